"""Finding p4c and BMv2 (as common.p4toolchain does: $P4C, $P4_BIN_DIR, PATH, /opt/p4/bin)
and compiling a P4 program to BMv2 JSON with include paths and defines.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from common import p4toolchain

P4C = p4toolchain.P4C_TOOL
SIMPLE_SWITCH = "simple_switch"
SIMPLE_SWITCH_CLI = "simple_switch_CLI"
COMPILE_TIMEOUT = 300.0


class ToolError(Exception):
    """A tool is missing or failed; the message says which and why."""


def find_tool(name: str) -> Path | None:
    try:
        return p4toolchain.find_p4c() if name == P4C else p4toolchain.find_tool(name)
    except p4toolchain.ToolchainError:
        return None


def require_tool(name: str) -> Path:
    try:
        path = p4toolchain.find_p4c() if name == P4C else p4toolchain.find_tool(name)
    except p4toolchain.ToolchainError as exc:
        raise ToolError(str(exc)) from None
    if path is None:
        raise ToolError(p4toolchain.missing_message(name))
    return path


def compile_p4(
    source: Path,
    out_json: Path,
    *,
    includes: tuple[Path, ...] = (),
    defines: tuple[str, ...] = (),
    p4info: Path | None = None,
) -> Path:
    """``p4c-bm2-ss --p4v 16`` ``source`` into ``out_json`` (and ``p4info``); ToolError on
    failure, with p4c's own message."""
    p4c = require_tool(P4C)
    cmd = [str(p4c), "--p4v", "16", "-o", str(out_json)]
    for inc in (source.parent, *includes):
        cmd += ["-I", str(inc)]
    for d in defines:
        cmd += [f"-D{d}"]
    if p4info is not None:
        cmd += ["--p4runtime-files", str(p4info)]
    cmd.append(str(source))
    env = dict(os.environ)
    env["PATH"] = f"{p4c.parent}{os.pathsep}{env.get('PATH', '')}"  # p4c runs cpp from PATH
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT,
                              check=False, env=env)
    except subprocess.TimeoutExpired:
        raise ToolError(f"{P4C} timed out on {source}") from None
    if done.returncode != 0 or not out_json.exists():
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        detail = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        raise ToolError(f"{P4C} failed on {source.name}: {detail.strip()}")
    return out_json

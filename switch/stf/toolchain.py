"""Where p4c and BMv2 are, and compiling a P4 program to BMv2 JSON.

The tools are optional (the embedded target needs none). A tool is looked up in
``$P4C_BIN_DIR`` (when set), then on ``PATH``, then in ``/opt/p4/bin`` (where the shared
toolchain installs itself).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

BIN_DIR_VAR = "P4C_BIN_DIR"
DEFAULT_BIN_DIR = Path("/opt/p4/bin")
P4C = "p4c-bm2-ss"
SIMPLE_SWITCH = "simple_switch"
SIMPLE_SWITCH_CLI = "simple_switch_CLI"
COMPILE_TIMEOUT = 300.0


class ToolError(Exception):
    """A tool is missing or failed; the message says which and why."""


def find_tool(name: str) -> Path | None:
    bin_dir = os.environ.get(BIN_DIR_VAR)
    if bin_dir:
        candidate = Path(bin_dir) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    candidate = DEFAULT_BIN_DIR / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    return None


def require_tool(name: str) -> Path:
    path = find_tool(name)
    if path is None:
        raise ToolError(
            f"{name} not found (looked in ${BIN_DIR_VAR}, PATH and {DEFAULT_BIN_DIR}); install "
            f"p4c/BMv2 (e.g. sudo ../shared/p4tools/install.sh) or set {BIN_DIR_VAR}"
        )
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

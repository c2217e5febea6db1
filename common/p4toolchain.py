"""Where the optional P4 toolchain (p4c, BMv2) is on this machine.

The project works without it: the compiled programs are committed under p4/ and the embedded
switch target needs no P4 tool. Tools are looked up, in this order:

1. ``P4C`` (the compiler only): the path of a ``p4c-bm2-ss`` binary;
2. ``P4_BIN_DIR``: a directory holding the tools (``p4c-bm2-ss``, ``simple_switch_grpc``, ...);
3. ``PATH``;
4. ``/opt/p4/bin``, where ``../shared/p4tools/install.sh`` puts them.

A variable that is set but does not name an executable is an error, not a fallback, so a typo
never silently selects another toolchain.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

P4C_VAR = "P4C"
BIN_DIR_VAR = "P4_BIN_DIR"
DEFAULT_BIN_DIR = Path("/opt/p4/bin")
P4C_TOOL = "p4c-bm2-ss"


class ToolchainError(Exception):
    """A P4 tool is missing or misconfigured; the message says where it was looked for."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_tool(
    name: str, env: Mapping[str, str] | None = None, fallback: bool = True
) -> Path | None:
    """The tool ``name`` per the lookup order above, or None when it is nowhere.

    ``fallback=False`` skips the ``/opt/p4/bin`` step (BMv2 switches are run from
    ``P4_BIN_DIR`` or PATH only). Raises ToolchainError when ``P4_BIN_DIR`` is set but holds
    no executable ``name``."""
    env = os.environ if env is None else env
    bin_dir = env.get(BIN_DIR_VAR)
    if bin_dir:
        candidate = Path(bin_dir) / name
        if not _executable(candidate):
            raise ToolchainError(f"{BIN_DIR_VAR}={bin_dir}: no executable {name} there")
        return candidate
    on_path = shutil.which(name, path=env.get("PATH", os.defpath))
    if on_path is not None:
        return Path(on_path)
    if not fallback:
        return None
    candidate = DEFAULT_BIN_DIR / name
    return candidate if _executable(candidate) else None


def find_p4c(env: Mapping[str, str] | None = None) -> Path | None:
    """The BMv2 back end of p4c (``p4c-bm2-ss``), or None when it is not installed."""
    env = os.environ if env is None else env
    explicit = env.get(P4C_VAR)
    if explicit:
        path = Path(explicit)
        if not _executable(path):
            raise ToolchainError(f"{P4C_VAR}={explicit} is not an executable file")
        return path
    return find_tool(P4C_TOOL, env)


def missing_message(tool: str = P4C_TOOL) -> str:
    """What to tell a user who has no ``tool``."""
    return (
        f"{tool} not found (looked at ${P4C_VAR}, ${BIN_DIR_VAR}, PATH and {DEFAULT_BIN_DIR}); "
        f"install p4c/BMv2 (e.g. sudo ../shared/p4tools/install.sh) or set "
        f"{P4C_VAR}=/path/to/{P4C_TOOL} or {BIN_DIR_VAR}=/dir/of/the/tools; see docs/install.md"
    )


def require_p4c(env: Mapping[str, str] | None = None) -> Path:
    """Like find_p4c, but a missing compiler raises ToolchainError with missing_message()."""
    path = find_p4c(env)
    if path is None:
        raise ToolchainError(missing_message())
    return path


def tool_version(path: Path) -> str:
    """First line that names a version in ``path --version`` (e.g. ``Version 1.2.4.8 (...)``)."""
    out = subprocess.run(
        [str(path), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    for line in lines:
        if "version" in line.lower():
            return line
    return lines[0] if lines else "unknown version"

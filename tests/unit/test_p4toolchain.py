"""common.p4toolchain: where p4c and BMv2 are found, and what a user without them is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from common import p4toolchain
from common.p4toolchain import ToolchainError, find_p4c, find_tool, missing_message, require_p4c


def _tool(directory: Path, name: str, executable: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\necho 'p4c-bm2-ss' ; echo 'Version 9.9.9 (SHA: x)'\n")
    path.chmod(0o755 if executable else 0o644)
    return path


@pytest.fixture
def no_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the /opt/p4/bin fallback at an empty directory of the test's own."""
    empty = tmp_path / "opt-p4-bin"
    empty.mkdir()
    monkeypatch.setattr(p4toolchain, "DEFAULT_BIN_DIR", empty)
    return empty


def test_lookup_order_variable_then_bin_dir_then_path_then_default(
    tmp_path: Path, no_default: Path
) -> None:
    explicit = _tool(tmp_path / "explicit", "my-p4c")
    bin_dir = _tool(tmp_path / "bindir", "p4c-bm2-ss")
    on_path = _tool(tmp_path / "onpath", "p4c-bm2-ss")
    default = _tool(no_default, "p4c-bm2-ss")
    path = str(tmp_path / "onpath")
    everything = {"P4C": str(explicit), "P4_BIN_DIR": str(bin_dir.parent), "PATH": path}
    assert find_p4c(everything) == explicit
    assert find_p4c({"P4_BIN_DIR": str(bin_dir.parent), "PATH": path}) == bin_dir
    assert find_p4c({"PATH": path}) == on_path
    assert find_p4c({"PATH": str(tmp_path / "nowhere")}) == default
    # the other tools follow the same order (without the compiler-only variable)
    sw = _tool(tmp_path / "bindir", "simple_switch_grpc")
    assert find_tool("simple_switch_grpc", {"P4_BIN_DIR": str(sw.parent), "PATH": path}) == sw


def test_missing_toolchain_is_none_and_the_message_says_how_to_get_one(
    tmp_path: Path, no_default: Path
) -> None:
    env = {"PATH": str(tmp_path / "nowhere")}
    _tool(no_default, "p4c-bm2-ss", executable=False)  # present but not executable: ignored
    assert find_p4c(env) is None
    with pytest.raises(ToolchainError) as info:
        require_p4c(env)
    message = str(info.value)
    for hint in ("P4C", "P4_BIN_DIR", "PATH", "install.sh", "docs/install.md"):
        assert hint in message
    assert message == missing_message()


def test_a_variable_naming_no_executable_is_an_error_not_a_fallback(
    tmp_path: Path, no_default: Path
) -> None:
    on_path = _tool(tmp_path / "onpath", "p4c-bm2-ss")
    env = {"PATH": str(on_path.parent)}
    with pytest.raises(ToolchainError, match=r"P4C=.*not an executable"):
        find_p4c({**env, "P4C": str(tmp_path / "typo")})
    with pytest.raises(ToolchainError, match=r"P4_BIN_DIR=.*no executable p4c-bm2-ss"):
        find_p4c({**env, "P4_BIN_DIR": str(tmp_path)})


def test_tool_version_reads_the_version_line(tmp_path: Path) -> None:
    tool = _tool(tmp_path, "p4c-bm2-ss")
    assert p4toolchain.tool_version(tool) == "Version 9.9.9 (SHA: x)"

"""The running-fabrics registry: `mrcnet ctl` finds the newest live fabric's controller."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common import fabric_registry
from controller import cli as ctl_cli


def test_newest_live_entry_wins_and_dead_ones_are_dropped(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    fabric_registry.register("old", {"pid": os.getpid(), "started": 1.0,
                                     "controller": "/x/old.sock"}, tmp_path)
    fabric_registry.register("new", {"pid": os.getpid(), "started": 2.0,
                                     "controller": "/x/new.sock"}, tmp_path)
    fabric_registry.register("gone", {"pid": dead.pid, "started": 3.0,
                                      "controller": "/x/gone.sock"}, tmp_path)
    (tmp_path / "junk.json").write_text("{not json")
    assert fabric_registry.newest_controller(tmp_path) == "/x/new.sock"
    assert not (tmp_path / "gone.json").exists()
    fabric_registry.unregister("new", tmp_path)
    fabric_registry.unregister("new", tmp_path)  # idempotent
    assert fabric_registry.newest_controller(tmp_path) == "/x/old.sock"
    assert fabric_registry.newest_controller(tmp_path / "none") is None


def test_ctl_default_socket_prefers_env_then_the_running_fabric(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fabric_registry, "REGISTRY", tmp_path)
    monkeypatch.delenv("MRCNET_CTL_SOCKET", raising=False)
    assert ctl_cli.default_socket() == "/run/mrcnet/controller.sock"  # nothing runs
    fabric_registry.register("f1", {"pid": os.getpid(), "started": 5.0,
                                    "controller": "/tmp/f1/ctl.sock"}, tmp_path)
    assert ctl_cli.default_socket() == "/tmp/f1/ctl.sock"
    monkeypatch.setenv("MRCNET_CTL_SOCKET", "/elsewhere.sock")
    assert ctl_cli.default_socket() == "/elsewhere.sock"

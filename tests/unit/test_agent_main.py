"""``python -m hosts``: configuration and app errors are reported before any socket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _run(tmp_path: Path, config: object) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    return subprocess.run([sys.executable, "-m", "hosts", "--config", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)


PORT = {"ifname": "x0", "mac": "02:00:00:00:00:01", "gid": "fd00::1",
        "neighbor_mac": "02:00:00:00:00:02"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"name": "h"}, "config: missing field 'ports'"),
        ({"name": "h", "ports": [PORT], "apps": [{"target": "no_such_module_xyz:f"}]},
         "no_such_module_xyz"),
    ],
)
def test_bad_config_or_app_exits_2_with_message(tmp_path: Path, config: object,
                                                message: str) -> None:
    proc = _run(tmp_path, config)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "ready" not in proc.stdout


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "hosts", "--config",
                           str(tmp_path / "absent.json")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "absent.json" in proc.stderr

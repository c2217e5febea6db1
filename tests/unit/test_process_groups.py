"""Stopping many process groups at once (common/netns.py): SIGTERM to all, one shared
timeout, SIGKILL to those still running (no root needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from common.netns import stop_process_groups

# Ignores SIGTERM; on receiving it, writes whether the process ``argv[2]`` was still alive.
STUBBORN = """
import os, signal, sys, time
def on_term(_sig, _frame):
    other = int(sys.argv[2])
    try:
        os.kill(other, 0)
        alive = "alive"
    except ProcessLookupError:
        alive = "gone"
    with open(sys.argv[1], "w") as out:
        out.write(alive)
signal.signal(signal.SIGTERM, on_term)
open(sys.argv[1] + ".ready", "w").close()
end = time.monotonic() + 60
while time.monotonic() < end:
    time.sleep(0.01)
"""


def _start(script: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script, *args], start_new_session=True)


def _wait_ready(path: Path) -> None:
    for _ in range(1000):
        if Path(str(path) + ".ready").exists():
            return
        subprocess.run(["sleep", "0.01"], check=True)
    raise AssertionError(f"{path}: the helper process did not start")


def test_every_group_gets_sigterm_before_any_gets_sigkill(tmp_path: Path) -> None:
    polite = _start("import time; time.sleep(60)")
    first_log, second_log = tmp_path / "first", tmp_path / "second"
    first = _start(STUBBORN, str(first_log), str(polite.pid))
    _wait_ready(first_log)
    second = _start(STUBBORN, str(second_log), str(first.pid))
    _wait_ready(second_log)
    stop_process_groups([first, second, polite], timeout=1.0)
    assert [p.returncode for p in (first, second, polite)] == [-9, -9, -15]
    # the second was told to stop while the first still ran: no one-at-a-time stop
    assert second_log.read_text() == "alive"
    stop_process_groups([first, second, polite])  # idempotent


def test_an_exited_process_is_left_alone() -> None:
    done = _start("pass")
    done.wait(10)
    stop_process_groups([done], timeout=0.1)
    assert done.returncode == 0

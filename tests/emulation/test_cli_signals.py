"""SIGTERM to a running `mrcnet` command removes what it created, like Ctrl-C does.

`mrcnet bench transport` builds two host namespaces, veths, a switch process and two agents
(run prefix ``b<pid>``); it is terminated once its namespaces exist, and everything with its
prefix must be gone when it has exited.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from common.netns import wait_until

pytestmark = pytest.mark.emulation


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return {line.split(":")[1].strip().split("@")[0] for line in out.stdout.splitlines()}


def test_sigterm_cleans_up_a_running_bench(tmp_path: object) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mrcnet.cli", "bench", "transport", "--runs", "1", "--size", "256",
         "--results", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    prefix = f"b{proc.pid % 100000:05d}"[:6]
    try:
        wait_until(lambda: any(n.startswith(prefix) for n in _netns()) or proc.poll() is not None,
                   30, "the bench's namespaces")
        assert proc.poll() is None, proc.communicate()
        time.sleep(1.0)  # let it start its switch and agents too
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert not [n for n in _netns() if n.startswith(prefix)]
    assert not [link for link in _links() if link.startswith(prefix)]

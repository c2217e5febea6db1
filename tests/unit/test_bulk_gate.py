"""The writers' start gate (hosts/bulk/gate.py): nobody starts before the last writer
arrived, everybody starts at the one published time, and a gate that does not fill opens
after its timeout."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from hosts.bulk.gate import pass_gate


def test_writers_arriving_apart_start_at_one_time(tmp_path: Path) -> None:
    arrived: dict[str, float] = {}
    started: dict[str, float] = {}
    hows: list[str] = []

    def writer(name: str, delay: float) -> None:
        time.sleep(delay)
        arrived[name] = time.time()
        result = pass_gate(tmp_path, "w1-start", name, 4, timeout=30.0, poll=0.002)
        started[name] = time.time()
        hows.append(result.how)

    threads = [threading.Thread(target=writer, args=(f"f{i}", 0.02 * i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    start = json.loads((tmp_path / "w1-start-go.json").read_text())["start"]
    assert hows == ["opened"] * 4
    assert start > max(arrived.values())
    assert all(t >= start for t in started.values())
    # a gate of another round is a separate count
    assert pass_gate(tmp_path, "w2-start", "f0", 1, timeout=30.0).how == "opened"


def test_a_gate_that_does_not_fill_opens_after_its_timeout(tmp_path: Path) -> None:
    t0 = time.monotonic()
    result = pass_gate(tmp_path, "w1-start", "f0", 3, timeout=0.05, poll=0.005)
    assert result.how == "timeout" and time.monotonic() - t0 >= 0.05
    assert not (tmp_path / "w1-start-go.json").exists()
    # the writers that arrive later fill the count: the last one opens it for itself
    pass_gate(tmp_path, "w1-start", "f1", 3, timeout=0.05, poll=0.005)
    assert pass_gate(tmp_path, "w1-start", "f2", 3, timeout=5.0).how == "opened"


def test_writers_of_one_process_arriving_at_once_all_pass(tmp_path: Path) -> None:
    """An agent runs its writers as threads of one process: when several of them find the
    count complete together, each publishes the start through a file of its own (they once
    shared one, and a writer lost its transfer to the other's clean-up)."""
    n = 12

    def writer(barrier: threading.Barrier, hows: list[str], group: str, name: str) -> None:
        barrier.wait()
        hows.append(pass_gate(tmp_path, group, name, n, timeout=30.0, poll=0.001).how)

    for rnd in range(10):
        barrier = threading.Barrier(n)
        hows: list[str] = []
        threads = [threading.Thread(target=writer, args=(barrier, hows, f"w{rnd}-start", f"f{i}"))
                   for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert hows == ["opened"] * n
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_gate_the_file_system_fails_lets_the_writer_go(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "oob"
    not_a_folder.write_text("")
    assert pass_gate(not_a_folder, "w1-start", "f0", 2, timeout=30.0).how == "error"

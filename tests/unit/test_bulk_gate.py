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

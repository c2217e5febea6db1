"""A start gate for the writers of one workload round: they begin at the same instant.

An experiment such as an incast means every sender starts at once; in the emulation each
writer would otherwise begin when its own agent has picked up its job and connected its QP,
some milliseconds apart (15 ms over the 8 senders of incast-8), and the first round trip's
burst, which the simulator starts at one instant, is spread out. So each writer, once
connected, says it has arrived; the one that completes the count publishes the start time, a
little ahead (every waiting writer polls for it), and all of them sleep until then. A gate
that does not fill within ``timeout`` opens anyway: a late writer must not stall the rest.

The gate lives in the folder the endpoints already share (hosts/bulk/oob.py); the start
time is wall-clock (the writers run on one machine).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hosts.bulk.oob import POLL_S, publish

LEAD_S = 0.03  # the start is this far after the last arrival: every poller sees it in time


@dataclass(frozen=True)
class GateResult:
    """How a writer passed the gate: ``opened`` (every writer arrived) or ``timeout``, and
    how long it waited (wall seconds)."""

    how: str
    waited_s: float

    def to_json(self) -> dict[str, object]:
        return {"how": self.how, "waited_s": round(self.waited_s, 6)}


def _arrivals(folder: Path, group: str) -> int:
    return sum(1 for _ in folder.glob(f"{group}-arrived-*.json"))


def _publish_once(path: Path, data: dict[str, float]) -> None:
    """Create ``path`` with ``data`` unless it exists (the first writer's start time wins).
    The temporary file is the caller's own: an agent runs several writers as threads of one
    process."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def _read_start(path: Path) -> float | None:
    try:
        return float(json.loads(path.read_text())["start"])
    except (FileNotFoundError, KeyError, ValueError, TypeError):
        return None


def pass_gate(folder: Path, group: str, name: str, count: int, timeout: float,
              poll: float = POLL_S) -> GateResult:
    """Arrive at gate ``group`` as ``name``; return at the common start time once ``count``
    writers arrived (or after ``timeout`` wall seconds, at once). A gate the file system
    fails (``how`` "error") lets the writer start at once: it must never cost a transfer."""
    t0 = time.monotonic()
    try:
        return _pass(folder, group, name, count, timeout, poll, t0)
    except OSError:
        return GateResult("error", time.monotonic() - t0)


def _pass(folder: Path, group: str, name: str, count: int, timeout: float, poll: float,
          t0: float) -> GateResult:
    folder.mkdir(parents=True, exist_ok=True)
    publish(folder, f"{group}-arrived-{name}", {})
    go = folder / f"{group}-go.json"
    deadline = t0 + timeout
    while True:
        start = _read_start(go)
        if start is None and _arrivals(folder, group) >= count:
            _publish_once(go, {"start": time.time() + LEAD_S})
            start = _read_start(go)
        if start is not None:
            delay = start - time.time()
            if delay > 0:
                time.sleep(delay)
            return GateResult("opened", time.monotonic() - t0)
        if time.monotonic() >= deadline:
            return GateResult("timeout", time.monotonic() - t0)
        time.sleep(poll)


__all__ = ["LEAD_S", "GateResult", "pass_gate"]

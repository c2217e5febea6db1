"""How far a process fell behind its own schedule: the overload signal of an emulation.

A switch schedules departures, an agent schedules transport timers, and a frame that arrived
on a socket is due at once; when the CPU cannot keep up, that work runs late and the emulated
network is no longer the configured one. The event loop of each process reports, for every
piece of due work it runs, when it was due and when it ran (``LagMeter.due``; ``queued`` for
a frame that waited in a socket), and the time it spent waiting in the OS (``waited``). The
meter keeps cumulative figures only (a few float operations per call, no allocation), so a
reader takes two ``snapshot()`` dicts and ``window()`` turns them into the figures of that
interval:

- ``lag_fraction``: the fraction of (virtual) time the process was behind schedule. Work is
  late when it ran more than ``tolerance`` after it was due; the process counts as behind
  from ``due + tolerance`` until it ran, overlapping intervals counted once;
- ``late``/``events``: late and all scheduled runs; ``late_hist``: late runs per lag bucket
  (bucket k holds lags in [tolerance x 2^(k-1), tolerance x 2^k), the last one all above);
- ``max_lag_s``: the largest lag in the window (the cumulative maximum when it happened in
  the window, else the upper bound of the highest non-empty bucket);
- ``busy_fraction``: 1 - (time spent waiting in the OS) / (elapsed time);
- ``wakeups``: returns from the loop's OS waits, and ``moderated``: rounds that ended a
  coalesced sleep (common/coalesce.py; ``slack_s`` is the loop's coalescing slack, the
  lateness it allows itself to batch events, 0 when it wakes for every event);
- ``loop_cpu_s``: CPU time of the loop's thread (a snapshot is taken on that thread), so a
  reader can tell what the loop's work cost apart from the rest of the process.

Every time is virtual (the run's clock, common/vclock.py), ``tolerance`` too. A fabric run
sets it to the time one MTU-sized frame takes on the fastest link (mrcnet/fabric/
orchestrator.py ``lag_tolerance``): a process later than that has let the emulated network's
events slip by a whole packet. A process started alone defaults to 2 ms of wall time.
"""

from __future__ import annotations

import time
from typing import Any

DEFAULT_TOLERANCE_WALL = 2e-3
"""Default lag (wall seconds) up to which work counts as on time, for a process started on
its own (epoll waits round up to whole milliseconds)."""
FAITHFUL_LAG_FRACTION = 0.01
"""A run is faithful while every process was behind schedule at most this fraction of the
time."""
HIST_BUCKETS = 12


class LagMeter:
    """Cumulative lateness of one event loop (not thread-safe: the loop's thread writes)."""

    __slots__ = (
        "_behind_until",
        "behind",
        "events",
        "hist",
        "idle",
        "late",
        "max_lag",
        "moderated",
        "slack",
        "start",
        "tdf",
        "tolerance",
        "wakeups",
    )

    def __init__(self, start: float, tdf: float = 1.0, tolerance: float | None = None) -> None:
        """``tolerance``: virtual seconds (default ``DEFAULT_TOLERANCE_WALL`` of wall time)."""
        tol = DEFAULT_TOLERANCE_WALL / tdf if tolerance is None else tolerance
        if not tdf >= 1.0 or not tol > 0:
            raise ValueError(f"need tdf >= 1 and tolerance > 0, got {tdf}, {tol}")
        self.tdf = tdf
        self.tolerance = tol
        self.start = start
        self.events = 0
        self.late = 0
        self.behind = 0.0
        self.idle = 0.0
        self.max_lag = 0.0
        self.hist = [0] * HIST_BUCKETS
        self._behind_until = start
        self.wakeups = 0  # returns from the loop's OS waits (the loop counts them)
        self.moderated = 0  # rounds after a coalesced sleep (the loop counts them)
        self.slack = 0.0  # the loop's coalescing slack (virtual seconds)

    def due(self, scheduled: float, now: float) -> None:
        """Work due at ``scheduled`` ran at ``now`` (call only when ``now >= scheduled``)."""
        self.events += 1
        lag = now - scheduled
        if lag > self.max_lag:
            self.max_lag = lag
        tol = self.tolerance
        if lag <= tol:
            return
        self.late += 1
        k = int(lag / tol).bit_length()
        self.hist[k if k < HIST_BUCKETS else HIST_BUCKETS - 1] += 1
        begin = scheduled + tol
        if begin < self._behind_until:
            begin = self._behind_until
        if now > begin:
            self.behind += now - begin
            self._behind_until = now

    def queued(self, wall_age: float, now: float) -> None:
        """Work that had waited ``wall_age`` wall seconds in an OS queue ran at ``now``."""
        self.due(now - wall_age / self.tdf, now)

    def waited(self, seconds: float) -> None:
        """The loop spent ``seconds`` (virtual) blocked in the OS waiting for work."""
        self.idle += seconds

    def snapshot(self, now: float) -> dict[str, Any]:
        """Cumulative figures at ``now`` (JSON-ready; ``window`` takes two of them)."""
        return {
            "t": now,
            "start": self.start,
            "tdf": self.tdf,
            "tolerance_s": self.tolerance,
            "events": self.events,
            "late": self.late,
            "behind_s": self.behind,
            "idle_s": self.idle,
            "max_lag_s": self.max_lag,
            "late_hist": list(self.hist),
            "wakeups": self.wakeups,
            "moderated": self.moderated,
            "slack_s": self.slack,
            "loop_cpu_s": time.thread_time(),  # the caller is the loop's thread
        }


def window(first: dict[str, Any] | None, last: dict[str, Any]) -> dict[str, Any]:
    """The figures of the interval between two snapshots of one meter (``first`` None: since
    the meter started). See the module docstring."""
    if first is None:
        first = {"t": last["start"], "events": 0, "late": 0, "behind_s": 0.0, "idle_s": 0.0,
                 "max_lag_s": 0.0, "late_hist": [0] * len(last["late_hist"]), "wakeups": 0,
                 "moderated": 0}
    span = float(last["t"]) - float(first["t"])
    hist = [int(b) - int(a) for a, b in zip(first["late_hist"], last["late_hist"])]
    if last["max_lag_s"] > first["max_lag_s"]:
        max_lag = float(last["max_lag_s"])  # the maximum moved: it happened in the window
    else:
        top = max((k for k, n in enumerate(hist) if n), default=-1)
        max_lag = float(last["tolerance_s"]) * (2**top) if top >= 0 else 0.0
        max_lag = min(max_lag, float(last["max_lag_s"]))
    behind = float(last["behind_s"]) - float(first["behind_s"])
    idle = float(last["idle_s"]) - float(first["idle_s"])
    return {
        "seconds": span,
        "events": int(last["events"]) - int(first["events"]),
        "late": int(last["late"]) - int(first["late"]),
        "lag_fraction": min(1.0, behind / span) if span > 0 else 0.0,
        "busy_fraction": max(0.0, min(1.0, 1.0 - idle / span)) if span > 0 else 0.0,
        "max_lag_s": max_lag,
        "late_hist": hist,
        "tolerance_s": float(last["tolerance_s"]),
        "wakeups": int(last.get("wakeups", 0)) - int(first.get("wakeups", 0)),
        "moderated": int(last.get("moderated", 0)) - int(first.get("moderated", 0)),
        "slack_s": float(last.get("slack_s", 0.0)),
        "loop_cpu_s": float(last.get("loop_cpu_s", 0.0)) - float(first.get("loop_cpu_s", 0.0)),
    }

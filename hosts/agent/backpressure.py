"""Responder backpressure from the host's own congestion: how long received frames waited.

The agent is this host's NIC: when it cannot keep up (its loop thread starved of CPU, the
GIL held by a busy application thread, a slow handler), frames queue in the kernel's socket
buffer before the core sees them. Every frame carries the kernel's receive time
(SO_TIMESTAMPNS, hosts/agent/nic.py), so the wait of the oldest frame of each batch (kernel
arrival to the moment the loop read it) is measured directly; docs/transport.md shows how it
compares with the other candidate signals (event-loop lag, unconsumed completions).

``RxWait`` averages that wait over frames (a batch of n frames whose oldest waited ``a`` and
newest ``b`` counts as n frames of ``(a + b) / 2``; EWMA with a gain of 1/256 per frame, about
the last 256 frames: a host that stalls 20 ms in every 25 makes most of its frames wait, while
a per-batch average would be drawn down by the many small batches between the stalls) and
turns it into the CC_STATE penalty
every SACK of this host carries: 0 up to ``low``, rising linearly to 127 at ``high``. When the
penalty falls back to 0 after having been positive, ``restore`` is set (the requesters' NSCC
brings back the window it had before the penalty) until the next penalty.
"""

from __future__ import annotations

import math

GAIN = 1 / 256  # weight of one frame's wait in the average
MAX_PENALTY = 127


class RxWait:
    """The receive-queue wait and the penalty it implies (``low``/``high`` in seconds;
    ``high <= low`` disables the penalty, the wait is still measured)."""

    __slots__ = ("_n", "_sum", "avg", "high", "low", "max", "penalised", "penalty", "restore")

    def __init__(self, low: float, high: float) -> None:
        self.low = low
        self.high = high
        self.avg = 0.0
        self.penalty = 0
        self.restore = False
        self.penalised = 0  # updates that found a positive penalty (for metrics)
        self.max = 0.0  # largest wait since the last window
        self._sum = 0.0
        self._n = 0

    def observe(self, oldest: float, newest: float = 0.0, frames: int = 1) -> None:
        """One batch of ``frames`` frames: its oldest waited ``oldest`` seconds, its newest
        ``newest``."""
        if oldest < 0.0:
            oldest = 0.0
        mean = (oldest + max(0.0, newest)) * 0.5 if frames > 1 else oldest
        weight = frames * GAIN
        self.avg += (weight if weight < 1.0 else 1.0) * (mean - self.avg)
        if oldest > self.max:
            self.max = oldest
        self._sum += mean * frames
        self._n += frames

    def update(self) -> bool:
        """Recompute the penalty from the average; True when (penalty, restore) changed."""
        if self.high <= self.low:
            return False
        over = self.avg - self.low
        p = 0 if over <= 0 else min(MAX_PENALTY, math.ceil(MAX_PENALTY * over /
                                                           (self.high - self.low)))
        restore = self.restore
        if p > 0:
            restore = False
            self.penalised += 1
        elif self.penalty > 0:
            restore = True
        changed = p != self.penalty or restore != self.restore
        self.penalty = p
        self.restore = restore
        return changed

    def window(self) -> dict[str, float | int | bool]:
        """{"rx_wait_avg", "rx_wait_mean" (per frame), "rx_wait_max" (oldest of a batch),
        "frames", "penalty", ...} since the last call (the metrics interval); resets it."""
        out: dict[str, float | int | bool] = {
            "rx_wait_avg": self.avg, "rx_wait_mean": self._sum / self._n if self._n else 0.0,
               "rx_wait_max": self.max, "frames": self._n, "penalty": self.penalty,
               "restore": self.restore, "penalised_updates": self.penalised}
        self.max = 0.0
        self._sum = 0.0
        self._n = 0
        return out

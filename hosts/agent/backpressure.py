"""Responder backpressure from the host's own congestion: how long received frames waited.

The agent is this host's NIC: when it cannot keep up (its loop thread starved of CPU, the
GIL held by a busy application thread, a slow handler), frames queue in the kernel's socket
buffer before the core sees them. Every frame carries the kernel's receive time
(SO_TIMESTAMPNS, hosts/agent/nic.py), so the wait of the oldest frame of each batch (kernel
arrival to the moment the loop read it) is measured directly; docs/transport.md shows how it
compares with the other candidate signals (event-loop lag, unconsumed completions).

``RxWait`` smooths that wait (EWMA, gain 1/8 per batch) and turns it into the CC_STATE penalty
every SACK of this host carries: 0 up to ``low``, rising linearly to 127 at ``high``. When the
penalty falls back to 0 after having been positive, ``restore`` is set (the requesters' NSCC
brings back the window it had before the penalty) until the next penalty.
"""

from __future__ import annotations

import math

GAIN = 0.125  # weight of a batch's wait in the average
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
        self.penalised = 0  # batches seen with a positive penalty (for metrics)
        self.max = 0.0  # largest wait since the last window
        self._sum = 0.0
        self._n = 0

    def observe(self, wait: float) -> None:
        """One batch: its oldest frame waited ``wait`` seconds."""
        if wait < 0.0:
            wait = 0.0
        self.avg += GAIN * (wait - self.avg)
        if wait > self.max:
            self.max = wait
        self._sum += wait
        self._n += 1

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
        """{"rx_wait_avg", "rx_wait_mean", "rx_wait_max", "batches", "penalty"} since the last
        call (the metrics interval); resets the window."""
        out: dict[str, float | int | bool] = {"rx_wait_avg": self.avg, "rx_wait_mean": self._sum / self._n if self._n else 0.0,
               "rx_wait_max": self.max, "batches": self._n, "penalty": self.penalty,
               "restore": self.restore, "penalised_batches": self.penalised}
        self.max = 0.0
        self._sum = 0.0
        self._n = 0
        return out

"""Wake-up coalescing for an event loop on the run's clock (a NIC's interrupt moderation).

A switch or agent loop that wakes for every frame and every departure pays the cost of one
wake-up (a system call, a context switch, the loop's own bookkeeping) per event. Under time
dilation the load per wall second falls and every event gets its own wake-up, so the CPU one
packet costs grows with the dilation factor instead of staying flat. A NIC solves the same
problem with interrupt moderation: while frames come densely it raises one interrupt per
interval, not one per frame.

``Coalescer`` does that for a loop, adaptively:
- *normal*: the loop waits for its sockets and its next deadline, as without coalescing;
- after a wake-up that found work less than ``slack`` after the previous one that found work
  (events are denser than the slack), the loop goes *moderated*: it sleeps ``slack`` without
  watching its data sockets (control descriptors still wake it), then polls them without
  waiting and handles everything that arrived or fell due meanwhile in one round;
- it stays moderated while each such poll finds work, and goes back to normal at the first
  one that finds none, so an isolated event costs what it costs without coalescing.
Nothing runs early: work is late by at most ``slack`` (plus the OS's own latency), and the
loop's lag meter measures it like any other lateness. It is off unless asked for
(``--coalesce``): measured on clos-2p at TDF 200 with half the lag tolerance as slack
(`mrcnet bench path-cost`), it removed a quarter of the wake-ups but none of the CPU per
packet, and doubled the time processes spent behind schedule (docs/switch.md). Times are
virtual seconds; ``slack`` 0 turns it off, and so
does a slack shorter than ``MIN_WALL_SLACK`` of wall time (``slack x tdf``): a sleep that
short costs a system call more than it saves (at TDF 1 a fabric's slack is a microsecond or
two, and a loaded loop would pay an extra ``select`` per round).
"""

from __future__ import annotations

MIN_WALL_SLACK = 50e-6
"""Wall seconds below which a coalescing sleep is not worth its system call."""


class Coalescer:
    """Decides, after each round of a loop, whether the next wait is moderated."""

    __slots__ = ("_last_work", "moderated", "slack")

    def __init__(self, slack: float = 0.0, tdf: float = 1.0) -> None:
        """``slack`` in virtual seconds on a clock ``tdf`` times slower than the wall clock;
        ``self.slack`` is the one in force (0 when off)."""
        if not slack >= 0.0:
            raise ValueError(f"coalescing slack must be >= 0 seconds, got {slack!r}")
        self.slack = slack if slack * tdf >= MIN_WALL_SLACK else 0.0
        self.moderated = False  # the next wait sleeps ``slack``, then polls
        self._last_work = float("-inf")

    def after_round(self, now: float, worked: bool) -> bool:
        """The loop finished a round at ``now`` (virtual) that found work or not; returns
        whether its next wait is moderated."""
        if not worked:
            self.moderated = False
            return False
        if not self.moderated and self.slack > 0.0 and now - self._last_work < self.slack:
            self.moderated = True
        self._last_work = now
        return self.moderated

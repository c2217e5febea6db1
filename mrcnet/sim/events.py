"""The simulator's discrete-event core: one heap of timestamped callbacks.

Ties are broken by the order events were scheduled, so a run is a pure function of its inputs
(no wall clock, no hash order). Two kinds of entry share the heap: ``at`` returns an ``Event``
that can be cancelled (a host's transport timer; a cancelled one stays in the heap and is
skipped when it comes up, so cancelling is O(1)), and ``call_at(when, fn, arg)`` schedules
``fn(arg)`` with no handle and no object of its own (the per-frame wake-ups of switch ports,
which supersede themselves: see mrcnet/sim/switchnode.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

Callback = Callable[[], None]


class Event:
    """A scheduled callback; ``cancel()`` makes the scheduler skip it."""

    __slots__ = ("alive", "fn", "when")

    def __init__(self, when: float, fn: Callback) -> None:
        self.when = when
        self.fn = fn
        self.alive = True

    def cancel(self) -> None:
        self.alive = False


class Scheduler:
    """Simulated time (seconds from 0) and the events still to run."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.events_run = 0  # callbacks run (cancelled events are not counted)
        # (when, sequence, fn or None for an Event, the argument or the Event)
        self._heap: list[tuple[float, int, Callable[[Any], object] | None, Any]] = []
        self._seq = 0

    def clock(self) -> float:
        """The current simulated time (a clock function for code that asks for one)."""
        return self.now

    def at(self, when: float, fn: Callback) -> Event:
        """Run ``fn`` at ``when`` (a time in the past means now: time never goes back)."""
        if when < self.now:
            when = self.now
        ev = Event(when, fn)
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, None, ev))
        return ev

    def after(self, delay: float, fn: Callback) -> Event:
        return self.at(self.now + delay, fn)

    def call_at(self, when: float, fn: Callable[[Any], object], arg: Any) -> None:
        """Run ``fn(arg)`` at ``when`` (not before now); no handle, nothing to cancel."""
        if when < self.now:
            when = self.now
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, arg))

    @property
    def pending(self) -> int:
        """Entries in the heap, cancelled ones included (they leave when they come up)."""
        return len(self._heap)

    def next_time(self) -> float | None:
        """When the next entry runs (None: nothing left); cancelled events are dropped first."""
        heap = self._heap
        while heap and heap[0][2] is None and not heap[0][3].alive:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run(self, until: float | None = None, max_events: int | None = None) -> int:
        """Run events in time order; stop when none is left, the next one is after ``until``
        (time then stands at ``until``) or ``max_events`` ran. Returns the number run."""
        heap = self._heap
        pop = heapq.heappop
        limit = float("inf") if until is None else until
        budget = -1 if max_events is None else max_events
        ran = 0
        while heap:
            if heap[0][0] > limit:
                break
            if ran == budget:
                self.events_run += ran
                return ran
            when, _seq, fn, arg = pop(heap)
            if fn is None:
                if not arg.alive:
                    continue
                arg.alive = False
                self.now = when
                arg.fn()
            else:
                self.now = when
                fn(arg)
            ran += 1
        if until is not None and until > self.now:
            self.now = until
        self.events_run += ran
        return ran

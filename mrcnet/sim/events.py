"""The simulator's discrete-event core: one heap of timestamped callbacks.

Ties are broken by the order events were scheduled, so a run is a pure function of its inputs
(no wall clock, no hash order). Cancelled events stay in the heap and are skipped when they
come up (cancelling is O(1); the heap never needs re-sorting).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

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
        self.events_run = 0
        self._heap: list[tuple[float, int, Event]] = []
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
        heapq.heappush(self._heap, (when, self._seq, ev))
        return ev

    def after(self, delay: float, fn: Callback) -> Event:
        return self.at(self.now + delay, fn)

    @property
    def pending(self) -> int:
        """Events in the heap, cancelled ones included (they leave when they come up)."""
        return len(self._heap)

    def next_time(self) -> float | None:
        """When the next live event runs (None: nothing left)."""
        heap = self._heap
        while heap and not heap[0][2].alive:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def run(self, until: float | None = None, max_events: int | None = None) -> int:
        """Run events in time order; stop when none is left, the next one is after ``until``
        (time then stands at ``until``) or ``max_events`` ran. Returns the number run."""
        heap = self._heap
        pop = heapq.heappop
        ran = 0
        while heap:
            when, _seq, ev = heap[0]
            if until is not None and when > until:
                break
            if max_events is not None and ran >= max_events:
                self.events_run += ran
                return ran
            pop(heap)
            if not ev.alive:
                continue
            self.now = when
            ev.alive = False
            ev.fn()
            ran += 1
        if until is not None and until > self.now:
            self.now = until
        self.events_run += ran
        return ran

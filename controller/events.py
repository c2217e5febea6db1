"""EV event fan-out to operator subscribers (WatchEvEvents), with per-subscriber drop counts.

Each subscriber has a bounded queue. When it is full the event is dropped for that subscriber
only and counted; the next event it does receive carries ``drop_count`` = events lost since the
previous delivered one (the precise drop count of mrc_ctl's EV event CQ). Slow subscribers
never block agents or other subscribers.
"""

from __future__ import annotations

import threading
from collections import deque

from common.proto import mrc_ctl_pb2 as pb

DEFAULT_DEPTH = 1024
MAX_DEPTH = 65536


class Subscription:
    def __init__(self, profile_ids: set[int], depth: int) -> None:
        self.profile_ids = profile_ids
        self.depth = depth
        self.queue: deque[pb.EvEvent] = deque()
        self.pending_drops = 0
        self.total_drops = 0
        self.closed = False
        self.cond = threading.Condition()

    def wants(self, event: pb.EvEvent) -> bool:
        return not self.profile_ids or event.profile_id in self.profile_ids

    def offer(self, event: pb.EvEvent) -> None:
        with self.cond:
            if self.closed:
                return
            if len(self.queue) >= self.depth:
                self.pending_drops += 1
                self.total_drops += 1
                return
            copy = pb.EvEvent()
            copy.CopyFrom(event)
            copy.drop_count = self.pending_drops
            self.pending_drops = 0
            self.queue.append(copy)
            self.cond.notify()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def next(self, timeout: float) -> pb.EvEvent | None:
        """The next event, or None on timeout or when closed."""
        with self.cond:
            if not self.queue and not self.closed:
                self.cond.wait(timeout)
            return self.queue.popleft() if self.queue else None


class EventHub:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[Subscription] = []
        self._seq = 0
        self.published = 0

    def subscribe(self, profile_ids: set[int], depth: int = 0) -> Subscription:
        sub = Subscription(profile_ids, min(depth or DEFAULT_DEPTH, MAX_DEPTH))
        with self._lock:
            self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.close()
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def publish(self, event: pb.EvEvent) -> None:
        with self._lock:
            self._seq += 1
            event.seq = self._seq
            self.published += 1
            subs = list(self._subs)
        for sub in subs:
            if sub.wants(event):
                sub.offer(event)

    def close_all(self) -> None:
        with self._lock:
            subs, self._subs = self._subs, []
        for sub in subs:
            sub.close()

    @property
    def subscribers(self) -> int:
        with self._lock:
            return len(self._subs)

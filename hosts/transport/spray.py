"""Spraying policies: which usable EV carries the next packet of a QP.

``EvManager`` (ev.py) keeps the EV states and hands a policy the usable EVs (indices into the
profile's EV list) whenever that set changes; the policy picks one per packet. What came back
on each EV is fed to the policy too (EV reflection: a SACK names the EV of its trigger, the
requester knows the EV of every PSN it acknowledges): ``on_delivered`` with the EVs of packets
that arrived unmarked (only when the policy ``wants_deliveries``), ``on_signal`` with ECN
(SACK m=SKIP_ONCE), NACK (trimmed), LOSS (inferred) or TIMEOUT on one EV.

A policy may also take changes of the usable set, ``update_usable(added, removed)`` (EVs that
joined and left, the set as ``rebuild`` last gave it in index order), leaving itself exactly as
``rebuild`` of the new set would: the built-in ones do, in O(changed) bisections, so an EV
state change costs no scan of the QP's EVs. ``EvManager`` calls ``rebuild`` for a policy
without it.

Policies, chosen by name per EV profile (``EvProfile.spray``, ``SPRAY_POLICIES``) unless
``HostConfig.spray_factory(ports, seed)`` supplies one (``ports``: each EV's NIC port, i.e.
its plane):

- ``rotation`` (``FixedRotation``, the default): a seeded pseudo-random permutation of all EVs
  walked round-robin over the usable ones; feedback acts only through the EV states.
- ``reps`` (``PlaneReps``): recycled entropies (``Reps``) within each plane. The next packet
  goes to the plane with the most clean EVs waiting to be recycled, the planes in turn among
  equals: the NIC's ports carry equal shares while their paths answer alike, and a plane whose
  packets come back marked, or that has fewer working paths, gets fewer. (One ring over all
  planes filled with the EVs of whichever plane answered last, and the ports, each with a
  queue of its own, carried unequal shares: measured on a permutation over clos-2p at 1 Gb/s,
  one plane's uplinks 99 % busy and the other's 60 %, the RTT 1.7 x the base RTT.) A plane
  whose EVs are all unusable is left out. Within a plane: EVs whose packets came back
  unmarked go into a small ring (16 entries) and carry the next packets, each once; when no
  fresh entry is left a random usable EV is explored. A timeout freezes the ring: only EVs in
  it are reused (round robin, fresh or not) until ``freeze_s`` passed, then the ring is
  cleared and 16 packets explore. ECN-marked, trimmed and lost packets are simply not
  recycled, so a congested path gets fewer packets the more of them it marks.
- ``bitmap`` (``BitmapPenalty``): the rotation, where each EV has a penalty (ECN +1, NACK or
  loss +4, timeout +15, at most 15); an EV with a penalty is skipped and loses one point.
"""

from __future__ import annotations

import random
from bisect import bisect_left, insort
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import ClassVar, Protocol


class PathSignal(IntEnum):
    """What came back on one EV (ordered by severity)."""

    ECN = 1  # SACK m=SKIP_ONCE / ALWAYS_SKIP: the forward path saw congestion
    NACK = 2  # NACK TRIMMED: a queue of the path was full
    LOSS = 3  # inferred loss (fast, time, probe, per-packet timer)
    TIMEOUT = 4  # ACK timeout of a packet sent on it


class SprayPolicy(Protocol):
    """Chooses the next EV among the usable ones (indices into the profile's EV list)."""

    wants_deliveries: bool  # feed on_delivered (costs a list per SACK)

    def rebuild(self, usable: Sequence[int]) -> None:
        """The usable set changed (kept in the policy's own order)."""
        ...

    def pick(self, avoid: int) -> tuple[int, bool]:
        """Next usable index (not ``avoid`` when possible) or -1; and whether a round ended."""
        ...

    def on_delivered(self, indices: Sequence[int], now: float) -> None:
        """Packets sent on these EVs arrived unmarked (first transmissions only)."""
        ...

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        """A congestion or failure signal on one EV."""
        ...


class FixedRotation:
    """A seeded permutation of all EVs, walked round-robin over the usable ones."""

    wants_deliveries = False

    def __init__(self, n: int, seed: int) -> None:
        order = list(range(n))
        random.Random(seed).shuffle(order)
        self._rank = {idx: pos for pos, idx in enumerate(order)}
        self._ring: list[int] = []
        self._ranks: list[int] = []  # the ring's ranks (ascending): where an EV goes in it
        self._pos = 0

    def rebuild(self, usable: Sequence[int]) -> None:
        anchor = self._anchor()
        self._ring = sorted(usable, key=self._rank.__getitem__)
        self._ranks = [self._rank[idx] for idx in self._ring]
        self._resume(anchor)

    def update_usable(self, added: Sequence[int], removed: Sequence[int]) -> None:
        """``rebuild`` of the set with ``added`` joined and ``removed`` gone, by bisection."""
        anchor = self._anchor()
        ring, ranks, rank = self._ring, self._ranks, self._rank
        for idx in removed:
            j = bisect_left(ranks, rank[idx])
            del ranks[j]
            del ring[j]
        for idx in added:
            r = rank[idx]
            j = bisect_left(ranks, r)
            ranks.insert(j, r)
            ring.insert(j, idx)
        self._resume(anchor)

    def _anchor(self) -> int | None:
        """The rank of the EV the rotation is at (None: no ring)."""
        return self._ranks[self._pos] if self._ring and self._pos < len(self._ring) else None

    def _resume(self, anchor: int | None) -> None:
        # continue at the first EV at or after the one we were at, so a change of the usable
        # set does not restart the round
        pos = 0 if anchor is None else bisect_left(self._ranks, anchor)
        self._pos = pos if pos < len(self._ranks) else 0

    def pick(self, avoid: int) -> tuple[int, bool]:
        ring = self._ring
        n = len(ring)
        if n == 0:
            return -1, False
        pos = self._pos
        if pos >= n:
            pos = 0
        idx = ring[pos]
        pos += 1
        wrapped = pos >= n
        if idx == avoid and n > 1:
            if wrapped:
                pos = 0
            idx = ring[pos]
            pos += 1
            wrapped = wrapped or pos >= n
        self._pos = 0 if wrapped else pos
        return idx, wrapped

    def on_delivered(self, indices: Sequence[int], now: float) -> None:
        return None

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        return None


class Reps:
    """Recycled entropy packet spraying (see the module docstring)."""

    wants_deliveries = True
    EXPLORE_AFTER_FREEZE = 16  # packets sent on random EVs once a freeze ends

    def __init__(self, n: int, seed: int, freeze_s: float = 0.05, ring: int = 16) -> None:
        self._rng = random.Random(seed)
        self.freeze_s = freeze_s
        # REPS's ring has 8 entries for a receiver that acknowledges every 4 packets; here
        # one SACK acknowledges up to ack_coalesce (8) packets at once, so twice as many
        # entries keep a SACK's worth of clean EVs from overwriting the previous one's.
        self.RING = self.ring_size = ring
        self._usable: list[int] = []
        self._usable_set: set[int] = set()
        self._ring = [-1] * self.RING
        self._fresh = [False] * self.RING
        self._head = 0  # next slot written
        self._cursor = 0  # frozen mode: next slot reused
        self._nfresh = 0
        self.frozen_until: float | None = None
        self.explore = 0
        self._since_round = 0
        self.recycled = 0  # packets on a recycled EV
        self.explored = 0  # packets on a random EV

    def rebuild(self, usable: Sequence[int]) -> None:
        self._usable = list(usable)
        self._usable_set = set(self._usable)

    def update_usable(self, added: Sequence[int], removed: Sequence[int]) -> None:
        """``rebuild`` with the changes only (the usable list in index order, as EvManager's)."""
        usable, members = self._usable, self._usable_set
        for idx in removed:
            members.discard(idx)
            del usable[bisect_left(usable, idx)]
        for idx in added:
            members.add(idx)
            insort(usable, idx)

    def _round(self) -> bool:
        self._since_round += 1
        if self._since_round >= max(1, len(self._usable)):
            self._since_round = 0
            return True
        return False

    def _random(self, avoid: int) -> int:
        usable = self._usable
        idx = usable[self._rng.randrange(len(usable))]
        if idx == avoid and len(usable) > 1:
            idx = usable[(usable.index(idx) + 1) % len(usable)]
        self.explored += 1
        return idx

    def pick(self, avoid: int) -> tuple[int, bool]:
        if not self._usable:
            return -1, False
        if self.explore > 0:
            self.explore -= 1
            return self._random(avoid), self._round()
        ok = self._usable_set
        ring, fresh = self._ring, self._fresh
        if self.frozen_until is not None:
            for _ in range(self.RING):
                slot = self._cursor
                self._cursor = (slot + 1) % self.RING
                idx = ring[slot]
                if idx in ok and idx != avoid:
                    if fresh[slot]:
                        fresh[slot] = False
                        self._nfresh -= 1
                    self.recycled += 1
                    return idx, self._round()
            return self._random(avoid), self._round()
        while self._nfresh:
            slot = (self._head - self._nfresh) % self.RING  # the oldest fresh entry
            fresh[slot] = False
            self._nfresh -= 1
            idx = ring[slot]
            if idx in ok and idx != avoid:
                self.recycled += 1
                return idx, self._round()
        return self._random(avoid), self._round()

    def usable_count(self) -> int:
        return len(self._usable)

    def fresh_count(self) -> int:
        """EVs that came back clean and were not reused yet (a frozen ring: all its slots)."""
        return self.RING if self.frozen_until is not None else self._nfresh

    def on_delivered(self, indices: Sequence[int], now: float) -> None:
        self._thaw(now)
        ring, fresh = self._ring, self._fresh
        for idx in indices:
            slot = self._head
            ring[slot] = idx
            if not fresh[slot]:
                fresh[slot] = True
                self._nfresh += 1
            self._head = (slot + 1) % self.RING
        if self._nfresh > self.RING:
            self._nfresh = self.RING

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        self._thaw(now)
        if signal == PathSignal.TIMEOUT and self.frozen_until is None and self.explore == 0:
            self.frozen_until = now + self.freeze_s

    def _thaw(self, now: float) -> None:
        if self.frozen_until is not None and now > self.frozen_until:
            self.frozen_until = None
            self._ring = [-1] * self.RING
            self._fresh = [False] * self.RING
            self._nfresh = 0
            self.explore = self.EXPLORE_AFTER_FREEZE


class PlaneReps:
    """``Reps`` per plane (NIC port); the plane with the most clean EVs to recycle first."""

    wants_deliveries = True

    def __init__(self, ports: Sequence[int], seed: int, freeze_s: float = 0.05,
                 ring: int = 16) -> None:
        self._plane = list(ports)
        self.planes = {p: Reps(len(self._plane), seed * 7919 + p, freeze_s, ring)
                       for p in sorted(set(self._plane))}
        self._turn: list[Reps] = []  # planes with a usable EV, in port order
        self._next = 0
        self._n_usable = 0
        self._since_round = 0

    def rebuild(self, usable: Sequence[int]) -> None:
        by_plane: dict[int, list[int]] = {p: [] for p in self.planes}
        for idx in usable:
            by_plane[self._plane[idx]].append(idx)
        for port, reps in self.planes.items():
            reps.rebuild(by_plane[port])
        self._tally()

    def update_usable(self, added: Sequence[int], removed: Sequence[int]) -> None:
        """``rebuild`` with the changes only, each to its plane's ``Reps``."""
        plane = self._plane
        for port, reps in self.planes.items():
            joined = [i for i in added if plane[i] == port]
            left = [i for i in removed if plane[i] == port]
            if joined or left:
                reps.update_usable(joined, left)
        self._tally()

    def _tally(self) -> None:
        """The planes in turn (those with a usable EV, in port order) and the usable count."""
        self._turn = [reps for reps in self.planes.values() if reps.usable_count()]
        self._n_usable = sum(reps.usable_count() for reps in self._turn)

    def pick(self, avoid: int) -> tuple[int, bool]:
        turn = self._turn
        if not turn:
            return -1, False
        n = len(turn)
        start = self._next % n
        pos, most = start, turn[start].fresh_count()
        for k in range(1, n):  # the plane with the most clean EVs to recycle, first in turn
            j = (start + k) % n
            fresh = turn[j].fresh_count()
            if fresh > most:
                pos, most = j, fresh
        self._next = pos + 1
        idx = turn[pos].pick(avoid)[0]
        self._since_round += 1
        if self._since_round >= self._n_usable:
            self._since_round = 0
            return idx, True
        return idx, False

    def on_delivered(self, indices: Sequence[int], now: float) -> None:
        plane = self._plane
        by_plane: dict[int, list[int]] = {}
        for idx in indices:
            by_plane.setdefault(plane[idx], []).append(idx)
        for port, mine in by_plane.items():
            self.planes[port].on_delivered(mine, now)

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        self.planes[self._plane[index]].on_signal(index, signal, now)

    @property
    def recycled(self) -> int:
        return sum(r.recycled for r in self.planes.values())

    @property
    def explored(self) -> int:
        return sum(r.explored for r in self.planes.values())


class BitmapPenalty(FixedRotation):
    """The rotation with a per-EV penalty: skipped (and decremented) while positive."""

    MAX_PENALTY = 15
    PENALTY: ClassVar[dict[PathSignal, int]] = {
        PathSignal.ECN: 1, PathSignal.NACK: 4, PathSignal.LOSS: 4, PathSignal.TIMEOUT: 15}

    def __init__(self, n: int, seed: int) -> None:
        super().__init__(n, seed)
        self.penalty = [0] * n
        self.skips = 0

    def pick(self, avoid: int) -> tuple[int, bool]:
        n = len(self._ring)
        penalty = self.penalty
        wrapped_any = False
        for _ in range(n):
            idx, wrapped = super().pick(avoid)
            wrapped_any = wrapped_any or wrapped
            if idx < 0 or penalty[idx] == 0:
                return idx, wrapped_any
            penalty[idx] -= 1
            self.skips += 1
        return super().pick(avoid)[0], True  # every EV penalised: take the next one anyway

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        if 0 <= index < len(self.penalty):
            self.penalty[index] = min(self.MAX_PENALTY,
                                      self.penalty[index] + self.PENALTY[signal])


SprayFactory = Callable[[Sequence[int], int], SprayPolicy]
"""(each EV's NIC port, seed) -> a QP's spraying policy."""


def _rotation(ports: Sequence[int], seed: int) -> SprayPolicy:
    return FixedRotation(len(ports), seed)


def _bitmap(ports: Sequence[int], seed: int) -> SprayPolicy:
    return BitmapPenalty(len(ports), seed)


SPRAY_POLICIES: dict[str, SprayFactory] = {
    "rotation": _rotation,
    "reps": PlaneReps,
    "bitmap": _bitmap,
}
"""Policies by the name an EV profile gives (``EvProfile.spray``)."""

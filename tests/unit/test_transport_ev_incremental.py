"""EvManager keeps its usable set (and the spraying policy's ring) up to date incrementally:
over random sequences of state changes, picks, round ends and mask changes it must behave
exactly as the from-scratch rebuild after every change (the manager before the change did):
the same usable set, states, active set, counters, events and the same EV for every pick."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

import pytest

from hosts.transport.ev import EvManager
from hosts.transport.profiles import EvEntry
from hosts.transport.spray import (
    BitmapPenalty,
    FixedRotation,
    PathSignal,
    PlaneReps,
    Reps,
    SprayPolicy,
)
from hosts.transport.types import EvState

Factory = Callable[[int, int], SprayPolicy]
POLICIES: dict[str, Factory] = {"rotation": FixedRotation, "reps": Reps,
                                "bitmap": BitmapPenalty}
PER_PLANE = "planereps"  # PlaneReps: built from each EV's port (pair() below)


class WholeSet:
    """A policy seen without ``update_usable``: the manager hands it the whole set."""

    def __init__(self, inner: SprayPolicy) -> None:
        self.inner = inner
        self.wants_deliveries = inner.wants_deliveries

    def rebuild(self, usable: Sequence[int]) -> None:
        self.inner.rebuild(usable)

    def pick(self, avoid: int) -> tuple[int, bool]:
        return self.inner.pick(avoid)

    def on_delivered(self, indices: Sequence[int], now: float) -> None:
        self.inner.on_delivered(indices, now)

    def on_signal(self, index: int, signal: PathSignal, now: float) -> None:
        self.inner.on_signal(index, signal, now)


class FromScratch(EvManager):
    """The reference: every change rebuilds the usable set and the policy from all EVs."""

    def _refresh(self, touched: Iterable[int]) -> None:
        self._rebuild()


def pair(rng: random.Random, policy: str) -> tuple[EvManager, EvManager, list[object],
                                                   list[object]]:
    n = rng.choice([8, 32, 64])
    ports = rng.choice([1, 2, 4])
    entries = [EvEntry(0x100 + i, rng.randrange(ports) if rng.random() < 0.3 else i % ports)
               for i in range(n)]
    kw = {"active_count": rng.choice([0, n // 2, n // 4 + 1]), "min_active": rng.choice([0, 1, 4]),
          "seed": rng.randrange(1000)}
    seed = rng.randrange(1000)
    log_a: list[object] = []
    log_b: list[object] = []

    def make() -> SprayPolicy:
        if policy == PER_PLANE:
            return PlaneReps([e.port for e in entries], seed)
        return POLICIES[policy](n, seed)

    fast = EvManager(entries, emit=lambda *e: log_a.append(e), **kw, policy=make())
    slow = FromScratch(entries, emit=lambda *e: log_b.append(e), **kw,
                       policy=WholeSet(make()))
    return fast, slow, log_a, log_b


def same(fast: EvManager, slow: EvManager) -> None:
    assert fast.usable() == slow.usable()
    # the incremental structures are what a rebuild from all EVs gives
    assert fast.usable() == [i for i in range(len(fast.states)) if fast._wanted(i)]
    assert fast._usable_set == set(fast.usable())
    assert fast.states == slow.states and fast.active == slow.active
    assert fast._n_active == sum(fast.active)
    for attr in ("refused", "fallbacks", "n_bad", "version", "local_mask", "remote_mask"):
        assert getattr(fast, attr) == getattr(slow, attr), attr


@pytest.mark.parametrize("policy", [*POLICIES, PER_PLANE])
@pytest.mark.parametrize("seed", range(12))
def test_incremental_usable_set_matches_a_rebuild_from_scratch(policy: str, seed: int) -> None:
    rng = random.Random(seed)
    fast, slow, log_a, log_b = pair(rng, policy)
    n = len(fast.states)
    ports = max(fast.ports) + 1
    states = list(EvState)
    now = 0.0
    for _ in range(1500):
        now += 1e-4
        op = rng.random()
        if op < 0.45:
            i, new, ctl = rng.randrange(n), rng.choice(states), rng.random() < 0.1
            reason = "test"
            assert fast.set_state(i, new, reason, controller=ctl) == slow.set_state(
                i, new, reason, controller=ctl)
        elif op < 0.9:
            avoid = rng.randrange(-1, n)
            assert fast.pick(avoid) == slow.pick(avoid)
        elif op < 0.95:
            i, sig = rng.randrange(n), rng.choice(list(PathSignal))
            fast.signal(i, sig, now)
            slow.signal(i, sig, now)
            got = [rng.randrange(n) for _ in range(rng.randrange(4))]
            if fast.wants_deliveries:
                fast.delivered(got, now)
                slow.delivered(got, now)
        else:
            local = rng.randrange(1 << ports) if rng.random() < 0.5 else -1
            remote = rng.randrange(1 << ports) if rng.random() < 0.5 else None
            fast.set_masks(local, remote)
            slow.set_masks(local, remote)
        same(fast, slow)
    assert log_a == log_b
    assert len(log_a) > 100  # the sequence really changed states


@pytest.mark.parametrize("seed", range(20))
def test_rotation_update_equals_rebuild_mid_round(seed: int) -> None:
    rng = random.Random(seed)
    n = 48
    fast, slow = FixedRotation(n, seed), FixedRotation(n, seed)
    current = set(rng.sample(range(n), 20))
    fast.rebuild(sorted(current))
    slow.rebuild(sorted(current))
    for _ in range(300):
        for _ in range(rng.randrange(3)):
            avoid = rng.randrange(-1, n)
            assert fast.pick(avoid) == slow.pick(avoid)
        removed = rng.sample(sorted(current), min(len(current), rng.randrange(3)))
        spare = sorted(set(range(n)) - current)
        added = rng.sample(spare, min(len(spare), rng.randrange(3)))
        current = (current - set(removed)) | set(added)
        fast.update_usable(added, removed)
        slow.rebuild(sorted(current))
        assert fast._ring == slow._ring and fast._pos == slow._pos

"""Spraying policy FixedRotation (hosts/transport/spray.py) on its own: a seeded permutation
walked round-robin over the usable EVs, across rebuilds of the usable set."""

from __future__ import annotations

import random

import pytest

from hosts.transport.spray import FixedRotation


def _permutation(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def test_walks_the_seeded_permutation_and_reports_each_round() -> None:
    rot = FixedRotation(6, seed=9)
    rot.rebuild(range(6))
    picks = [rot.pick(-1) for _ in range(12)]
    order = _permutation(6, 9)
    assert [i for i, _ in picks] == order + order
    assert [end for _, end in picks] == [False] * 5 + [True] + [False] * 5 + [True]


def test_only_usable_evs_in_permutation_order_and_avoid() -> None:
    rot = FixedRotation(8, seed=3)
    usable = [1, 4, 6, 7]
    rot.rebuild(usable)
    order = [i for i in _permutation(8, 3) if i in usable]
    assert [rot.pick(-1)[0] for _ in range(8)] == order + order
    # avoid: the next one instead, unless it is the only choice
    first = order[0]
    assert rot.pick(first)[0] == order[1]
    solo = FixedRotation(8, seed=3)
    solo.rebuild([5])
    assert solo.pick(5) == (5, True)
    empty = FixedRotation(4, seed=1)
    empty.rebuild([])
    assert empty.pick(-1) == (-1, False)


def test_a_rebuild_continues_the_round_where_it_was() -> None:
    rot = FixedRotation(6, seed=2)
    order = _permutation(6, 2)
    rot.rebuild(range(6))
    assert rot.pick(-1)[0] == order[0]
    assert rot.pick(-1)[0] == order[1]
    gone = order[3]
    rot.rebuild([i for i in range(6) if i != gone])  # the EV after next became unusable
    rest = [rot.pick(-1)[0] for _ in range(3)]
    assert rest == [order[2], order[4], order[5]]


# -- REPS and the bitmap penalty ------------------------------------------------------------


def test_reps_recycles_each_clean_ev_once_then_explores() -> None:
    from hosts.transport.spray import Reps

    reps = Reps(16, seed=4)
    reps.rebuild(range(16))
    reps.on_delivered([3, 5, 7], now=0.0)
    # the oldest fresh entry first, each once
    assert [reps.pick(-1)[0] for _ in range(3)] == [3, 5, 7]
    assert reps.recycled == 3 and reps.explored == 0
    # nothing fresh: a random usable EV (seeded, so reproducible)
    rng = random.Random(4)
    expect = [list(range(16))[rng.randrange(16)] for _ in range(2)]
    assert [reps.pick(-1)[0] for _ in range(2)] == expect and reps.explored == 2


def test_reps_ring_keeps_the_last_entries_and_skips_unusable_ones() -> None:
    from hosts.transport.spray import Reps

    reps = Reps(64, seed=1, ring=8)
    reps.rebuild(range(64))
    reps.on_delivered(list(range(10, 20)), now=0.0)  # 10 entries into 8 slots
    reps.rebuild([i for i in range(64) if i != 13])  # EV 13 left the usable set
    picks = [reps.pick(-1)[0] for _ in range(7)]
    assert picks == [12, 14, 15, 16, 17, 18, 19]  # 10, 11 overwritten; 13 dropped
    assert reps.recycled == 7 and Reps(4, seed=1).ring_size == 16


def test_reps_freezes_on_a_timeout_and_explores_after_the_freeze() -> None:
    from hosts.transport.spray import PathSignal, Reps

    reps = Reps(16, seed=2, freeze_s=0.1)
    reps.rebuild(range(16))
    reps.on_delivered([1, 2], now=0.0)
    reps.on_signal(9, PathSignal.TIMEOUT, now=1.0)
    assert reps.frozen_until == pytest.approx(1.1)
    # frozen: only EVs of the ring, round robin, also those already used
    assert [reps.pick(-1)[0] for _ in range(5)] == [1, 2, 1, 2, 1]
    assert reps.explored == 0
    reps.on_delivered([4], now=1.05)  # still frozen: recycled too
    assert sorted({reps.pick(-1)[0] for _ in range(6)}) == [1, 2, 4]
    reps.on_delivered([6], now=1.2)  # the freeze is over: ring cleared, 16 explorations
    assert reps.frozen_until is None and reps.explore == 16
    for _ in range(16):
        reps.pick(-1)
    assert reps.explored == 16
    assert reps.pick(-1)[0] == 6  # then recycling again


def test_reps_reports_rounds_by_count_so_skipped_evs_return() -> None:
    from hosts.transport.spray import Reps

    reps = Reps(4, seed=3)
    reps.rebuild([0, 1, 2])
    assert [reps.pick(-1)[1] for _ in range(6)] == [False, False, True] * 2


def test_bitmap_penalty_skips_penalised_evs_and_forgets() -> None:
    from hosts.transport.spray import BitmapPenalty, PathSignal

    bm = BitmapPenalty(4, seed=5)
    bm.rebuild(range(4))
    order = _permutation(4, 5)
    first = order[0]
    bm.on_signal(first, PathSignal.ECN, now=0.0)  # +1
    bm.on_signal(order[1], PathSignal.NACK, now=0.0)  # +4
    bm.on_signal(order[2], PathSignal.TIMEOUT, now=0.0)  # +15
    bm.on_signal(order[2], PathSignal.TIMEOUT, now=0.0)  # capped at 15
    assert bm.penalty[first] == 1 and bm.penalty[order[1]] == 4 and bm.penalty[order[2]] == 15
    # first pass: order[0..2] skipped (each loses a point), order[3] taken
    assert bm.pick(-1)[0] == order[3]
    assert (bm.penalty[first], bm.penalty[order[1]], bm.penalty[order[2]]) == (0, 3, 14)
    assert bm.pick(-1)[0] == first  # its penalty is used up
    assert bm.skips == 3


def test_ecn_on_some_evs_moves_traffic_away_with_reps() -> None:
    """Every packet on a quarter of the EVs comes back CE-marked: REPS sends them far less
    than an even share; the fixed rotation only skips them for the rest of a round."""
    from hosts.transport.profiles import EvProfile, EvProfileMode
    from hosts.transport.sim import MARK, PASS, LinkModel, Network, QpOptions, connect
    from hosts.transport.types import Completion, SendWR, TxPacket, WrOpcode
    from tests.unit.transport_util import make_host

    share: dict[str, float] = {}
    for policy in ("rotation", "reps"):
        a, b = make_host(1), make_host(2)
        for h in (a, b):
            h.set_ev_profile(EvProfile(1, EvProfileMode.GEN, per_plane=16, spray=policy))
        qa, _ = connect(a, b, QpOptions(mpr=2))
        size = 4 << 20
        src = bytearray(random.Random(1).randbytes(size))
        dst = bytearray(size)
        ma, mb = a.register_mr(src, 0xF), b.register_mr(dst, 0xF)
        net = Network([a, b], LinkModel(delay=20e-6, rate=1.25e9))
        net.record = True
        hot = {e for e, _p, _s in a.ev_states(qa)[:4]}

        def mark(src_host: int, tx: TxPacket, hot: set[int] = hot) -> str:
            return MARK if src_host == 0 and tx.ev in hot else PASS

        net.verdict = mark
        a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, size, ma.lkey, mb.addr, mb.rkey),
                    0.0)
        events = net.events[0]
        assert net.run(lambda events=events: any(isinstance(e, Completion) for e in events),
                       max_time=5.0)
        assert dst == src
        data = [tx for _t, s, tx in net.sent if s == 0 and tx.pkt.reth is not None]
        steady = data[512:]  # after the first two windows (MPR 256), sent before any feedback
        share[policy] = sum(tx.ev in hot for tx in steady) / len(steady)
    even = 4 / 16
    assert share["reps"] < even / 3 < share["rotation"]


def test_plane_reps_takes_the_planes_in_turn_and_recycles_within_a_plane() -> None:
    from hosts.transport.spray import SPRAY_POLICIES, PlaneReps

    ports = [0, 1] * 8  # EV i on plane i % 2
    reps = SPRAY_POLICIES["reps"](ports, 7)
    assert isinstance(reps, PlaneReps)
    reps.rebuild(range(16))
    picks = [reps.pick(-1)[0] for _ in range(40)]
    assert [ports[i] for i in picks] == [0, 1] * 20  # the NIC's ports get equal shares
    # clean EVs came back on plane 0 only: plane 1 (nothing clean to recycle) is skipped
    # until they are used, oldest first; then the planes explore in turn again
    reps.on_delivered([2, 4, 6], now=0.0)
    before = reps.planes[1].explored
    picks = [reps.pick(-1)[0] for _ in range(7)]
    assert picks[:3] == [2, 4, 6] and reps.recycled == 3
    assert [ports[i] for i in picks[3:]] in ([0, 1, 0, 1], [1, 0, 1, 0])
    assert reps.planes[1].explored == before + 2
    # both planes with clean EVs: in turn
    reps.on_delivered([8, 10], now=0.0)
    reps.on_delivered([9, 11], now=0.0)
    assert sorted(reps.pick(-1)[0] for _ in range(4)) == [8, 9, 10, 11]
    # a plane without a usable EV leaves the turn
    reps.rebuild([i for i in range(16) if ports[i] == 1])
    assert {ports[reps.pick(-1)[0]] for _ in range(10)} == {1}
    reps.rebuild([])
    assert reps.pick(-1) == (-1, False)


def test_plane_reps_ends_a_round_per_usable_ev_and_freezes_only_the_timed_out_plane() -> None:
    from hosts.transport.spray import PathSignal, PlaneReps

    ports = [0, 0, 1, 1]
    reps = PlaneReps(ports, seed=1, freeze_s=0.1)
    reps.rebuild([0, 1, 2])
    assert [reps.pick(-1)[1] for _ in range(6)] == [False, False, True] * 2
    reps.on_signal(3, PathSignal.TIMEOUT, now=1.0)
    assert reps.planes[1].frozen_until == pytest.approx(1.1)
    assert reps.planes[0].frozen_until is None

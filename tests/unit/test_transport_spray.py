"""Spraying policy FixedRotation (hosts/transport/spray.py) on its own: a seeded permutation
walked round-robin over the usable EVs, across rebuilds of the usable set."""

from __future__ import annotations

import random

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

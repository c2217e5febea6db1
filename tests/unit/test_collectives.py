"""Collective step patterns: shapes from the Harvest reference and symbolic execution."""

from __future__ import annotations

import pytest

from common.collectives import (
    Collective,
    CollectiveError,
    build,
    recursive_doubling,
    ring,
    simulate,
    swing,
    swing_peer,
    swing_rho,
)


def test_recursive_doubling_n8_offsets_and_chunks() -> None:
    coll = recursive_doubling(8)
    offsets = [{(v - u) % 8 for u, v in s.pairs} for s in coll.steps]
    assert offsets == [{1}, {2}, {4}, {4}, {2}, {1}]
    assert [s.fraction for s in coll.steps] == [1 / 2, 1 / 4, 1 / 8, 1 / 8, 1 / 4, 1 / 2]
    assert [s.kind for s in coll.steps] == ["reduce-scatter"] * 3 + ["all-gather"] * 3


def test_swing_rho_and_pairing() -> None:
    assert [swing_rho(s) for s in range(5)] == [1, -1, 3, -5, 11]
    for n in (4, 8, 16, 32):
        for s in range(n.bit_length() - 1):
            for r in range(n):
                peer = swing_peer(s, r, n)
                assert peer % 2 != r % 2
                assert swing_peer(s, peer, n) == r  # exchanges are pairwise
    coll = swing(16)
    assert [s.fraction for s in coll.steps] == [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 16, 1 / 8,
                                                1 / 4, 1 / 2]


def _check_allreduce(name: str, n: int) -> None:
    everyone = frozenset(range(n))
    final = simulate(build(name, n, "allreduce"))
    for u in range(n):
        assert set(final[u]) == set(range(n))
        assert all(contrib == everyone for contrib in final[u].values())
    rs = simulate(build(name, n, "reduce-scatter"))
    for u in range(n):
        assert rs[u] == {u: everyone}
    ag = simulate(build(name, n, "all-gather"))
    for u in range(n):
        assert set(ag[u]) == set(range(n))


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_butterflies_compute_an_allreduce(n: int) -> None:
    _check_allreduce("rd", n)
    _check_allreduce("swing", n)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ring_computes_an_allreduce(n: int) -> None:
    _check_allreduce("ring", n)
    coll = ring(n)
    assert len(coll.steps) == 2 * (n - 1)
    assert all(s.fraction == 1 / n for s in coll.steps)


def test_every_block_sent_once_per_step_and_sizes_uniform() -> None:
    for name in ("rd", "swing"):
        for step in build(name, 16).steps:
            sizes = {len(b) for b in step.blocks}
            assert len(sizes) == 1
            for v in range(16):
                assert len(step.receives_from(v)) == 1


@pytest.mark.parametrize(
    ("name", "n", "phase", "message"),
    [
        ("rd", 12, "allreduce", "power of two"),
        ("swing", 6, "allreduce", "power of two"),
        ("ring", 1, "allreduce", "at least 2"),
        ("rd", 0, "allreduce", "at least 2"),
        ("rd", 8, "broadcast", "unknown phase"),
        ("tree", 8, "allreduce", "unknown collective"),
    ],
)
def test_bad_parameters_are_clear_errors(name: str, n: int, phase: str, message: str) -> None:
    with pytest.raises(CollectiveError, match=message):
        build(name, n, phase)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_bruck_shapes_and_delivery(n: int) -> None:
    coll = build("bruck", n)
    assert coll.phase == "all-to-all" and len(coll.steps) == n.bit_length() - 1
    for k, st in enumerate(coll.steps):
        assert st.sends == tuple((u + (1 << k)) % n for u in range(n))
        assert st.fraction == 0.5  # n/2 positions: those with bit k set
        assert all(len(b) == n // 2 and all(j >> k & 1 for j in b) for b in st.blocks)
    final = simulate(coll)
    # position j of rank v holds rank (v - j)'s block: its block for v (recomputed here)
    assert all(final[v][j] == {(v - j) % n} for v in range(n) for j in range(n))


@pytest.mark.parametrize("n", [2, 5, 6, 8])
def test_linear_shift_any_n(n: int) -> None:
    coll = build("shift", n, "all-to-all")
    assert len(coll.steps) == n - 1
    for s, st in enumerate(coll.steps, start=1):
        assert st.pairs == tuple((u, (u + s) % n) for u in range(n))
        assert st.fraction == 1 / n and st.blocks == ((s,),) * n
    final = simulate(coll)
    assert all(final[v][j] == {(v - j) % n} for v in range(n) for j in range(n))


def test_all_to_all_errors() -> None:
    with pytest.raises(CollectiveError, match="power of two"):
        build("bruck", 6)
    with pytest.raises(CollectiveError, match="all-to-all"):
        build("shift", 8, "allreduce")
    with pytest.raises(CollectiveError, match="reduction"):
        build("rd", 8, "all-to-all")
    short = build("bruck", 8)
    broken = Collective(short.name, short.phase, 8, short.steps[:-1])
    with pytest.raises(CollectiveError, match="wrong blocks"):
        simulate(broken)

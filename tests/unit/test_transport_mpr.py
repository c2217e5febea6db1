"""Dynamic MPR (hosts/transport/mpr.py): the shared-bitmap policy on literal cases, then on
simulated hosts: two writers into one responder host whose tracking budget is shared, so a
writer's window shrinks when the other starts and grows back when it ends, and the requester
never sends beyond the window it was given."""

from __future__ import annotations

import random

import pytest

from hosts.transport import ALL_ACCESS, LogRecord, QpHintFlag, SendWR, WrOpcode
from hosts.transport.lognames import MPR_UPDATED
from hosts.transport.mpr import MprUse, SharedBitmap
from hosts.transport.sim import LinkModel, Network, QpOptions, connect, default_profile
from tests.unit.transport_util import make_host

MIB = 1 << 20
DYN = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH | QpHintFlag.DYNAMIC_MPR


def use(qpn: int, span: int = 0, arrivals: int = 1, negotiated: int = 1024) -> MprUse:
    return MprUse(qpn, negotiated, negotiated, span, arrivals)


def test_idle_qps_keep_their_floor_and_busy_ones_share_the_rest() -> None:
    policy = SharedBitmap(1024)  # 8 units of 128 PSNs
    # one busy QP: the idle one keeps 1 unit, the busy one takes the other 7
    assert policy.allocate([use(1), use(2, arrivals=0)]) == {1: 896, 2: 128}
    # both busy: 1 unit each first, then 6 shared equally
    assert policy.allocate([use(1), use(2)]) == {1: 512, 2: 512}
    # never more than negotiated; what one cannot take goes to the other
    assert policy.allocate([use(1, negotiated=256), use(2)]) == {1: 256, 2: 768}
    # the span a QP holds now is its floor, even beyond a fair share (rounded up to units);
    # the last unit goes to the smaller grant
    assert policy.allocate([use(1, span=700), use(2)]) == {1: 768, 2: 256}
    assert policy.allocate([use(1, span=1000), use(2)]) == {1: 1024, 2: 128}
    # a budget too small for the floors: everyone keeps its floor
    assert policy.allocate([use(q) for q in range(1, 11)]) == {q: 128 for q in range(1, 11)}
    with pytest.raises(ValueError):
        SharedBitmap(100)


def _max_min_fair(budget: int, floors: list[int], caps: list[int], busy: list[bool]) -> list[int]:
    """Brute force: among every grant vector with floors <= g <= caps (idle QPs at their
    floor) whose sum is the largest possible within the budget, the one whose sorted totals
    are lexicographically largest (max-min fairness)."""
    import itertools

    ranges = [range(f, (c if b else f) + 1) for f, c, b in zip(floors, caps, busy)]
    best: list[int] | None = None
    for g in itertools.product(*ranges):
        if sum(g) > max(budget, sum(floors)):
            continue
        key = (sum(g), sorted(g))
        if best is None or key > (sum(best), sorted(best)):
            best = list(g)
    assert best is not None
    return best


def test_allocation_is_max_min_fair_checked_by_brute_force() -> None:
    rng = random.Random(5)
    for _ in range(200):
        n = rng.randint(1, 4)
        budget = rng.randint(1, 14)
        uses = [MprUse(q, 128 * rng.randint(1, 5), 128, rng.randint(0, 500),
                       rng.choice([0, 0, 3])) for q in range(n)]
        got = SharedBitmap(budget * 128).allocate(uses)
        floors = [min(-(-(u.span_peak + 1) // 128), u.negotiated // 128) for u in uses]
        want = _max_min_fair(budget, floors, [u.negotiated // 128 for u in uses],
                             [u.arrivals > 0 for u in uses])
        assert sorted(v // 128 for v in got.values()) == sorted(want)
        assert sum(got.values()) == 128 * sum(want)


def _two_writers(budget: int) -> tuple[Network, list[tuple[int, int]], bytearray, bytearray]:
    """Hosts 0 and 1 write into host 2, whose Dynamic-MPR budget is ``budget`` PSNs."""
    a, b = make_host(1), make_host(2)
    c = make_host(3, mpr_budget=budget, mpr_interval=50e-6)
    for h in (a, b, c):
        h.set_ev_profile(default_profile(1, 1, 16))
    opts = QpOptions(mpr=8, hint=DYN)
    qa, qca = connect(a, c, opts)
    qb, qcb = connect(b, c, opts)
    src = bytearray(random.Random(1).randbytes(8 * MIB))
    dst = bytearray(8 * MIB)
    net = Network([a, b, c], LinkModel(delay=5e-6, rate=12.5e9))
    net._mrs = (a.register_mr(src, ALL_ACCESS), b.register_mr(src, ALL_ACCESS),  # type: ignore[attr-defined]
                c.register_mr(dst, ALL_ACCESS))
    return net, [(qa, qca), (qb, qcb)], src, dst


def _post(net: Network, host: int, qpn: int, off: int, length: int) -> None:
    mr_src, mr_dst = net._mrs[host], net._mrs[2]  # type: ignore[attr-defined]
    net.hosts[host].post_send(qpn, SendWR(off, WrOpcode.WRITE, mr_src.addr + off, length,
                                          mr_src.lkey, mr_dst.addr + off, mr_dst.rkey), net.now)


def _windows(net: Network, host: int) -> list[int]:
    return [e.data["new"] for e in net.events[host]
            if isinstance(e, LogRecord) and e.name == MPR_UPDATED]


def test_a_writer_s_window_shrinks_when_another_starts_and_grows_when_it_ends() -> None:
    net, qps, src, dst = _two_writers(1024)
    (qa, _), (qb, _) = qps
    a, _b, c = net.hosts

    def sends(host: int) -> int:
        return sum(1 for e in net.events[host] if type(e).__name__ == "Completion")

    _post(net, 0, qa, 0, 4 * MIB)  # alone: 7 of the 8 units (idle b keeps its floor of 1)
    assert net.run(lambda: a.qp_stats(qa)["mpr_window"] == 896, max_time=0.05)
    _post(net, 1, qb, 4 * MIB, 2 * MIB)  # both busy: 4 units each
    assert net.run(lambda: a.qp_stats(qa)["mpr_window"] == 512, max_time=0.05)
    assert net.run(lambda: sends(1) == 1, max_time=0.5)  # b done; a grows back
    assert net.run(lambda: a.qp_stats(qa)["mpr_window"] == 896, max_time=0.5)
    assert sends(0) == 0  # a was still writing when its window grew back
    assert net.run(lambda: sends(0) == 1, max_time=1.0)
    assert dst[: 6 * MIB] == src[: 6 * MIB]
    # idle at first (the floor), alone, shared, alone again
    assert _windows(net, 0) == [128, 896, 512, 896]
    # the responder announced every change; the requesters followed them
    changes = [e.data for e in net.events[2] if isinstance(e, LogRecord)
               and e.name == MPR_UPDATED]
    assert {d["side"] for d in changes} == {"responder"} and len(changes) >= 4
    st = a.qp_stats(qa)
    assert st["mpr_window_changes"] >= 3
    assert c.host_stats()["mpr_adv_changes"] == len(changes)


def test_requester_never_sends_beyond_the_window_it_was_given() -> None:
    """Each mpr_updated record of the requester carries the peak PSN span it sent with the
    window it leaves: it is always below that window."""
    net, qps, _src, _dst = _two_writers(1024)
    (qa, _), (qb, _) = qps
    _post(net, 0, qa, 0, 4 * MIB)
    _post(net, 1, qb, 4 * MIB, 4 * MIB)
    net.run(lambda: False, max_time=0.01)
    records = [(e.data["old"], e.data["peak"]) for e in net.events[0]
               if isinstance(e, LogRecord) and e.name == MPR_UPDATED]
    assert len(records) >= 2
    assert all(peak < old for old, peak in records[1:])  # the first epoch had the full MPR
    st = net.hosts[0].qp_stats(qa)
    assert st["mpr_window_peak"] < st["mpr_window"]
    assert st.get("tx_window_blocked", 0) > 0  # the window really bound

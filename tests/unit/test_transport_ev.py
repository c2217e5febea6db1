"""EV manager, EV state transitions, multi-plane spraying, port status updates, EV probes."""

from __future__ import annotations

from collections import Counter

import pytest

from common.classes import TrafficClass
from hosts.transport import (
    AsyncEvent,
    AsyncEventKind,
    EndpointResponse,
    EndpointTimeout,
    EvEntry,
    EvProfile,
    EvProfileMode,
    EvState,
    EvStateChanged,
    LogRecord,
    RxMeta,
    TxPacket,
)
from hosts.transport.ev import EvManager
from hosts.transport.sim import (
    DROP,
    MARK,
    PASS,
    TRIM,
    LinkModel,
    Network,
    QpOptions,
    connect,
    default_profile,
    is_data,
)
from hosts.wire import Bth, CcState, EndpointOp, MrcPacket, Opcode, SackVerdict, Seth
from tests.unit.transport_util import Pair, gid, make_host, make_pair

KIB = 1024
MIB = 1024 * KIB


def _mgr(
    n: int = 8, ports: int = 1, **kw: int
) -> tuple[EvManager, list[tuple[int, EvState, EvState, str]]]:
    log: list[tuple[int, EvState, EvState, str]] = []
    entries = [EvEntry(0x100 + i, i % ports) for i in range(n)]
    m = EvManager(
        entries,
        active_count=kw.get("active", 0),
        min_active=kw.get("min_active", 1),
        seed=kw.get("seed", 5),
        emit=lambda i, o, nw, r: log.append((i, o, nw, r)),
    )
    return m, log


def test_rotation_is_fixed_pseudorandom_and_even() -> None:
    m, _ = _mgr(8)
    picks = [m.pick() for _ in range(80)]
    assert Counter(picks) == {i: 10 for i in range(8)}
    assert picks[:8] == picks[8:16]  # a fixed rotation
    assert picks[:8] != list(range(8))  # pseudo-random order
    m2, _ = _mgr(8)
    assert [m2.pick() for _ in range(8)] == picks[:8]  # deterministic for a seed
    m3, _ = _mgr(8, seed=6)
    assert [m3.pick() for _ in range(8)] != picks[:8]
    # avoid: never the avoided EV while others exist
    assert all(m.pick(avoid=3) != 3 for _ in range(50))


def test_skip_lasts_one_round_then_good() -> None:
    m, log = _mgr(4)
    assert m.set_state(2, EvState.SKIP, "ecn")
    seen = [m.pick() for _ in range(6)]
    assert (2, EvState.SKIP, EvState.GOOD, "skip_round_done") in log
    assert m.states[2] == EvState.GOOD
    assert 2 in [m.pick() for _ in range(4)]
    assert seen.count(2) <= 1


def test_transition_rules_and_min_active() -> None:
    m, log = _mgr(3, min_active=2)
    assert m.set_state(0, EvState.ASSUMED_BAD, "timeout")
    assert not m.set_state(1, EvState.ASSUMED_BAD, "timeout")  # would leave 1 < 2 usable
    assert m.refused == 1 and m.states[1] == EvState.GOOD
    assert not m.set_state(0, EvState.SKIP, "ecn")  # ASSUMED_BAD does not go to SKIP
    assert m.set_state(0, EvState.GOOD, "probe")
    assert m.set_state(1, EvState.DENIED, "ctl", controller=True)  # controller always applies
    assert not m.set_state(1, EvState.GOOD, "probe")  # DENIED never recovers by itself
    assert m.set_state(1, EvState.GOOD, "ctl", controller=True)
    assert m.set_state(2, EvState.SKIP, "ecn")
    assert m.set_state(2, EvState.ASSUMED_BAD, "always_skip")  # SKIP -> ASSUMED_BAD
    assert m.set_state(2, EvState.DENIED, "ctl", controller=True)  # ASSUMED_BAD -> DENIED
    assert not m.has_bad()
    assert [(i, o.name, n.name) for i, o, n, _ in log] == [
        (0, "GOOD", "ASSUMED_BAD"),
        (0, "ASSUMED_BAD", "GOOD"),
        (1, "GOOD", "DENIED"),
        (1, "DENIED", "GOOD"),
        (2, "GOOD", "SKIP"),
        (2, "SKIP", "ASSUMED_BAD"),
        (2, "ASSUMED_BAD", "DENIED"),
    ]


def test_replacement_comes_from_same_plane() -> None:
    m, _ = _mgr(16, ports=2, active=4)
    active = [i for i in range(16) if m.active[i]]
    assert len(active) == 4 and Counter(m.ports[i] for i in active) == {0: 2, 1: 2}
    victim = next(i for i in active if m.ports[i] == 1)
    m.set_state(victim, EvState.ASSUMED_BAD, "timeout")
    now_active = [i for i in range(16) if m.active[i]]
    (new,) = set(now_active) - set(active)
    assert m.ports[new] == 1 and len(now_active) == 4
    assert set(m.pick() for _ in range(40)) == set(now_active)


def test_plane_masks_and_fallback() -> None:
    m, _ = _mgr(8, ports=2)
    m.set_masks(local_mask=0b01)
    assert {m.ports[m.pick()] for _ in range(20)} == {0}
    m.set_masks(local_mask=0b11, remote_mask=0b10)
    assert {m.ports[m.pick()] for _ in range(20)} == {1}
    m.set_masks(remote_mask=0b00)
    assert m.pick() == -1
    # all GOOD EVs gone but a path may still work: fall back to ASSUMED_BAD ones
    m2, _ = _mgr(2, min_active=0)
    m2.set_state(0, EvState.ASSUMED_BAD, "t")
    m2.set_state(1, EvState.ASSUMED_BAD, "t")
    assert m2.pick() in (0, 1) and m2.fallbacks == 1


def test_profile_generation() -> None:
    p = EvProfile(4, EvProfileMode.GEN, planes=2, per_plane=3)
    evs = p.expand()
    assert [e.port for e in evs] == [0, 0, 0, 1, 1, 1]
    assert len({e.ev for e in evs}) == 6 and all(0x8000 <= e.ev <= 0xFFFF for e in evs)
    x = EvProfile(5, EvProfileMode.EXP, entries=[EvEntry(7, 1), EvEntry(9, 0)])
    assert x.expand() == [EvEntry(7, 1), EvEntry(9, 0)]


# -- transitions driven by the datapath ------------------------------------------------------
def _changes(p: Pair, host: int = 0) -> list[tuple[int, str, str, str]]:
    return [
        (e.ev, e.old.name, e.new.name, e.reason)
        for e in p.net.events[host]
        if isinstance(e, EvStateChanged)
    ]


def test_ecn_mark_skips_ev_once() -> None:
    p = make_pair(256 * KIB)
    marked: list[int] = []

    def mark_one(src: int, tx: TxPacket) -> str:
        if src == 0 and is_data(tx) and tx.pkt.bth.psn == 3:
            marked.append(tx.ev)
            return MARK
        return PASS

    p.net.verdict = mark_one
    p.net.record = True
    p.write(1, 0, 256 * KIB)
    assert p.run_until_completions(1)
    ev = marked[0]
    assert _changes(p) == [(ev, "GOOD", "SKIP", "sack_skip_once")]
    # the EV sits out the rest of the current rotation round, then is GOOD again
    p.net.sent.clear()
    p.write(2, 0, 256 * KIB)
    assert p.run_until_completions(2)
    assert _changes(p)[1] == (ev, "SKIP", "GOOD", "skip_round_done")
    second = [tx.ev for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx)]
    assert ev not in second[:1] and second.count(ev) >= 3
    sacks = [pkt for (_t, d, pkt, _m) in p.net.delivered if d == 0 and pkt.seth is not None]
    assert [s.seth.entropy for s in sacks if s.seth and s.seth.m == SackVerdict.SKIP_ONCE] == [ev]
    assert p.dst == p.src and p.a.qp_stats(p.qa).get("tx_rtx", 0) == 0


def test_trim_nack_skips_ev_and_lasthop_does_not() -> None:
    for lasthop in (False, True):
        p = make_pair(64 * KIB, LinkModel(lasthop_trim=lasthop))
        trimmed: list[int] = []

        def trim_one(src: int, tx: TxPacket, out: list[int] = trimmed) -> str:
            if src == 0 and is_data(tx) and tx.pkt.bth.psn == 1 and not out:
                out.append(tx.ev)
                return TRIM
            return PASS

        p.net.verdict = trim_one
        p.write(1, 0, 64 * KIB)
        assert p.run_until_completions(1)
        ch = [c for c in _changes(p) if c[3] == "nack_trimmed"]
        assert ch == ([] if lasthop else [(trimmed[0], "GOOD", "SKIP", "nack_trimmed")])
        reason = "rx_nack_trimmed_lasthop" if lasthop else "rx_nack_trimmed"
        assert p.a.qp_stats(p.qa)[reason] == 1 and p.dst == p.src


def _sack_to(p: Pair, ev: int, m: int, pr: bool) -> None:
    pkt = MrcPacket(
        Bth(opcode=Opcode.SACK, dest_qp=p.qa, psn=0xFFFFFF),
        seth=Seth(m=m, pr=pr, entropy=ev, cack_psn=0xFFFFFF, sack_offset=1),
        cc_state=CcState(),
    )
    p.a.receive(pkt, RxMeta(0, gid(2, 0), gid(1, 0), ev), p.net.now)


def test_always_skip_then_probe_recovers() -> None:
    p = make_pair(64 * KIB)
    evs = [ev for ev, _port, _s in p.a.ev_states(p.qa)]
    _sack_to(p, evs[3], SackVerdict.ALWAYS_SKIP, False)
    states = {ev: s for ev, _p, s in p.a.ev_states(p.qa)}
    assert states[evs[3]] == EvState.ASSUMED_BAD
    _sack_to(p, evs[3], SackVerdict.NONE, True)  # reliability probe answered clean
    states = {ev: s for ev, _p, s in p.a.ev_states(p.qa)}
    assert states[evs[3]] == EvState.GOOD
    p.net.step()
    assert _changes(p) == [
        (evs[3], "GOOD", "ASSUMED_BAD", "sack_always_skip"),
        (evs[3], "ASSUMED_BAD", "GOOD", "probe_ok"),
    ]


def test_timeout_marks_ev_assumed_bad_and_ev_probe_recovers_it() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=8), probe_after=1.0, ev_probe_interval=100e-6)
    p.net.record = True
    bad: list[int] = []

    def blackhole_first(src: int, tx: TxPacket) -> str:
        if src == 0 and is_data(tx) and tx.pkt.bth.psn == 0 and not tx.pkt.bth.rtx:
            bad.append(tx.ev)
            return DROP
        return PASS

    p.net.verdict = blackhole_first
    p.write(1, 0, 4 * KIB)
    assert p.run_until_completions(1)
    # the EV probe is answered after the retransmission completed the Write; keep running
    p.net.run(lambda: any(c[3] == "ev_probe_ok" for c in _changes(p)), max_time=0.1)
    ch = _changes(p)
    assert ch[:2] == [
        (bad[0], "GOOD", "ASSUMED_BAD", "ack_timeout"),
        (bad[0], "ASSUMED_BAD", "GOOD", "ev_probe_ok"),
    ]
    probes = [tx for (_t, s, tx) in p.net.sent if s == 0 and tx.pkt.bth.opcode == Opcode.EP_REQUEST]
    assert probes and probes[0].ev == bad[0] and probes[0].pkt.bth.dest_qp == 2
    assert probes[0].pkt.erth is not None and probes[0].pkt.erth.op == EndpointOp.EV_PROBE
    # B answered statelessly, on the probe's EV
    resp = [tx for (_t, s, tx) in p.net.sent if s == 1 and tx.pkt.bth.opcode == Opcode.EP_RESPONSE]
    assert resp and resp[0].ev == bad[0] and resp[0].pkt.bth.psn == probes[0].pkt.bth.psn


def test_denied_ev_is_never_used_until_controller_restores_it() -> None:
    p = make_pair(512 * KIB, per_plane=4)
    p.net.record = True
    evs = [ev for ev, _port, _s in p.a.ev_states(p.qa)]
    assert p.a.set_ev_state(1, evs[0], EvState.DENIED) == 1
    p.write(1, 0, 256 * KIB)
    assert p.run_until_completions(1)
    used = {tx.ev for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx)}
    assert used == set(evs[1:])
    p.a.set_ev_state(1, evs[0], EvState.GOOD)
    p.net.sent.clear()
    p.write(2, 256 * KIB, 256 * KIB)
    assert p.run_until_completions(2)
    used = {tx.ev for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx)}
    assert used == set(evs)
    assert [c[1:] for c in _changes(p)] == [
        ("GOOD", "DENIED", "controller"),
        ("DENIED", "GOOD", "controller"),
    ]


# -- multi-plane, port status updates, endpoint operations ---------------------------------------
def test_spraying_covers_both_planes_evenly() -> None:
    p = make_pair(1024 * KIB, planes=2, per_plane=8)
    p.net.record = True
    p.write(1, 0, 1024 * KIB)
    assert p.run_until_completions(1)
    ports = Counter(tx.port for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx))
    evs = Counter(tx.ev for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx))
    assert ports == {0: 128, 1: 128} and len(evs) == 16 and set(evs.values()) == {16}
    for _t, s, tx in p.net.sent:  # every packet goes to the peer's address on its plane
        assert tx.dst_gid == gid(2 - s, tx.port)


def test_peer_port_down_moves_traffic_off_that_plane() -> None:
    p = make_pair(4096 * KIB, LinkModel(delay=5e-6, rate=12.5e9), planes=2, per_plane=8)
    p.net.record = True
    p.write(1, 0, 4096 * KIB)
    p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_data", 0) >= 100, max_time=1.0)
    t_down = p.net.now
    p.net.plane_up[1] = False  # the link of plane 1 fails ...
    p.b.port_status(1, False, t_down)  # ... and B's NIC sees its port 1 go down
    assert p.run_until_completions(1)
    assert p.dst == p.src
    psu = [tx for (t, s, tx) in p.net.sent if s == 1 and tx.pkt.bth.opcode == Opcode.EP_REQUEST]
    assert len(psu) == 1 and psu[0].port == 0 and psu[0].pkt.erth is not None
    assert psu[0].pkt.erth.op == EndpointOp.PORT_STATUS_UPDATE
    assert psu[0].pkt.erth.port_status_mask == 0b01
    t_psu = next(
        t for (t, d, pkt, _m) in p.net.delivered if d == 0 and pkt.bth.opcode == Opcode.EP_REQUEST
    )
    late = [tx for (t, s, tx) in p.net.sent if s == 0 and t > t_psu and tx.port == 1]
    assert late == []
    st = p.a.qp_stats(p.qa)
    assert st.get("loss_plane_down", 0) > 0 and st.get("timeouts", 0) == 0
    assert any(
        isinstance(e, AsyncEvent) and e.kind == AsyncEventKind.PEER_PORT_STATUS
        for e in p.net.events[0]
    )
    assert any(
        isinstance(e, AsyncEvent) and e.kind == AsyncEventKind.PORT_ERR for e in p.net.events[1]
    )
    # B's own control packets (SACKs) also left plane 1 at once
    assert [tx for (t, s, tx) in p.net.sent if s == 1 and t >= t_down and tx.port == 1] == []
    # port back: a new update with both bits, and plane 1 carries data again
    p.b.port_status(1, True, p.net.now)
    p.net.plane_up[1] = True
    p.net.sent.clear()
    p.net.run(lambda: p.b.stats.get("rx_ep_response", 0) >= 2, max_time=1.0)
    p.write(2, 0, 512 * KIB)
    assert p.run_until_completions(2)
    psu2 = [tx for (_t, s, tx) in p.net.sent if s == 1 and tx.pkt.bth.opcode == Opcode.EP_REQUEST]
    assert psu2 and psu2[0].pkt.erth is not None and psu2[0].pkt.erth.port_status_mask == 0b11
    assert {tx.port for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx)} == {0, 1}


def test_local_port_down_stops_its_evs_at_once() -> None:
    p = make_pair(1024 * KIB, planes=2, per_plane=4)
    p.net.record = True
    p.a.port_status(0, False, 0.0)
    p.net.plane_up[0] = False
    p.write(1, 0, 1024 * KIB)
    assert p.run_until_completions(1)
    assert {tx.port for (_t, s, tx) in p.net.sent if s == 0} == {1}
    assert p.a.port_status_mask == 0b10


def test_ev_probe_endpoint_rtt_and_timeout() -> None:
    a = make_host(1)
    b = make_host(2)  # no QPs at all: endpoint operations are stateless
    from hosts.transport.sim import Network

    net = Network([a, b], LinkModel(delay=7e-6))
    rid = a.send_ev_probe(gid(2, 0), 0, 0x1234, 0.0)
    net.run(lambda: bool(net.events[0]), max_time=0.01)
    (resp,) = net.events[0]
    assert isinstance(resp, EndpointResponse)
    assert resp.req_id == rid and resp.ev == 0x1234 and resp.op == EndpointOp.EV_PROBE
    assert resp.rtt == pytest.approx(14e-6, abs=0.2e-6)
    net.plane_up[0] = False
    rid2 = a.send_ev_probe(gid(2, 0), 0, 0x1234, net.now)
    net.run(lambda: len(net.events[0]) > 1, max_time=0.1)
    assert isinstance(net.events[0][1], EndpointTimeout) and net.events[0][1].req_id == rid2
    # port status updates are retried before giving up
    rid3 = a.send_port_status_update(gid(2, 0), net.now)
    net.run(lambda: len(net.events[0]) > 2, max_time=1.0)
    assert isinstance(net.events[0][2], EndpointTimeout) and net.events[0][2].req_id == rid3
    assert a.stats["tx_ep_retry"] == a.config.endpoint_retries


def test_control_packets_use_the_profiles_control_evs() -> None:
    a = make_host(1, 2)
    b = make_host(2, 2)
    prof = EvProfile(
        1,
        EvProfileMode.GEN,
        planes=2,
        per_plane=4,
        control_evs=[EvEntry(0x77, 1), EvEntry(0x66, 0)],
    )
    for h in (a, b):
        h.set_ev_profile(prof)
    from hosts.transport import ALL_ACCESS, SendWR, WrOpcode
    from hosts.transport.sim import Network, connect

    qa, _qb = connect(a, b)
    src = bytearray(b"x" * 65536)
    dst = bytearray(65536)
    ma = a.register_mr(src, ALL_ACCESS)
    mb = b.register_mr(dst, ALL_ACCESS)
    net = Network([a, b])
    net.record = True
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, 65536, ma.lkey, mb.addr, mb.rkey), 0.0)
    assert net.run(lambda: any(type(e).__name__ == "Completion" for e in net.events[0]))
    ctl = [tx for (_t, s, tx) in net.sent if s == 1]
    assert ctl and all(tx.tclass.name == "CONTROL" for tx in ctl)
    # SACKs answer on the ingress plane with that plane's control EV
    assert {(tx.port, tx.ev) for tx in ctl} <= {(1, 0x77), (0, 0x66)}
    b.port_status(1, False, net.now)
    net.sent.clear()
    a.post_send(qa, SendWR(2, WrOpcode.WRITE, ma.addr, 65536, ma.lkey, mb.addr, mb.rkey), net.now)
    net.run(lambda: len([e for e in net.events[0] if type(e).__name__ == "Completion"]) >= 2)
    sacks = [tx for (_t, s, tx) in net.sent if s == 1 and tx.pkt.bth.opcode == Opcode.SACK]
    assert sacks and {(tx.port, tx.ev) for tx in sacks} == {(0, 0x66)}


def test_pluggable_spray_policy_and_loss_detector() -> None:
    from collections.abc import Sequence

    from hosts.transport.loss import LossDetector

    class FirstOnly:
        wants_deliveries = False

        def __init__(self, ports: Sequence[int], seed: int) -> None:
            self.usable: list[int] = []

        def on_delivered(self, indices: Sequence[int], now: float) -> None:
            return None

        def on_signal(self, index: int, signal: object, now: float) -> None:
            return None

        def rebuild(self, usable: Sequence[int]) -> None:
            self.usable = list(usable)

        def pick(self, avoid: int) -> tuple[int, bool]:
            choices = [i for i in self.usable if i != avoid] or self.usable
            return (choices[0] if choices else -1), False

    class Never:
        def on_acked(self, max_txseq: int) -> None:
            return None

        def is_lost(self, txseq: int) -> bool:
            return False

        def on_spurious(self) -> None:
            return None

    def never(_qpn: int) -> LossDetector:
        return Never()

    p = make_pair(
        256 * KIB,
        LinkModel(loss=0.05, seed=4),
        per_plane=8,
        spray_factory=FirstOnly,
        loss_factory=never,
    )
    p.net.record = True
    p.write(1, 0, 256 * KIB)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    first = {tx.ev for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx) and not tx.pkt.bth.rtx}
    assert len(first) == 1  # the policy decided
    st = p.a.qp_stats(p.qa)
    assert p.net.stats["dropped"] > 0 and st.get("loss_fast", 0) == 0  # the detector decided
    assert st.get("loss_probe", 0) + st.get("timeouts", 0) > 0


def test_two_planes_with_unequal_queues_recover_with_few_spurious_retransmissions() -> None:
    """Each plane has its own queue, so packets on one plane overtake older ones on the other
    by hundreds of positions; loss detection per plane keeps retransmissions to real losses.
    Within a plane, paths that differ by more than a quarter of the RTT (2 us of skew against
    a few us) may make the time threshold retransmit a late packet a few times, until it
    widens (each spurious retransmission doubles it)."""
    model = LinkModel(delay=5e-6, path_skew=2e-6, ce=0.02, loss=0.01, trim=0.01, rate=25e9, seed=1)
    p = make_pair(8 * 1024 * KIB, model, planes=2, per_plane=128)
    for i in range(8):
        p.write(i, i * 1024 * KIB, 1024 * KIB)
    assert p.run_until_completions(8)
    assert p.dst == p.src
    st = p.a.qp_stats(p.qa)
    losses = p.net.stats["dropped"] + p.net.stats["trimmed"]
    assert losses > 20
    spurious = st.get("spurious_rtx", 0)
    assert st["tx_rtx"] >= losses and st["tx_rtx"] - losses <= losses // 5
    assert p.b.qp_stats(p.qb).get("rx_dup", 0) == st["tx_rtx"] - losses
    assert spurious <= losses // 5


def test_silently_dead_plane_is_abandoned_without_waiting_for_the_ack_timeout() -> None:
    """A plane black-holes without any carrier loss or port status update: losses found by
    time and by reliability probes (one dying on the dead plane is repeated on another EV)
    are three in a row on each of its EVs, so the whole dead plane leaves the rotation long
    before an ACK timeout and the transfer finishes on the other plane."""
    p = make_pair(
        8 * 1024 * KIB, LinkModel(delay=5e-6, path_skew=2e-6, rate=12.5e9), planes=2, per_plane=8
    )
    p.net.record = True
    for i in range(8):
        p.write(i, i * 1024 * KIB, 1024 * KIB)
    p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_data", 0) >= 300, max_time=1.0)
    p.net.plane_up[1] = False
    assert p.run_until_completions(8)
    assert p.dst == p.src
    st = p.a.qp_stats(p.qa)
    assert st.get("timeouts", 0) == 0
    assert st["ev_state_repeated_loss"] == 8 and st["rtx_sack_gap"] + st["rtx_probe"] > 0
    plane1 = {ev for ev, port, _s in p.a.ev_states(p.qa) if port == 1}
    bad = {c[0] for c in _changes(p) if c[2] == "ASSUMED_BAD"}
    assert bad == plane1
    # once the last of its EVs went bad, no first transmission and no retransmission went
    # to plane 1 (the detection that made it bad logs its record right after the change)
    seen_bad: set[int] = set()
    t_bad = None
    for e in p.net.events[0]:
        if isinstance(e, EvStateChanged) and e.new == EvState.ASSUMED_BAD:
            seen_bad.add(e.ev)
        elif isinstance(e, LogRecord) and seen_bad == plane1 and t_bad is None:
            t_bad = e.time
    assert t_bad is not None
    assert [
        tx for (t, s, tx) in p.net.sent if s == 0 and t > t_bad and tx.port == 1 and is_data(tx)
    ] == []
    # while the plane stays dead its EVs are probed with exponential backoff, silently
    p.net.sent.clear()
    t0 = p.net.now
    p.net.run(lambda: p.net.now > t0 + 0.05, max_time=t0 + 0.06)
    probes = Counter(
        tx.ev for (_t, s, tx) in p.net.sent if s == 0 and tx.pkt.bth.opcode == Opcode.EP_REQUEST
    )
    assert set(probes) == plane1 and max(probes.values()) <= 7  # 1+2+4+8+16+32 ms > 50 ms
    assert not any(isinstance(e, EndpointTimeout) for e in p.net.events[0])
    assert p.a.stats["ev_probe_timeout"] > 0
    # the plane heals: EV probes bring its EVs back without any controller action
    p.net.plane_up[1] = True
    assert p.net.run(
        lambda: all(s == EvState.GOOD for _ev, _port, s in p.a.ev_states(p.qa)),
        max_time=p.net.now + 0.05,
    )
    assert {c[0] for c in _changes(p) if c[3] == "ev_probe_ok"} == plane1


def test_responder_sprays_control_packets_so_one_dead_reverse_path_does_not_silence_it() -> None:
    """The responder learns nothing about the paths of its SACKs. If it answered on one
    fixed EV and that EV's reverse path died, every SACK would be lost until routing is
    repaired; rotating control packets over the plane's EVs keeps most of them flowing."""
    p = make_pair(4 * MIB, opts=QpOptions(timeout=14), per_plane=8)
    p.net.record = True
    dead: set[int] = set()

    def reverse_blackhole(src: int, tx: TxPacket) -> str:
        if src == 1 and tx.tclass == TrafficClass.CONTROL:
            if not dead:
                dead.add(tx.ev)  # the path of the first control EV the responder uses
            if tx.ev in dead:
                return DROP
        return PASS

    p.net.verdict = reverse_blackhole
    p.write(1, 0, 2 * MIB)
    assert p.run_until_completions(1, max_time=2.0)
    assert bytes(p.dst[: 2 * MIB]) == bytes(p.src[: 2 * MIB])
    ctl = [tx for (_t, s, tx) in p.net.sent if s == 1 and tx.tclass == TrafficClass.CONTROL]
    used = {tx.ev for tx in ctl}
    assert len(used) == 8  # every EV of the plane carried control packets
    delivered = [tx for tx in ctl if tx.ev not in dead]
    assert len(delivered) >= len(ctl) * 6 // 8  # about 7 in 8 got through
    assert p.a.qp_stats(p.qa).get("timeouts", 0) == 0


def test_control_packets_avoid_evs_another_qp_found_bad_towards_the_same_peer() -> None:
    from hosts.transport import ALL_ACCESS, Completion, SendWR, WrOpcode

    """Host A writes to B on one QP and receives from B on another. The same EV to the same
    address takes the same path, so once A's writer QP holds an EV ASSUMED_BAD, the SACKs of
    A's responder QP stop using it too (and resume once it is GOOD again)."""
    a, b = make_host(1), make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile(1, 1, 8))
    qa, _qb = connect(a, b)
    qb2, qa2 = connect(b, a)  # B writes, A answers
    src = bytearray(range(256)) * 1024
    dst = bytearray(len(src))
    mb = b.register_mr(src, ALL_ACCESS)
    ma = a.register_mr(dst, ALL_ACCESS)
    net = Network([a, b], LinkModel(delay=5e-6, rate=12.5e9))
    net.record = True
    net.verdict = lambda s, tx: DROP if tx.pkt.bth.opcode == Opcode.EP_REQUEST else PASS
    mgr = a._qps[qa].ev
    assert mgr is not None
    bad_ev = mgr.evs[3]
    mgr.set_state(3, EvState.ASSUMED_BAD, "test")  # A's writer QP only

    b.post_send(qb2, SendWR(1, WrOpcode.WRITE, mb.addr, len(src), mb.lkey, ma.addr, ma.rkey),
                net.now)
    assert net.run(lambda: any(isinstance(e, Completion) for e in net.events[1]), max_time=1.0)
    assert dst == src
    ctl_evs = {tx.ev for (_t, s, tx) in net.sent if s == 0 and tx.pkt.seth is not None}
    assert ctl_evs == set(mgr.evs) - {bad_ev}
    assert a._qps[qa2].ev is not None and a._qps[qa2].ev.is_usable(3)  # its own state: GOOD
    # GOOD again: back in the rotation of control packets
    mgr.set_state(3, EvState.GOOD, "test", controller=True)
    net.sent.clear()
    b.post_send(qb2, SendWR(2, WrOpcode.WRITE, mb.addr, len(src), mb.lkey, ma.addr, ma.rkey),
                net.now)
    assert net.run(lambda: sum(isinstance(e, Completion) for e in net.events[1]) == 2,
                   max_time=1.0)
    assert bad_ev in {tx.ev for (_t, s, tx) in net.sent if s == 0 and tx.pkt.seth is not None}


def test_a_retransmission_takes_another_ev_even_if_the_lost_copy_s_is_the_only_usable_one() -> None:
    mgr = EvManager([EvEntry(0x10 + i, 0) for i in range(3)], active_count=0, min_active=0,
                    seed=1, emit=lambda *a: None)
    mgr.set_state(1, EvState.ASSUMED_BAD, "x")
    mgr.set_state(2, EvState.ASSUMED_BAD, "x")
    assert mgr.usable() == [0] and mgr.pick() == 0
    assert mgr.pick(avoid=0) in (1, 2) and mgr.fallbacks == 1

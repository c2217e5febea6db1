"""The mechanism counters of qp_stats / host_stats (hosts/transport/counters.py), each made to
fire on the simulator by the one mechanism it names, and checked against what the network
did (the packets the test dropped, trimmed or marked) and against the events the core emitted.
"""

from __future__ import annotations

from collections import Counter

import pytest

from hosts.transport import EvState, EvStateChanged, LogRecord, QpType, TxPacket
from hosts.transport.counters import EV_STATE_PREFIX, GAUGES, RTX_COUNTERS
from hosts.transport.lognames import ACK_TIMEOUT
from hosts.transport.sim import DROP, MARK, PASS, TRIM, LinkModel, QpOptions, is_data
from tests.unit.transport_util import Pair, make_pair

KIB = 1 << 10


def _rtx(st: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in st.items() if k in RTX_COUNTERS}


def _once(psns: set[int], verdict: str) -> object:
    """Verdict callback: ``verdict`` for the first copy of each PSN in ``psns`` from host 0."""
    done: set[int] = set()

    def fn(src: int, tx: TxPacket) -> str:
        psn = tx.pkt.bth.psn
        if src == 0 and is_data(tx) and psn in psns and psn not in done and not tx.pkt.bth.rtx:
            done.add(psn)
            return verdict
        return PASS

    return fn


def _run(p: Pair, size: int) -> dict[str, int]:
    p.write(1, 0, size)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    st = p.a.qp_stats(p.qa)
    assert sum(_rtx(st).values()) == st["tx_rtx"]  # every retransmission has one trigger
    return st


def test_trims_count_as_nacks_by_reason_and_nack_retransmissions() -> None:
    p = make_pair(64 * KIB)
    p.net.verdict = _once({2, 5, 9}, TRIM)
    st = _run(p, 64 * KIB)
    assert _rtx(st) == {"rtx_nack": 3}
    assert st["rx_nack_trimmed"] == 3 and st["loss_nack"] == 3
    resp = p.b.qp_stats(p.qb)
    assert resp["rx_trimmed"] == 3 and resp["tx_nack_trimmed"] == 3
    assert st[EV_STATE_PREFIX + "nack_trimmed"] == 3  # each EV went SKIP


def test_gaps_in_sacks_count_as_sack_gap_retransmissions() -> None:
    p = make_pair(256 * KIB)  # 64 packets: 32 later deliveries find a loss
    p.net.verdict = _once({3, 10}, DROP)
    st = _run(p, 256 * KIB)
    assert _rtx(st) == {"rtx_sack_gap": 2}
    assert st["loss_fast"] + st.get("loss_time", 0) == 2 and st.get("timeouts", 0) == 0


def test_tail_loss_counts_as_a_probe_retransmission() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=12))
    p.net.verdict = _once({15}, DROP)
    st = _run(p, 64 * KIB)
    assert _rtx(st) == {"rtx_probe": 1}
    assert st["tx_probe"] >= 1 and st["probe_answered"] >= 1 and st.get("timeouts", 0) == 0


def test_per_packet_timer_retransmissions() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=14), per_packet_timeout=200e-6,
                  probe_after=1.0)
    p.net.verdict = _once({15}, DROP)
    st = _run(p, 64 * KIB)
    assert _rtx(st) == {"rtx_per_packet_timer": 1}
    assert st["loss_per_packet_timer"] == 1


def test_ack_timeouts_count_with_their_interval() -> None:
    p = make_pair(4 * KIB, opts=QpOptions(timeout=8), probe_after=1.0)
    p.net.verdict = _once({0}, DROP)
    st = _run(p, 4 * KIB)
    assert _rtx(st) == {"rtx_ack_timeout": 1}
    assert st["timeouts"] == 1 and st["loss_ack_timeout"] == 1
    assert st["timeout_interval_us"] == round(1.024 * 2**8)
    rec = [e.data for e in p.net.events[0] if isinstance(e, LogRecord) and e.name == ACK_TIMEOUT]
    assert rec == [{"una": 0, "retries": 1, "interval": pytest.approx(1.024e-6 * 2**8),
                    "next_interval": pytest.approx(1.024e-6 * 2**8)}]
    assert st[EV_STATE_PREFIX + "ack_timeout"] == 1


def test_plane_down_retransmissions_and_port_status_updates() -> None:
    p = make_pair(512 * KIB, LinkModel(delay=5e-6, rate=12.5e9), planes=2, per_plane=8)
    p.write(1, 0, 512 * KIB)
    p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_data", 0) >= 20, max_time=1.0)
    p.a.port_status(1, False, p.net.now)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    st = p.a.qp_stats(p.qa)
    assert st["rtx_plane_down"] == st["loss_plane_down"] > 0
    assert p.a.host_stats()["tx_psu"] == 1
    p.net.run(lambda: p.a.host_stats().get("rx_psu_response", 0) == 1, max_time=1.0)
    assert p.b.host_stats()["rx_psu"] == 1 and p.b.qp_stats(p.qb)["peer_psu"] == 1


def test_rc_go_back_retransmissions() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(qp_type=QpType.RC))
    p.net.verdict = _once({4}, DROP)
    st = _run(p, 64 * KIB)
    assert set(_rtx(st)) == {"rtx_go_back"} and st["rtx_go_back"] == 12  # PSNs 4..15
    assert st["loss_go_back"] == 12 and st["rc_go_back"] == 1


def test_ev_state_counters_match_the_events_by_cause() -> None:
    model = LinkModel(delay=5e-6, path_skew=2e-6, ce=0.03, loss=0.01, trim=0.01, rate=25e9,
                      seed=2)
    p = make_pair(2048 * KIB, model, planes=2, per_plane=16)
    st = _run(p, 2048 * KIB)
    causes = Counter(e.reason for e in p.net.events[0]
                     if isinstance(e, EvStateChanged) and e.qpn == p.qa)
    assert causes["sack_skip_once"] > 0  # ECN -> SKIP
    counted = {k[len(EV_STATE_PREFIX):]: v for k, v in st.items()
               if k.startswith(EV_STATE_PREFIX)}
    assert counted == dict(causes)


def test_host_stats_sum_every_qp_destroyed_ones_included() -> None:
    p = make_pair(64 * KIB)
    p.net.verdict = _once({1, 2}, TRIM)
    _run(p, 64 * KIB)
    one = p.a.qp_stats(p.qa)
    host = p.a.host_stats()
    for key, value in one.items():
        if key not in GAUGES:
            assert host[key] == value, key
    assert not GAUGES & set(host)
    p.a.destroy_qp(p.qa)
    assert p.a.host_stats()["rtx_nack"] == 2  # kept after the QP is gone


def test_controller_ev_probe_brings_assumed_bad_evs_back_in_every_qp_to_that_peer() -> None:
    """An EV probe the controller asked for (``send_ev_probe``) that comes back makes its EV
    GOOD in the QPs that send to that peer over it, with its own cause."""
    p = make_pair(64 * KIB)
    ev = p.a.ev_states(p.qa)[2][0]
    p.a.set_ev_state(1, ev, EvState.ASSUMED_BAD)
    # queued before the datapath's own first probe of that EV (sent at the next timer)
    p.a.send_ev_probe(p.b.config.ports[0].gid, 0, ev, p.net.now)
    p.net.run(lambda: p.a.host_stats().get("rx_ev_probe_response", 0) == 1, max_time=0.01)
    assert dict((e, s) for e, _p, s in p.a.ev_states(p.qa))[ev] == EvState.GOOD
    st = p.a.qp_stats(p.qa)
    assert st[EV_STATE_PREFIX + "ctl_ev_probe_ok"] == 1
    assert st.get(EV_STATE_PREFIX + "probe_ok", 0) == 0  # not a reliability probe
    host = p.a.host_stats()
    assert host["tx_ev_probe"] == 2 and host["ev_probe_revived"] == 1  # the second: no news
    assert p.b.host_stats()["rx_ev_probe"] >= 1


def test_ecn_marks_count_on_both_sides() -> None:
    p = make_pair(64 * KIB)
    p.net.verdict = _once({3}, MARK)
    st = _run(p, 64 * KIB)
    assert p.b.qp_stats(p.qb)["rx_ce"] == 1
    assert st[EV_STATE_PREFIX + "sack_skip_once"] == 1

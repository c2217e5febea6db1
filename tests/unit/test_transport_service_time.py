"""Service-time compensation and responder backpressure, end to end on the fake clock.

The simulated network carries each packet's arrival time (RxMeta.rx_time) and can hold a
host's packets before it processes them (``Network.host_delay``): a host slow to handle what
it receives. The responder measures its service time from the arrival, the requester takes
the RTT up to the SACK's arrival and subtracts the service time; a penalty set on the
responder's host reaches the requester's NSCC, and the restore flag brings its window back.
"""

from __future__ import annotations

import random

from common.nscc import profile_fields, scaled
from hosts.transport.memory import ALL_ACCESS
from hosts.transport.profiles import CcProfile
from hosts.transport.sim import LinkModel, Network, QpOptions, connect, default_profile
from hosts.transport.types import Completion, QpHintFlag, SendWR, WrOpcode
from tests.unit.transport_util import make_host

MIB = 1 << 20
LINK = LinkModel(delay=20e-6, rate=1.25e9)  # 10 Gb/s, 20 us each way
NETWORK_RTT = 2 * 20e-6


def _pair(hint: QpHintFlag, cc_profile_id: int = 0) -> tuple[Network, int, int, int]:
    a, b = make_host(1), make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile())
        h.set_cc_profile(CcProfile(5, "uet-1.0-nscc",
                                   dict(profile_fields(scaled(10e9, 100e-6)))))
    # ACK timeout 16.8 ms: longer than the slow host's 2 ms
    qa, qb = connect(a, b, QpOptions(hint=hint, cc_profile_id=cc_profile_id, timeout=14))
    size = 8 * MIB
    src = bytearray(random.Random(3).randbytes(size))
    dst = bytearray(size)
    ma, mb = a.register_mr(src, ALL_ACCESS), b.register_mr(dst, ALL_ACCESS)
    net = Network([a, b], LINK)
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, size, ma.lkey, mb.addr, mb.rkey), 0.0)
    net.src, net.dst = src, dst  # type: ignore[attr-defined]
    return net, qa, qb, size


def _done(net: Network) -> bool:
    return any(isinstance(e, Completion) for e in net.events[0])


SVC = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH | QpHintFlag.SVC_TIME


def test_a_slow_responder_reports_its_service_time_and_the_rtt_excludes_it() -> None:
    net, qa, _qb, _ = _pair(SVC)
    net.host_delay[1] = 2e-3  # the responder handles every packet 2 ms after it arrived
    assert net.run(lambda: _done(net), max_time=5.0)
    assert net.dst == net.src  # type: ignore[attr-defined]
    rtt = net.hosts[0].qp_rtt_stats(qa)
    # network RTT: 2 x 20 us plus serialisation; the 2 ms are the responder's
    assert NETWORK_RTT <= rtt["min_rtt"] < NETWORK_RTT + 100e-6
    assert rtt["service_time"] >= 2e-3 - 128e-9  # TSETH units of 128 ns
    # without SVC_TIME the responder reports nothing: the 2 ms count as RTT
    net2, qa2, _qb2, _ = _pair(QpHintFlag.TRIM_NACK | QpHintFlag.TSETH)
    net2.host_delay[1] = 2e-3
    assert net2.run(lambda: _done(net2), max_time=5.0)
    rtt2 = net2.hosts[0].qp_rtt_stats(qa2)
    assert rtt2["min_rtt"] >= 2e-3 and rtt2["service_time"] == 0.0


def test_the_requesters_own_receive_delay_is_not_rtt() -> None:
    net, qa, _qb, _ = _pair(SVC)
    net.host_delay[0] = 1e-3  # SACKs wait 1 ms in the requester's host before it sees them
    assert net.run(lambda: _done(net), max_time=5.0)
    assert net.hosts[0].qp_rtt_stats(qa)["min_rtt"] < NETWORK_RTT + 100e-6


def test_the_responders_penalty_shrinks_the_requesters_window_and_restore_brings_it_back(
) -> None:
    net, qa, qb, _ = _pair(SVC, cc_profile_id=5)
    a, b = net.hosts
    cwnd = []

    def at(t: float) -> None:
        assert net.run(lambda: net.now >= t, max_time=5.0)
        cwnd.append(a.qp_cc_log(qa)["cwnd"])

    at(1e-3)
    before = cwnd[-1]
    b.set_host_backpressure(8)  # the responder's host is congested
    for t in (1.1e-3, 1.2e-3, 1.3e-3):
        at(t)
    # while penalised the window follows what is in flight down, less p/128 of each SACK's
    # bytes: it drains to one packet
    assert before > cwnd[1] >= cwnd[2] >= cwnd[3] == 4096
    log = a.qp_cc_log(qa)
    assert log["penalty"] == 8 and log["penalised"] == 1
    b.set_host_backpressure(0, restore=True)
    at(1.5e-3)
    # the saved window is back (within the window limit, which follows the base RTT down)
    assert cwnd[4] == min(before, a.qp_cc_log(qa)["max_wnd"]) > 4 * 4096
    assert a.qp_cc_log(qa)["restored"] == 1
    assert net.run(lambda: _done(net), max_time=5.0)
    assert net.dst == net.src  # type: ignore[attr-defined]
    assert b.qp_stats(qb)["rx_data"] > 0

"""Loss recovery on its own (hosts/transport/recovery.py): the scoreboard, RTT samples, the
fast and time-based detectors, reliability probes, the per-packet timer and the ACK timeout's
linear-then-exponential backoff. A stand-in QP records what recovery asks of it; times are
literal seconds of a fake clock, expected values are worked out here from the rules in
docs/transport.md."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from hosts.transport.cc import NoCongestionControl
from hosts.transport.counters import RTX_NACK
from hosts.transport.ev import EvManager
from hosts.transport.lognames import ACK_TIMEOUT, PACKETS_LOST
from hosts.transport.profiles import EvEntry
from hosts.transport.psn import TS_PER_SECOND, ts16
from hosts.transport.recovery import Recovery
from hosts.transport.types import (
    EXP_CNT_INFINITE,
    EvState,
    HostConfig,
    PortConfig,
    RetryAttr,
    TxPacket,
    WcStatus,
)
from hosts.wire import Opcode

T10 = 1.024e-6 * 2**10  # ACK timeout of exponent 10
SIZE = 1000


@dataclass
class FakeQp:
    counts: dict[str, int] = field(default_factory=dict)
    logs: list[tuple[float, str, dict[str, object]]] = field(default_factory=list)
    fails: list[tuple[float, WcStatus, str]] = field(default_factory=list)
    ctrl: list[TxPacket] = field(default_factory=list)
    ready: int = 0

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def log(self, now: float, name: str, **data: object) -> None:
        self.logs.append((now, name, data))

    def fail(self, now: float, status: WcStatus, detail: str, *, first_status: bool = True) -> None:
        self.fails.append((now, status, detail))

    def mark_ready(self) -> None:
        self.ready += 1

    def queue_control(self, tx: TxPacket) -> None:
        self.ctrl.append(tx)


class RecordingCc(NoCongestionControl):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[float, int, int, bool]] = []
        self.timeouts: list[tuple[float, int]] = []

    def on_packet_sent(
        self, *, now: float, size: int, bytes_in_flight: int, retransmission: bool
    ) -> None:
        self.sent.append((now, size, bytes_in_flight, retransmission))

    def on_timeout(self, *, now: float, bytes_in_flight: int) -> None:
        self.timeouts.append((now, bytes_in_flight))


@dataclass
class Rig:
    rec: Recovery
    qp: FakeQp
    ev: EvManager
    cc: RecordingCc
    ev_log: list[tuple[int, EvState, EvState, str]]


def rig(
    planes: int = 1,
    n_evs: int = 4,
    timeout: int = 10,
    retry: RetryAttr | None = None,
    rc: bool = False,
    **cfg: object,
) -> Rig:
    """A recovery of EVs 0x100.. (EV index i on plane i % planes), started at time 0."""
    qp = FakeQp()
    ev_log: list[tuple[int, EvState, EvState, str]] = []
    ev = EvManager(
        [EvEntry(0x100 + i, i % planes) for i in range(n_evs)],
        active_count=0,
        min_active=1,
        seed=1,
        emit=lambda i, o, n, r: ev_log.append((i, o, n, r)),
    )
    cc = RecordingCc()
    config = HostConfig(
        ports=[PortConfig(bytes([0xFD] + [0] * 14 + [p])) for p in range(planes)],
        **cfg,  # type: ignore[arg-type]
    )
    rec = Recovery(
        qp,
        ev,
        cc,
        config,
        qpn=0x10,
        rc=rc,
        dest_qpn=0x20,
        dest_gids=tuple(bytes([0xFD] + [0] * 13 + [2, p]) for p in range(planes)),
        sq_psn=0,
        mpr_psns=128,
        timeout=timeout,
        retry=retry or RetryAttr(7, 0),
        now=0.0,
    )
    return Rig(rec, qp, ev, cc, ev_log)


def bits(*psns: int, una: int = 0) -> int:
    return sum(1 << (p - una) for p in psns)


def test_sent_bytes_are_in_flight_until_acknowledged() -> None:
    r = rig()
    for psn in range(4):
        assert r.rec.on_sent(psn, psn, SIZE, psn * 1e-6, False) == 0  # plane 0
    assert (r.rec.una, r.rec.next_psn, r.rec.inflight) == (0, 4, 4 * SIZE)
    assert [s[2] for s in r.cc.sent] == [SIZE, 2 * SIZE, 3 * SIZE, 4 * SIZE]
    acked, rtt, svc = r.rec.on_sack(bits(0, 2), 2, 0, False, False, 10e-6)
    assert acked == 2 * SIZE and r.rec.inflight == 2 * SIZE
    assert rtt == pytest.approx(10e-6 - 2e-6) and svc == 0.0  # trigger PSN 2 was sent at 2 us
    assert r.rec.sacked == bits(0, 2)
    r.rec.on_cumulative_ack(1, 10e-6)
    assert r.rec.una == 1 and r.rec.sacked == bits(2, una=1)
    # a PSN acknowledged twice counts once
    acked, _rtt, _svc = r.rec.on_sack(0, 2, 0, False, False, 11e-6)
    assert acked == 0 and r.rec.inflight == 2 * SIZE
    stats: dict[str, int] = {}
    r.rec.add_stats(stats)
    assert stats == {
        "bytes_in_flight": 2 * SIZE,
        "tx_data": 4,
        "tx_rtx": 0,
        "reorder_threshold": 32,
        "una_stall_max_us": 10,  # PSN 0 sent at 0, acknowledged cumulatively at 10 us
    }


def test_the_stall_is_the_longest_wait_of_the_cumulative_ack_while_psns_are_outstanding() -> None:
    r = rig()
    r.rec.on_sent(0, 0, SIZE, 1.0, False)
    r.rec.on_sent(1, 1, SIZE, 1.001, False)
    r.rec.on_cumulative_ack(1, 1.004)  # 4 ms
    r.rec.on_cumulative_ack(1, 1.010)  # 6 ms: nothing outstanding from now on
    r.rec.on_sent(2, 2, SIZE, 3.0, False)  # two idle seconds are no stall
    r.rec.on_cumulative_ack(1, 3.300)  # 300 ms
    r.rec.on_sent(3, 3, SIZE, 3.301, False)
    r.rec.on_cumulative_ack(1, 3.351)
    stats: dict[str, int] = {}
    r.rec.add_stats(stats)
    assert stats["una_stall_max_us"] == 300_000


def test_lost_bytes_leave_flight_and_a_retransmission_brings_them_back() -> None:
    r = rig()
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.on_sent(1, 1, SIZE, 0.0, False)
    assert r.rec.mark_lost(1, RTX_NACK) and not r.rec.mark_lost(1, RTX_NACK)  # once
    assert r.rec.lost == bits(1) and r.rec.inflight == SIZE
    assert not r.rec.mark_lost(2, RTX_NACK)  # never sent
    r.rec.lost = 0  # the requester takes PSN 1 for retransmission
    r.rec.on_sent(1, 2, 0, 5e-6, True)
    assert r.rec.inflight == 2 * SIZE and r.rec.transmissions(1) == 1
    assert r.cc.sent[-1] == (5e-6, SIZE, 2 * SIZE, True)


def test_service_time_is_taken_out_of_the_rtt_and_retransmitted_triggers_give_none() -> None:
    r = rig()
    r.rec.on_sent(0, 0, SIZE, 100e-6, False)
    svc_ticks = 40  # the responder held the trigger 40 x 128 ns
    reflected = (ts16(100e-6) + svc_ticks) & 0xFFFF
    _acked, rtt, svc = r.rec.on_sack(bits(0), 0, reflected, False, True, 130e-6)
    assert svc == pytest.approx(svc_ticks / TS_PER_SECOND)
    assert rtt == pytest.approx(30e-6 - svc_ticks / TS_PER_SECOND)
    assert r.rec.rtt.srtt == rtt
    # Karn: a trigger that was retransmitted gives no sample
    r.rec.on_cumulative_ack(1, 130e-6)
    r.rec.on_sent(1, 0, SIZE, 140e-6, False)
    r.rec.mark_lost(1, RTX_NACK)
    r.rec.lost = 0
    r.rec.on_sent(1, 1, 0, 150e-6, True)
    _acked, rtt, _svc = r.rec.on_sack(bits(1, una=1), 1, ts16(150e-6), False, True, 160e-6)
    assert rtt is None and r.rec.rtt.srtt == pytest.approx(30e-6 - svc_ticks / TS_PER_SECOND)


def test_fast_loss_counts_only_transmissions_of_the_same_plane() -> None:
    r = rig(planes=2, reorder_threshold=3)
    for psn in range(6):  # plane 0: EV index 0
        r.rec.on_sent(psn, 0, SIZE, psn * 1e-6, False)
    for psn in range(6, 12):  # plane 1: EV index 1
        r.rec.on_sent(psn, 1, SIZE, psn * 1e-6, False)
    # PSNs 1..5 arrive: 5 later transmissions of plane 0 than PSN 0 were delivered (>= 3)
    r.rec.on_sack(bits(1, 2, 3, 4, 5), 5, 0, False, False, 30e-6)
    r.rec.detect_losses(30e-6, None)
    assert r.rec.lost == bits(0)
    assert r.qp.counts["loss_fast"] == 1
    assert r.qp.logs == [(30e-6, PACKETS_LOST, {"trigger": "fast", "count": 1, "una": 0})]
    # plane 1's PSNs were sent later than PSN 0 but nothing of plane 1 was delivered yet
    assert not r.rec.lost & bits(*range(6, 12))


def test_time_threshold_catches_a_silent_plane() -> None:
    r = rig(planes=2)  # reorder threshold 32: the fast detector stays quiet
    r.rec.on_sent(0, 1, SIZE, 0.0, False)  # plane 1, then plane 1 goes silent
    for psn in range(1, 4):
        r.rec.on_sent(psn, 0, SIZE, (49 + psn) * 1e-6, False)  # plane 0 at 50, 51, 52 us
    r.rec.on_sack(bits(1, 2, 3), 3, 0, False, False, 60e-6)  # RTT sample 60 - 52 = 8 us
    assert r.rec.rtt.srtt == pytest.approx(8e-6)
    r.rec.detect_losses(60e-6, None)
    # lost: sent at least srtt (8 us) before the latest delivered packet (52 us)
    assert r.rec.lost == bits(0) and r.qp.counts == {"loss_time": 1}


def test_within_a_plane_the_time_threshold_is_a_whole_srtt() -> None:
    """A plane has several paths whose queues differ: a packet of the same plane sent srtt/4
    later and delivered first is reordering, not a loss; one sent a whole srtt later is."""
    r = rig(planes=2)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)  # plane 0, still in a deeper queue
    r.rec.on_sent(1, 0, SIZE, 3e-6, False)  # plane 0, 3 us later
    r.rec.on_sent(2, 1, SIZE, 3e-6, False)  # plane 1
    r.rec.on_sack(bits(1, 2), 2, 0, False, False, 11e-6)  # srtt = 8 us; 3 us >= 8 / 4
    r.rec.detect_losses(11e-6, None)
    assert r.rec.lost == 0 and r.qp.counts == {}
    r.rec.on_sent(3, 0, SIZE, 9e-6, False)  # plane 0, 9 us after PSN 0: more than srtt
    r.rec.on_sack(bits(1, 2, 3), 3, 0, False, False, 17e-6)
    r.rec.detect_losses(17e-6, None)
    assert r.rec.lost == bits(0) and r.qp.counts == {"loss_time": 1}


def test_spurious_retransmissions_double_the_thresholds_up_to_their_caps() -> None:
    r = rig(reorder_threshold=3)
    for _ in range(6):
        r.rec.on_sack(0, -1, 0, True, False, 1e-6)
    # ReorderThreshold doubles to half the MPR (64 PSNs); the time multiplier to 16
    thresholds = [getattr(d, "threshold", None) for d in r.rec.detectors]
    assert thresholds == [min(3 * 2**6, 64)]
    assert r.rec.reo_mult == 16.0 and r.qp.counts["spurious_rtx"] == 6


def test_reflected_timestamp_of_the_last_copy_lets_a_retransmission_advance_the_detector() -> None:
    r = rig(reorder_threshold=2)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.mark_lost(0, RTX_NACK)
    r.rec.lost = 0
    r.rec.on_sent(0, 0, 0, 10e-6, True)  # plane sequence 1
    r.rec.on_sent(1, 0, SIZE, 11e-6, False)  # plane sequence 2
    r.rec.on_sent(2, 0, SIZE, 12e-6, False)
    r.rec.on_sent(3, 0, SIZE, 13e-6, False)
    # only the retransmitted PSN 0 arrives, with the timestamp of its second copy
    r.rec.on_sack(bits(0), 0, ts16(10e-6), False, True, 20e-6)
    assert r.rec.detectors[0].max_acked == 1  # type: ignore[attr-defined]
    # with the first copy's timestamp the detector would not have moved
    r2 = rig(reorder_threshold=2)
    r2.rec.on_sent(0, 0, SIZE, 0.0, False)
    r2.rec.mark_lost(0, RTX_NACK)
    r2.rec.lost = 0
    r2.rec.on_sent(0, 0, 0, 10e-6, True)
    r2.rec.on_sack(bits(0), 0, ts16(0.0), False, True, 20e-6)
    assert r2.rec.detectors[0].max_acked == -1  # type: ignore[attr-defined]


def test_reliability_probe_after_quiet_time_and_what_its_answer_shows() -> None:
    r = rig(probe_after=100e-6)
    for psn in range(10):  # EV index psn % 4, sent at psn us
        r.rec.on_sent(psn, psn % 4, SIZE, psn * 1e-6, False)
    r.rec.on_sack(bits(0, 1, 2, 3, 4), 4, 0, False, False, 20e-6)  # srtt = 20 - 4 = 16 us
    r.rec.on_cumulative_ack(5, 20e-6)
    assert r.rec.next_timer() == pytest.approx(20e-6 + 100e-6)  # before the ACK timeout
    r.rec.on_timer(120e-6)
    assert len(r.qp.ctrl) == 1
    probe = r.qp.ctrl[0]
    assert probe.ev == 0x100 + 4 % 4  # the EV that delivered last (PSN 4's)
    assert probe.pkt.bth.opcode == Opcode.PROBE and probe.pkt.bth.dest_qp == 0x20
    assert probe.pkt.peth is not None and probe.pkt.peth.tx_timestamp == ts16(120e-6)
    assert probe.pkt.bth.psn == probe.pkt.peth.probe_id == 1
    assert r.qp.counts["tx_probe"] == 1
    # one probe at a time: an unanswered one is repeated 4 srtt later (at most probe_after),
    # times the ACK timeout's backoff (1 before the first expiry)
    assert r.rec.next_timer() == pytest.approx(120e-6 + 4 * 16e-6)
    r.rec.on_sent(10, 0, SIZE, 125e-6, False)  # sent after the probe
    # the answer (pr=1, bitmap from PSN 5): only PSN 7 arrived
    r.rec.on_sack(bits(7, una=5), 4, 0, False, False, 140e-6)
    r.rec.detect_losses(140e-6, 5, ts16(120e-6))
    # missing and sent at least srtt before the probe (120 - 16 = 104 us): lost; a loss a
    # probe found makes its EV assumed bad at once (a timeout without trim), as far as
    # ev_min_active (1) lets it: PSN 5 took EV index 1, 6 index 2, 8 index 0
    assert r.rec.lost == bits(5, 6, 8, 9, una=5)
    assert r.qp.counts["loss_probe"] == 4
    assert [(i, n, why) for i, _o, n, why in r.ev_log] == [
        (1, EvState.ASSUMED_BAD, "repeated_loss"), (2, EvState.ASSUMED_BAD, "repeated_loss"),
        (0, EvState.ASSUMED_BAD, "repeated_loss")]
    assert r.qp.logs[-1] == (140e-6, PACKETS_LOST, {"trigger": "probe", "count": 4, "una": 5})
    # PSN 5 is still the oldest unacknowledged: the next probe goes probe_after after this one
    assert r.rec.next_timer() == pytest.approx(120e-6 + 100e-6)


def test_an_unanswered_probe_is_repeated_on_another_ev_with_the_timeout_backoff() -> None:
    r = rig(probe_after=100e-6, retry=RetryAttr(0, EXP_CNT_INFINITE))
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.on_timer(100e-6)  # quiet for probe_after: probe 1
    assert r.qp.counts["tx_probe"] == 1 and "probe_expired" not in r.qp.counts
    r.rec.on_timer(200e-6)  # no answer: probe 2, and the first counts as expired
    assert r.qp.counts["tx_probe"] == 2 and r.qp.counts["probe_expired"] == 1
    assert r.qp.ctrl[0].ev != r.qp.ctrl[1].ev  # the rotation moved on
    r.rec.on_timer(T10)  # the ACK timeout (linear_cnt 0): from now on the backoff is 2
    assert r.qp.counts["timeouts"] == 1 and r.qp.counts["tx_probe"] == 3
    assert r.rec.next_timer() == pytest.approx(T10 + 2 * 100e-6)


def test_a_probe_goes_out_when_the_oldest_psn_is_stuck_even_while_sacks_flow() -> None:
    r = rig(probe_after=100e-6, reorder_threshold=64)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)  # the stuck one
    for k in range(1, 20):  # later PSNs keep being acknowledged: feedback, but no progress
        r.rec.on_sent(k, k % 4, SIZE, k * 10e-6, False)
        r.rec.on_sack(bits(k), k, 0, False, False, k * 10e-6 + 5e-6)
        r.rec.on_timer(k * 10e-6 + 5e-6)
    assert r.qp.counts["tx_probe"] == 1 and r.rec.last_probe == pytest.approx(105e-6)


def test_a_probe_takes_the_ev_that_delivered_last_and_after_it_went_unanswered_another() -> None:
    r = rig(n_evs=4, probe_after=100e-6)
    for psn in range(3):
        r.rec.on_sent(psn, psn, SIZE, psn * 1e-6, False)
    r.rec.on_sack(bits(1, 2), 2, 0, False, False, 10e-6)  # EV index 2 delivered last
    assert r.rec.fresh_ev == 2
    assert r.rec.proven_ev(avoid=2) == -1 and r.rec.proven_ev(avoid=0) == 2
    r.rec.on_timer(100e-6)  # no progress: probe 1 on the proven EV
    assert r.qp.ctrl[-1].ev == 0x102
    r.rec.on_timer(200e-6)  # unanswered: probe 2 on the rotation, not on EV index 2 again
    assert r.qp.counts["probe_expired"] == 1 and r.qp.ctrl[-1].ev != 0x102


def test_a_late_answer_is_read_against_its_own_probe() -> None:
    """An answer reflects its probe's timestamp: one to an earlier probe than the last says
    nothing of the PSNs sent after that probe, and once a newer answer was read it is
    ignored."""
    r = rig(probe_after=100e-6)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.on_sack(0, 0, 0, False, False, 10e-6)  # feedback without progress: srtt unknown
    r.rec.on_timer(100e-6)  # probe 1
    r.rec.on_sent(1, 1, SIZE, 150e-6, False)
    r.rec.on_timer(200e-6)  # probe 1 unanswered for probe_after: probe 2
    assert r.qp.counts["tx_probe"] == 2
    r.rec.on_sent(2, 2, SIZE, 250e-6, False)
    # the answer to probe 1 arrives now: only PSN 0 was sent before it
    r.rec.on_sack(0, 0, 0, False, False, 400e-6)
    r.rec.detect_losses(400e-6, 0, ts16(100e-6))
    assert r.rec.lost == bits(0)
    # probe 2's answer: PSN 1 went before it, PSN 2 after
    r.rec.detect_losses(401e-6, 0, ts16(200e-6))
    assert r.rec.lost == bits(0, 1)
    # a duplicate of probe 1's answer, and an answer to no probe sent, change nothing
    r.rec.detect_losses(402e-6, 0, ts16(100e-6))
    r.rec.detect_losses(402e-6, 0, ts16(300e-6))
    assert r.rec.lost == bits(0, 1) and r.qp.counts["loss_probe"] == 2


def test_per_packet_timer() -> None:
    r = rig(per_packet_timeout=50e-6)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.on_sent(1, 1, SIZE, 30e-6, False)
    assert r.rec.next_timer() == pytest.approx(50e-6)
    r.rec.on_timer(50e-6)
    assert r.rec.lost == bits(0) and r.qp.counts["loss_per_packet_timer"] == 1
    assert r.qp.logs == [
        (50e-6, PACKETS_LOST, {"trigger": "per_packet_timer", "count": 1, "una": 0})
    ]
    assert r.rec.next_timer() == pytest.approx(80e-6)


def test_two_slow_or_three_fast_inferred_losses_in_a_row_make_an_ev_assumed_bad() -> None:
    """Losses that waited a round trip (here the per-packet timer) weigh 1.5 fast ones: two in
    a row are enough; three found by the reordering threshold are needed."""
    r = rig(per_packet_timeout=10e-6)
    for psn in range(4):
        r.rec.on_sent(psn, psn % 2, SIZE, 0.0, False)  # EV indexes 0, 1, 0, 1
    r.rec.on_sack(bits(1), 1, 0, False, False, 5e-6)  # a delivery on EV 1 resets its count
    r.rec.on_timer(10e-6)  # PSNs 0, 2 (EV 0) and 3 (EV 1) vanished
    assert r.ev_log == [(0, EvState.GOOD, EvState.ASSUMED_BAD, "repeated_loss")]
    assert r.rec.ev_loss[1] == 3  # one slow loss on EV 1 since its last delivery: still GOOD
    fast = rig(reorder_threshold=1)
    for psn, idx in ((0, 0), (1, 0), (2, 1)):
        fast.rec.on_sent(psn, idx, SIZE, psn * 1e-6, False)
    fast.rec.on_sack(bits(2), 2, 0, False, False, 10e-6)
    fast.rec.detect_losses(10e-6, None)  # PSNs 0 and 1 (EV 0) lost by reordering
    assert fast.qp.counts["loss_fast"] == 2 and fast.ev_log == []  # two fast: not enough
    for psn, idx in ((3, 0), (4, 1)):
        fast.rec.on_sent(psn, idx, SIZE, psn * 1e-6, False)
    fast.rec.on_sack(bits(4), 4, 0, False, False, 11e-6)
    fast.rec.detect_losses(11e-6, None)  # PSN 3 (EV 0): the third
    assert fast.ev_log == [(0, EvState.GOOD, EvState.ASSUMED_BAD, "repeated_loss")]
    # RC never changes EV states from the datapath
    rc = rig(per_packet_timeout=10e-6, rc=True)
    for psn in range(4):
        rc.rec.on_sent(psn, 0, SIZE, 0.0, False)
    rc.rec.on_timer(10e-6)
    assert rc.rec.lost == bits(0, 1, 2, 3) and rc.ev_log == []


def test_ack_timeout_backs_off_linearly_then_exponentially_then_gives_up() -> None:
    linear, exp = 2, 3
    r = rig(retry=RetryAttr(linear, exp), probe_after=1.0)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    # after the k-th expiry the next wait is T while k <= linear_cnt, then T * 2**(k - linear)
    waits = [T10 if k <= linear else T10 * 2 ** (k - linear) for k in range(linear + exp + 1)]
    expected = [sum(waits[: i + 1]) for i in range(len(waits))]  # T, 2T, 3T, 5T, 9T, 17T
    fired = []
    for _ in range(linear + exp + 1):
        t = r.rec.next_timer()
        assert t is not None
        fired.append(t)
        r.rec.on_timer(t)
    assert fired == pytest.approx(expected)
    assert r.qp.counts["timeouts"] == linear + exp + 1
    timeouts = [d for (_t, name, d) in r.qp.logs if name == ACK_TIMEOUT]
    assert timeouts == [
        {"una": 0, "retries": k, "interval": pytest.approx(waits[k - 1]),
         "next_interval": pytest.approx(waits[k])}
        for k in range(1, linear + exp + 1)]
    assert len(r.qp.fails) == 1
    when, status, detail = r.qp.fails[0]
    assert when == pytest.approx(17 * T10) and status == WcStatus.RETRY_EXC_ERR
    assert "5 retries exhausted at PSN 0" in detail
    assert r.cc.timeouts[0] == (pytest.approx(T10), 0)  # PSN 0 no longer in flight


def test_unlimited_retries_never_give_up_and_progress_restarts_the_timeout() -> None:
    r = rig(retry=RetryAttr(0, EXP_CNT_INFINITE), probe_after=1e9)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    r.rec.on_sent(1, 1, SIZE, 0.0, False)
    t = 0.0
    for k in range(40):
        nxt = r.rec.next_timer()
        assert nxt is not None
        # doubling per expiry up to the cap (HostConfig.ack_backoff_cap, 64 by default)
        assert nxt - t == pytest.approx(T10 * min(2**k, 64))
        t = nxt
        r.rec.on_timer(t)
    assert r.qp.fails == []
    assert r.rec.max_interval == pytest.approx(64 * T10)
    r.rec.on_cumulative_ack(1, t)  # progress: back to the first interval
    assert r.rec.retries == 0 and r.rec.next_timer() == pytest.approx(t + T10)
    assert r.rec.retry_budget_exhausted(10**6) is False


def test_backoff_cap_is_configurable() -> None:
    r = rig(retry=RetryAttr(1, EXP_CNT_INFINITE), probe_after=1e9, ack_backoff_cap=4)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)
    waits = []
    t = 0.0
    for _ in range(6):
        nxt = r.rec.next_timer()
        assert nxt is not None
        waits.append(round((nxt - t) / T10, 6))
        t = nxt
        r.rec.on_timer(t)
    assert waits == [1, 1, 2, 4, 4, 4]


def test_timeout_presumes_old_copies_lost_and_their_evs_bad_unless_trimmed() -> None:
    r = rig(n_evs=4, probe_after=1.0)
    r.rec.on_sent(0, 0, SIZE, 0.0, False)  # EV index 0
    r.rec.on_sent(1, 1, SIZE, 0.0, False)
    assert r.rec.on_nack(1, trimmed=True) == SIZE  # trimmed on EV 1, retransmitted on EV 3
    r.rec.lost = 0
    r.rec.on_sent(1, 3, 0, 0.0, True)
    r.rec.on_sent(2, 2, SIZE, 0.5 * T10, False)  # younger than one timeout at the expiry
    r.rec.on_timer(T10)
    assert r.rec.lost == bits(0, 1)
    assert r.ev_log == [(0, EvState.GOOD, EvState.ASSUMED_BAD, "ack_timeout")]
    assert r.cc.timeouts == [(T10, SIZE)]  # only PSN 2 still in flight


def test_retry_budget_of_nacks() -> None:
    r = rig(retry=RetryAttr(2, 3))
    assert not r.rec.retry_budget_exhausted(5) and r.rec.retry_budget_exhausted(6)


def test_planes_lost_go_back_and_flush() -> None:
    r = rig(planes=2)
    for psn in range(6):
        r.rec.on_sent(psn, psn % 2, SIZE, 0.0, False)  # odd PSNs on plane 1
    r.rec.on_planes_lost({1}, 1e-6)
    assert r.rec.lost == bits(1, 3, 5) and r.qp.counts["loss_plane_down"] == 3
    assert r.qp.logs == [(1e-6, PACKETS_LOST, {"trigger": "plane_down", "count": 3, "una": 0})]
    rc = rig(rc=True)
    for psn in range(3):
        rc.rec.on_sent(psn, 0, SIZE, 0.0, False)
    rc.rec.go_back()
    assert rc.rec.lost == bits(0, 1, 2) and rc.qp.counts["rc_go_back"] == 1 and rc.qp.ready == 1
    r.rec.flush()
    assert r.rec.una == r.rec.next_psn == 6 and r.rec.lost == 0 and r.rec.next_timer() is None

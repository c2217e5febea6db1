"""NSCC (hosts/transport/nscc.py): one test per rule, windows computed by hand on a fake clock.

The controller is fed SACK/NACK feedback directly. Parameters are round numbers (base RTT
100 us, target 75 us, 1000-byte packets, max window 100,000 bytes) so every expected window
below is arithmetic a reader can redo; ``delay_ewma = 1`` makes the average delay the last
sample where a rule uses it.
"""

from __future__ import annotations

import dataclasses

import pytest

from common.nscc import (
    TARGET_PACKET_TIMES,
    NsccParams,
    from_profile_fields,
    profile_fields,
    rate_for,
    scaled,
)
from hosts.transport.cc import NackFeedback, SackFeedback, congestion_control_factory
from hosts.transport.nscc import NSCC, Nscc
from hosts.wire import NackReason

US = 1e-6
PARAMS = NsccParams(
    base_rtt=100 * US,
    target_delay=75 * US,
    max_cwnd=100_000,
    mtu=1000,
    alpha=1e7,  # bytes per second of delay below target, per byte
    fi=2000.0,
    fi_scale=0.5,
    eta=100.0,
    gamma=0.8,
    max_md_jump=0.5,
    qa_gate=3,  # quick adapt only below 100,000 >> 3 = 12,500 delivered bytes
    qa_threshold=300 * US,
    adjust_bytes_threshold=8000,
    adjust_period=100 * US,
    delay_ewma=1.0,
)


ADJUST = {"adjust_bytes_threshold": 8000, "adjust_period": 100 * US}
"""The adjustment of pending increases: only the tests about it have it (elsewhere it
would add ``eta`` per period and blur the rule under test)."""


def make(**changes: object) -> Nscc:
    changes = {"adjust_bytes_threshold": 10**9, "adjust_period": 1.0, **changes}
    cc = Nscc(dataclasses.replace(PARAMS, **changes), mtu=1000)  # type: ignore[arg-type]
    cc.on_packet_sent(now=0.0, size=1000, bytes_in_flight=1000, retransmission=False)
    return cc


def sack(cc: Nscc, t_us: float, nrb: int, rtt_us: float | None, *, ecn: bool = False,
         inflight: int = 20_000, penalty: int = 0, restore: bool = False) -> float:
    cc.on_sack(SackFeedback(
        now=t_us * US, ev=0x11, ecn=ecn, newly_acked_bytes=nrb, rcvd_bytes_delta=nrb,
        rtt=None if rtt_us is None else rtt_us * US, service_time=0.0, ooo_count=0,
        penalty=penalty, restore=restore, bytes_in_flight=inflight))
    return cc.cwnd


def nack(cc: Nscc, t_us: float, reason: int = NackReason.TRIMMED, size: int = 1000) -> float:
    cc.on_nack(NackFeedback(t_us * US, 0x11, int(reason), size, 20_000))
    return cc.cwnd


def test_the_window_starts_at_the_maximum_and_admits_while_it_has_room() -> None:
    cc = make()
    assert cc.cwnd == 100_000
    assert cc.can_send(bytes_in_flight=99_000, size=1000)
    assert not cc.can_send(bytes_in_flight=99_001, size=1000)
    assert cc.can_send(bytes_in_flight=0, size=1000)


def test_fair_increase_above_target_then_the_adjustment() -> None:
    cc = make(**ADJUST)
    cc.cwnd = 50_000.0
    # delay 100 us >= target 75 us, no ECN: inc += fi x nrb = 2000 x 4000
    assert sack(cc, 10, 4000, 200) == 50_000  # 4000 bytes received: no adjustment yet
    # 9000 received > 8000: cwnd += (8e6 + 1e7) / 50000 = 360; 20 us < period: no eta
    assert sack(cc, 20, 5000, 200) == pytest.approx(50_360)
    # 130 us since the last eta: adjustment by time, cwnd += 2e6 / 50360 + eta (100)
    assert sack(cc, 130, 1000, 200) == pytest.approx(50_360 + 2e6 / 50_360 + 100)
    assert cc.counts["fair"] == 3


def test_proportional_increase_below_target() -> None:
    cc = make(**ADJUST)
    cc.cwnd = 50_000.0
    # delay 50 us: inc += alpha x nrb x (75 - 50) us = 1e7 x 8000 x 25e-6 = 2e6
    assert sack(cc, 10, 8000, 150) == 50_000  # exactly 8000 bytes: not above the threshold
    # + 1e7 x 1000 x 25e-6 = 2.5e5; 9000 > 8000: cwnd += 2.25e6 / 50000 = 45
    assert sack(cc, 20, 1000, 150) == pytest.approx(50_045)
    assert cc.counts["proportional"] == 2


def test_fast_increase_once_the_path_stayed_empty_for_a_window() -> None:
    cc = make()
    cc.cwnd = 20_000.0
    # delay 0 < fast_increase_delay (1 us x 75/12): count the bytes first
    assert PARAMS.fast_increase_delay == pytest.approx(6.25 * US)
    assert sack(cc, 10, 8000, 100) == 20_000  # 8000 <= 20000
    assert sack(cc, 20, 8000, 100) == 20_000  # 16000 <= 20000
    assert sack(cc, 30, 8000, 100) == 24_000  # 24000 > 20000: + 8000 x fi_scale 0.5
    assert sack(cc, 40, 8000, 100) == 28_000  # stays fast while the path is empty
    assert sack(cc, 50, 8000, 120) == 28_000  # delay 20 us: back to proportional (inc only)
    assert cc.counts["fast"] == 2


def test_multiplicative_decrease_at_most_once_per_base_rtt() -> None:
    cc = make()
    # ECN with delay 150 us >= 75: cwnd *= max(1 - 0.8 (150 - 75) / 150, 0.5) = 0.6
    assert sack(cc, 10, 1000, 250, ecn=True) == pytest.approx(60_000)
    assert sack(cc, 60, 1000, 250, ecn=True) == pytest.approx(60_000)  # 50 us later: no
    assert sack(cc, 111, 1000, 250, ecn=True) == pytest.approx(36_000)  # 101 us later
    # a larger delay is capped by max_md_jump: 1 - 0.8 (250 - 75) / 250 = 0.44 < 0.5
    assert sack(cc, 212, 1000, 350, ecn=True) == pytest.approx(18_000)
    assert cc.counts["md"] == 3


def test_ecn_below_target_leaves_the_window_to_load_balancing() -> None:
    cc = make()
    cc.cwnd = 50_000.0
    for t in range(10, 300, 10):
        sack(cc, t, 1000, 150, ecn=True)  # delay 50 < 75
    assert cc.cwnd == 50_000 and cc.counts["md"] == 0 and cc.counts["ecn"] == 29


def test_quick_adapt_after_a_trim_sets_the_window_to_what_was_delivered() -> None:
    cc = make()
    sack(cc, 10, 1000, 200)  # opens the first quick-adapt window: 10 + 100 + 75 = 185 us
    # a trim inside the window: quick adapt is armed, the NACKed size comes off meanwhile
    assert nack(cc, 50) == 99_000
    assert sack(cc, 100, 3000, 200) == 99_000
    # the window ended with 3000 + 2000 = 5000 < 12,500 bytes delivered: cwnd = 5000
    assert sack(cc, 200, 2000, 200, inflight=20_000) == 5000
    assert cc.counts["qa"] == 1
    # the marks of the 20,000 bytes in flight then are ignored: no decrease
    assert sack(cc, 310, 1000, 400, ecn=True) == 5000
    assert cc.counts["md"] == 0
    # once those bytes came back, marks count again (avg delay 300 us: factor 0.5)
    assert sack(cc, 320, 19_000, 400, ecn=True) == 2500


def test_quick_adapt_does_not_fire_when_enough_was_delivered() -> None:
    cc = make()
    sack(cc, 10, 1000, 200)
    nack(cc, 50)
    sack(cc, 100, 13_000, 200)  # 13,000 >= 12,500 delivered in the window
    assert sack(cc, 200, 1000, 200) == 99_000 and cc.counts["qa"] == 0


def test_a_large_delay_alone_triggers_quick_adapt() -> None:
    cc = make()
    sack(cc, 10, 1000, 200)
    sack(cc, 100, 4000, 200)
    # delay 350 us > qa_threshold 300 us at the end of the window: cwnd = 4000 + 1000
    assert sack(cc, 200, 1000, 450) == 5000


def test_trims_and_inferred_losses_take_their_size_off_the_window() -> None:
    cc = make()
    assert nack(cc, 10, size=1500) == 98_500
    assert nack(cc, 20, NackReason.TRIMMED_LASTHOP) == 97_500
    assert nack(cc, 30, NackReason.NO_RESOURCE) == 97_500  # a receiver refusal: unchanged
    cc.on_packets_lost(now=40 * US, lost_bytes=3000, bytes_in_flight=10_000)
    assert cc.cwnd == 94_500 and cc.counts["loss_decrease"] == 1
    cc.cwnd = 1500.0
    assert nack(cc, 50) == 1000  # never below one packet


def test_a_trim_counts_as_a_base_rtt_of_delay() -> None:
    cc = make(delay_ewma=0.5)
    nack(cc, 10)
    assert cc.avg_delay == pytest.approx(0.5 * 100 * US)


def test_receiver_penalty_shrinks_the_window_and_restore_brings_it_back() -> None:
    cc = make()
    cc.cwnd = 50_000.0
    # p = 64: cwnd = min(50000, inflight 30000) - 64 x 4000 / 128 = 28000; saved 50000
    assert sack(cc, 10, 4000, 150, inflight=30_000, penalty=64) == 28_000
    assert cc.saved_cwnd == 50_000
    # still penalised: - 64 x 4000 / 128 again, and no increase (delay 50 < target)
    assert sack(cc, 20, 4000, 150, inflight=30_000, penalty=64) == 26_000
    assert cc.inc == 0.0
    # penalty gone, restore set: the saved window is back
    assert sack(cc, 30, 1000, 150, restore=True) == 50_000
    assert cc.saved_cwnd is None and cc.counts["penalised"] == cc.counts["restored"] == 1
    # a restore without a saved window changes nothing
    assert sack(cc, 40, 1000, 150, restore=True) == 50_000
    assert cc.inc == pytest.approx(2 * 1e7 * 1000 * 25 * US)  # increases resumed (pending)


def test_a_smaller_rtt_lowers_the_base_rtt_and_the_window_limit() -> None:
    cc = make()
    # max_wnd follows the base RTT down in proportion: 100,000 x 80 us / 100 us
    assert sack(cc, 10, 1000, 80) == pytest.approx(80_000)
    assert cc.base_rtt == pytest.approx(80 * US) and cc.max_wnd == pytest.approx(80_000)


def test_sacks_without_an_rtt_sample_use_the_average_delay() -> None:
    cc = make()
    sack(cc, 10, 1000, 250, ecn=True)  # avg delay 150: MD to 60000
    assert sack(cc, 200, 1000, None, ecn=True) == pytest.approx(36_000)


def test_the_log_data_carries_window_rtt_delay_and_penalty() -> None:
    cc = make()
    sack(cc, 10, 4000, 150, inflight=30_000, penalty=9)
    log = cc.get_log_data()
    assert log["cwnd"] == 30_000 - (9 * 4000 >> 7)
    assert log["rtt"] == pytest.approx(150 * US) and log["delay"] == pytest.approx(50 * US)
    assert log["penalty"] == 9 and log["sacks"] == 1 and log["base_rtt"] == pytest.approx(1e-4)


def test_profile_fields_round_trip_and_missing_fields_follow_the_scaling_rules() -> None:
    for rate in (10e9, 1e9):  # BDP 61 packets (reference rules) and 6 (the least target)
        ref = scaled(rate, 200 * US, 4096, unmarked_last_hop=True)
        back = from_profile_fields(profile_fields(ref), 4096)
        assert back.unmarked_last_hop
        assert back.base_rtt == pytest.approx(ref.base_rtt) and back.max_cwnd == ref.max_cwnd
        assert back.alpha == pytest.approx(ref.alpha) and back.fi == pytest.approx(ref.fi)
        assert rate_for(ref.max_cwnd, 200 * US, 4096) == pytest.approx(rate, rel=1e-4)
        # only the network: everything else is derived from it
        partial = from_profile_fields({"base_rtt_ns": 200_000, "max_cwnd": ref.max_cwnd,
                                       "unmarked_last_hop": True}, 4096)
        for f in dataclasses.fields(ref):
            assert getattr(partial, f.name) == pytest.approx(getattr(ref, f.name),
                                                             rel=1e-4), f.name
    # an empty profile: the reference network
    assert from_profile_fields({}, 4096).max_cwnd == round(1.5 * 150_000)
    with pytest.raises(ValueError, match="gamma"):
        from_profile_fields({"gamma": 2.0}, 4096)
    with pytest.raises(ValueError, match="unknown"):
        from_profile_fields({"beta": 1.0}, 4096)


def test_the_algorithm_is_registered_under_the_profile_name() -> None:
    from hosts.transport.cc import CcSetup

    factory = congestion_control_factory(NSCC)
    assert factory is not None and NSCC == "uet-1.0-nscc"
    cc = factory(CcSetup(0x10, 4096, 1 << 30, profile_fields(scaled(10e9, 200 * US))))
    assert isinstance(cc, Nscc) and cc.cwnd == round(1.5 * 10e9 / 8 * 200 * US)


def test_with_an_unmarked_last_hop_a_standing_delay_above_target_is_a_mark() -> None:
    # the reference: delay 150 us >= target without ECN is a fair increase (inc only here)
    ref = make()
    assert sack(ref, 10, 1000, 250) == 100_000 and ref.counts["fair"] == 1
    # MRC's last hop marks no ECN: a delay over target in two fresh samples in a row is its mark
    cc = make(unmarked_last_hop=True)
    assert sack(cc, 10, 1000, 250) == 100_000  # one sample: not yet standing
    assert cc.counts["fair"] == 1 and cc.counts["delay_marked"] == 0
    assert sack(cc, 20, 1000, None) == 100_000  # no fresh sample (a retransmitted trigger)
    assert cc.counts["delay_marked"] == 0
    # the second fresh sample >= 150 us: x (1 - 0.8 (150 - 75) / 150) = 0.6
    assert sack(cc, 30, 1000, 250) == pytest.approx(60_000)
    assert cc.counts["delay_marked"] == 1
    assert sack(cc, 50, 1000, 250) == pytest.approx(60_000)  # once per base RTT
    # samples alternating over and under target: the delay does not stand, no mark
    jitter = make(unmarked_last_hop=True)
    for t, rtt in ((10, 250), (100, 100), (200, 250), (300, 100), (400, 250)):
        sack(jitter, t, 1000, rtt)
    assert jitter.counts["delay_marked"] == 0 and jitter.cwnd == 100_000
    # below target it still increases proportionally (pending, no adjustment here)
    sack(cc, 260, 1000, 150)
    assert cc.counts["proportional"] == 1 and cc.inc > 0


def test_the_scaling_is_the_same_per_rtt_when_time_is_stretched() -> None:
    """Same BDP, RTT 10x longer at a 10x lower rate: every rule moves the window by the same
    bytes per RTT (the reference's 12 us appears only as its own network's RTT)."""
    for rate in (10e9, 1e9):  # the least target applies at 1 Gb/s: 20 packet times
        fast, slow = scaled(rate, 200 * US), scaled(rate / 10, 2000 * US)
        assert fast.max_cwnd == slow.max_cwnd and fast.fi == pytest.approx(slow.fi)
        assert slow.target_delay == pytest.approx(10 * fast.target_delay)
        # proportional increase of a window at zero delay: alpha x 0.75 base RTT = 4 sa 0.75 MTU
        sa = rate / 8 * 200 * US / 150_000
        for p in (fast, slow):
            assert p.alpha * 0.75 * p.base_rtt == pytest.approx(4 * sa * 0.75 * 4096)
    # the least target: max(0.75 x 200 us, 20 x 4096 x 8 / 1 Gb/s = 655.36 us)
    assert TARGET_PACKET_TIMES == 20
    assert scaled(1e9, 200 * US).target_delay == pytest.approx(655.36 * US)
    assert scaled(10e9, 200 * US).target_delay == pytest.approx(150 * US)
    ref = scaled(100e9, 12 * US)  # on the reference network: target / 12 us exactly
    assert ref.alpha == pytest.approx(4.0 * 1 * (9 / 12) * 4096 / (9 * US))

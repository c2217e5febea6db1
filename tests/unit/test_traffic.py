"""Traffic manager with a fake clock: rates, priorities, limits, loss, delay, admin state."""

from __future__ import annotations

import math
import random

import pytest

from switch.traffic import LinkConfig, Shaper, TrafficManager, parse_link_spec

MBPS = 1e6


def frame(tag: int, size: int = 1250) -> bytes:
    """A distinguishable frame of ``size`` bytes (1250 B = 10 ms at 1 Mb/s)."""
    return tag.to_bytes(4, "big") + bytes(size - 4)


def tag(data: bytes) -> int:
    return int.from_bytes(data[:4], "big")


def drain(sh: Shaper, now: float) -> list[int]:
    out: list[bytes] = []
    sh.service(now, out)
    return [tag(d) for d in out]


def test_packets_leave_one_serialisation_time_apart_and_depth_follows_time() -> None:
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=100))
    for i in range(10):
        assert sh.enqueue(frame(i), 0, now=0.0)
    assert drain(sh, 0.0) == []  # first packet is on the wire, not delivered yet
    assert sh.depth(0) == (9, 9 * 1250)  # the packet on the wire is no longer queued
    assert drain(sh, 0.0099) == []
    assert drain(sh, 0.0101) == [0]
    assert sh.depth(0) == (8, 8 * 1250)
    assert drain(sh, 0.0351) == [1, 2]
    assert sh.depth(0) == (6, 6 * 1250)
    assert sh.next_deadline() == pytest.approx(0.04)


def test_late_polling_keeps_ideal_departure_times() -> None:
    """Polled only at 1 s, ten packets still left at 10 ms intervals; the wire idled after."""
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=100))
    for i in range(10):
        sh.enqueue(frame(i), 0, now=0.0)
    assert drain(sh, 1.0) == list(range(10))
    assert sh.wire_free_at == pytest.approx(0.1)
    sh.enqueue(frame(99), 0, now=1.0)
    assert drain(sh, 1.0) == []
    assert sh.wire_free_at == pytest.approx(1.01)  # starts at its arrival, not at 0.1


def test_departures_are_exact_under_random_poll_jitter() -> None:
    """Delivered count at any poll time equals floor(t / serialisation time)."""
    rng = random.Random(3)
    sh = Shaper(1, LinkConfig(rate_bps=8 * MBPS, qpkts=0))  # 1250 B -> 1.25 ms
    n = 400
    for i in range(n):
        sh.enqueue(frame(i), 0, now=0.0)
    t, got = 0.0, 0
    while got < n:
        t += rng.uniform(0.0, 0.004)
        got += len(drain(sh, t))
        expected = min(n, math.floor(t / 0.00125 + 1e-9))
        assert got == expected


def test_high_priority_overtakes_queued_low_priority() -> None:
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=100))
    for i in range(5):
        sh.enqueue(frame(i), 1, now=0.0)
    drain(sh, 0.0)  # packet 0 starts
    sh.enqueue(frame(100), 7, now=0.005)
    assert drain(sh, 1.0) == [0, 100, 1, 2, 3, 4]


def test_priority_is_decided_among_packets_present_when_the_wire_freed() -> None:
    """Polled late: a high-priority packet that arrived after a departure does not jump it."""
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=100))
    sh.enqueue(frame(0), 0, now=0.0)
    sh.enqueue(frame(1), 0, now=0.0)
    sh.enqueue(frame(2), 0, now=0.0)
    # No service until 0.015: wire freed at 0.01 when only low packets were there.
    sh.enqueue(frame(100), 5, now=0.015)
    assert drain(sh, 1.0) == [0, 1, 100, 2]


def test_tail_drop_by_packets_and_bytes_calls_drop_hook() -> None:
    drops: list[tuple[int, int, int]] = []
    sh = Shaper(
        4, LinkConfig(rate_bps=1 * MBPS, qpkts=3, qbytes=0), on_drop=lambda *a: drops.append(a)
    )
    # The first packet goes straight onto the idle wire; three more fill the queue.
    accepted = [sh.enqueue(frame(i), 2, now=0.0) for i in range(6)]
    assert accepted == [True, True, True, True, False, False]
    assert drops == [(4, 2, 1250), (4, 2, 1250)]
    assert sh.stats.queues[2].drops == 2 and sh.stats.tail_drops == 2
    assert sh.stats.queues[2].max_depth_pkts == 3

    sh2 = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=0, qbytes=3000))
    assert [sh2.enqueue(frame(i, 1000), 0, 0.0) for i in range(5)] == [True] * 4 + [False]
    assert sh2.stats.queues[0].max_depth_bytes == 3000
    # Space frees as the wire drains: the second packet left the queue at t=8 ms.
    drain(sh2, 0.0081)
    assert sh2.enqueue(frame(9, 1000), 0, 0.0081)
    assert not sh2.enqueue(frame(10, 1000), 0, 0.0081)


def test_priority_without_queue_drops() -> None:
    drops: list[tuple[int, int, int]] = []
    sh = Shaper(1, LinkConfig(), nqueues=4, on_drop=lambda *a: drops.append(a))
    assert not sh.enqueue(frame(0), 5, 0.0)
    assert drops == [(1, 5, 1250)]


def test_random_loss_matches_the_seeded_generator() -> None:
    n, p = 2000, 0.1
    sh = Shaper(1, LinkConfig(loss=p, qpkts=0), rng=random.Random(11))
    for i in range(n):
        sh.enqueue(frame(i, 64), 0, 0.0)
    got = drain(sh, 0.0)
    ref = random.Random(11)
    expected = [i for i in range(n) if not ref.random() < p]
    assert got == expected
    assert sh.stats.loss_drops == n - len(expected)


def test_propagation_delay_and_wire_order_after_delay_change() -> None:
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, delay_s=0.05, qpkts=10))
    sh.enqueue(frame(0), 0, 0.0)
    sh.enqueue(frame(1), 0, 0.0)
    assert drain(sh, 0.0599) == []
    assert drain(sh, 0.0601) == [0]  # 10 ms on the wire + 50 ms propagation
    # Packet 1 left the wire at 20 ms and arrives at 70 ms. Drop the delay to 0 and send
    # packet 2 (on the wire 61-71 ms): it would arrive at 71 ms anyway; make it small so it
    # would arrive first (61.1 ms) and check that it does not overtake packet 1.
    sh.configure(sh.config.updated(delay_s=0.0), now=0.0601)
    sh.enqueue(frame(2, 12), 0, 0.0601)
    assert drain(sh, 0.065) == []
    assert drain(sh, 0.0701) == [1, 2]


def test_unshaped_link_delivers_at_once() -> None:
    sh = Shaper(1, LinkConfig())
    sh.enqueue(frame(0), 3, 5.0)
    assert drain(sh, 5.0) == [0]
    assert sh.stats.packets == 1 and sh.stats.bytes == 1250
    assert sh.stats.queues[3].packets == 1


def test_admin_down_drops_queued_inflight_and_new_packets() -> None:
    drops: list[tuple[int, int, int]] = []
    sh = Shaper(
        2, LinkConfig(rate_bps=1 * MBPS, delay_s=1.0, qpkts=10), on_drop=lambda *a: drops.append(a)
    )
    for i in range(3):
        sh.enqueue(frame(i), 1, 0.0)
    drain(sh, 0.015)  # packet 0 in flight (delay 1 s), packet 1 on the wire, packet 2 queued
    sh.configure(sh.config.updated(up=False), now=0.015)
    # Queued packet 2 plus packets 0 (propagating) and 1 (being serialised) are lost.
    assert sh.stats.down_drops == 3 and sh.depth(1) == (0, 0)
    assert not sh.enqueue(frame(3), 1, 0.02)
    assert sh.stats.down_drops == 4
    assert drain(sh, 5.0) == []
    sh.configure(sh.config.updated(up=True), now=6.0)
    sh.enqueue(frame(4), 1, 6.0)
    assert drain(sh, 7.011) == [4]
    assert [d[1] for d in drops] == [1, 1]  # queued + new packet reported to the pipeline


def test_ecn_and_trim_flags_are_counted_per_queue() -> None:
    sh = Shaper(1, LinkConfig())
    sh.enqueue(frame(0), 6, 0.0, trimmed=True)
    sh.enqueue(frame(1), 1, 0.0, ecn=True)
    sh.enqueue(frame(2), 1, 0.0)
    assert sh.stats.queues[6].trims == 1 and sh.stats.queues[1].ecn_marks == 1
    assert sh.stats.queues[1].trims == 0


def test_traffic_manager_ingress_shaping_and_egress() -> None:
    tm = TrafficManager(rng=random.Random(1))
    tm.add_port(1, egress=LinkConfig(rate_bps=1 * MBPS))
    tm.add_port(2, ingress=LinkConfig(rate_bps=1 * MBPS, delay_s=0.001))
    assert 2 in tm.ingress_shaped and 1 not in tm.ingress_shaped
    tm.receive(2, frame(7), 0.0)
    tm.enqueue(1, 0, frame(8), 0.0)
    tx: list[tuple[int, bytes]] = []
    rx: list[tuple[int, bytes]] = []
    tm.service(0.0105, tx, rx)
    assert [(p, tag(d)) for p, d in tx] == [(1, 8)]
    assert rx == []
    assert tm.next_deadline() == pytest.approx(0.011)
    tm.service(0.0111, tx, rx)
    assert [(p, tag(d)) for p, d in rx] == [(2, 7)]
    assert tm.next_deadline() is None
    assert tm.qdepth(9, 0) == (0, 0)
    with pytest.raises(ValueError, match="no port 9"):
        tm.configure(9, 0.0, rate_bps=1.0)
    with pytest.raises(ValueError, match="unknown link parameter"):
        tm.configure(1, 0.0, speed=1.0)
    tm.set_admin(1, False, 0.2)
    assert not tm.admin_up(1) and not tm.enqueue(1, 0, frame(1), 0.2)


def test_parse_link_spec() -> None:
    cfg = parse_link_spec("rate=1e9, delay=10e-6,loss=0.01,qpkts=32,qbytes=65536,up=0")
    assert cfg == LinkConfig(
        rate_bps=1e9, delay_s=10e-6, loss=0.01, qpkts=32, qbytes=65536, up=False
    )
    with pytest.raises(ValueError, match="bad link parameter"):
        parse_link_spec("speed=1")
    with pytest.raises(ValueError, match="loss"):
        parse_link_spec("loss=1.5")
    with pytest.raises(ValueError, match="bad value"):
        parse_link_spec("rate=fast")


def test_a_packet_on_an_idle_wire_leaves_the_queue_at_enqueue() -> None:
    """The depth the next packet sees excludes the one already being serialised."""
    sh = Shaper(1, LinkConfig(rate_bps=1 * MBPS, qpkts=100))
    sh.enqueue(frame(0), 1, 0.0)
    assert sh.depth(1) == (0, 0)
    sh.enqueue(frame(1), 1, 0.001)
    assert sh.depth(1) == (1, 1250)
    assert sh.stats.queues[1].max_depth_pkts == 1


def test_rate_change_applies_to_the_rest_of_the_frame_on_the_wire() -> None:
    sh = Shaper(1, LinkConfig(rate_bps=1e3, delay_s=0.5, qpkts=10))
    sh.enqueue(frame(0), 0, 0.0)  # 10 000 bits: 10 s at 1 kb/s
    sh.enqueue(frame(1), 0, 0.0)
    sh.configure(sh.config.updated(rate_bps=1e6, delay_s=0.0), now=1.0)
    # 9 000 bits were left: 9 ms at 1 Mb/s; no more propagation delay.
    assert sh.wire_free_at == pytest.approx(1.009)
    assert drain(sh, 1.0089) == []
    assert drain(sh, 1.0091) == [0]
    assert drain(sh, 1.0191) == [1]  # the next frame starts at 1.009, all at the new rate


def test_rate_change_settles_departures_due_under_the_old_rate_first() -> None:
    sh = Shaper(1, LinkConfig(rate_bps=1e6, qpkts=10))
    for i in range(3):
        sh.enqueue(frame(i), 0, 0.0)
    # Not serviced since t=0: at 15 ms frame 0 is done and frame 1 is half sent at 1 Mb/s.
    sh.configure(sh.config.updated(rate_bps=2e6), now=0.015)
    assert sh.wire_free_at == pytest.approx(0.0175)  # 5 000 bits left at 2 Mb/s
    assert drain(sh, 0.0226) == [0, 1, 2]  # frame 2: 17.5 + 5 ms


def test_service_into_delivers_what_service_delivers_per_port() -> None:
    """The data-plane loop's per-port variant and ``service`` agree frame for frame, with
    several priorities, arrivals while the wire is busy and idle gaps (the busy-queue mask)."""

    def build() -> TrafficManager:
        tm = TrafficManager(rng=random.Random(3))
        for port in (1, 2):
            tm.add_port(port, egress=LinkConfig(rate_bps=1 * MBPS, qpkts=1000))
        return tm

    a, b = build(), build()
    rng = random.Random(5)
    events = sorted((rng.uniform(0, 0.5), rng.choice((1, 2)), rng.randrange(8), i)
                    for i in range(300))
    got_a: dict[int, list[int]] = {1: [], 2: []}
    got_b: dict[int, list[int]] = {1: [], 2: []}
    per_port: dict[int, list[bytes]] = {}
    for now, port, prio, i in [*events, (5.0, 0, 0, -1)]:
        tx: list[tuple[int, bytes]] = []
        rx: list[tuple[int, bytes]] = []
        a.service(now, tx, rx)
        for p, d in tx:
            got_a[p].append(tag(d))
        b.service_into(now, per_port, rx)
        for p, frames in per_port.items():
            got_b[p].extend(tag(d) for d in frames)
            frames.clear()
        if i >= 0:
            assert a.enqueue(port, prio, frame(i), now) == b.enqueue(port, prio, frame(i), now)
    assert got_a == got_b
    assert sum(map(len, got_a.values())) == 300
    # strict priority changed the order within each port: not simply arrival order
    assert any(v != sorted(v) for v in got_a.values())


def test_queueing_delay_histogram_counts_each_packets_wait() -> None:
    from switch.traffic import WAIT_BUCKET_S

    sh = Shaper(1, LinkConfig(rate_bps=8 * MBPS, qpkts=100))  # 1000 B -> 1 ms on the wire
    for _ in range(3):
        sh.enqueue(b"x" * 1000, 0, 0.0)  # all at t = 0: they wait 0, 1 and 2 ms
    sh.enqueue(b"y" * 1000, 0, 2.5e-3)  # the wire frees at 3 ms: waits 0.5 ms
    sh.service(1.0, [])
    per_ms = round(1e-3 / WAIT_BUCKET_S)
    assert sh.stats.queues[0].wait_hist == {0: 1, per_ms: 1, 2 * per_ms: 1, per_ms // 2: 1}


def test_only_busy_shapers_are_looked_at_and_the_deadline_is_the_earliest_of_all() -> None:
    """``service``/``next_deadline`` visit the busy shapers only (a 16-port switch with traffic
    on a few ports); the deadline equals the minimum over every shaper, computed
    independently, and a shaper that went idle leaves the busy set."""
    tm = TrafficManager(rng=random.Random(1))
    for port in range(1, 17):
        shaped = LinkConfig(rate_bps=10 * MBPS, delay_s=1e-4, qpkts=1000)
        tm.add_port(port, egress=shaped, ingress=shaped if port <= 2 else None)
    rng = random.Random(9)
    now = 0.0
    delivered = 0
    for i in range(400):
        now += rng.uniform(0, 2e-4)
        tx: list[tuple[int, bytes]] = []
        rx: list[tuple[int, bytes]] = []
        tm.service(now, tx, rx)
        delivered += len(tx) + len(rx)
        if rng.random() < 0.5:
            tm.enqueue(rng.choice((3, 7, 11)), rng.randrange(8), frame(i), now)
        else:
            tm.receive(rng.choice((1, 2)), frame(i), now)
        every = [t for sh in (*tm.egress.values(), *tm.ingress.values())
                 if (t := sh.next_deadline()) is not None]
        assert tm.next_deadline() == min(every)
        assert set(tm.busy_egress) <= {3, 7, 11} and set(tm.busy_ingress) <= {1, 2}
    while (t := tm.next_deadline()) is not None:
        tx, rx = [], []
        tm.service(t, tx, rx)
        delivered += len(tx) + len(rx)
    assert delivered == 400
    assert tm.busy_egress == {} and tm.busy_ingress == {}

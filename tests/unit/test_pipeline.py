"""mrc_switch pipeline: routing, ECMP, structured EV, SRv6, classes, ECN, trimming, drops."""

from __future__ import annotations

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from common.classes import DEFAULT_CLASSES, TrafficClass
from common.evbits import ev_subfield, usid_shift
from common.p4schema.mrc_switch import DropReason
from hosts.wire.enums import EvMode
from hosts.wire.ev_placement import ev_to_fields
from switch.pipeline import Pipeline, QDepthFn
from switch.pipeline.control import DELETE, INSERT, MODIFY, table_write
from switch.pipeline.state import Entry
from tests.unit.pipeline_helpers import (
    MRC,
    SW_MAC,
    add,
    add_ecmp_group,
    add_route,
    call,
    empty_queues,
    frame,
    ip6,
    mrc_pipeline,
    nexthop,
    srv6_frame,
)


def drops(state: object, reason: int) -> int:
    return state.counter("MrcIngress.drop_reason").packets[reason]  # type: ignore[attr-defined]


def crc16_arc_bitwise(data: bytes) -> int:
    """Independent bit-by-bit CRC-16/ARC (reflected 0x8005, init 0)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def test_unconfigured_pipeline_drops_and_counts() -> None:
    pipe = Pipeline()
    assert pipe.process(frame(), 1, 0.0, empty_queues) == []
    assert pipe.unconfigured_drops == 1


def test_lpm_longest_prefix_wins_and_rewrites_l2_and_hop_limit() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8::", 32, nexthop(1))
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    out = pipe.process(frame(dst="2001:db8:2::7", hlim=9), 5, 0.0, empty_queues)
    assert [p.port for p in out] == [2]
    pkt = Ether(out[0].data)
    assert pkt[IPv6].hlim == 8
    assert pkt.src == "02:00:00:00:00:99" and int(pkt.dst.replace(":", ""), 16) == 0x0200000000A2
    assert pipe.process(frame(dst="2001:db8:3::1"), 5, 0.0, empty_queues)[0].port == 1
    assert pipe.process(frame(dst="2001:db9::1"), 5, 0.0, empty_queues) == []
    assert drops(state, DropReason.NO_ROUTE) == 1
    assert SW_MAC


def test_ecmp_member_is_crc16_of_selector_fields_modulo_members() -> None:
    pipe, state = mrc_pipeline()
    ports = [3, 1, 4, 2]
    add_ecmp_group(state, 7, ports)
    add_route(state, "2001:db8:2::", 48, call("MrcIngress.route_ecmp", 7))
    ordered = [p for _, p in sorted((7 * 100 + p, p) for p in ports)]  # by member id
    seen = set()
    for sport in range(1000, 1200):
        raw = frame(sport=sport, flow_label=sport * 7 & 0xFFFFF)
        ip = Ether(raw)[IPv6]
        key_int = (
            (ip6(ip.src) << 188) | (ip6(ip.dst) << 60) | (ip.fl << 40) | (ip.nh << 32)
            | (sport << 16) | 4791
        ) << 4
        expected = ordered[crc16_arc_bitwise(key_int.to_bytes(40, "big")) % len(ports)]
        out = pipe.process(raw, 9, 0.0, empty_queues)
        assert out[0].port == expected
        assert pipe.process(raw, 9, 0.0, empty_queues)[0].port == expected  # flow stays
        seen.add(expected)
    assert seen == set(ports)


def test_watch_port_down_removes_member_and_port_down_drops_direct_routes() -> None:
    pipe, state = mrc_pipeline()
    add_ecmp_group(state, 1, [1, 2], watch=True)
    add_route(state, "2001:db8:2::", 48, call("MrcIngress.route_ecmp", 1))
    add_route(state, "2001:db8:3::", 48, nexthop(2))
    pipe.set_port_oper_status(2, False)
    ports = {pipe.process(frame(sport=s), 9, 0.0, empty_queues)[0].port for s in range(50)}
    assert ports == {1}
    assert pipe.process(frame(dst="2001:db8:3::1"), 9, 0.0, empty_queues) == []
    assert drops(state, DropReason.PORT_DOWN) == 1
    assert state.register("MrcIngress.port_down").read(2) == 1
    pipe.set_port_oper_status(2, True)
    assert pipe.process(frame(dst="2001:db8:3::1"), 9, 0.0, empty_queues)[0].port == 2


def test_structured_ev_uplink_is_named_by_the_tier_subfield() -> None:
    pipe, state = mrc_pipeline()
    # T0 field: 8 bits at the EV's MSB offset 8 -> shift = 32 - 8 - 8 = 16, mask 0xFF
    msb_offset, width = 8, 8
    shift = 32 - msb_offset - width
    uplinks = {v: 10 + v for v in range(4)}
    for value, port in uplinks.items():
        add(state, "MrcIngress.ev_uplink", (5, value), nexthop(port))
    add_route(state, "2001:db8:2::", 48, call("MrcIngress.route_ev", 5, shift, 0xFF, 0))
    for ev in [0x00000000, 0x00010000, 0x12020034, 0xFF03FFFF, 0x00030001]:
        sport, fl = ev_to_fields(EvMode.STRUCTURED, ev)
        out = pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues)
        assert out[0].port == uplinks[ev_subfield(ev, msb_offset, width)]
    sport, fl = ev_to_fields(EvMode.STRUCTURED, 0x00090000)  # field value 9: no uplink
    assert pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues) == []
    assert drops(state, DropReason.EV_MISS) == 1


def test_structured_ev_falls_back_to_ecmp_when_its_uplink_is_down() -> None:
    pipe, state = mrc_pipeline()
    add(state, "MrcIngress.ev_uplink", (5, 1), nexthop(11))
    add_ecmp_group(state, 2, [12, 13])
    add_route(state, "2001:db8:2::", 48, call("MrcIngress.route_ev", 5, 16, 0xFF, 2))
    sport, fl = ev_to_fields(EvMode.STRUCTURED, 0x00010000)
    assert pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues)[0].port == 11
    pipe.set_port_oper_status(11, False)
    out = pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues)
    assert out[0].port in (12, 13)
    assert Ether(out[0].data)[IPv6].hlim == 63  # decremented once
    # a field value with no entry also falls back; an explicit drop entry does not
    sport, fl = ev_to_fields(EvMode.STRUCTURED, 0x00070000)
    assert pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues)[0].port in (12, 13)
    add(state, "MrcIngress.ev_uplink", (5, 8), call("MrcIngress.drop"))
    sport, fl = ev_to_fields(EvMode.STRUCTURED, 0x00080000)
    assert pipe.process(frame(sport=sport, flow_label=fl), 9, 0.0, empty_queues) == []
    assert drops(state, DropReason.EV_MISS) == 1


def test_srv6_usid_shift_and_forward_then_srh_segment_then_decap() -> None:
    pipe, state = mrc_pipeline()
    block = "fc00:0:"
    add(state, "MrcIngress.my_usid", ((ip6(block + "100::"), 48),), call("MrcIngress.usid_shift"))
    add_route(state, block + "200::", 48, nexthop(4))
    container = block + "100:200:300::"
    out = pipe.process(srv6_frame(container), 1, 0.0, empty_queues)
    assert out[0].port == 4
    shifted = usid_shift(ip6(container).to_bytes(16, "big"))
    assert ip6(Ether(out[0].data)[IPv6].dst) == int.from_bytes(shifted, "big")
    # container exhausted after the shift: the next SRH segment becomes the destination
    # (RFC 8754: segments_left is decremented, then Segment List[segments_left] is loaded;
    # Segment List[0] is the final segment, listed first on the wire)
    add_route(state, "fc00:0:600::", 48, nexthop(6))
    raw = srv6_frame(block + "100::", segments=["fc00:0:600::", "fc00:0:500::"], segments_left=1)
    out = pipe.process(raw, 1, 0.0, empty_queues)
    assert out[0].port == 6
    pkt = Ether(out[0].data)
    assert pkt[IPv6].dst == "fc00:0:600::" and pkt[IPv6ExtHdrSegmentRouting].segleft == 0
    # decap: pops the outer header and routes on the inner destination
    add(state, "MrcIngress.my_usid", ((ip6("fc00:0:700::"), 48),), call("MrcIngress.usid_decap"))
    add_route(state, "2001:db8:2::", 48, nexthop(7))
    out = pipe.process(srv6_frame("fc00:0:700::"), 1, 0.0, empty_queues)
    pkt = Ether(out[0].data)
    assert out[0].port == 7 and pkt[IPv6].dst == "2001:db8:2::1" and pkt[IPv6].nh == 17
    assert pkt[UDP].dport == 4791


def test_dscp_class_sets_priority_and_counts_per_port_and_class() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    for cls, class_id in ((TrafficClass.CONTROL, 5), (TrafficClass.TRIMMABLE, 1)):
        add(state, "MrcIngress.dscp_class", (DEFAULT_CLASSES.dscp[cls],),
            call("MrcIngress.set_class", class_id, DEFAULT_CLASSES.priority[cls], 0))
    ctl = pipe.process(frame(dscp=DEFAULT_CLASSES.dscp[TrafficClass.CONTROL]), 3, 0.0,
                       empty_queues)
    data = pipe.process(frame(dscp=DEFAULT_CLASSES.dscp[TrafficClass.TRIMMABLE]), 3, 0.0,
                        empty_queues)
    other = pipe.process(frame(dscp=0), 3, 0.0, empty_queues)
    assert [ctl[0].priority, data[0].priority, other[0].priority] == [7, 1, 0]
    rx = state.counter("MrcIngress.rx_port_class")
    tx = state.counter("MrcEgress.tx_port_class")
    assert rx.packets[3 * 8 + 5] == 1 and rx.packets[3 * 8 + 1] == 1 and rx.packets[3 * 8] == 1
    assert tx.packets[2 * 8 + 5] == 1 and tx.bytes[2 * 8 + 5] == len(ctl[0].data)


ECN_BYTES = 4000  # port 2's thresholds in bytes queued
TRIM_BYTES = 10000


def _congested_port(state: object, last_hop: int) -> None:
    trimmed = DEFAULT_CLASSES.dscp[TrafficClass.TRIMMED_LASTHOP if last_hop
                                   else TrafficClass.TRIMMED]
    add(state, "MrcEgress.port_config", (2,),  # type: ignore[arg-type]
        call("MrcEgress.set_port_params", ECN_BYTES, TRIM_BYTES, last_hop, trimmed, 6))
    add(state, "MrcIngress.dscp_class", (10,),  # type: ignore[arg-type]
        call("MrcIngress.set_class", 1, 1, 1))
    add(state, "MrcIngress.dscp_class", (26,),  # type: ignore[arg-type]
        call("MrcIngress.set_class", 2, 1, 0))


def test_ecn_marks_over_threshold_except_last_hop_and_not_ect() -> None:
    for last_hop in (0, 1):
        pipe, state = mrc_pipeline()
        add_route(state, "2001:db8:2::", 48, nexthop(2))
        _congested_port(state, last_hop)

        def depth(packets: int, nbytes: int) -> QDepthFn:
            return lambda port, prio: (packets, nbytes)

        # the threshold is in bytes: many small packets below it, one big packet at it
        below = pipe.process(frame(dscp=26), 1, 0.0, depth(40, ECN_BYTES - 1))[0]
        above = pipe.process(frame(dscp=26), 1, 0.0, depth(1, ECN_BYTES))[0]
        not_ect = pipe.process(frame(dscp=26, ecn=0), 1, 0.0, depth(9, 10 * ECN_BYTES))[0]
        assert not below.ecn_marked and Ether(below.data)[IPv6].tc & 3 == 1
        assert above.ecn_marked == (last_hop == 0)
        assert Ether(above.data)[IPv6].tc & 3 == (1 if last_hop else 3)
        assert not not_ect.ecn_marked and Ether(not_ect.data)[IPv6].tc & 3 == 0
        assert state.counter("MrcEgress.ecn_port_queue").packets[2 * 8 + 1] == (1 - last_hop)
        assert state.register("MrcEgress.max_qdepth").read(2 * 8 + 1) == 40  # packets


def test_zero_thresholds_disable_ecn_and_trimming() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    add(state, "MrcEgress.port_config", (2,), call("MrcEgress.set_port_params", 0, 0, 0, 40, 6))
    add(state, "MrcIngress.dscp_class", (10,), call("MrcIngress.set_class", 1, 1, 1))
    raw = frame(dscp=10, ecn=1, payload=2000)
    out = pipe.process(raw, 1, 0.0, lambda p, q: (0x7FFFF, 1 << 40))[0]
    assert not out.trimmed and not out.ecn_marked and len(out.data) == len(raw)
    assert Ether(out.data)[IPv6].tc & 3 == 1
    # the byte depth saturates at the 32-bit width instead of wrapping to a small value
    table_write(state, MODIFY, state.table("MrcEgress.port_config"),
                Entry(key=(2,), action=call("MrcEgress.set_port_params", 0, 0xFFFFFFFF, 0, 40, 6)))
    assert pipe.process(raw, 1, 0.0, lambda p, q: (1, (1 << 32) + 5))[0].trimmed


def test_trimming_cuts_to_header_stack_fixes_lengths_and_rewrites_dscp() -> None:
    for last_hop, opcode, tsh in ((0, 0xCA, False), (1, 0xCB, True)):
        pipe, state = mrc_pipeline()
        add_route(state, "2001:db8:2::", 48, nexthop(2))
        _congested_port(state, last_hop)
        raw = frame(dscp=10, payload=4000, opcode=opcode, tsh=tsh)
        out = pipe.process(raw, 1, 0.0, lambda port, prio: (1, TRIM_BYTES))[0]
        ext = 4 + (4 if tsh else 0) + 16 + (4 if opcode == 0xCB else 0)
        assert out.trimmed and not out.ecn_marked and out.priority == 6
        assert len(out.data) == 14 + 40 + 8 + 12 + ext
        pkt = Ether(out.data)
        assert pkt[IPv6].plen == len(out.data) - 54
        assert pkt[UDP].len == len(out.data) - 54 and pkt[UDP].chksum == 0
        want = TrafficClass.TRIMMED_LASTHOP if last_hop else TrafficClass.TRIMMED
        assert pkt[IPv6].tc >> 2 == DEFAULT_CLASSES.dscp[want]
        assert out.data[54 + 8:] == raw[54 + 8:54 + 8 + 12 + ext]  # MRC headers intact
        assert state.counter("MrcEgress.trim_port_queue").packets[2 * 8 + 1] == 1
        # not trimmable (NO_TRIM) or below the threshold: untouched length
        no_trim = frame(dscp=26, payload=4000, opcode=opcode, tsh=tsh)
        deep = pipe.process(no_trim, 1, 0.0, lambda p, q: (100, 100 * TRIM_BYTES))[0]
        assert len(deep.data) == len(raw)
        assert not pipe.process(raw, 1, 0.0, lambda p, q: (100, TRIM_BYTES - 1))[0].trimmed


def test_trimming_an_srv6_packet_fixes_outer_and_inner_lengths() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "fc00:0:100::", 48, nexthop(2))
    _congested_port(state, 0)
    out = pipe.process(srv6_frame("fc00:0:100::", payload=3000), 1, 0.0,
                       lambda p, q: (2, TRIM_BYTES + 1))[0]
    pkt = Ether(out.data)
    assert out.trimmed and len(out.data) == 14 + 40 + 40 + 8 + 12 + 20
    assert pkt[IPv6].plen == len(out.data) - 54
    inner = pkt[IPv6].payload
    assert isinstance(inner, IPv6) and inner.plen == len(out.data) - 94
    assert inner.tc >> 2 == DEFAULT_CLASSES.dscp[TrafficClass.TRIMMED]


def test_malformed_frames_are_counted_and_dropped_and_forwarding_continues() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    good = frame()
    bad_plen = bytearray(good)
    bad_plen[18:20] = (len(good)).to_bytes(2, "big")  # claims more than the frame holds
    bad_udp = bytearray(good)
    bad_udp[58:60] = (3).to_bytes(2, "big")  # UDP length < 8
    cases = {
        DropReason.PARSE_ERROR: [good[:10], good[:40], good[:60], good[:70], b"\x00" * 13,
                                 good[:12] + b"\x86\xdd" + b"\x45" * 60],
        DropReason.BAD_LENGTH: [bytes(bad_plen), bytes(bad_udp)],
        DropReason.NOT_IPV6: [good[:12] + b"\x08\x00" + good[14:], bytes(60)],
        DropReason.HOP_LIMIT: [frame(hlim=1), frame(hlim=0)],
    }
    for reason, frames in cases.items():
        for f in frames:
            assert pipe.process(f, 1, 0.0, empty_queues) == [], (reason, f[:20].hex())
        assert drops(state, reason) == len(frames), reason
    assert pipe.process(good, 1, 0.0, empty_queues)[0].port == 2


def test_random_garbage_never_crashes() -> None:
    import random

    rng = random.Random(7)
    pipe, state = mrc_pipeline()
    add_route(state, "::", 1, nexthop(2))
    add_route(state, "8000::", 1, nexthop(3))
    good = frame(payload=64)
    for i in range(3000):
        if i % 2:
            f = bytearray(good)
            for _ in range(rng.randint(1, 6)):
                f[rng.randrange(len(f))] = rng.randrange(256)
            f = f[: rng.randint(0, len(f))]
        else:
            f = bytearray(rng.randbytes(rng.randint(0, 200)))
        out = pipe.process(bytes(f), 1, 0.0, empty_queues)
        assert len(out) <= 1
    total = sum(state.counter("MrcIngress.drop_reason").packets)
    forwarded = sum(state.counter("MrcEgress.tx_port_class").packets)
    assert total + forwarded == 3000


def test_table_write_undo_restores_lookup_state() -> None:
    pipe, state = mrc_pipeline()
    table = state.table("MrcIngress.ipv6_route")
    entry = Entry(key=((ip6("2001:db8:2::"), 48),), action=nexthop(2))
    undo = table_write(state, INSERT, table, entry)
    assert pipe.process(frame(), 1, 0.0, empty_queues)[0].port == 2
    undo()
    assert pipe.process(frame(), 1, 0.0, empty_queues) == []
    table_write(state, INSERT, table, entry)
    undo = table_write(state, DELETE, table, entry)
    assert pipe.process(frame(), 1, 0.0, empty_queues) == []
    undo()
    assert pipe.process(frame(), 1, 0.0, empty_queues)[0].port == 2
    assert MRC.name == "mrc_switch"


def test_lpm_lookup_matches_brute_force_longest_prefix() -> None:
    import random

    from switch.pipeline.state import TableState

    rng = random.Random(11)
    _, state = mrc_pipeline()
    table: TableState = state.table("MrcIngress.ipv6_route")
    prefixes: dict[tuple[int, int], int] = {}
    base = ip6("2001:db8::")
    for i in range(300):
        plen = rng.choice([16, 32, 40, 48, 56, 64, 96, 127, 128])
        value = (base | rng.getrandbits(96)) & (((1 << plen) - 1) << (128 - plen))
        if (value, plen) in prefixes:
            continue
        prefixes[(value, plen)] = i
        add(state, "MrcIngress.ipv6_route", ((value, plen),), nexthop(i % 500))
    for _ in range(2000):
        addr = base | rng.getrandbits(96)
        if rng.random() < 0.5:  # aim at a stored prefix
            value, plen = rng.choice(list(prefixes))
            addr = value | (rng.getrandbits(128 - plen) if plen < 128 else 0)
        best = max(
            ((v, p) for (v, p) in prefixes if addr >> (128 - p) == v >> (128 - p)),
            key=lambda vp: vp[1],
            default=None,
        )
        hit = table.lookup_lpm(addr)
        assert (hit.key[0] if hit else None) == best


def test_tx_per_queue_counts_the_queue_joined() -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    add(state, "MrcEgress.port_config", (2,),
        call("MrcEgress.set_port_params", 0, 5000, 0, 40, 6))
    add(state, "MrcIngress.dscp_class", (10,), call("MrcIngress.set_class", 1, 1, 1))
    full = pipe.process(frame(), 1, 0.0, lambda p, q: (4, 4999))[0]
    cut = pipe.process(frame(), 1, 0.0, lambda p, q: (1, 5000))[0]
    q = state.counter("MrcEgress.tx_port_queue")
    assert (q.packets[2 * 8 + 1], q.bytes[2 * 8 + 1]) == (1, len(full.data))
    # counters count the received length, as BMv2 does (the trimmed copy is len(cut.data))
    assert len(cut.data) < len(frame())
    assert (q.packets[2 * 8 + 6], q.bytes[2 * 8 + 6]) == (1, len(frame()))


def test_the_batch_path_gives_what_process_gives_frame_by_frame() -> None:
    """The data plane's batch path (Pipeline.datapath_batch: tuples, the engine's run
    inlined) against ``process`` on a twin pipeline: the same copies, flags (ECN marked,
    trimmed), drops, counters and queue depths seen, when each frame's copies are enqueued
    before the next frame runs."""
    raws = [frame(dscp=26), frame(dscp=26, ecn=0), frame(dscp=10, payload=4000),
            frame(dst="2001:db8:9::1"), b"\x00" * 10, frame(dscp=26, ecn=3), frame(dscp=26)]
    twins = []
    for _ in range(2):
        pipe, state = mrc_pipeline()
        add_route(state, "2001:db8:2::", 48, nexthop(2))
        _congested_port(state, 0)
        twins.append((pipe, state))

    def queue() -> tuple[list[tuple[int, int]], QDepthFn]:
        """A queue that grows by each copy enqueued: frame i sees what i-1 left."""
        seen: list[tuple[int, int]] = []
        depth = [0, 0]

        def qdepth(port: int, prio: int) -> tuple[int, int]:
            seen.append((depth[0], depth[1]))
            return depth[0], depth[1]

        def enqueue(data: bytes) -> None:
            depth[0] += 1
            depth[1] += 6000  # past the ECN threshold after one copy, trimming after two

        qdepth.enqueue = enqueue  # type: ignore[attr-defined]
        return seen, qdepth

    (one, one_state), (batch, batch_state) = twins
    seen_one, q_one = queue()
    want = []
    for raw in raws:
        for eg in one.process(raw, 1, 0.0, q_one):
            want.append((eg.port, eg.priority, eg.data, eg.trimmed, eg.ecn_marked))
            q_one.enqueue(eg.data)  # type: ignore[attr-defined]
    seen_batch, q_batch = queue()
    failures: list[int] = []
    got = []
    with batch.lock:
        for out in batch.datapath_batch()(raws, 1, 0.0, q_batch, failures.append):
            got.append(out)
            q_batch.enqueue(out[2])  # type: ignore[attr-defined]
    assert got == want and seen_batch == seen_one and not failures
    assert any(o[4] for o in got) and any(o[3] for o in got)  # marked and trimmed copies
    assert len(got) < len(raws)  # the unrouted and the runt frames are dropped
    for name in ("MrcEgress.ecn_port_queue", "MrcEgress.trim_port_queue",
                 "MrcEgress.tx_port_class"):
        assert batch_state.counter(name).packets == one_state.counter(name).packets
    assert vars(batch.engine.stats) == vars(one.engine.stats)  # type: ignore[union-attr]

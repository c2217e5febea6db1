"""Forwarding through real switch processes: ECMP, Structured EV over two tiers, SRv6 uSID.

Each test builds namespaces and veths with run-prefixed names, starts switch processes (each
test once with the embedded target, once with BMv2 where it is installed), programs them over
P4Runtime and checks what sniffers in the namespaces receive.
"""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from common.p4schema.mrc_switch import DropReason
from testbed.switch_lab import Lab
from tests.emulation.switch_util import (
    BMV2_PACING,
    SWITCH_MAC,
    connect,
    ip6int,
    lab,
    mrc_frame,
    nexthop,
    parse,
    route,
    switch_kind,
)

pytestmark = pytest.mark.emulation
__all__ = ["lab", "switch_kind"]


def test_ecmp_spreads_flows_over_all_members_and_pins_each_flow(
    lab: Lab, switch_kind: str
) -> None:
    ns = lab.namespace("h")
    lab.wire("p1", "h0", None, ns)
    members = [2, 3, 4, 5]
    for p in members:
        lab.wire(f"p{p}", f"h{p}", None, ns)
    sw = lab.start_switch(
        "s1", {p: lab.ifname(f"p{p}") for p in [1, *members]}, kind=switch_kind
    )
    with connect(sw) as c:
        dst = "fd00:0:0:9::1"
        c.insert(
            "MrcIngress.ipv6_route",
            {"hdr.ipv6.dst_addr": (ip6int("fd00:0:0:9::"), 64)},
            "MrcIngress.route_ecmp",
            {"group": 7},
        )
        dmacs = {p: f"02:00:00:00:00:{p:02x}" for p in members}
        c.insert_group(
            "MrcIngress.ecmp_selector",
            1,
            [(p, "MrcIngress.set_nexthop", nexthop(p, dmacs[p])) for p in members],
        )
        te = c.table_entry("MrcIngress.ecmp", {"meta.next_group": 7}, group_id=1)
        c.write([c.update(1, table_entry=te)])  # INSERT

        flows = [10000 + 37 * i for i in range(64)]
        frames = [mrc_frame(dst, sport=sp, psn=k) for k in range(3) for sp in flows]
        sniffer = lab.sniff(ns, [lab.ifname(f"h{p}") for p in members], count=len(frames), marks=0)
        # BMv2 takes a port's frames from a 32-frame receive ring (docs/switch.md, deviations):
        # a burst of 192 at once overflows it, so there the frames are paced.
        lab.send(ns, lab.ifname("h0"), frames, gap=BMV2_PACING if switch_kind == "bmv2" else 0.0)
        capture = sniffer.result()
    seen_ports: dict[int, set[str]] = defaultdict(set)
    by_if = {lab.ifname(f"h{p}"): p for p in members}
    for ifname, _t, data in capture.frames:
        pkt = parse(data)
        if UDP not in pkt:
            continue
        port = by_if[ifname]
        seen_ports[pkt[UDP].sport].add(ifname)
        assert pkt[Ether].dst == dmacs[port] and pkt[Ether].src == SWITCH_MAC
        assert pkt[IPv6].hlim == 63
    assert set(seen_ports) == set(flows)
    assert all(len(ifs) == 1 for ifs in seen_ports.values()), "a flow used two members"
    per_member: dict[str, int] = defaultdict(int)
    for ifs in seen_ports.values():
        per_member[next(iter(ifs))] += 1
    assert set(per_member) == set(by_if), f"members unused: {per_member}"
    assert min(per_member.values()) >= 6, f"uneven spread over 64 flows: {dict(per_member)}"
    assert sum(1 for i, _, _ in capture.frames if i in by_if) == len(frames)


def _ev_route(c: object, prefix: str, shift: int) -> None:
    """Route PREFIX/48 by the 4-bit EV field at ``shift``: value 0 -> port 2, 1 -> port 3."""
    from common.p4runtime_client import P4RuntimeClient

    assert isinstance(c, P4RuntimeClient)
    c.insert(
        "MrcIngress.ipv6_route",
        {"hdr.ipv6.dst_addr": (ip6int(prefix), 48)},
        "MrcIngress.route_ev",
        {"group": 1, "shift": shift, "mask": 0xF, "fallback": 0},
    )
    for value, port in ((0, 2), (1, 3)):
        c.insert(
            "MrcIngress.ev_uplink",
            {"meta.ev_group": 1, "meta.ev_field": value},
            "MrcIngress.set_nexthop",
            nexthop(port),
        )


def test_structured_ev_selects_the_uplink_named_by_each_tier_field(
    lab: Lab, switch_kind: str
) -> None:
    """Leaf L -> {A1, A2} by EV bits 31:28, then A_i -> {k_i1, k_i2} by EV bits 27:24.

    EV = flow_label[15:0] << 16 | udp_sport (docs/switch.md), so the tier-0 field is flow-label
    bits 15:12 and the tier-1 field bits 11:8."""
    ns = lab.namespace("h")
    lab.wire("l1", "h0", None, ns)
    for i in (1, 2):
        lab.wire(f"l{i + 1}", f"a{i}1", None, None)  # L port i+1 <-> A_i port 1
        for j in (1, 2):
            lab.wire(f"a{i}{j + 1}", f"k{i}{j}", None, ns)  # A_i port j+1 <-> sink k_ij
    leaf = lab.start_switch(
        "L", {p: lab.ifname(f"l{p}") for p in (1, 2, 3)}, device_id=1, kind=switch_kind
    )
    aggs = [
        lab.start_switch(
            f"A{i}", {p: lab.ifname(f"a{i}{p}") for p in (1, 2, 3)}, device_id=1 + i,
            kind=switch_kind,
        )
        for i in (1, 2)
    ]
    clients = [connect(sw) for sw in (leaf, *aggs)]
    try:
        _ev_route(clients[0], "fd00:0:7::", 28)
        for c in clients[1:]:
            _ev_route(c, "fd00:0:7::", 24)
        rng = random.Random(5)
        dst = "fd00:0:7::2"
        expected: dict[tuple[int, int], str] = {}
        frames = []
        for n in range(24):
            f0, f1 = n % 2, (n // 2) % 2
            flow = rng.getrandbits(20) & ~0xFF00 | f0 << 12 | f1 << 8
            sport = rng.randrange(1024, 65536)
            expected[(flow, sport)] = lab.ifname(f"k{f0 + 1}{f1 + 1}")
            frames.append(mrc_frame(dst, sport=sport, flow_label=flow))
        # An EV whose tier-0 field names no uplink (value 5) is dropped and counted.
        frames.append(mrc_frame(dst, sport=999, flow_label=5 << 12))
        sinks = [lab.ifname(f"k{i}{j}") for i in (1, 2) for j in (1, 2)]
        sniffer = lab.sniff(ns, sinks, count=24, marks=0)
        lab.send(ns, lab.ifname("h0"), frames)
        capture = sniffer.result()
        got = {}
        for ifname, _t, data in capture.frames:
            pkt = parse(data)
            assert pkt[IPv6].hlim == 62  # two switches
            got[(pkt[IPv6].fl, pkt[UDP].sport)] = ifname
        assert got == expected
        misses = clients[0].read_counter("MrcIngress.drop_reason", DropReason.EV_MISS)
        assert misses[DropReason.EV_MISS][0] == 1
    finally:
        for c in clients:
            c.close()


def test_srv6_usid_shift_and_forward_hop_by_hop(lab: Lab, switch_kind: str) -> None:
    """S1 (uSID 0100) -> S2 (uSID 0200) -> host A (a01) or host B (a02) in block fc00:0::/32."""
    ns = lab.namespace("h")
    lab.wire("s11", "h0", None, ns)
    lab.wire("s12", "s21", None, None)
    lab.wire("s22", "ha", None, ns)
    lab.wire("s23", "hb", None, ns)
    s1 = lab.start_switch(
        "S1", {1: lab.ifname("s11"), 2: lab.ifname("s12")}, device_id=1, kind=switch_kind
    )
    s2 = lab.start_switch(
        "S2", {p: lab.ifname(f"s2{p}") for p in (1, 2, 3)}, device_id=2, kind=switch_kind
    )
    c1, c2 = connect(s1), connect(s2)
    try:
        for c, usid in ((c1, "fc00:0:100::"), (c2, "fc00:0:200::")):
            c.insert(
                "MrcIngress.my_usid",
                {"hdr.ipv6.dst_addr": (ip6int(usid), 48)},
                "MrcIngress.usid_shift",
            )
        route(c1, "fc00:0:200::", 48, 2)
        route(c2, "fc00:0:a01::", 48, 2)
        route(c2, "fc00:0:a02::", 48, 3)
        sends = {
            "fc00:0:100:200:a01::": ("fc00:0:a01::", lab.ifname("ha")),
            "fc00:0:100:200:a02::": ("fc00:0:a02::", lab.ifname("hb")),
        }
        frames = [
            mrc_frame(dst, sport=7000 + i, psn=i, payload=bytes([i]) * 8)
            for i in range(10)
            for dst in sends
        ]
        sniffer = lab.sniff(ns, [lab.ifname("ha"), lab.ifname("hb")], count=len(frames), marks=0)
        lab.send(ns, lab.ifname("h0"), frames)
        capture = sniffer.result()
        assert len(capture.frames) == len(frames)
        for sent, (ifname, _t, data) in zip(
            sorted(frames, key=lambda f: (parse(f)[UDP].sport, parse(f)[IPv6].dst)),
            sorted(capture.frames, key=lambda x: (parse(x[2])[UDP].sport, parse(x[2])[IPv6].dst)),
        ):
            original, pkt = parse(sent), parse(data)
            want_dst, want_if = sends[original[IPv6].dst]
            assert ifname == want_if
            assert pkt[IPv6].dst == want_dst  # shifted twice, zero filled
            assert pkt[IPv6].hlim == original[IPv6].hlim - 2
            assert bytes(pkt[UDP]) == bytes(original[UDP])  # transport untouched
    finally:
        c1.close()
        c2.close()

"""Helpers for the switch pipeline tests: frames built with scapy, table writes by name."""

from __future__ import annotations

import struct

from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from common.p4schema import PROGRAMS
from switch.pipeline import Pipeline
from switch.pipeline.control import INSERT, group_write, member_write, table_write
from switch.pipeline.state import ActionCall, Entry, Group, GroupMember, ProgramState

MRC = PROGRAMS["mrc_switch"]
OCS = PROGRAMS["ocs"]
HOST_MAC = "02:00:00:00:00:01"
SW_MAC = 0x020000000099


def ip6(text: str) -> int:
    import ipaddress

    return int(ipaddress.IPv6Address(text))


def mrc_headers(opcode: int = 0xCA, tsh: bool = False, psn: int = 1) -> bytes:
    """BTH + METH [+ TSETH] + RETH (+ ImmDt) for a write opcode (MRC layout)."""
    bth = struct.pack("!BBHB3sB3s", opcode, 0, 0xFFFF, 0, (0x10).to_bytes(3, "big"),
                      0x10 if tsh else 0, psn.to_bytes(3, "big"))
    ext = struct.pack("!HH", 1, 2)
    if tsh:
        ext += struct.pack("!I", 0x1234)
    ext += struct.pack("!QII", 0x1000, 0x77, 4096)
    if opcode in (0xC9, 0xCB):
        ext += struct.pack("!I", 0xABCD)
    return bth + ext


def frame(
    dst: str = "2001:db8:2::1",
    src: str = "2001:db8:1::1",
    sport: int = 4000,
    dscp: int = 10,
    ecn: int = 1,
    flow_label: int = 0,
    hlim: int = 64,
    payload: int = 256,
    opcode: int = 0xCA,
    tsh: bool = False,
) -> bytes:
    pkt = (
        Ether(dst="02:00:00:00:00:99", src=HOST_MAC)
        / IPv6(src=src, dst=dst, tc=(dscp << 2) | ecn, fl=flow_label, hlim=hlim)
        / UDP(sport=sport, dport=4791, chksum=0)
        / Raw(mrc_headers(opcode, tsh) + bytes(payload) + b"\x11\x22\x33\x44")
    )
    return bytes(pkt)


def srv6_frame(outer_dst: str, segments: list[str] | None = None, segments_left: int = 0,
               inner_dst: str = "2001:db8:2::1", payload: int = 64) -> bytes:
    inner = (
        IPv6(src="2001:db8:1::1", dst=inner_dst, tc=10 << 2)
        / UDP(sport=4000, dport=4791, chksum=0)
        / Raw(mrc_headers() + bytes(payload))
    )
    outer = IPv6(src="2001:db8:1::1", dst=outer_dst, tc=10 << 2, nh=41 if not segments else 43)
    if segments:
        srh = IPv6ExtHdrSegmentRouting(addresses=segments, segleft=segments_left, nh=41,
                                       lastentry=len(segments) - 1)
        return bytes(Ether(src=HOST_MAC, dst="02:00:00:00:00:99") / outer / srh / inner)
    return bytes(Ether(src=HOST_MAC, dst="02:00:00:00:00:99") / outer / inner)


def call(name: str, *params: int) -> ActionCall:
    return ActionCall(MRC.id(name), tuple(params))


def nexthop(port: int, dmac: int = 0x0200000000A0) -> ActionCall:
    return call("MrcIngress.set_nexthop", port, SW_MAC, dmac + port)


def add(state: ProgramState, table: str, key: tuple[object, ...], action: ActionCall | None = None,
        *, group_id: int | None = None, member_id: int | None = None) -> None:
    table_write(state, INSERT, state.table(table),
                Entry(key=key, action=action, group_id=group_id, member_id=member_id))


def add_route(state: ProgramState, prefix: str, plen: int, action: ActionCall) -> None:
    add(state, "MrcIngress.ipv6_route", ((ip6(prefix), plen),), action)


def add_ecmp_group(state: ProgramState, group: int, ports: list[int],
                   watch: bool = False) -> None:
    profile = state.profile("MrcIngress.ecmp_selector")
    members = []
    for port in ports:
        mid = group * 100 + port
        member_write(state, INSERT, profile, mid, nexthop(port))
        members.append(GroupMember(mid, 1, port if watch else None))
    group_write(state, INSERT, profile, Group(group, members))
    add(state, "MrcIngress.ecmp", (group,), group_id=group)


def mrc_pipeline() -> tuple[Pipeline, ProgramState]:
    pipe = Pipeline()
    state = pipe.commit(MRC)
    return pipe, state


def empty_queues(port: int, prio: int) -> tuple[int, int]:
    return (0, 0)

"""Differential test: p4c's JSON of p4/mrc_switch.p4 run by the p4json engine and by BMv2's
simple_switch, with the same table entries (direct tables, an action selector, a register)
and the same hypothesis-generated MRC frames (every path mode, malformed ones too), gives
the same frames on the same ports. Skipped without p4c and BMv2."""

from __future__ import annotations

import ipaddress
import random
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from switch.p4json.engine import Engine
from switch.stf import bmv2, embedded
from switch.stf.parse import Command, parse_text
from switch.stf.toolchain import P4C, SIMPLE_SWITCH, compile_p4, find_tool

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_tool(P4C) is None or find_tool(SIMPLE_SWITCH) is None,
                       reason=f"needs p4c ({P4C}) and BMv2 ({SIMPLE_SWITCH})"),
]
PORTS = range(1, 8)
BLOCK = "fc00:0:"  # uSID block fc00:0000::/32
ROUTES = {
    "2001:db8:1::": (48, "set_nexthop(port:2, smac:0x0200000000aa, dmac:0x020000000002)"),
    "2001:db8:2::": (48, "route_ecmp(group:1)"),
    "2001:db8:3::": (48, "route_ev(group:7, shift:16, mask:0x3, fallback:2)"),
    "2001:db8:4::": (48, "route_ev(group:8, shift:0, mask:0xff, fallback:0)"),
    "2001:db8:5::": (48, "drop()"),
    "2001:db8:6::": (64, "set_nexthop(port:5, smac:0x0200000000aa, dmac:0x020000000005)"),
    "fc00:0:200::": (48, "set_nexthop(port:6, smac:0x0200000000aa, dmac:0x020000000006)"),
}
DSTS = [*(ipaddress.IPv6Address(p) + 0x1234 for p in ROUTES),
        ipaddress.IPv6Address("2001:db8:9::1"), ipaddress.IPv6Address("fc00:0:100:200::"),
        ipaddress.IPv6Address("fc00:0:100::"), ipaddress.IPv6Address("fc00:0:300::")]


def setup_commands() -> str:
    lines = [
        "add dscp_class meta.dscp:10 set_class(class_id:1, priority:1, trimmable:1)",
        "add dscp_class meta.dscp:46 set_class(class_id:5, priority:7, trimmable:0)",
        "add dscp_class meta.dscp:0 set_class(class_id:0, priority:0, trimmable:0)",
        f"add my_usid hdr.ipv6.dst_addr:{int(ipaddress.IPv6Address(BLOCK + '100::'))}/48 "
        "usid_shift()",
        f"add my_usid hdr.ipv6.dst_addr:{int(ipaddress.IPv6Address(BLOCK + '300::'))}/48 "
        "usid_decap()",
        "add ev_uplink meta.ev_group:7 meta.ev_field:1 set_nexthop(port:3, smac:0x0200000000aa, "
        "dmac:0x020000000003)",
        "add ev_uplink meta.ev_group:7 meta.ev_field:2 set_nexthop(port:7, smac:0x0200000000aa, "
        "dmac:0x020000000007)",
        "add ev_uplink meta.ev_group:8 meta.ev_field:5 set_nexthop(port:4, smac:0x0200000000aa, "
        "dmac:0x020000000004)",
        "add port_config standard_metadata.egress_port:3 set_port_params("
        "ecn_threshold_bytes:0, trim_threshold_bytes:0, last_hop:1, trim_dscp:40, "
        "trim_priority:6)",
        "register_write MrcIngress.port_down 7 1",
    ]
    for prefix, (plen, action) in ROUTES.items():
        lines.append(f"add ipv6_route hdr.ipv6.dst_addr:{int(ipaddress.IPv6Address(prefix))}/"
                     f"{plen} {action}")
    for port in (2, 3, 4):  # members 0..2 of group 0 (= ecmp group 1), members 3..4 of group 1
        lines.append(f"act_prof_create_member MrcIngress.ecmp_selector MrcIngress.set_nexthop "
                     f"{port} 0x0200000000aa 0x02000000001{port}")
    for port in (5, 6):
        lines.append(f"act_prof_create_member MrcIngress.ecmp_selector MrcIngress.set_nexthop "
                     f"{port} 0x0200000000aa 0x02000000002{port}")
    lines += ["act_prof_create_group MrcIngress.ecmp_selector",
              "act_prof_create_group MrcIngress.ecmp_selector"]
    for m in (0, 1, 2):
        lines.append(f"act_prof_add_member_to_group MrcIngress.ecmp_selector {m} 0")
    for m in (3, 4):
        lines.append(f"act_prof_add_member_to_group MrcIngress.ecmp_selector {m} 1")
    lines += ["table_indirect_add_with_group MrcIngress.ecmp 1 => 0",
              "table_indirect_add_with_group MrcIngress.ecmp 2 => 1"]
    lines += [f"expect {p}" for p in PORTS]  # interfaces; contents compared below
    return "\n".join(lines) + "\n"


@st.composite
def mrc_frame(draw: st.DrawFn) -> bytes:
    dst = draw(st.sampled_from(DSTS)).packed
    src = ipaddress.IPv6Address(0x20010DB8_0000_0000_0000_0000_0000_0000 | draw(st.integers(0, 2**64))).packed
    dscp = draw(st.sampled_from([0, 10, 46, 12]))
    ecn = draw(st.integers(0, 3))
    flow = draw(st.integers(0, 0xFFFFF))
    hlim = draw(st.sampled_from([0, 1, 2, 64]))
    opcode = draw(st.sampled_from([0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xCB, 0x11, 0x04]))
    tsh = draw(st.booleans())
    sport = draw(st.integers(0, 0xFFFF))
    dport = draw(st.sampled_from([4791, 4791, 4791, 53]))
    payload = bytes(draw(st.integers(0, 64)))
    bth = struct.pack("!BBHB3sB3s", opcode, 0, 0xFFFF, 0, b"\x00\x00\x10",
                      0x10 if tsh else 0, b"\x00\x00\x01")
    ext = b""
    if 0xC6 <= opcode <= 0xCB:
        ext = struct.pack("!I", 1) + (struct.pack("!I", 2) if tsh else b"")
        ext += struct.pack("!QII", 0x1000, 7, len(payload))
        if opcode in (0xC9, 0xCB):
            ext += struct.pack("!I", 0xABCD)
    body = bth + ext + payload + b"\x11\x22\x33\x44"
    udp = struct.pack("!HHHH", sport, dport, 8 + len(body), 0) + body
    mode = draw(st.sampled_from(["plain", "plain", "srh", "encap"]))
    tc = (dscp << 2) | ecn
    if mode == "plain":
        l3 = struct.pack("!IHBB", 6 << 28 | tc << 20 | flow, len(udp), 17, hlim) + src + dst + udp
    else:
        inner = struct.pack("!IHBB", 6 << 28 | tc << 20 | flow, len(udp), 17, 64) + src + dst + udp
        outer_dst = ipaddress.IPv6Address(BLOCK + "100:200::").packed
        if mode == "srh":
            segs = [ipaddress.IPv6Address(BLOCK + "200::").packed, dst]
            left = draw(st.integers(0, 2))
            srh = struct.pack("!BBBBBBH", 41, 2 * len(segs), 4, left, len(segs) - 1, 0, 0)
            ext_hdr = srh + b"".join(segs)
            l3 = (struct.pack("!IHBB", 6 << 28 | tc << 20 | flow, len(ext_hdr) + len(inner), 43,
                              hlim) + src + outer_dst + ext_hdr + inner)
        else:
            l3 = (struct.pack("!IHBB", 6 << 28 | tc << 20 | flow, len(inner), 41, hlim) + src
                  + outer_dst + inner)
    frame = bytes.fromhex("020000000099020000000001") + b"\x86\xdd" + l3
    damage = draw(st.sampled_from(["none"] * 6 + ["cut", "len", "ver", "garbage"]))
    if damage == "cut":
        frame = frame[: draw(st.integers(0, len(frame)))]
    elif damage == "len":
        i = draw(st.sampled_from([18, 58]))  # IPv6 payload length / a UDP length byte
        frame = frame[:i] + bytes([draw(st.integers(0, 255))]) + frame[i + 1:]
    elif damage == "ver":
        frame = frame[:14] + bytes([draw(st.integers(0, 255))]) + frame[15:]
    elif damage == "garbage":
        frame = bytes(draw(st.lists(st.integers(0, 255), max_size=80)))
    return frame


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mrc") / "mrc_switch.json"
    return compile_p4(ROOT / "p4" / "mrc_switch.p4", out)


def outputs_both(program: Path, commands: list[Command],
                 work: Path) -> tuple[dict[int, list[bytes]], dict[int, list[bytes]]]:
    engine = Engine(program.read_bytes(), clock=lambda: 0.0)
    mine = embedded.execute(engine, commands)
    assert engine.stats.errors == 0
    theirs = bmv2.execute(program, commands, work, ("--priority-queues", "8"))
    return mine, theirs


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow,
                                                                  HealthCheck.data_too_large])
@given(frames=st.lists(mrc_frame(), min_size=120, max_size=160))
def test_engine_and_simple_switch_send_the_same_frames(
    program: Path, tmp_path_factory: pytest.TempPathFactory, frames: list[bytes]
) -> None:
    text = setup_commands() + "".join(f"packet 1 {f.hex()}\n" for f in frames if f)
    commands = parse_text(text)
    mine, theirs = outputs_both(program, commands, tmp_path_factory.mktemp("bmv2"))
    for port in PORTS:  # BMv2 may reorder across its priority queues: compare as multisets
        assert sorted(mine.get(port, [])) == sorted(theirs.get(port, [])), f"port {port}"


def test_every_path_mode_forwards_the_same_on_both(
    program: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A fixed sample that reaches every route kind: next hop, ECMP (spread over members),
    structured EV with and without fallback, uSID shift, decap, drops."""
    rng = random.Random(1)
    frames: list[bytes] = []
    for dst in DSTS:
        for _ in range(12):
            frames.append(_frame(dst.packed, rng))
    text = setup_commands() + "".join(f"packet 1 {f.hex()}\n" for f in frames)
    mine, theirs = outputs_both(program, parse_text(text), tmp_path_factory.mktemp("bmv2"))
    for port in PORTS:
        assert sorted(mine.get(port, [])) == sorted(theirs.get(port, [])), f"port {port}"
    used = {port for port, got in mine.items() if got}
    assert {2, 3, 4, 5, 6} <= used  # next hop, ECMP members, EV uplinks, uSID route


def _frame(dst: bytes, rng: random.Random) -> bytes:
    body = struct.pack("!BBHB3sB3s", 0xCA, 0, 0xFFFF, 0, b"\x00\x00\x10", 0, b"\x00\x00\x01")
    body += struct.pack("!I", 1) + struct.pack("!QII", 0x1000, 7, 16) + bytes(16) + bytes(4)
    udp = struct.pack("!HHHH", rng.getrandbits(16), 4791, 8 + len(body), 0) + body
    tc = 10 << 2 | 1
    src = rng.getrandbits(64).to_bytes(8, "big") * 2
    ip = struct.pack("!IHBB", 6 << 28 | tc << 20 | rng.getrandbits(20), len(udp), 17, 64)
    return bytes.fromhex("020000000099020000000001") + b"\x86\xdd" + ip + src + dst + udp

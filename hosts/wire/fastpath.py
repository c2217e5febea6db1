"""Optional C fast path of the codec: compiles the stack plans into tables for _fastwire.c.

The C extension (``hosts/wire/_fastwire.c``, built by common/cext.py) is a small table-driven
interpreter: it knows no header layout. This module hands it, at import, one *program* per
header stack (frame with Ethernet, SRv6 inner stack, MRC-only packet; per opcode and TSETH
presence) plus two for the SRv6 outer headers (Ethernet + outer IPv6, SRH), made from the same
``compile.plan_stack`` plans the Python generator uses. A
program is a list of field operations (word offset and size in the stack, shift, width, kind,
which object and slot holds the value, where an encoded value comes from, what a decoded value
must equal, which register it feeds), the classes to instantiate and the slots of MrcPacket
left None. The C functions handle the valid common case and give everything else (bad
lengths, unknown opcodes, wrong types, bad ICRC, unusual arguments) to the Python reference,
so errors and edge cases are the reference's by construction. ``install`` returns None when the extension is unbuilt or MRCNET_PURE_PYTHON=1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from types import ModuleType
from typing import Any

import hosts.wire.icrc as icrc
import hosts.wire.layout as L
from common import cext
from hosts.wire.compile import field_shift, plan_stack
from hosts.wire.enums import ICRC_LEN, ROCEV2_UDP_PORT, Opcode
from hosts.wire.headers import Bth
from hosts.wire.packet import Frame, MrcPacket, Srv6Outer
from hosts.wire.stacks import (
    FRAME_FIELDS,
    FRAME_SOURCE,
    HEADER_CLASSES,
    STACK_KEYS,
    frame_parts,
    packet_parts,
)

MODULE = "hosts.wire._fastwire"

# Tables (C: T_ETH, T_INNER, T_PACKET, then the SRv6 outer programs T_OUTER, T_SRH) and
# object indices of a program (SRv6 outer programs: 0 frame, 1 Srv6Outer).
TABLE_ETH, TABLE_INNER, TABLE_PACKET, TABLE_OUTER, TABLE_SRH = range(5)
OBJ_FRAME, OBJ_PKT, OBJ_BTH = 0, 1, 2
OBJ_SRV6 = 1
# Field kinds (C: K_*): layout kinds plus "o", the opcode (decoded as the Opcode member).
KINDS = {"u": 0, "s": 1, "f": 2, "b": 3, "o": 4}
# Where an encoded value comes from (C: SRC_*): an object slot, a constant, a register.
SRC_NONE, SRC_SLOT, SRC_CONST, SRC_REG = range(4)
# Registers (C: R_*): decoded fields are copied into theirs (the C code checks lengths with
# them as the reference does); encoded SRC_REG fields take the value C derives (lengths, pad,
# tsh, next headers).
R_ULEN, R_PLEN, R_PAD, R_TSH, R_NH, R_EXTLEN, R_LEFT, R_LAST = range(8)

DECODE_EXPECT = {  # values the Python decoder checks (stacks.Stack.decode); else: fall back
    "eth.ethertype": L.ETHERTYPE_IPV6,
    "ip.version": 6,
    "ip.next_header": L.IPPROTO_UDP,
    "udp.dport": ROCEV2_UDP_PORT,
}
REGISTER = {
    "ip.payload_len": R_PLEN,
    "udp.length": R_ULEN,
    "bth.pad": R_PAD,
    "bth.tsh": R_TSH,
}
_FRAME_SLOT = {q: slot for slot, q in FRAME_FIELDS.items()}

# SRv6 outer headers (codec._srv6_outer / codec._encode_srv6): encoding source, decoding
# destination (a slot of the Frame or of the Srv6Outer), register and required value.
OUTER_SOURCE: dict[str, tuple[int, object]] = {  # qualified field -> (SRC_*, slot/const/reg)
    "eth.dst": (SRC_SLOT, "eth_dst"),
    "eth.src": (SRC_SLOT, "eth_src"),
    "eth.ethertype": (SRC_CONST, L.ETHERTYPE_IPV6),
    "ip.version": (SRC_CONST, 6),
    "ip.dscp": (SRC_SLOT, "dscp"),
    "ip.ecn": (SRC_SLOT, "ecn"),
    "ip.flow_label": (SRC_SLOT, "flow_label"),
    "ip.payload_len": (SRC_REG, R_PLEN),
    "ip.next_header": (SRC_REG, R_NH),  # SRH or IPv6-in-IPv6
    "ip.hop_limit": (SRC_SLOT, "hop_limit"),
    "ip.src": (SRC_SLOT, "src"),
    "ip.dst": (SRC_SLOT, "dst"),
    "srh.next_header": (SRC_CONST, L.IPPROTO_IPV6),
    "srh.hdr_ext_len": (SRC_REG, R_EXTLEN),
    "srh.routing_type": (SRC_CONST, L.SRH_ROUTING_TYPE),
    "srh.segments_left": (SRC_SLOT, "segments_left"),
    "srh.last_entry": (SRC_REG, R_LAST),
    "srh.flags": (SRC_CONST, 0),
    "srh.tag": (SRC_CONST, 0),
}
OUTER_REGISTER = {
    "ip.payload_len": R_PLEN,
    "ip.next_header": R_NH,
    "srh.next_header": R_NH,
    "srh.hdr_ext_len": R_EXTLEN,
    "srh.segments_left": R_LEFT,
    "srh.last_entry": R_LAST,
}
OUTER_EXPECT = {
    "eth.ethertype": L.ETHERTYPE_IPV6,
    "ip.version": 6,
    "srh.routing_type": L.SRH_ROUTING_TYPE,
}

Op = tuple[int, int, int, int, int, int, str | None, int, int, int, int]


@dataclass(frozen=True)
class Program:
    """One stack as C executes it (see ``as_tuple`` for the order C parses)."""

    table: int
    key: int
    tsh: bool
    size: int
    ip_at: int  # IPv6 header offset in the stack; -1 for MRC-only stacks
    has_payload: bool
    opcode: Opcode
    objects: tuple[tuple[type, str], ...]  # (class, MrcPacket slot) of objects 2, 3, ...
    none_slots: tuple[str, ...]  # MrcPacket slots a decoded packet sets to None
    ops: tuple[Op, ...]

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.table, self.key, int(self.tsh), self.size, self.ip_at, int(self.has_payload),
            self.opcode, self.objects, self.none_slots, self.ops,
        )  # fmt: skip


def build_program(table: int, op: Opcode, tsh: bool) -> Program:
    """Translate the plan of one stack into field operations (no bit position is chosen here)."""
    if table == TABLE_PACKET:
        attrs, parts = packet_parts(op, tsh)
    else:
        attrs, parts = frame_parts(op, tsh, table == TABLE_ETH)
    plan = plan_stack(parts)
    index = {"bth": OBJ_BTH, **{a: OBJ_BTH + 1 + i for i, a in enumerate(attrs)}}
    ops: list[Op] = []
    decoded: set[tuple[int, str]] = set()
    for w in plan.words:
        for q, f in w.fields:
            prefix, name = q.split(".", 1)
            obj, slot, src, const = -1, None, SRC_NONE, 0
            if prefix in index:
                obj, slot, src = index[prefix], name, SRC_SLOT
                if q in REGISTER:  # bth.pad, bth.tsh: derived by the encoder
                    src = SRC_REG
            else:
                source = FRAME_SOURCE[q]
                if source == "ulen":
                    src = SRC_REG
                elif source.isdigit():
                    src, const = SRC_CONST, int(source)
                elif source.startswith("frame."):
                    src = SRC_SLOT
                else:
                    raise ValueError(f"{q}: no encoding source {source!r}")
                if q in _FRAME_SLOT:  # decoded into the Frame
                    obj, slot = OBJ_FRAME, _FRAME_SLOT[q]
                    if src == SRC_SLOT and source != f"frame.{slot}":
                        raise ValueError(f"{q}: encoded from {source}, decoded into {slot}")
            if obj >= 0 and slot is not None:
                decoded.add((obj, slot))
            kind = "o" if q == "bth.opcode" else f.kind
            ops.append(
                (
                    w.start, w.size, field_shift(w, f), f.width, KINDS[kind], obj, slot, src,
                    const, DECODE_EXPECT.get(q, -1), REGISTER.get(q, -1),
                )
            )  # fmt: skip
    objects = ((Bth, "bth"), *((HEADER_CLASSES[a], a) for a in attrs))
    _check_coverage(table, objects, decoded)
    none_slots = tuple(
        f.name
        for f in dataclass_fields(MrcPacket)
        if f.name not in ("bth", "payload", "trimmed", *attrs)
    )
    ip_at = -1 if table == TABLE_PACKET else (L.ETH.size if table == TABLE_ETH else 0)
    return Program(
        table, (int(op) << 1) | tsh, tsh, plan.size, ip_at, op in L.PAYLOAD_OPCODES, op,
        objects, none_slots, tuple(ops),
    )  # fmt: skip


def _check_coverage(
    table: int, objects: tuple[tuple[type, str], ...], decoded: set[tuple[int, str]]
) -> None:
    """Every slot of every decoded object is set by exactly the program or by C's fixed stores."""
    want = set()
    if table != TABLE_PACKET:
        fixed = {"srv6"} | ({"eth_dst", "eth_src"} if table == TABLE_INNER else set())
        want |= {(OBJ_FRAME, f.name) for f in dataclass_fields(Frame) if f.name not in fixed}
    for i, (cls, _slot) in enumerate(objects):
        want |= {(OBJ_BTH + i, f.name) for f in dataclass_fields(cls)}
    if decoded != want:
        raise ValueError(f"program slots differ: missing {want - decoded}, extra {decoded - want}")


def outer_program(table: int) -> tuple[Any, ...]:
    """SRv6 outer program (C tuple layout): Ethernet + outer IPv6, or the SRH fixed part."""
    parts = [("eth", L.ETH), ("ip", L.IPV6)] if table == TABLE_OUTER else [("srh", L.SRH)]
    plan = plan_stack(parts)
    ops: list[Op] = []
    decoded = set()
    for w in plan.words:
        for q, f in w.fields:
            src, what = OUTER_SOURCE[q]
            obj, slot, const = -1, None, 0
            if src == SRC_SLOT:
                assert isinstance(what, str)
                obj, slot = (OBJ_FRAME if q.startswith("eth.") else OBJ_SRV6), what
                decoded.add((obj, slot))
            elif src == SRC_CONST:
                assert isinstance(what, int)
                const = what
            elif what != OUTER_REGISTER.get(q):
                raise ValueError(f"{q}: encoded from register {what}, decoded into another")
            ops.append(
                (
                    w.start, w.size, field_shift(w, f), f.width, KINDS[f.kind], obj, slot, src,
                    const, OUTER_EXPECT.get(q, -1), OUTER_REGISTER.get(q, -1),
                )
            )  # fmt: skip
    if table == TABLE_OUTER:
        want = {(OBJ_FRAME, "eth_dst"), (OBJ_FRAME, "eth_src")} | {
            (OBJ_SRV6, f.name)
            for f in dataclass_fields(Srv6Outer)
            if f.name not in ("segments", "segments_left")
        }
    else:
        want = {(OBJ_SRV6, "segments_left")}
    if decoded != want:
        raise ValueError(f"outer program slots differ: {want ^ decoded}")
    return (table, 0, 0, plan.size, -1, 0, None, (), (), tuple(ops))


def programs() -> list[Program]:
    """Every stack of every table."""
    return [
        build_program(table, op, tsh)
        for table in (TABLE_ETH, TABLE_INNER, TABLE_PACKET)
        for op, tsh in STACK_KEYS.values()
    ]


def config(references: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Everything C needs: classes, sizes and offsets from the layouts, ICRC, references."""
    tsh = L.BTH.field("tsh")
    opcode = L.BTH.field("opcode")
    if tsh.width != 1 or opcode.width != 8 or opcode.bit != 7:
        raise ValueError("the stack key needs a 1-bit tsh and a byte-aligned 8-bit opcode")
    return {
        "frame": Frame,
        "packet": MrcPacket,
        "bth": Bth,
        "srv6": Srv6Outer,
        "opcode_byte": opcode.byte,
        "tsh_byte": tsh.byte,
        "tsh_mask": 1 << tsh.bit,
        "bth_len": L.BTH.size,
        "eth_len": L.ETH.size,
        "ip_len": L.IPV6.size,
        "ip_nh_byte": L.IPV6.field("next_header").byte,
        "udp_len": L.UDP.size,
        "srh_len": L.SRH.size,
        "seg_len": 16,
        "icrc_len": ICRC_LEN,
        "pad_mask": 3,
        "proto_udp": L.IPPROTO_UDP,
        "proto_ipv6": L.IPPROTO_IPV6,
        "proto_routing": L.IPPROTO_ROUTING,
        "srh_unit": 8,  # RFC 8754: hdr_ext_len counts 8-octet units
        "max_segments": ((1 << L.SRH.field("hdr_ext_len").width) - 1) * 8 // 16,
        "crc32": icrc.crc32,
        "seed": icrc.ICRC_SEED,
        "mask": icrc.ICRC_MASK.to_bytes(icrc.ICRC_MASK_LEN, "big"),
        "programs": [
            *(p.as_tuple() for p in programs()),
            outer_program(TABLE_OUTER),
            outer_program(TABLE_SRH),
        ],
        **references,
    }


def install(references: dict[str, Callable[..., Any]]) -> ModuleType | None:
    """Load and configure the extension; None (reason in ``why_missing``) for pure Python.

    ``references`` are the Python functions C falls back to: encode_frame, decode_frame,
    encode_packet, decode_packet.
    """
    mod = cext.load(MODULE)
    if mod is None:
        return None
    mod.configure(config(references))
    return mod


def why_missing() -> str:
    return cext.why_missing(MODULE)

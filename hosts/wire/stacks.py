"""Generated whole-frame encoders/decoders, one per (opcode, TSETH present, Ethernet included).

A stack is Ethernet (plain frames only), IPv6, UDP, BTH and the opcode's extension headers.
For each stack this module generates Python source that packs or unpacks every header with one
precompiled ``struct.Struct`` call, builds the dataclass instances directly (``object.__new__``
and slot stores, which skips an ``__init__`` call per object), checks lengths, copies or slices
the payload and computes or verifies the ICRC. The layouts come from layout.py through
compile.plan_stack; nothing here knows a bit position.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields as dataclass_fields
from typing import TypeVar

import hosts.wire.layout as L
from hosts.wire.compile import Word, generate, plan_stack
from hosts.wire.enums import ICRC_LEN, ROCEV2_UDP_PORT, Opcode
from hosts.wire.errors import WireError
from hosts.wire.headers import (
    Aeth,
    Bth,
    CcState,
    Eeth,
    Erth,
    ImmDt,
    Meth,
    Neth,
    Peth,
    Reth,
    Seth,
    Tseth,
)
from hosts.wire.icrc import ICRC_MASK, ICRC_MASK_LEN, ICRC_SEED, compute_icrc, crc32, read_icrc
from hosts.wire.packet import Frame, MrcPacket

HEADER_CLASSES: dict[str, type] = {  # MrcPacket attribute -> header dataclass
    "meth": Meth,
    "tseth": Tseth,
    "reth": Reth,
    "immdt": ImmDt,
    "aeth": Aeth,
    "seth": Seth,
    "cc_state": CcState,
    "neth": Neth,
    "peth": Peth,
    "erth": Erth,
    "eeth": Eeth,
}

# Where each network-layer field comes from when encoding: a Frame attribute, a constant or
# "ulen" (the UDP length, also the inner IPv6 payload length).
FRAME_SOURCE = {
    "eth.dst": "frame.eth_dst",
    "eth.src": "frame.eth_src",
    "eth.ethertype": f"{L.ETHERTYPE_IPV6}",
    "ip.version": "6",
    "ip.dscp": "frame.dscp",
    "ip.ecn": "frame.ecn",
    "ip.flow_label": "frame.flow_label",
    "ip.payload_len": "ulen",
    "ip.next_header": f"{L.IPPROTO_UDP}",
    "ip.hop_limit": "frame.hop_limit",
    "ip.src": "frame.ip_src",
    "ip.dst": "frame.ip_dst",
    "udp.sport": "frame.udp_sport",
    "udp.dport": "frame.udp_dport",
    "udp.length": "ulen",
    "udp.checksum": "0",
}
FRAME_FIELDS = {  # Frame attribute -> qualified field it is decoded from
    "eth_dst": "eth.dst",
    "eth_src": "eth.src",
    "ip_src": "ip.src",
    "ip_dst": "ip.dst",
    "dscp": "ip.dscp",
    "ecn": "ip.ecn",
    "flow_label": "ip.flow_label",
    "hop_limit": "ip.hop_limit",
    "udp_sport": "udp.sport",
    "udp_dport": "udp.dport",
}
_IP = L.IPV6.size
_UDP = L.UDP.size
_ETH = L.ETH.size


def packet_parts(op: Opcode, tsh: bool) -> tuple[list[str], list[tuple[str, L.Layout]]]:
    """(MrcPacket attributes after the BTH, (prefix, layout) parts) of an MRC-only stack."""
    attrs = [a for a in L.OPCODE_HEADERS[op] if tsh or a not in L.OPTIONAL_HEADERS]
    return attrs, [("bth", L.BTH), *((a, L.MRC_HEADERS[a]) for a in attrs)]


def frame_parts(
    op: Opcode, tsh: bool, with_eth: bool
) -> tuple[list[str], list[tuple[str, L.Layout]]]:
    """Like ``packet_parts`` with [Ethernet,] IPv6 and UDP in front (one frame stack)."""
    attrs, mrc = packet_parts(op, tsh)
    parts = [("eth", L.ETH)] if with_eth else []
    return attrs, [*parts, ("ip", L.IPV6), ("udp", L.UDP), *mrc]


class Stack:
    """Generated functions of one header stack.

    ``decode(mv, start, limit, eth_dst, eth_src, srv6, verify) -> (Frame, MrcPacket)`` parses a
    stack that starts at ``start`` in ``mv`` (bytes up to ``limit`` belong to the packet).
    ``encode(buf, mv, start, frame, pkt, tsh) -> end`` writes it and returns the end offset
    (after the ICRC). Both raise WireError; the caller guarantees ``start + size <= limit``.
    """

    __slots__ = ("decode", "encode", "has_payload", "op", "size", "source")

    def __init__(self, op: Opcode, tsh: bool, with_eth: bool) -> None:
        attrs, parts = frame_parts(op, tsh, with_eth)
        plan = plan_stack(parts)
        self.op = op
        self.size = plan.size
        self.has_payload = op in L.PAYLOAD_OPCODES
        x = plan.extract
        ip_at = _ETH if with_eth else 0
        lines = [
            "def decode(mv, start, limit, eth_dst, eth_src, srv6, verify, _u=_st.unpack_from):",
            f"    {plan.word_vars} = _u(mv, start)",
        ]
        if with_eth:
            lines += [
                f"    if {x['eth.ethertype']} != {L.ETHERTYPE_IPV6}:",
                f'        raise _E(f"not IPv6 (ethertype {{{x["eth.ethertype"]}:#06x}})", start + 12)',
            ]
        lines += [
            f"    ip_off = start + {ip_at}",
            f"    if {x['ip.version']} != 6:",
            f'        raise _E(f"IP version {{{x["ip.version"]}}}, expected 6", ip_off)',
            f"    if {x['ip.next_header']} != {L.IPPROTO_UDP}:",
            f'        raise _E(f"inner IPv6 next header {{{x["ip.next_header"]}}} is not UDP", ip_off + 6)',
            f"    ip_end = ip_off + {_IP} + {x['ip.payload_len']}",
            "    if ip_end > limit:",
            f'        raise _E(f"IPv6 payload length {{{x["ip.payload_len"]}}} exceeds the {{limit - ip_off}} bytes", ip_off + 4)',
            f"    if {x['udp.dport']} != {ROCEV2_UDP_PORT}:",
            f'        raise _E(f"UDP destination port {{{x["udp.dport"]}}} is not RoCEv2 (4791)", ip_off + {_IP + 2})',
            f"    ulen = {x['udp.length']}",
            f"    end = ip_off + {_IP} + ulen",
            f"    if end > ip_end or ulen < {_UDP}:",
            f'        raise _E(f"bad UDP length {{ulen}}", ip_off + {_IP + 4})',
            f"    hdr_end = start + {plan.size}",
            "    if hdr_end > end:",
            f'        raise _E(f"UDP length {{ulen}} too short for {op.name} headers", ip_off + {_IP + 4})',
        ]
        lines += _build_object("bth", "_Bth", [f.name for f in L.BTH.fields], x, {"opcode": "_op"})
        for a in attrs:
            lines += _build_object(a, f"_{a}", [f.name for f in L.MRC_HEADERS[a].fields], x, {})
        lines.append("    pkt = _new(_Pkt)")
        for slot in (f.name for f in dataclass_fields(MrcPacket)):
            if slot in ("payload", "trimmed"):
                continue  # set once the payload is known, below
            value = "bth" if slot == "bth" else slot if slot in attrs else "None"
            lines.append(f"    pkt.{slot} = {value}")
        lines.append("    frame = _new(_Frame)")
        for slot in (f.name for f in dataclass_fields(Frame)):
            if slot == "srv6":
                value = "srv6"
            elif slot in ("eth_dst", "eth_src") and not with_eth:
                value = slot
            else:
                value = x[FRAME_FIELDS[slot]]
            lines.append(f"    frame.{slot} = {value}")
        if self.has_payload:
            lines += [
                "    if hdr_end == end:",
                '        pkt.payload = b""',
                "        pkt.trimmed = True",
                "        return frame, pkt",
            ]
        lines += [
            f"    if end - hdr_end < {ICRC_LEN}:",
            '        raise _E("truncated ICRC", hdr_end)',
            f"    end -= {ICRC_LEN}",
            "    if verify:",
            "        want = _icrc(mv, ip_off, end)",
            "        got = _read_icrc(mv, end)",
            "        if got != want:",
            '            raise _E(f"bad ICRC {got:#010x}, expected {want:#010x}", end)',
        ]
        if self.has_payload:
            lines += [
                "    pad = bth.pad",
                "    if end - hdr_end < pad:",
                '        raise _E(f"pad count {pad} exceeds the {end - hdr_end} payload bytes", hdr_end)',
                "    pkt.payload = mv[hdr_end : end - pad]",
                "    pkt.trimmed = False",
            ]
        else:
            lines += [
                "    if end != hdr_end:",
                f'        raise _E(f"{{end - hdr_end}} unexpected bytes after {op.name} headers", hdr_end)',
                '    pkt.payload = b""',
                "    pkt.trimmed = False",
            ]
        lines.append("    return frame, pkt")

        def source_of(q: str) -> str:
            return FRAME_SOURCE.get(q, q)

        lines += [
            "def encode(buf, mv, start, frame, pkt, tsh, _p=_st.pack_into):",
            "    bth = pkt.bth",
            *(f"    {a} = pkt.{a}" for a in attrs),
        ]
        if self.has_payload:
            lines += [
                "    payload = pkt.payload",
                "    plen = len(payload)",
                "    pad = -plen & 3",
                "    if bth.pad != pad or bth.tsh != tsh:",
                "        bth.pad = pad",
                "        bth.tsh = tsh",
                f"    hdr_end = start + {plan.size}",
                "    end = hdr_end + plen + pad",
            ]
        else:
            lines += [
                "    if bth.pad or bth.tsh:",
                "        bth.pad = 0",
                "        bth.tsh = False",
                f"    end = start + {plan.size}",
            ]
        # The ICRC is computed in place: the stack is first packed with its ICRC-variant bits
        # all ones, the CRC runs over the buffer, then the words holding variant bits are
        # rewritten with their real values (no scratch copy of the masked header).
        masks = _variant_word_masks(plan.words, ip_at)
        packed, packed_fast = (
            [
                f"{plan.insert_word(w, source_of, _VARIANT, fast)} | {masks[i]:#x}"
                if masks[i]
                else plan.insert_word(w, source_of, unchecked=fast)
                for i, w in enumerate(plan.words)
            ]
            for fast in (False, True)
        )
        patches = []
        for i, w in enumerate(plan.words):
            if masks[i]:
                real = plan.insert_word(w, source_of)
                if w.code == "B":
                    patches.append(f"    mv[start + {w.start}] = {real}")
                else:
                    patches.append(f"    _pw_{w.code}(buf, start + {w.start}, {real})")
        lines += [
            f"    total = end + {ICRC_LEN}",
            "    if total > len(mv):",
            '        raise _E(f"buffer too small: need {total} bytes, have {len(mv)}", start)',
            f"    ip_off = start + {ip_at}",
            f"    ulen = total - ip_off - {_IP}",
            "    if ulen > 0xFFFF:",
            '        raise _E(f"packet too large: UDP length {ulen} exceeds 65535", ip_off + 4)',
            "    try:",
            f"        _p(buf, start, {', '.join(packed_fast)})",
            "    except _StructError:  # a value out of range: write it modulo 2**width",
            f"        _p(buf, start, {', '.join(packed)})",
        ]
        if self.has_payload:
            lines += [
                "    if plen:",
                "        mv[hdr_end : hdr_end + plen] = payload",
                "    if pad:",
                "        mv[hdr_end + plen : end] = _ZEROS[pad]",
            ]
        lines += [
            "    crc = _crc32(mv[ip_off:end], _SEED)",
            *patches,
            "    _pack_icrc(buf, end, crc)",
            "    return total",
        ]
        src = "\n".join(lines) + "\n"
        ns = generate(
            src,
            f"stack {op.name}{' tseth' if tsh else ''}{' eth' if with_eth else ''}",
            _st=plan.struct,
            _op=op,
            _new=object.__new__,
            _Bth=Bth,
            _Frame=Frame,
            _Pkt=MrcPacket,
            _E=WireError,
            _icrc=compute_icrc,
            _read_icrc=read_icrc,
            _pack_icrc=_PACK_ICRC,
            _ZEROS=(b"", b"\x00", b"\x00\x00", b"\x00\x00\x00"),
            _crc32=crc32,
            _StructError=struct.error,
            _SEED=ICRC_SEED,
            _pw_H=struct.Struct("!H").pack_into,
            _pw_I=struct.Struct("!I").pack_into,
            _pw_Q=struct.Struct("!Q").pack_into,
            **{f"_{a}": HEADER_CLASSES[a] for a in attrs},
        )
        self.decode: Callable[..., tuple[Frame, MrcPacket]] = ns["decode"]
        self.encode: Callable[..., int] = ns["encode"]  # returns the end offset
        self.source = src


def _build_object(
    var: str, cls: str, names: list[str], x: dict[str, str], override: dict[str, str]
) -> list[str]:
    prefix = var
    lines = [f"    {var} = _new({cls})"]
    for n in names:
        lines.append(f"    {var}.{n} = {override.get(n, x[f'{prefix}.{n}'])}")
    return lines


_PACK_ICRC = struct.Struct("<I").pack_into

# Qualified names of the fields the ICRC treats as all ones (plus the reserved bits of BTH
# byte 4, which are no field).
_VARIANT = frozenset(
    [f"ip.{n}" for n in L.ICRC_IPV6_VARIANT]
    + [f"udp.{n}" for n in L.ICRC_UDP_VARIANT]
    + [f"bth.{f.name}" for f in L.BTH.fields if f.byte == L.ICRC_BTH_VARIANT_BYTE]
)


def _variant_word_masks(words: tuple[Word, ...], ip_at: int) -> list[int]:
    """Per word, the bits the ICRC masks to ones (from icrc.ICRC_MASK over IPv6+UDP+BTH)."""
    total = ICRC_MASK_LEN * 8
    out = []
    for w in words:
        lo = (w.start - ip_at) * 8
        value = 0
        for bit in range(w.size * 8):
            pos = lo + bit
            if 0 <= pos < total and (ICRC_MASK >> (total - 1 - pos)) & 1:
                value |= 1 << (w.size * 8 - 1 - bit)
        out.append(value)
    return out


class PacketStack:
    """Generated functions of the MRC part alone (BTH + extension headers, no ICRC).

    ``decode(mv, start, end) -> MrcPacket`` (caller guarantees ``start + size <= end``) and
    ``encode(buf, mv, start, pkt, tsh) -> end``; both raise WireError.
    """

    __slots__ = ("decode", "encode", "has_payload", "op", "size", "source")

    def __init__(self, op: Opcode, tsh: bool) -> None:
        attrs, parts = packet_parts(op, tsh)
        plan = plan_stack(parts)
        self.op = op
        self.size = plan.size
        self.has_payload = op in L.PAYLOAD_OPCODES
        x = plan.extract
        lines = [
            "def decode(mv, start, end, _u=_st.unpack_from):",
            f"    {plan.word_vars} = _u(mv, start)",
            f"    hdr_end = start + {plan.size}",
        ]
        lines += _build_object("bth", "_Bth", [f.name for f in L.BTH.fields], x, {"opcode": "_op"})
        for a in attrs:
            lines += _build_object(a, f"_{a}", [f.name for f in L.MRC_HEADERS[a].fields], x, {})
        lines.append("    pkt = _new(_Pkt)")
        for slot in (f.name for f in dataclass_fields(MrcPacket)):
            if slot not in ("payload", "trimmed"):
                value = "bth" if slot == "bth" else slot if slot in attrs else "None"
                lines.append(f"    pkt.{slot} = {value}")
        lines.append("    pkt.trimmed = False")
        if self.has_payload:
            lines += [
                "    pad = bth.pad",
                "    if end - hdr_end < pad:",
                '        raise _E(f"pad count {pad} exceeds the {end - hdr_end} payload bytes", hdr_end)',
                "    pkt.payload = mv[hdr_end : end - pad]",
            ]
        else:
            lines += [
                "    if end != hdr_end:",
                f'        raise _E(f"{{end - hdr_end}} unexpected bytes after {op.name} headers", hdr_end)',
                '    pkt.payload = b""',
            ]
        lines += [
            "    return pkt",
            "def encode(buf, mv, start, pkt, tsh, _p=_st.pack_into):",
            "    bth = pkt.bth",
            *(f"    {a} = pkt.{a}" for a in attrs),
        ]
        if self.has_payload:
            lines += [
                "    payload = pkt.payload",
                "    plen = len(payload)",
                "    pad = -plen & 3",
            ]
        else:
            lines += ["    plen = pad = 0"]
        lines += [
            "    if bth.pad != pad or bth.tsh != tsh:",
            "        bth.pad = pad",
            "        bth.tsh = tsh",
            f"    hdr_end = start + {plan.size}",
            "    end = hdr_end + plen + pad",
            "    if end > len(mv):",
            '        raise _E(f"buffer too small: need {end} bytes, have {len(mv)}", start)',
            "    try:",
            f"        _p(buf, start, {', '.join(plan.insert_word(w, _same, unchecked=True) for w in plan.words)})",
            "    except _StructError:  # a value out of range: write it modulo 2**width",
            f"        _p(buf, start, {', '.join(plan.insert(_same))})",
        ]
        if self.has_payload:
            lines += [
                "    if plen:",
                "        mv[hdr_end : hdr_end + plen] = payload",
                "    if pad:",
                "        mv[hdr_end + plen : end] = _ZEROS[pad]",
            ]
        lines.append("    return end")
        src = "\n".join(lines) + "\n"
        ns = generate(
            src,
            f"packet {op.name}{' tseth' if tsh else ''}",
            _st=plan.struct,
            _op=op,
            _new=object.__new__,
            _Bth=Bth,
            _Pkt=MrcPacket,
            _E=WireError,
            _StructError=struct.error,
            _ZEROS=(b"", b"\x00", b"\x00\x00", b"\x00\x00\x00"),
            **{f"_{a}": HEADER_CLASSES[a] for a in attrs},
        )
        self.decode: Callable[..., MrcPacket] = ns["decode"]
        self.encode: Callable[..., int] = ns["encode"]
        self.source = src


def _same(q: str) -> str:
    return q


S = TypeVar("S", "Stack", "PacketStack")

STACK_KEYS: dict[int, tuple[Opcode, bool]] = {
    (int(op) << 1) | tsh: (op, bool(tsh))
    for op in L.OPCODE_HEADERS
    for tsh in (0, 1)
    if tsh == 0 or op in L.PAYLOAD_OPCODES
}
"""Valid stack keys ``opcode << 1 | tsh`` (TSETH only on data packets)."""


class StackTable(dict[int, S]):
    """Stacks keyed by ``opcode << 1 | tsh``, generated on first use (keeps import fast).

    Hot path: ``table.get(key) or table.build(key)``; ``build`` returns None for a key that
    names no MRC header stack.
    """

    def __init__(self, factory: Callable[[Opcode, bool], S]) -> None:
        super().__init__()
        self._factory: Callable[[Opcode, bool], S] = factory

    def build(self, key: int) -> S | None:
        spec = STACK_KEYS.get(key)
        if spec is None:
            return None
        stack = self._factory(*spec)
        self[key] = stack
        return stack

    def build_all(self) -> StackTable[S]:
        for key in STACK_KEYS:
            if key not in self:
                self.build(key)
        return self


def build_stacks(with_eth: bool) -> StackTable[Stack]:
    """Frame stacks (with or without Ethernet), generated lazily."""
    return StackTable(lambda op, tsh: Stack(op, tsh, with_eth))


def build_packet_stacks() -> StackTable[PacketStack]:
    """MRC-only stacks, generated lazily."""
    return StackTable(PacketStack)

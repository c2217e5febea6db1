"""Scapy layers for every MRC header, generated from hosts/wire/layout.py (tools and tests).

Import this module and scapy dissects UDP port 4791 as MRC: ``Ether(raw_bytes).show()``.
Crafting works the usual way; the ICRC, BTH ``tsh`` (TSETH present) and ``pad`` (payload padded
to 4 bytes with zeros) are filled in unless set by hand::

    from scapy.all import Ether, IPv6, UDP, Raw
    from hosts.wire.scapy_layers import MrcBTH, MrcMETH, MrcRETH
    pkt = Ether()/IPv6(src="fd00::1", dst="fd00::2")/UDP(sport=0xBEEF, dport=4791)/ \
          MrcBTH(opcode="WRITE_ONLY", dest_qp=5, psn=1)/MrcMETH()/MrcRETH(dma_len=4)/Raw(b"data")

The header that follows each MRC layer is chosen from the BTH opcode (layout.OPCODE_HEADERS)
and the BTH ``tsh`` bit, exactly as the codec does. Not for the hot path.
"""

from __future__ import annotations

import sys
from dataclasses import fields as dataclass_fields
from typing import Any

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    FCSField,
    Field,
    LongField,
    SignedShortField,
    XBitField,
    XByteField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, Raw, bind_layers, split_bottom_up

import hosts.wire.layout as L
from hosts.wire.codec import HEADER_CLASSES
from hosts.wire.enums import EndpointOp, NackReason, Opcode, SackVerdict
from hosts.wire.headers import Bth
from hosts.wire.icrc import compute_icrc

_ENUMS: dict[tuple[str, str], dict[int, str]] = {
    ("BTH", "opcode"): {int(op): op.name for op in Opcode},
    ("NETH", "reason"): {int(r): r.name for r in NackReason},
    ("SETH", "m"): {int(v): v.name for v in SackVerdict},
    ("ERTH", "op"): {int(v): v.name for v in EndpointOp},
    ("EETH", "op"): {int(v): v.name for v in EndpointOp},
}
_HEX = {"pkey", "dest_qp", "entropy", "bitmap", "port_status_mask", "rkey", "va", "imm"}


def _scapy_field(layout: L.Layout, f: L.Field, default: int) -> Field[Any, Any]:
    enum = _ENUMS.get((layout.name, f.name))
    aligned = f.start % 8 == 0
    if f.kind == "s":
        if not (aligned and f.width == 16):
            raise ValueError(f"signed field {layout.name}.{f.name} must be an aligned 16 bits")
        return SignedShortField(f.name, default)
    if enum is not None:
        if aligned and f.width == 8:
            return ByteEnumField(f.name, default, enum)
        return BitEnumField(f.name, default, f.width, enum)
    if aligned and f.name in _HEX:
        fixed = {8: XByteField, 16: XShortField, 32: XIntField, 64: XLongField}.get(f.width)
        if fixed is not None:
            return fixed(f.name, default)
    if aligned and f.width == 64:
        return LongField(f.name, default)
    if f.name in _HEX:
        return XBitField(f.name, default, f.width)
    return BitField(f.name, default, f.width)


def fields_desc_of(layout: L.Layout, cls: type | None = None) -> list[Field[Any, Any]]:
    """Scapy fields for a layout; reserved gaps become ``rsvd<bit>`` fields.

    Defaults come from the header dataclass ``cls`` (e.g. BTH P_Key 0xFFFF).
    """
    defaults = {d.name: int(d.default) for d in dataclass_fields(cls)} if cls else {}  # type: ignore[arg-type]
    out: list[Field[Any, Any]] = []
    pos = 0
    for f in sorted(layout.fields, key=lambda x: x.start):
        if f.start > pos:
            out.append(BitField(f"rsvd{pos}", 0, f.start - pos))
        out.append(_scapy_field(layout, f, defaults.get(f.name, 0)))
        pos = f.end
    if pos < layout.size * 8:
        out.append(BitField(f"rsvd{pos}", 0, layout.size * 8 - pos))
    return out


def _find_bth(pkt: Packet) -> Packet | None:
    layer: Packet | None = pkt
    while layer is not None:
        if isinstance(layer, MrcBTH):
            return layer
        layer = layer.underlayer
    return None


def _next_class(bth: Packet, after: str | None) -> type[Packet]:
    attrs = [
        a for a in L.OPCODE_HEADERS.get(bth.opcode, ()) if bth.tsh or a not in L.OPTIONAL_HEADERS
    ]
    if not attrs:
        return Raw
    i = 0 if after is None else attrs.index(after) + 1 if after in attrs else len(attrs)
    return LAYERS[attrs[i]] if i < len(attrs) else Raw


class _MrcExtension(Packet):
    """Common base: the next layer follows the opcode's header stack."""

    attr = ""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = _find_bth(self)
        if bth is None:
            return Raw
        return _next_class(bth, self.attr)

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        return s, None


class MrcBTH(Packet):
    """MRC Base Transport Header (with rtx/tsh bits) and the trailing ICRC of the packet."""

    name = "MRC BTH"
    fields_desc = [*fields_desc_of(L.BTH, Bth), FCSField("icrc", None, fmt="<I")]  # noqa: RUF012

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        return _next_class(self, None)

    def post_build(self, p: bytes, pay: bytes) -> bytes:
        p = _fill_tsh_pad(self, p, pay)
        if self.icrc is None:
            p = p[:-4] + _icrc_bytes(self, p)
        return p


def _fill_tsh_pad(bth: Packet, head: bytes, pay: bytes) -> bytes:
    """BTH + rest, with ``tsh`` and ``pad`` derived (and pad bytes added) unless set by hand."""
    ext = 0
    has_tseth = False
    layer = bth.payload
    while isinstance(layer, _MrcExtension):
        ext += len(layer.self_build())
        has_tseth = has_tseth or isinstance(layer, MrcTSETH)
        layer = layer.payload
    out = bytearray(head + pay)
    if "tsh" not in bth.fields:
        out[8] = (out[8] & ~0x10) | (0x10 if has_tseth else 0)
    if "pad" not in bth.fields and bth.opcode in L.PAYLOAD_OPCODES:
        data_len = len(pay) - 4 - ext
        pad = -data_len & 3
        out[1] = (out[1] & ~0x30) | (pad << 4)
        out[len(out) - 4 : len(out) - 4] = bytes(pad)
    return bytes(out)


def _icrc_bytes(bth: Packet, built: bytes) -> bytes:
    """ICRC of ``built`` (BTH + rest + 4 placeholder bytes) using the IPv6/UDP underlayers."""
    udp = bth.underlayer
    ip = udp.underlayer if udp is not None else None
    if not isinstance(udp, UDP) or ip is None or ip.name != "IPv6":
        return b"\x00\x00\x00\x00"
    ip_copy = ip.copy()
    ip_copy[UDP].remove_payload()
    ip_copy[UDP].add_payload(Raw(built))
    raw_ip = bytes(ip_copy)
    raw_ip = raw_ip[: 48 + len(built)]
    return compute_icrc(raw_ip, 0, len(raw_ip) - 4).to_bytes(4, "little")


LAYERS: dict[str, type[Packet]] = {}
for _attr, _layout in L.MRC_HEADERS.items():
    _cls = type(
        f"Mrc{_layout.name.replace('_', '')}",
        (_MrcExtension,),
        {
            "name": f"MRC {_layout.name}",
            "fields_desc": fields_desc_of(_layout, HEADER_CLASSES[_attr]),
            "attr": _attr,
            "__doc__": _layout.title,
            "__module__": __name__,
        },
    )
    LAYERS[_attr] = _cls
    setattr(sys.modules[__name__], _cls.__name__, _cls)

MrcMETH: type[Packet] = LAYERS["meth"]
MrcTSETH: type[Packet] = LAYERS["tseth"]
MrcRETH: type[Packet] = LAYERS["reth"]
MrcImmDt: type[Packet] = LAYERS["immdt"]
MrcAETH: type[Packet] = LAYERS["aeth"]
MrcSETH: type[Packet] = LAYERS["seth"]
MrcCCSTATE: type[Packet] = LAYERS["cc_state"]
MrcNETH: type[Packet] = LAYERS["neth"]
MrcPETH: type[Packet] = LAYERS["peth"]
MrcERTH: type[Packet] = LAYERS["erth"]
MrcEETH: type[Packet] = LAYERS["eeth"]


def _bind() -> None:
    roce = sys.modules.get("scapy.contrib.roce")
    if roce is not None:  # the RoCE BTH would win the UDP 4791 guess; MRC takes it over
        split_bottom_up(UDP, roce.BTH, dport=4791)
    bind_layers(UDP, MrcBTH, dport=4791)
    # Building convenience: MrcBTH()/MrcSETH() gets opcode SACK, and so on. Dissection follows
    # the opcode's whole stack through guess_payload_class, not these bindings.
    for op, attrs in L.OPCODE_HEADERS.items():
        first = LAYERS[attrs[0]]
        if first not in _FIRST_BOUND:
            _FIRST_BOUND.add(first)
            bind_layers(MrcBTH, first, opcode=int(_PREFERRED.get(attrs[0], op)))


_PREFERRED = {"meth": Opcode.WRITE_ONLY}
_FIRST_BOUND: set[type[Packet]] = set()


_bind()

__all__ = [
    "LAYERS",
    "MrcAETH",
    "MrcBTH",
    "MrcCCSTATE",
    "MrcEETH",
    "MrcERTH",
    "MrcImmDt",
    "MrcMETH",
    "MrcNETH",
    "MrcPETH",
    "MrcRETH",
    "MrcSETH",
    "MrcTSETH",
    "fields_desc_of",
]

"""Encode/decode of MRC packets and whole Ethernet frames (hot path: struct, no copies).

Encoding writes into a caller-provided buffer (``encode_frame``) so the per-packet path
allocates only small header objects; the payload is copied once, into the frame. Decoding
works on bytes, bytearray or memoryview and returns the payload as a memoryview slice of the
input. Every decoding failure is a WireError with a reason and the byte offset.

Derived fields: the encoder sets ``bth.pad`` (payload padding to 4 bytes) and ``bth.tsh``
(TSETH present) on the packet it encodes, and computes IPv6 payload length, UDP length and
the ICRC. The UDP checksum is sent as zero (RoCEv2 practice; the ICRC protects the payload).

The functions here are the reference. When the optional C extension hosts/wire/_fastwire.c is
built (and MRCNET_PURE_PYTHON is unset) the four public encode/decode names are rebound to its
fast path, which runs the same layout plans and hands every unusual case back to these
functions (see the end of this module, fastpath.py and docs/wire-format.md).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import hosts.wire.fastpath as fastpath
import hosts.wire.layout as L
from hosts.wire.compile import CompiledLayout, compile_layout
from hosts.wire.enums import ICRC_LEN, Opcode
from hosts.wire.errors import WireError
from hosts.wire.headers import Bth
from hosts.wire.packet import Frame, MrcPacket, Srv6Outer
from hosts.wire.stacks import HEADER_CLASSES, build_packet_stacks, build_stacks

Buffer = bytes | bytearray | memoryview


BTH_CODEC = compile_layout(L.BTH, Bth)
HEADER_CODECS: dict[str, CompiledLayout] = {
    attr: compile_layout(lay, HEADER_CLASSES[attr]) for attr, lay in L.MRC_HEADERS.items()
}
ETH_CODEC = compile_layout(L.ETH)
IPV6_CODEC = compile_layout(L.IPV6)
SRH_CODEC = compile_layout(L.SRH)

_BTH_LEN = L.BTH.size
_ETH_LEN = L.ETH.size
_IP_LEN = L.IPV6.size
_UDP_LEN = L.UDP.size
_SRH_LEN = L.SRH.size

# opcode -> (Opcode member, ((attr, size, unpack, pack, optional), ...), carries payload)
_Step = tuple[str, int, Callable[..., Any], Callable[..., None], bool]
_OPINFO: dict[int, tuple[Opcode, tuple[_Step, ...], bool]] = {
    int(op): (
        op,
        tuple(
            (
                attr,
                HEADER_CODECS[attr].size,
                HEADER_CODECS[attr].unpack,
                HEADER_CODECS[attr].pack,
                attr in L.OPTIONAL_HEADERS,
            )
            for attr in attrs
        ),
        op in L.PAYLOAD_OPCODES,
    )
    for op, attrs in L.OPCODE_HEADERS.items()
}

_unpack_bth = BTH_CODEC.unpack
_unpack_ipv6 = IPV6_CODEC.unpack
_pack_ipv6 = IPV6_CODEC.pack
_unpack_eth = ETH_CODEC.unpack
_pack_eth = ETH_CODEC.pack
_unpack_srh = SRH_CODEC.unpack
_pack_srh = SRH_CODEC.pack


def _opinfo(opcode: int, where: int) -> tuple[Opcode, tuple[_Step, ...], bool]:
    info = _OPINFO.get(opcode)
    if info is None:
        raise WireError(f"unknown MRC opcode {opcode:#04x}", where)
    return info


# ------------------------------------------------------------------ MRC packet (BTH..payload)
def packet_len(pkt: MrcPacket) -> int:
    """Bytes of BTH + extension headers + payload + padding (no ICRC)."""
    _, steps, has_payload = _opinfo(pkt.bth.opcode, 0)
    n = _BTH_LEN
    for attr, size, _u, _p, optional in steps:
        if optional and getattr(pkt, attr) is None:
            continue
        n += size
    if has_payload:
        n += (len(pkt.payload) + 3) & ~3
    return n


def encode_packet(pkt: MrcPacket, buf: bytearray | memoryview, offset: int = 0) -> int:
    """Write BTH..payload+pad at ``offset``; return the end offset (no ICRC).

    Raises WireError if the opcode is unknown, a required header is missing or the buffer
    is too small.
    """
    bth = pkt.bth
    tsh = pkt.tseth is not None
    key = (bth.opcode << 1) | tsh
    stack = _PACKET_STACKS.get(key) or _PACKET_STACKS.build(key)
    if stack is None:
        if tsh and (bth.opcode & 0xFF) in _OPINFO:
            raise WireError(f"{Opcode(bth.opcode).name} cannot carry a TSETH", offset)
        raise WireError(f"unknown MRC opcode {bth.opcode:#04x}", offset)
    mv = buf if type(buf) is memoryview else memoryview(buf)
    try:
        return stack.encode(buf, mv, offset, pkt, tsh)
    except AttributeError as exc:  # a required extension header is None
        raise WireError(f"{stack.op.name} is missing a header ({exc})", offset) from None
    except (struct.error, TypeError, ValueError) as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"cannot encode packet: {exc}", offset) from None


def _decode_headers(data: Buffer, offset: int, limit: int) -> tuple[MrcPacket, int, bool]:
    """Parse BTH and extension headers within data[offset:limit]; return (pkt, end, payload?)."""
    if limit - offset < _BTH_LEN:
        raise WireError(f"truncated BTH: {max(limit - offset, 0)} of {_BTH_LEN} bytes", offset)
    bth = _unpack_bth(data, offset)
    op, steps, has_payload = _opinfo(bth.opcode, offset)
    bth.opcode = op
    pkt = MrcPacket(bth)
    off = offset + _BTH_LEN
    tsh = bth.tsh
    for attr, size, unpack, _p, optional in steps:
        if optional and not tsh:
            continue
        if limit - off < size:
            raise WireError(f"truncated {attr.upper()}: {limit - off} of {size} bytes", off)
        setattr(pkt, attr, unpack(data, off))
        off += size
    if tsh and not has_payload:
        raise WireError(f"BTH tsh set on {op.name}, which has no TSETH", offset + 8)
    return pkt, off, has_payload


def decode_packet(data: Buffer, offset: int = 0, end: int | None = None) -> MrcPacket:
    """Parse BTH..payload+pad in ``data[offset:end]`` (the ICRC, if any, excluded by ``end``).

    The payload is a memoryview slice of ``data``.
    """
    mv = data if type(data) is memoryview and data.itemsize == 1 else _as_view(data)
    n = len(mv)
    if end is None or end > n:
        end = n
    if offset < 0 or end < 0:
        raise WireError("negative offset", 0)
    if end - offset >= _BTH_LEN:
        key = (mv[offset] << 1) | (mv[offset + 8] & _TSH_BIT != 0)
        stack = _PACKET_STACKS.get(key) or _PACKET_STACKS.build(key)
        if stack is not None and offset + stack.size <= end:
            return stack.decode(mv, offset, end)
    pkt, off, has_payload = _decode_headers(mv, offset, end)  # raises the precise error
    _finish_payload(pkt, mv, off, end, has_payload)
    return pkt


def _finish_payload(pkt: MrcPacket, data: Buffer, off: int, end: int, has_payload: bool) -> None:
    if has_payload:
        pad = pkt.bth.pad
        if end - off < pad:
            raise WireError(f"pad count {pad} exceeds the {end - off} payload bytes", off)
        mv = data if isinstance(data, memoryview) else memoryview(data)
        pkt.payload = mv[off : end - pad]
    elif end != off:
        raise WireError(
            f"{end - off} unexpected bytes after {Opcode(pkt.bth.opcode).name} headers", off
        )


# ------------------------------------------------------------------ frames
_PACKET_STACKS = build_packet_stacks()  # BTH | ... (no network headers, no ICRC)
_ETH_STACKS = build_stacks(True)  # plain frames: Ethernet | IPv6 | UDP | BTH | ...
_INNER_STACKS = build_stacks(False)  # SRv6: inner IPv6 | UDP | BTH | ... after the outer part
_TSH_BIT = 0x10  # BTH byte 8
_new = object.__new__
_PLAIN_BTH = _ETH_LEN + _IP_LEN + _UDP_LEN  # BTH offset in a plain frame


def frame_len(frame: Frame, pkt: MrcPacket) -> int:
    """Total Ethernet frame length including the ICRC."""
    return _outer_len(frame) + _IP_LEN + _UDP_LEN + packet_len(pkt) + ICRC_LEN


def _outer_len(frame: Frame) -> int:
    srv6 = frame.srv6
    if srv6 is None:
        return _ETH_LEN
    if srv6.segments:
        return _ETH_LEN + _IP_LEN + _SRH_LEN + 16 * len(srv6.segments)
    return _ETH_LEN + _IP_LEN


def encode_frame(frame: Frame, pkt: MrcPacket, buf: bytearray | memoryview, offset: int = 0) -> int:
    """Write the whole frame (Ethernet..ICRC) into ``buf`` at ``offset``; return bytes written.

    ``buf`` may be a bytearray or a writable memoryview; passing the same memoryview every
    time saves creating one per call. Use ``memoryview(buf)[offset:offset + n]`` to hand the
    frame to a socket without a copy.
    """
    bth = pkt.bth
    tsh = pkt.tseth is not None
    srv6 = frame.srv6
    key = (bth.opcode << 1) | tsh
    if srv6 is None:
        stack = _ETH_STACKS.get(key) or _ETH_STACKS.build(key)
        start = offset
    else:
        stack = _INNER_STACKS.get(key) or _INNER_STACKS.build(key)
        start = offset + _outer_len(frame)
    if stack is None:
        if tsh and (bth.opcode & 0xFF) in _OPINFO:
            raise WireError(f"{Opcode(bth.opcode).name} cannot carry a TSETH", offset)
        raise WireError(f"unknown MRC opcode {bth.opcode:#04x}", offset)
    mv = buf if type(buf) is memoryview else memoryview(buf)
    try:
        total = stack.encode(buf, mv, start, frame, pkt, tsh)
    except AttributeError as exc:  # a required extension header is None
        raise WireError(f"{stack.op.name} is missing a header ({exc})", start) from None
    except (struct.error, TypeError, ValueError) as exc:  # e.g. an address that is not bytes
        if isinstance(exc, WireError):
            raise
        raise WireError(f"cannot encode frame: {exc}", start) from None
    if srv6 is not None:
        _srv6_tail(frame, buf, offset, total)
    return total - offset


def _srv6_tail(frame: Frame, buf: bytearray | memoryview, offset: int, total: int) -> None:
    """Ethernet + outer IPv6 (+ SRH) in front of an encoded inner stack ending at ``total``."""
    srv6 = frame.srv6
    assert srv6 is not None
    try:
        _pack_eth(buf, offset, frame.eth_dst, frame.eth_src, L.ETHERTYPE_IPV6)
        _encode_srv6(srv6, buf, offset + _ETH_LEN, total)
    except (struct.error, TypeError, ValueError) as exc:  # e.g. an outer field of a wrong type
        if isinstance(exc, WireError):
            raise
        raise WireError(f"cannot encode SRv6 outer header: {exc}", offset) from None


def _encode_srv6(srv6: Srv6Outer, buf: bytearray | memoryview, off: int, total: int) -> None:
    if total - off - _IP_LEN > 0xFFFF:
        raise WireError(f"packet too large: outer IPv6 payload {total - off - _IP_LEN} "
                        "exceeds 65535", off + 4)
    segs = srv6.segments
    nh = L.IPPROTO_ROUTING if segs else L.IPPROTO_IPV6
    _pack_ipv6(
        buf, off, 6, srv6.dscp, srv6.ecn, srv6.flow_label, total - off - _IP_LEN, nh,
        srv6.hop_limit, srv6.src, srv6.dst,
    )  # fmt: skip
    if not segs:
        return
    if len(segs) > 127:
        raise WireError("too many SRH segments", off)
    off += _IP_LEN
    _pack_srh(
        buf, off, L.IPPROTO_IPV6, 2 * len(segs), L.SRH_ROUTING_TYPE, srv6.segments_left,
        len(segs) - 1, 0, 0,
    )  # fmt: skip
    off += _SRH_LEN
    for seg in segs:
        if len(seg) != 16:
            raise WireError("an SRH segment is 16 bytes", off)
        buf[off : off + 16] = seg
        off += 16


def build_frame(frame: Frame, pkt: MrcPacket) -> bytes:
    """Convenience: allocate and return the encoded frame."""
    buf = bytearray(frame_len(frame, pkt))
    n = encode_frame(frame, pkt, buf)
    return bytes(buf[:n])


def decode_frame(data: Buffer, *, verify_icrc: bool = True) -> tuple[Frame, MrcPacket]:
    """Parse an Ethernet frame; raise WireError on anything malformed (or a bad ICRC).

    Bytes after the IPv6 payload (Ethernet padding) are ignored. A data packet that ends
    right after its headers (no payload, no ICRC) is a trimmed packet: ``pkt.trimmed``.
    The payload is a memoryview slice of ``data``.
    """
    mv = data if type(data) is memoryview else _as_view(data)
    if mv.itemsize != 1:
        mv = _as_view(mv)
    n = len(mv)
    if n < _ETH_LEN + _IP_LEN:
        raise WireError(f"frame too short ({n} bytes) for Ethernet + IPv6", 0)
    nh = mv[20]
    if nh == L.IPPROTO_UDP and n >= _PLAIN_BTH + _BTH_LEN:  # fast path: a plain frame
        key = (mv[_PLAIN_BTH] << 1) | (mv[_PLAIN_BTH + 8] & _TSH_BIT != 0)
        stack = _ETH_STACKS.get(key) or _ETH_STACKS.build(key)
        if stack is not None and stack.size <= n:
            return stack.decode(mv, 0, n, b"", b"", None, verify_icrc)
    if nh == L.IPPROTO_UDP:
        srv6 = None
        start = 0
        ip_off = _ETH_LEN
        limit = n
        stacks = _ETH_STACKS
        eth_dst = eth_src = b""
    elif nh == L.IPPROTO_IPV6 or nh == L.IPPROTO_ROUTING:
        eth_dst, eth_src, srv6, ip_off, limit = _srv6_outer(mv, n)
        start = ip_off
        stacks = _INNER_STACKS
    else:
        _check_l3(mv)
        raise WireError(f"IPv6 next header {nh} is neither UDP nor SRv6", 20)
    bth_off = ip_off + _IP_LEN + _UDP_LEN
    if limit - bth_off < _BTH_LEN:
        _diagnose(mv, ip_off, limit)
    key = (mv[bth_off] << 1) | (mv[bth_off + 8] & _TSH_BIT != 0)
    stack = stacks.get(key) or stacks.build(key)
    if stack is None:
        _check_l3(mv)
        if mv[bth_off] in _OPINFO:
            raise WireError(f"BTH tsh set on {_OPINFO[mv[bth_off]][0].name}", bth_off + 8)
        raise WireError(f"unknown MRC opcode {mv[bth_off]:#04x}", bth_off)
    if start + stack.size > limit:
        _diagnose(mv, ip_off, limit)
    return stack.decode(mv, start, limit, eth_dst, eth_src, srv6, verify_icrc)


def _as_view(data: object) -> memoryview:
    """A flat byte view of ``data``; WireError for anything that is not a bytes-like object."""
    try:
        mv = memoryview(data)  # type: ignore[arg-type]
        return mv if mv.itemsize == 1 and mv.ndim == 1 else mv.cast("B")
    except (TypeError, ValueError) as exc:
        raise WireError(f"not a bytes-like frame: {exc}", 0) from None


def _diagnose(data: Buffer, ip_off: int, limit: int) -> None:
    """Slow path for short frames: find the first truncated header and raise."""
    _check_l3(data)
    udp_off = ip_off + _IP_LEN
    if limit - udp_off < _UDP_LEN:
        raise WireError("truncated UDP header", udp_off)
    _decode_headers(data, udp_off + _UDP_LEN, limit)
    raise WireError("truncated packet", limit)


def _check_l3(data: Buffer) -> None:
    """Raise if the frame is not Ethernet + IPv6 (so errors name the outermost problem)."""
    if data[12] != 0x86 or data[13] != 0xDD:
        raise WireError(f"not IPv6 (ethertype {data[12]:#04x}{data[13]:02x})", 12)
    if data[14] >> 4 != 6:
        raise WireError(f"IP version {data[14] >> 4}, expected 6", 14)


def _srv6_outer(mv: memoryview, n: int) -> tuple[bytes, bytes, Srv6Outer, int, int]:
    """Ethernet + outer IPv6 (+ SRH) of an SRv6 frame: (eth dst, eth src, outer, inner IPv6
    offset, outer end); raises WireError for the outermost problem."""
    _check_l3(mv)
    eth_dst, eth_src, _t = _unpack_eth(mv, 0)
    srv6, ip_off, limit = _decode_srv6(mv, n)
    return eth_dst, eth_src, srv6, ip_off, limit


def _decode_srv6(data: Buffer, n: int) -> tuple[Srv6Outer, int, int]:
    """Parse the outer IPv6 (+ SRH); return (outer, inner IPv6 offset, outer end)."""
    off = _ETH_LEN
    _v, dscp, ecn, fl, plen, nh, hlim, src, dst = _unpack_ipv6(data, off)
    limit = off + _IP_LEN + plen
    if limit > n:
        raise WireError(f"IPv6 payload length {plen} exceeds the frame", off + 4)
    segs: tuple[bytes, ...] = ()
    left = 0
    off += _IP_LEN
    if nh == L.IPPROTO_ROUTING:
        if limit - off < _SRH_LEN:
            raise WireError("truncated SRH", off)
        nh, ext_len, rtype, left, last, _flags, _tag = _unpack_srh(data, off)
        srh_len = _SRH_LEN + 8 * ext_len
        if rtype != L.SRH_ROUTING_TYPE:
            raise WireError(f"routing header type {rtype} is not an SRH (4)", off + 2)
        if ext_len % 2 or limit - off < srh_len:
            raise WireError(f"bad SRH length {ext_len}", off + 1)
        count = ext_len // 2
        if last >= count or left > count:
            raise WireError(f"SRH last entry {last} / segments left {left} out of range", off + 3)
        base = off + _SRH_LEN
        segs = tuple(bytes(data[base + 16 * i : base + 16 * i + 16]) for i in range(count))
        off += srh_len
    if nh != L.IPPROTO_IPV6:
        raise WireError(f"SRv6 outer header carries next header {nh}, expected IPv6 (41)", off)
    if limit - off < _IP_LEN:
        raise WireError("truncated inner IPv6 header", off)
    outer = _new(Srv6Outer)  # fields come from struct: lengths are right, skip __post_init__
    outer.src = src
    outer.dst = dst
    outer.segments = segs
    outer.segments_left = left
    outer.dscp = dscp
    outer.ecn = ecn
    outer.flow_label = fl
    outer.hop_limit = hlim
    return outer, off, limit


# ------------------------------------------------------------------ C fast path
# The functions above are the reference. When the C extension is built (and MRCNET_PURE_PYTHON
# is not set) the public names are rebound to its functions, which handle the valid common
# case from the same layout plans and call these references for everything else
# (hosts/wire/fastpath.py, hosts/wire/_fastwire.c).
encode_frame_py = encode_frame
decode_frame_py = decode_frame
encode_packet_py = encode_packet
decode_packet_py = decode_packet

FAST = fastpath.install(
    {
        "encode_frame": encode_frame_py,
        "decode_frame": decode_frame_py,
        "encode_packet": encode_packet_py,
        "decode_packet": decode_packet_py,
    }
)
BACKEND = "python" if FAST is None else "c"
"""Which implementation the public functions use: "c" or "python"."""
if FAST is not None:
    encode_frame = FAST.encode_frame
    decode_frame = FAST.decode_frame
    encode_packet = FAST.encode_packet
    decode_packet = FAST.decode_packet

"""Encode/decode of MRC packets and whole Ethernet frames (hot path: struct, no copies)."""

from __future__ import annotations

from hosts.wire.packet import Frame, MrcPacket


def packet_len(pkt: MrcPacket) -> int:
    """Bytes of BTH + extension headers + payload + padding (no ICRC)."""
    raise NotImplementedError


def encode_packet(pkt: MrcPacket, buf: bytearray | memoryview, offset: int = 0) -> int:
    """Write BTH..payload+pad at ``offset``; return the end offset (no ICRC)."""
    raise NotImplementedError


def decode_packet(
    data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None
) -> MrcPacket:
    """Parse BTH..payload in ``data[offset:end]`` (the ICRC, if any, excluded by ``end``)."""
    raise NotImplementedError


def frame_len(frame: Frame, pkt: MrcPacket) -> int:
    """Total Ethernet frame length including the ICRC."""
    raise NotImplementedError


def encode_frame(frame: Frame, pkt: MrcPacket, buf: bytearray | memoryview, offset: int = 0) -> int:
    """Write the whole frame (Ethernet..ICRC) into ``buf`` at ``offset``; return bytes written."""
    raise NotImplementedError


def build_frame(frame: Frame, pkt: MrcPacket) -> bytes:
    """Convenience: allocate and return the encoded frame."""
    raise NotImplementedError


def decode_frame(
    data: bytes | bytearray | memoryview, *, verify_icrc: bool = True
) -> tuple[Frame, MrcPacket]:
    """Parse an Ethernet frame; raise WireError on anything malformed (or a bad ICRC)."""
    raise NotImplementedError

"""Packet-level values: the MRC header stack (MrcPacket) and the network layer (Frame)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from hosts.wire.enums import ROCEV2_UDP_PORT
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

Payload = bytes | bytearray | memoryview


@dataclass(slots=True)
class MrcPacket:
    """BTH, the extension headers its opcode requires, and the payload (no padding, no ICRC).

    Which extension headers must be present is given by layout.OPCODE_HEADERS; TSETH is
    optional on data packets (BTH ``tsh``). The decoder returns the payload as a memoryview
    slice of the received buffer (no copy). ``trimmed`` is True for a header-only packet
    without payload and ICRC, as produced by switch trimming.
    """

    bth: Bth
    meth: Meth | None = None
    tseth: Tseth | None = None
    reth: Reth | None = None
    immdt: ImmDt | None = None
    aeth: Aeth | None = None
    seth: Seth | None = None
    cc_state: CcState | None = None
    neth: Neth | None = None
    peth: Peth | None = None
    erth: Erth | None = None
    eeth: Eeth | None = None
    payload: Payload = b""
    trimmed: bool = False


@dataclass(slots=True)
class Srv6Outer:
    """Outer IPv6 header of SRv6 mode: destination is a uSID container; optional SRH.

    ``segments`` is the SRH segment list in SRH order (segments[0] is the final segment); an
    empty tuple means no SRH (a single uSID container carries the whole path). Traffic class
    and flow label of the outer header are separate from the inner ones because switches
    mark ECN on the header they forward (the outer one).
    """

    src: bytes
    dst: bytes
    segments: tuple[bytes, ...] = ()
    segments_left: int = 0
    dscp: int = 0
    ecn: int = 0
    flow_label: int = 0
    hop_limit: int = 64

    def __post_init__(self) -> None:
        _check_len("srv6.src", self.src, 16)
        _check_len("srv6.dst", self.dst, 16)
        for seg in self.segments:
            _check_len("SRH segment", seg, 16)


@dataclass(slots=True)
class Frame:
    """Ethernet + IPv6 + UDP fields around an MRC packet (the inner IPv6 in SRv6 mode).

    Addresses are raw bytes (6-byte MACs, 16-byte IPv6); use mac()/ip6() to convert text.
    The ICRC covers the inner IPv6 header, so SRv6 shift-and-forward does not invalidate it.
    """

    eth_dst: bytes = b"\x00" * 6
    eth_src: bytes = b"\x00" * 6
    ip_src: bytes = b"\x00" * 16
    ip_dst: bytes = b"\x00" * 16
    dscp: int = 0
    ecn: int = 0
    flow_label: int = 0
    hop_limit: int = 64
    udp_sport: int = 0
    udp_dport: int = ROCEV2_UDP_PORT
    srv6: Srv6Outer | None = None

    def __post_init__(self) -> None:
        # Construction-time check only: decoded frames are built field by field (always the
        # right lengths) and the hot path does not re-check mutated fields.
        _check_len("eth_dst", self.eth_dst, 6)
        _check_len("eth_src", self.eth_src, 6)
        _check_len("ip_src", self.ip_src, 16)
        _check_len("ip_dst", self.ip_dst, 16)

    @property
    def ce(self) -> bool:
        """Congestion Experienced on the inner or (SRv6) outer header."""
        return self.ecn == 3 or (self.srv6 is not None and self.srv6.ecn == 3)


def _check_len(name: str, value: bytes, size: int) -> None:
    if len(value) != size:
        raise ValueError(f"{name} must be {size} bytes, got {len(value)}")


def mac(text: str) -> bytes:
    """'02:00:00:00:00:01' -> 6 bytes."""
    raw = bytes.fromhex(text.replace(":", "").replace("-", ""))
    if len(raw) != 6:
        raise ValueError(f"not a MAC address: {text!r}")
    return raw


def ip6(text: str) -> bytes:
    """'fd00::1' -> 16 bytes."""
    return ipaddress.IPv6Address(text).packed


def mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def ip6_str(raw: bytes) -> str:
    return str(ipaddress.IPv6Address(bytes(raw)))

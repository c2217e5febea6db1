"""THE bit layouts of every header the codec handles, defined once.

Each header is a ``Layout``: a name, a size in bytes and ``Field`` rows. A field is located by
its starting byte, the position of its most significant bit inside that byte (7 = msb, as in
specifications that say "byte 8 bit 7") and its width in bits. Bits not covered by a field are
reserved: written as zero, ignored when read. Field kinds:

- ``u`` unsigned integer, ``s`` signed (two's complement), ``f`` one-bit flag (bool),
- ``b`` raw bytes (byte-aligned, width a multiple of 8: MAC and IPv6 addresses).

The codec (hosts/wire/compile.py), the scapy layers, the Wireshark dissector and the docs are all
generated from or checked against these tables, so a layout correction is a one-line change
here. Field names of the MRC headers equal the attribute names of hosts/wire/headers.py, in
the same order (a unit test checks this).
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.wire.enums import Opcode


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    byte: int
    bit: int
    width: int
    kind: str = "u"

    @property
    def start(self) -> int:
        """Offset of the field's msb in bits from the msb of the header."""
        return self.byte * 8 + (7 - self.bit)

    @property
    def end(self) -> int:
        return self.start + self.width


@dataclass(frozen=True, slots=True)
class Layout:
    name: str
    size: int
    fields: tuple[Field, ...]
    title: str = ""

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def F(name: str, byte: int, bit: int, width: int, kind: str = "u") -> Field:
    return Field(name, byte, bit, width, kind)


# ---------------------------------------------------------------- MRC transport headers
BTH = Layout(
    "BTH",
    12,
    (
        F("opcode", 0, 7, 8),
        F("se", 1, 7, 1, "f"),
        F("m", 1, 6, 1, "f"),
        F("pad", 1, 5, 2),
        F("tver", 1, 3, 4),
        F("pkey", 2, 7, 16),
        F("fecn", 4, 7, 1, "f"),
        F("becn", 4, 6, 1, "f"),
        F("dest_qp", 5, 7, 24),
        F("ack_req", 8, 7, 1, "f"),
        F("rtx", 8, 5, 1, "f"),
        F("tsh", 8, 4, 1, "f"),
        F("psn", 9, 7, 24),
    ),
    "Base Transport Header",
)

METH = Layout(
    "METH",
    4,
    (
        F("rqmsn", 0, 7, 16),
        F("msn", 2, 7, 16),
    ),
    "Message Extended Header",
)

TSETH = Layout(
    "TSETH",
    4,
    (
        F("tx_timestamp", 0, 7, 16),
        F("tsr", 2, 7, 1, "f"),
        F("ftype", 3, 3, 4),
    ),
    "Timestamp Extended Header",
)

RETH = Layout(
    "RETH",
    16,
    (
        F("va", 0, 7, 64),
        F("rkey", 8, 7, 32),
        F("dma_len", 12, 7, 32),
    ),
    "RDMA Extended Header",
)

IMMDT = Layout("ImmDt", 4, (F("imm", 0, 7, 32),), "Immediate Data")

AETH = Layout(
    "AETH",
    4,
    (
        F("syndrome", 0, 7, 8),
        F("msn", 1, 7, 24),
    ),
    "ACK Extended Header",
)

# m: byte 1 bits 6..5 (so m=1 is UET's M flag bit), pr: byte 1 bit 3 (UET's P flag bit).
SETH = Layout(
    "SETH",
    28,
    (
        F("m", 1, 6, 2),
        F("pr", 1, 3, 1, "f"),
        F("ack_psn_offset", 2, 7, 16, "s"),
        F("entropy", 4, 7, 32),
        F("src_id", 8, 7, 16),
        F("dst_id", 10, 7, 16),
        F("cack_psn", 13, 7, 24),
        F("cc_type", 16, 7, 4),
        F("cc_flags", 16, 3, 4),
        F("mpr", 17, 7, 8),
        F("sack_offset", 18, 7, 16, "s"),
        F("bitmap", 20, 7, 64),
    ),
    "SACK Extended Header",
)

CC_STATE = Layout(
    "CC_STATE",
    8,
    (
        F("tx_timestamp", 0, 7, 16),
        F("ooo_count", 2, 6, 15),
        F("restore", 4, 7, 1, "f"),
        F("rcv_cwnd_pen", 4, 6, 7),
        F("rcvd_bytes", 5, 7, 24),
    ),
    "Congestion Control State",
)

NETH = Layout(
    "NETH",
    20,
    (
        F("reason", 2, 7, 8),
        F("vendor", 3, 7, 8),
        F("entropy", 4, 7, 32),
        F("src_id", 8, 7, 16),
        F("dst_id", 10, 7, 16),
        F("nack_psn", 13, 7, 24),
        F("cc_type", 16, 7, 4),
        F("cc_flags", 16, 3, 4),
        F("tx_timestamp", 18, 7, 16),
    ),
    "NACK Extended Header",
)

PETH = Layout(
    "PETH",
    16,
    (
        F("probe_id", 4, 7, 16),
        F("tx_timestamp", 12, 7, 16),
    ),
    "Probe Extended Header",
)

ERTH = Layout(
    "ERTH",
    16,
    (
        F("op", 1, 1, 2),
        F("port_status_mask", 4, 7, 32),
        F("tx_timestamp", 12, 7, 16),
    ),
    "Endpoint Request Header",
)

EETH = Layout(
    "EETH",
    36,
    (
        F("op", 1, 1, 2),
        F("port_status_mask", 4, 7, 32),
        F("service_time", 24, 7, 32),
        F("tx_timestamp", 28, 7, 16),
    ),
    "Endpoint Response Header",
)

# ---------------------------------------------------------------- network layer
ETH = Layout(
    "ETH",
    14,
    (
        F("dst", 0, 7, 48, "b"),
        F("src", 6, 7, 48, "b"),
        F("ethertype", 12, 7, 16),
    ),
    "Ethernet II",
)

IPV6 = Layout(
    "IPV6",
    40,
    (
        F("version", 0, 7, 4),
        F("dscp", 0, 3, 6),
        F("ecn", 1, 5, 2),
        F("flow_label", 1, 3, 20),
        F("payload_len", 4, 7, 16),
        F("next_header", 6, 7, 8),
        F("hop_limit", 7, 7, 8),
        F("src", 8, 7, 128, "b"),
        F("dst", 24, 7, 128, "b"),
    ),
    "IPv6",
)

# Segment Routing Header fixed part (RFC 8754); 16-byte segments follow.
SRH = Layout(
    "SRH",
    8,
    (
        F("next_header", 0, 7, 8),
        F("hdr_ext_len", 1, 7, 8),
        F("routing_type", 2, 7, 8),
        F("segments_left", 3, 7, 8),
        F("last_entry", 4, 7, 8),
        F("flags", 5, 7, 8),
        F("tag", 6, 7, 16),
    ),
    "Segment Routing Header",
)

UDP = Layout(
    "UDP",
    8,
    (
        F("sport", 0, 7, 16),
        F("dport", 2, 7, 16),
        F("length", 4, 7, 16),
        F("checksum", 6, 7, 16),
    ),
    "UDP",
)

ETHERTYPE_IPV6 = 0x86DD
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41  # SRv6 encapsulation: outer IPv6 carries the inner IPv6 packet
IPPROTO_ROUTING = 43
SRH_ROUTING_TYPE = 4

# ICRC masking (RoCEv2): bytes of these headers that are replaced by all ones.
ICRC_IPV6_VARIANT = ("dscp", "ecn", "flow_label", "hop_limit")
ICRC_UDP_VARIANT = ("checksum",)
ICRC_BTH_VARIANT_BYTE = 4  # FECN | BECN | reserved

# ---------------------------------------------------------------- opcode -> header stack
MRC_HEADERS: dict[str, Layout] = {
    "meth": METH,
    "tseth": TSETH,
    "reth": RETH,
    "immdt": IMMDT,
    "aeth": AETH,
    "seth": SETH,
    "cc_state": CC_STATE,
    "neth": NETH,
    "peth": PETH,
    "erth": ERTH,
    "eeth": EETH,
}
"""MrcPacket attribute -> layout, for every header after the BTH."""

_WRITE = ("meth", "tseth", "reth")
OPCODE_HEADERS: dict[Opcode, tuple[str, ...]] = {
    Opcode.WRITE_FIRST: _WRITE,
    Opcode.WRITE_MIDDLE: _WRITE,
    Opcode.WRITE_LAST: _WRITE,
    Opcode.WRITE_LAST_IMM: (*_WRITE, "immdt"),
    Opcode.WRITE_ONLY: _WRITE,
    Opcode.WRITE_ONLY_IMM: (*_WRITE, "immdt"),
    Opcode.ACK: ("aeth",),
    Opcode.EP_REQUEST: ("erth",),
    Opcode.EP_RESPONSE: ("eeth",),
    Opcode.SACK: ("seth", "cc_state"),
    Opcode.NACK: ("neth",),
    Opcode.PROBE: ("peth",),
}
"""Headers after the BTH, in wire order. ``tseth`` is present only when BTH.tsh is set."""

OPTIONAL_HEADERS = frozenset({"tseth"})
PAYLOAD_OPCODES = frozenset(op for op, hdrs in OPCODE_HEADERS.items() if "reth" in hdrs)
"""Opcodes that carry a payload (padded to 4 bytes, BTH.pad)."""

ALL_LAYOUTS: tuple[Layout, ...] = (
    BTH,
    METH,
    TSETH,
    RETH,
    IMMDT,
    AETH,
    SETH,
    CC_STATE,
    NETH,
    PETH,
    ERTH,
    EETH,
    ETH,
    IPV6,
    SRH,
    UDP,
)

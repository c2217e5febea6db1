"""Named wire values: opcodes, NACK reasons, SACK multipath verdicts, endpoint operations.

The numeric opcode values follow the public implementations that cite the OCP MRC 1.0
specification (opcode[7:5] = 0b110, RC's low bits); the seed paper's "0101 transport prefix"
disagrees. See docs/wire-format.md ("Known discrepancies"). The header stack that follows each
opcode lives in hosts/wire/layout.py (OPCODE_HEADERS).
"""

from __future__ import annotations

from enum import IntEnum

ROCEV2_UDP_PORT = 4791
"""UDP destination port of every MRC packet (RoCEv2)."""

ENDPOINT_QP = 0x2
"""Reserved destination QP of endpoint operations (ERTH/EETH)."""

ICRC_LEN = 4


OPCODE_PREFIX = 0b110
"""opcode[7:5]: IBTA's manufacturer-specific range, as the public implementations use. The seed
paper's "0101 prefix" cannot hold RC's 5 low bits (up to 0x1E); see docs/wire-format.md."""
_P = OPCODE_PREFIX << 5


class Opcode(IntEnum):
    """MRC opcodes: OPCODE_PREFIX followed by RC's operation bits."""

    WRITE_FIRST = _P | 0x06
    WRITE_MIDDLE = _P | 0x07
    WRITE_LAST = _P | 0x08
    WRITE_LAST_IMM = _P | 0x09
    WRITE_ONLY = _P | 0x0A
    WRITE_ONLY_IMM = _P | 0x0B
    ACK = _P | 0x11
    EP_REQUEST = _P | 0x18
    EP_RESPONSE = _P | 0x19
    SACK = _P | 0x1C
    NACK = _P | 0x1D
    PROBE = _P | 0x1E


WRITE_OPCODES = frozenset(
    {
        Opcode.WRITE_FIRST,
        Opcode.WRITE_MIDDLE,
        Opcode.WRITE_LAST,
        Opcode.WRITE_LAST_IMM,
        Opcode.WRITE_ONLY,
        Opcode.WRITE_ONLY_IMM,
    }
)
IMM_OPCODES = frozenset({Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM})


class NackReason(IntEnum):
    """NETH reason codes (UET values)."""

    TRIMMED = 0x01  # retransmit, EV -> SKIP, CC decrease
    TRIMMED_LASTHOP = 0x02  # retransmit, EV untouched
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    UNEXP_EVENT = 0x19  # fatal: QP to error


class SackVerdict(IntEnum):
    """SETH ``m``: the responder's multipath verdict on the EV that triggered the SACK."""

    NONE = 0
    SKIP_ONCE = 1  # forward path saw ECN
    ALWAYS_SKIP = 2


class EndpointOp(IntEnum):
    """ERTH/EETH ``op``."""

    PORT_STATUS_UPDATE = 0
    EV_PROBE = 1


class EvMode(IntEnum):
    """Where the entropy value travels (controller EV format modes UDP, STEV, SRV6)."""

    ECMP = 0  # EV in the UDP source port only; switches hash the 5-tuple
    STRUCTURED = 1  # 32-bit EV split between UDP source port and IPv6 flow label
    SRV6 = 2  # path in an SRv6 uSID container; EV still in the UDP source port


class Ecn(IntEnum):
    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3

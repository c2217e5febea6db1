"""Entropy-value placement for the three path modes, shared by hosts and switches.

- ECMP (controller mode UDP): the EV is 16 bits and is the UDP source port.
- Structured EV (STEV): a 32-bit EV; low 16 bits in the UDP source port, high 16 bits in the
  low 16 bits of the 20-bit IPv6 flow label (flow-label bits 19..16 are zero).
- SRv6 uSID: the EV's low 16 bits stay in the UDP source port (reflected in SACK/NACK); the
  path is the uSID container built from a per-destination template plus the EV's per-tier
  choices (usid_container).

Per-tier subfields of a structured EV are numbered from the most significant bit
(ev_subfield). All functions are pure and cheap; see docs/wire-format.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from hosts.wire.enums import EvMode

STEV_SPORT_BITS = 16  # EV bits [15:0] -> UDP source port
STEV_FLOW_LABEL_BITS = 16  # EV bits [31:16] -> flow label bits [15:0]
EV_BITS = {EvMode.ECMP: 16, EvMode.STRUCTURED: 32, EvMode.SRV6: 16}

USID_BLOCK_BITS = 32
USID_BITS = 16
USID_MAX = 6  # 32-bit block + six 16-bit uSIDs = 128 bits


def ev_to_fields(mode: EvMode, ev: int) -> tuple[int, int]:
    """EV -> (udp_sport, flow_label). Non-STEV modes leave the flow label 0."""
    if mode == EvMode.STRUCTURED:
        return ev & 0xFFFF, (ev >> 16) & 0xFFFF
    return ev & 0xFFFF, 0


def fields_to_ev(mode: EvMode, udp_sport: int, flow_label: int = 0) -> int:
    """(udp_sport, flow_label) -> EV; the inverse of ev_to_fields."""
    if mode == EvMode.STRUCTURED:
        return ((flow_label & 0xFFFF) << 16) | (udp_sport & 0xFFFF)
    return udp_sport & 0xFFFF


def ev_subfield(ev: int, msb_offset: int, width: int, total_bits: int = 32) -> int:
    """Subfield of a structured EV; ``msb_offset`` counts from the EV's most significant bit.

    Example (T0 8 bits, T1 4, T2 4): T1 = ev_subfield(ev, 8, 4).
    """
    if width <= 0 or msb_offset < 0 or msb_offset + width > total_bits:
        raise ValueError(f"subfield {msb_offset}+{width} outside a {total_bits}-bit EV")
    return (ev >> (total_bits - msb_offset - width)) & ((1 << width) - 1)


def ev_with_subfield(ev: int, msb_offset: int, width: int, value: int, total_bits: int = 32) -> int:
    """Return ``ev`` with one structured subfield replaced by ``value``."""
    if width <= 0 or msb_offset < 0 or msb_offset + width > total_bits:
        raise ValueError(f"subfield {msb_offset}+{width} outside a {total_bits}-bit EV")
    if not 0 <= value < (1 << width):
        raise ValueError(f"value {value} does not fit {width} bits")
    shift = total_bits - msb_offset - width
    mask = ((1 << width) - 1) << shift
    return (ev & ~mask) | (value << shift)


@dataclass(frozen=True, slots=True)
class UsidSlot:
    """One uSID of a template: ``base`` or'ed with ``ev_width`` EV bits taken at ``ev_shift``.

    ``ev_width`` 0 means a fixed uSID. The EV bits land at ``usid_shift`` inside the uSID.
    """

    base: int
    ev_shift: int = 0
    ev_width: int = 0
    usid_shift: int = 0


@dataclass(frozen=True, slots=True)
class UsidTemplate:
    """Per-destination uSID path: 32-bit locator block and up to six uSID slots."""

    block: int
    slots: tuple[UsidSlot, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.block < (1 << USID_BLOCK_BITS):
            raise ValueError("uSID block must be 32 bits")
        if len(self.slots) > USID_MAX:
            raise ValueError(f"at most {USID_MAX} uSIDs fit one container")
        for slot in self.slots:
            if not 0 < slot.base < (1 << USID_BITS) and slot.ev_width == 0:
                raise ValueError("a fixed uSID must be a non-zero 16-bit value")
            if slot.ev_width and slot.usid_shift + slot.ev_width > USID_BITS:
                raise ValueError("EV bits do not fit inside the uSID")


def usid_container(template: UsidTemplate, ev: int) -> bytes:
    """Build the 16-byte destination address for ``ev`` from a per-destination template."""
    value = template.block
    for slot in template.slots:
        usid = slot.base
        if slot.ev_width:
            usid |= ((ev >> slot.ev_shift) & ((1 << slot.ev_width) - 1)) << slot.usid_shift
        value = (value << USID_BITS) | (usid & 0xFFFF)
    value <<= USID_BITS * (USID_MAX - len(template.slots))
    return value.to_bytes(16, "big")


def usid_active(addr: bytes) -> int:
    """The active uSID (bits 95..80 of the container): the one the next switch must own."""
    return int.from_bytes(addr[4:6], "big")


def usid_block(addr: bytes) -> int:
    return int.from_bytes(addr[0:4], "big")


def usid_shift(addr: bytes) -> bytes:
    """NEXT-C-SID shift-and-forward: drop the active uSID, shift the rest left, zero fill."""
    if len(addr) != 16:
        raise ValueError("an IPv6 address is 16 bytes")
    return bytes(addr[0:4]) + bytes(addr[6:16]) + b"\x00\x00"


def usid_end_of_container(addr: bytes) -> bool:
    """True when no uSID is left after the active one (the container is exhausted)."""
    return not any(addr[6:16])

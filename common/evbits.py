"""Entropy-value bit fields and SRv6 uSID templates: the one definition of their arithmetic.

Neutral ground for the three users: topologies derives per-tier EV fields and per-destination
uSID templates from a topology, the host agent builds uSID containers from those templates per
packet, and the tests hold the switch's shift-and-forward to the reference here. How an EV is
placed in the headers (UDP source port, flow label) is the wire codec's (hosts.wire.ev_placement).

Per-tier subfields of a structured EV are numbered from the most significant bit. A uSID
container is a 32-bit locator block followed by up to six 16-bit uSIDs (RFC 9800 NEXT-C-SID),
zero filled to 128 bits. All functions are pure and cheap; see docs/wire-format.md.
"""

from __future__ import annotations

from dataclasses import dataclass

USID_BLOCK_BITS = 32
USID_BITS = 16
USID_MAX = 6  # 32-bit block + six 16-bit uSIDs = 128 bits


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

    def usid(self, ev: int) -> int:
        if not self.ev_width:
            return self.base
        return self.base | (((ev >> self.ev_shift) & ((1 << self.ev_width) - 1)) << self.usid_shift)


@dataclass(frozen=True, slots=True)
class UsidTemplate:
    """Per-destination uSID path: 32-bit locator block and up to six uSID slots.

    No slots means the destination is reached without a container (plain IPv6).
    """

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

    def usids(self, ev: int) -> list[int]:
        """The uSIDs ``ev`` selects, in path order."""
        return [slot.usid(ev) for slot in self.slots]


def usid_container(template: UsidTemplate, ev: int) -> bytes:
    """Build the 16-byte destination address for ``ev`` from a per-destination template."""
    value = template.block
    for slot in template.slots:
        value = (value << USID_BITS) | (slot.usid(ev) & 0xFFFF)
    value <<= USID_BITS * (USID_MAX - len(template.slots))
    return value.to_bytes(16, "big")


def usid_active(addr: bytes) -> int:
    """The active uSID (bits 95..80 of the container): the one the next switch must own."""
    return int.from_bytes(addr[4:6], "big")


def usid_shift(addr: bytes) -> bytes:
    """NEXT-C-SID shift-and-forward: drop the active uSID, shift the rest left, zero fill."""
    if len(addr) != 16:
        raise ValueError("an IPv6 address is 16 bytes")
    return bytes(addr[0:4]) + bytes(addr[6:16]) + b"\x00\x00"


def usid_end_of_container(addr: bytes) -> bool:
    """True when no uSID is left after the active one (the container is exhausted)."""
    return not any(addr[6:16])

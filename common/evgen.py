"""Generated (GEN) EV profiles: the one definition of how fields expand into entropy values.

A GEN profile describes its EVs by fields (mrc_ctl EV fields), packed from the most
significant end: each field is ``width`` bits whose base is ``init_val``; the values
``min_val..max_val`` are written into the bits set in ``mask`` (most significant first); a
field with mask 0 is the constant ``init_val``. ``gen_values`` lists every combination,
field 0 varying fastest.

Two ways to bind the values to NIC ports use it:

- ``gen_array`` (the controller, mrc_ctl semantics): EV i goes on port ``i mod ports``, its
  value is combination ``i // ports`` (so every combination appears on every port);
- ``gen_per_port`` (an agent's default profile when no controller gives one): ``per_port``
  consecutive combinations on each port, no value used twice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GenField:
    width: int
    init_val: int = 0
    mask: int = 0
    min_val: int = 0
    max_val: int = 0

    def problem(self) -> str | None:
        """Why the field cannot generate values, or None."""
        if self.width < 1:
            return "width must be >= 1"
        if self.init_val >> self.width or self.mask >> self.width:
            return f"init_val and mask must fit {self.width} bits"
        bits = self.mask.bit_count()
        if self.min_val > self.max_val or self.max_val >> bits:
            return f"need min_val <= max_val < 2**{bits} (mask bits)"
        return None

    @property
    def radix(self) -> int:
        return self.max_val - self.min_val + 1 if self.mask else 1

    def value(self, g: int) -> int:
        """``init_val`` with the bits of ``g`` written into the set bits of ``mask``."""
        positions = [b for b in range(self.mask.bit_length() - 1, -1, -1) if self.mask >> b & 1]
        value = self.init_val
        for i, bit in enumerate(positions):
            src = (g >> (len(positions) - 1 - i)) & 1
            value = (value & ~(1 << bit)) | (src << bit)
        return value


# The agent's default: 16-bit EVs 0x8000, 0x8001, ... (top bit set, 32768 values).
DEFAULT_GEN = (GenField(width=16, init_val=0x8000, mask=0x7FFF, min_val=0, max_val=0x7FFF),)


def combinations(fields: tuple[GenField, ...] | list[GenField]) -> int:
    return math.prod(f.radix for f in fields)


def gen_value(fields: tuple[GenField, ...] | list[GenField], c: int) -> int:
    """Value of combination ``c`` (0 <= c < combinations(fields)); field 0 varies fastest."""
    value = 0
    for f in fields:
        radix = f.radix
        g = f.min_val + c % radix if f.mask else 0
        c //= radix
        value = (value << f.width) | f.value(g)
    return value


def gen_array(
    fields: tuple[GenField, ...] | list[GenField], count: int, ports: int
) -> list[tuple[int, int]]:
    """``count`` (value, port index) pairs: EV i on port i mod ports, combination i // ports."""
    combos = combinations(fields)
    return [(gen_value(fields, (i // ports) % combos), i % ports) for i in range(count)]


def gen_per_port(
    fields: tuple[GenField, ...] | list[GenField], per_port: int, ports: int
) -> list[tuple[int, int]]:
    """``per_port`` distinct values on each port in turn, as long as combinations last."""
    combos = combinations(fields)
    out: list[tuple[int, int]] = []
    for port in range(ports):
        for c in range(port * per_port, min((port + 1) * per_port, combos)):
            out.append((gen_value(fields, c), port))
    return out

"""common.evgen: GEN fields expand into exactly the values their fields describe."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from common.evgen import (
    DEFAULT_GEN,
    GenField,
    combinations,
    gen_array,
    gen_per_port,
    gen_value,
)


@st.composite
def fields(draw: st.DrawFn) -> list[GenField]:
    out = []
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.integers(1, 6))
        mask = draw(st.integers(0, (1 << width) - 1))
        bits = mask.bit_count()
        lo = draw(st.integers(0, (1 << bits) - 1))
        hi = draw(st.integers(lo, (1 << bits) - 1))
        out.append(GenField(width, draw(st.integers(0, (1 << width) - 1)), mask, lo, hi))
    return out


def _gather(value: int, mask: int) -> int:
    """The bits of ``value`` under ``mask``, most significant first, as one number."""
    g = 0
    for b in range(mask.bit_length() - 1, -1, -1):
        if mask >> b & 1:
            g = (g << 1) | (value >> b & 1)
    return g


@given(fields())
def test_every_combination_reads_back_field_by_field(fs: list[GenField]) -> None:
    assert all(f.problem() is None for f in fs)
    values = [gen_value(fs, c) for c in range(combinations(fs))]
    assert len(set(values)) == len(values)
    seen = []
    for value in values:
        parts = []
        for f in reversed(fs):  # the last field holds the low bits
            part, value = value & ((1 << f.width) - 1), value >> f.width
            assert part & ~f.mask == f.init_val & ~f.mask
            g = _gather(part, f.mask)
            assert (g == 0) if not f.mask else f.min_val <= g <= f.max_val
            parts.append(g)
        seen.append(tuple(reversed(parts)))
    # field 0 varies fastest
    assert seen == sorted(seen, key=lambda t: tuple(reversed(t)))


def test_default_is_the_sequence_from_0x8000_in_blocks_per_port() -> None:
    assert gen_per_port(DEFAULT_GEN, 3, 2) == [
        (0x8000, 0), (0x8001, 0), (0x8002, 0), (0x8003, 1), (0x8004, 1), (0x8005, 1)
    ]  # fmt: skip
    small = (GenField(4, 0, 0b0011, 0, 3),)  # four values only
    assert gen_per_port(small, 3, 2) == [(0, 0), (1, 0), (2, 0), (3, 1)]
    assert gen_per_port(DEFAULT_GEN, 0, 2) == []


def test_array_interleaves_ports_and_repeats_each_combination_per_port() -> None:
    fs = (GenField(4, 0, 0b0011, 0, 2),)
    assert gen_array(fs, 7, 2) == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (0, 0)]


def test_fields_that_cannot_generate_say_why() -> None:
    assert "fit 4 bits" in str(GenField(4, init_val=16).problem())
    assert "2**2" in str(GenField(4, mask=0b0011, max_val=4).problem())
    assert "width" in str(GenField(0).problem())

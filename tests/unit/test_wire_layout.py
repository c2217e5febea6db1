"""The layout tables are consistent: sizes, no overlaps, names equal the dataclasses."""

from __future__ import annotations

from dataclasses import fields

import pytest

from hosts.wire import Bth, MrcPacket
from hosts.wire import layout as L
from hosts.wire.codec import HEADER_CLASSES
from hosts.wire.compile import plan_stack

SIZES = {
    "BTH": 12, "METH": 4, "TSETH": 4, "RETH": 16, "ImmDt": 4, "AETH": 4, "SETH": 28,
    "CC_STATE": 8, "NETH": 20, "PETH": 16, "ERTH": 16, "EETH": 36, "ETH": 14, "IPV6": 40,
    "SRH": 8, "UDP": 8,
}  # fmt: skip


@pytest.mark.parametrize("layout", L.ALL_LAYOUTS, ids=lambda x: x.name)
def test_sizes_and_no_overlap(layout: L.Layout) -> None:
    assert layout.size == SIZES[layout.name]
    bits = [0] * (layout.size * 8)
    for f in layout.fields:
        assert 0 <= f.bit <= 7 and f.width > 0
        for b in range(f.start, f.end):
            bits[b] += 1
    assert max(bits) == 1
    assert plan_stack([("", layout)]).size == layout.size


def test_names_match_dataclasses() -> None:
    assert [f.name for f in fields(Bth)] == [f.name for f in L.BTH.fields]
    for attr, layout in L.MRC_HEADERS.items():
        assert [f.name for f in fields(HEADER_CLASSES[attr])] == [f.name for f in layout.fields]
    slots = {f.name for f in fields(MrcPacket)}
    for attrs in L.OPCODE_HEADERS.values():
        assert set(attrs) <= slots


def test_flag_and_signed_kinds() -> None:
    for layout in L.ALL_LAYOUTS:
        for f in layout.fields:
            assert f.kind in "usfb"
            if f.kind == "f":
                assert f.width == 1


def test_opcode_prefix_is_the_manufacturer_range() -> None:
    for op in L.OPCODE_HEADERS:
        assert op >> 5 == 0b110


def test_docs_tables_are_generated_from_layout() -> None:
    from hosts.wire.docgen import DOC_PATH, render

    text = DOC_PATH.read_text()
    assert render(text) == text, "run: python -m hosts.wire.docgen"


def test_every_stack_generates() -> None:
    """Stacks are generated lazily; make sure every (opcode, TSETH) combination compiles."""
    from hosts.wire.stacks import build_packet_stacks, build_stacks

    expected = len(L.OPCODE_HEADERS) + len(L.PAYLOAD_OPCODES)
    for table in (build_stacks(True), build_stacks(False), build_packet_stacks()):
        assert len(table.build_all()) == expected
        assert table.build(0x04 << 1) is None  # an RC opcode is no MRC stack

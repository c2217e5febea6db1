"""The layout compiler against an independent big-integer bit packer, on random layouts."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hosts.wire.compile import compile_layout
from hosts.wire.layout import Field, Layout


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    """Random headers: each 32-bit chunk split into fields and reserved gaps, sometimes one
    aligned 64-bit field; bit offsets and widths are otherwise arbitrary."""
    size = draw(st.sampled_from([4, 8, 12, 16, 20]))
    fields: list[Field] = []
    chunk = 0
    while chunk < size:
        if chunk % 8 == 0 and chunk + 8 <= size and draw(st.integers(0, 5)) == 0:
            fields.append(Field(f"f{len(fields)}", chunk, 7, 64))
            chunk += 8
            continue
        pos = chunk * 8
        end = pos + 32
        while pos < end:
            pos += draw(st.integers(0, 6))
            if pos >= end:
                break
            width = draw(st.integers(1, end - pos))
            kind = "f" if width == 1 and draw(st.booleans()) else "u"
            if width == 16 and pos % 8 == 0 and draw(st.booleans()):
                kind = "s"
            fields.append(Field(f"f{len(fields)}", pos // 8, 7 - pos % 8, width, kind))
            pos += width
        chunk += 4
    assume(fields)
    return Layout("T", size, tuple(fields))


def _reference_pack(layout: Layout, values: dict[str, int]) -> bytes:
    total = 0
    for f in layout.fields:
        total |= (values[f.name] & ((1 << f.width) - 1)) << (layout.size * 8 - f.end)
    return total.to_bytes(layout.size, "big")


@settings(max_examples=150, deadline=None)
@given(layouts(), st.data())
def test_compiled_layouts_match_reference(layout: Layout, data: st.DataObject) -> None:
    try:
        compiled = compile_layout(layout)
    except ValueError:
        assume(False)  # a field crossing a 64-bit word: the compiler refuses, as documented
        return
    values: dict[str, int] = {}
    for f in layout.fields:
        if f.kind == "s":
            values[f.name] = data.draw(st.integers(-(1 << 15), (1 << 15) - 1))
        elif f.kind == "f":
            values[f.name] = int(data.draw(st.booleans()))
        else:
            values[f.name] = data.draw(st.integers(0, (1 << f.width) - 1))
    buf = bytearray(b"\xaa" * (layout.size + 3))
    compiled.pack(buf, 3, *(values[f.name] for f in layout.fields))
    assert bytes(buf[3:]) == _reference_pack(layout, values)
    assert bytes(buf[:3]) == b"\xaa" * 3
    decoded = compiled.unpack(bytes(buf), 3)
    assert [int(v) for v in decoded] == [values[f.name] for f in layout.fields]

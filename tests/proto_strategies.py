"""Hypothesis strategies for protobuf messages of any type, built from their descriptors.

``messages(cls)`` draws instances of a generated message class: every field may be left out
or set, scalars from their whole range and the edges around it (negative numbers, huge
numbers, empty and odd strings and bytes, unknown enum values), nested messages down to a
depth limit, repeated fields with a few elements, one member of each oneof. ``hints`` lets a
caller mix in values that reach deeper (valid ids, names, addresses), so a fuzzed request is
not refused at the first check every time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

F = FieldDescriptor
_INTS = {
    F.TYPE_INT32: (-(1 << 31), (1 << 31) - 1), F.TYPE_SINT32: (-(1 << 31), (1 << 31) - 1),
    F.TYPE_SFIXED32: (-(1 << 31), (1 << 31) - 1), F.TYPE_INT64: (-(1 << 63), (1 << 63) - 1),
    F.TYPE_SINT64: (-(1 << 63), (1 << 63) - 1), F.TYPE_SFIXED64: (-(1 << 63), (1 << 63) - 1),
    F.TYPE_UINT32: (0, (1 << 32) - 1), F.TYPE_FIXED32: (0, (1 << 32) - 1),
    F.TYPE_UINT64: (0, (1 << 64) - 1), F.TYPE_FIXED64: (0, (1 << 64) - 1),
}
Hints = Mapping[str, Sequence[Any]]  # field name -> values worth trying


def _int(lo: int, hi: int) -> st.SearchStrategy[int]:
    edges = [v for v in (0, 1, 2, 3, 7, 16, 255, 256, 0xFFFF, 0x10000, lo, hi, -1)
             if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(0, 64))


def _scalar(field: FieldDescriptor, hints: Hints) -> st.SearchStrategy[Any]:
    t = field.type
    if t in _INTS:
        base = _int(*_INTS[t])
    elif t == F.TYPE_BOOL:
        base = st.booleans()
    elif t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        base = st.floats(allow_nan=True, allow_infinity=True, width=32 if t == F.TYPE_FLOAT
                         else 64)
    elif t == F.TYPE_STRING:
        base = st.one_of(st.text(max_size=40), st.sampled_from(
            ["", "h0", "h1", "x" * 300, "fd00::1", "::", "1", "-1", "\x00", "g0:0->g1:1"]))
    elif t == F.TYPE_BYTES:
        base = st.one_of(st.binary(max_size=40), st.sampled_from([b"", b"\x00" * 16,
                                                                   b"\xff" * 64]))
    elif t == F.TYPE_ENUM:
        values = [v.number for v in field.enum_type.values]
        base = st.one_of(st.sampled_from(values), st.integers(-5, 1000))
    else:  # pragma: no cover - every scalar type is above
        raise TypeError(field.type)
    extra = hints.get(field.name)
    return st.one_of(st.sampled_from(list(extra)), base) if extra else base


def _fill(cls: type[Message], depth: int, hints: Hints) -> st.SearchStrategy[Message]:
    desc: Descriptor = cls.DESCRIPTOR

    @st.composite
    def build(draw: Callable[..., Any]) -> Message:
        msg = cls()
        for field in desc.fields:
            if not draw(st.booleans()):
                continue
            if field.message_type is not None:
                if depth <= 0:
                    continue
                sub = _message_class(field)
                if field.is_repeated:
                    if field.message_type.GetOptions().map_entry:
                        continue  # maps appear in answers, not in requests
                    for item in draw(st.lists(_fill(sub, depth - 1, hints), max_size=3)):
                        getattr(msg, field.name).add().CopyFrom(item)
                else:
                    getattr(msg, field.name).CopyFrom(draw(_fill(sub, depth - 1, hints)))
            elif field.is_repeated:
                getattr(msg, field.name).extend(
                    draw(st.lists(_scalar(field, hints), max_size=4)))
            else:
                value = draw(_scalar(field, hints))
                try:
                    setattr(msg, field.name, value)
                except (ValueError, TypeError):  # e.g. a float out of a float32's range
                    pass
        return msg

    return build()


def _message_class(field: FieldDescriptor) -> type[Message]:
    cls: type[Message] = field.message_type._concrete_class
    return cls


def messages(cls: type[Message], depth: int = 4,
             hints: Hints | None = None) -> st.SearchStrategy[Message]:
    return _fill(cls, depth, hints or {})

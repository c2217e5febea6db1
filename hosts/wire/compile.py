"""Turn the layout tables into fast pack/unpack code (generated once at import).

A *stack* is a sequence of layouts laid back to back (for example IPv6, UDP, BTH, METH,
RETH). ``plan_stack`` splits it into struct "words" (B/H/I/Q or raw bytes) such that no field
crosses a word, reserved bytes becoming struct pad bytes, and gives for every field the Python
expression that extracts it from the unpacked words and, for every word, the expression that
assembles it from field values. The codec turns plans into small generated functions, the
same technique dataclasses use for ``__init__``: one ``unpack_from``/``pack_into`` for a whole
header stack and a handful of integer operations, no loops.

Encoding takes every integer field modulo 2**width (PSNs wrap naturally; signed fields become
two's complement), so a field can never corrupt its neighbours.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from hosts.wire.layout import Field, Layout

_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


@dataclass(frozen=True, slots=True)
class Word:
    start: int  # byte offset in the stack
    size: int  # bytes
    base: int  # byte offset of the word's layout in the stack
    code: str  # struct code
    fields: tuple[tuple[str, Field], ...]  # (qualified name, field), e.g. ("bth.psn", ...)


@dataclass(frozen=True, slots=True)
class Plan:
    """How to (un)pack a stack of headers with one struct call."""

    struct: struct.Struct
    words: tuple[Word, ...]
    extract: dict[str, str]  # qualified field name -> expression over w0, w1, ...

    @property
    def size(self) -> int:
        return self.struct.size

    @property
    def word_vars(self) -> str:
        names = ", ".join(f"w{i}" for i in range(len(self.words)))
        return names + ("," if len(self.words) == 1 else "")

    def insert(self, source: Callable[[str], str]) -> list[str]:
        """Per-word expressions; ``source(qualified_name)`` gives each field's value code."""
        return [self.insert_word(w, source) for w in self.words]

    def insert_word(
        self,
        w: Word,
        source: Callable[[str], str],
        omit: frozenset[str] = frozenset(),
        unchecked: bool = False,
    ) -> str:
        """Expression of one word, leaving out the fields named in ``omit`` (zero bits).

        ``unchecked`` leaves the mask off the unsigned field in the word's top bits: a value
        out of range then overflows the whole word, which struct rejects (struct.error), so
        the caller can retry with the masked expression. Lower fields keep their masks (they
        could otherwise spill silently into the field above).
        """
        parts = [
            _insert(source(q), w, f, unchecked and f.kind in "uf" and _is_top(w, f))
            for q, f in w.fields
            if q not in omit
        ]
        return " | ".join(parts) if parts else "0"


def _layout_words(layout: Layout, base: int, prefix: str) -> list[Word]:
    size = layout.size
    covered = [False] * size
    for f in layout.fields:
        if f.width <= 0 or f.end > size * 8:
            raise ValueError(f"{layout.name}.{f.name}: outside the header")
        if f.kind == "b" and (f.start % 8 or f.width % 8):
            raise ValueError(f"{layout.name}.{f.name}: byte fields must be byte aligned")
        for b in range(f.start // 8, (f.end + 7) // 8):
            covered[b] = True
    words: list[Word] = []
    used_until = 0
    p = 0
    while p < size:
        if not covered[p]:
            p += 1
            continue
        start, end = p, p + 1
        while True:
            end = _closure(layout, start, end)
            members = tuple(f for f in layout.fields if f.start < end * 8 and f.end > start * 8)
            if any(f.kind == "b" for f in members):
                if len(members) != 1:
                    raise ValueError(f"{layout.name}: byte field shares bytes with another field")
                code = f"{end - start}s"
                break
            if end - start in _CODES:
                code = _CODES[end - start]
                break
            if end - start > 8:
                raise ValueError(f"{layout.name}: no struct word fits bytes {start}..{end}")
            # widen to a struct integer size: reserved bytes around it first, then the word
            # before (e.g. BTH byte 4, FECN/BECN, joins bytes 5-7, dest QP), then the fields after
            prev = words[-1] if words else None
            if start > used_until and not covered[start - 1]:
                start -= 1
            elif end < size and not covered[end]:
                end += 1
            elif (
                prev is not None
                and prev.base == base  # never merge across two headers
                and prev.start + prev.size == base + start
                and prev.code in "BHI"
                and base + end - prev.start <= 8
            ):
                words.pop()
                start = prev.start - base
                used_until = start
            elif end < size:
                end += 1
            else:
                raise ValueError(f"{layout.name}: cannot map bytes {start}..{end} to a word")
        words.append(_word(base, start, end - start, code, members, prefix))
        used_until = p = end
    return words


def _closure(layout: Layout, start: int, end: int) -> int:
    """Smallest end >= ``end`` such that no field crosses bytes start..end."""
    while True:
        new_end = end
        for f in layout.fields:
            if f.start < end * 8 and f.end > start * 8:
                new_end = max(new_end, (f.end + 7) // 8)
        if new_end == end:
            return end
        end = new_end


def _word(
    base: int, start: int, size: int, code: str, members: tuple[Field, ...], prefix: str
) -> Word:
    return Word(base + start, size, base, code, tuple((f"{prefix}{f.name}", f) for f in members))


def field_shift(w: Word, f: Field) -> int:
    """Bits between the lsb of ``f`` and the lsb of its word (0 for byte fields)."""
    return 0 if f.kind == "b" else (w.start - w.base + w.size) * 8 - f.end


def _extract(var: str, w: Word, f: Field) -> str:
    if f.kind == "b":
        return var
    shift = field_shift(w, f)
    mask = (1 << f.width) - 1
    top = shift + f.width == w.size * 8
    if f.kind == "f":
        return f"({var} & {1 << shift:#x} != 0)"
    expr = var if shift == 0 else f"({var} >> {shift})"
    if not top:
        expr = f"({expr} & {mask:#x})"
    if f.kind == "s":
        half = 1 << (f.width - 1)
        expr = f"(({expr} ^ {half:#x}) - {half:#x})"
    return expr


def _insert(value: str, w: Word, f: Field, unmasked: bool = False) -> str:
    if f.kind == "b":
        return value
    shift = field_shift(w, f)
    mask = (1 << f.width) - 1
    expr = value if unmasked else f"({value} & {mask:#x})"
    return expr if shift == 0 else f"({expr} << {shift})"


def _is_top(w: Word, f: Field) -> bool:
    """True if ``f`` holds the most significant bits of word ``w``."""
    return f.start == (w.start - w.base) * 8


def plan_stack(parts: Sequence[tuple[str, Layout]]) -> Plan:
    """Plan one struct for layouts back to back; field names are qualified "prefix.name"."""
    words: list[Word] = []
    base = 0
    for prefix, layout in parts:
        words.extend(_layout_words(layout, base, f"{prefix}." if prefix else ""))
        base += layout.size
    fmt = "!"
    pos = 0
    for w in words:
        if w.start > pos:
            fmt += f"{w.start - pos}x"
        fmt += w.code
        pos = w.start + w.size
    if pos < base:
        fmt += f"{base - pos}x"
    st = struct.Struct(fmt)
    if st.size != base:
        raise ValueError(f"struct size {st.size} != stack size {base}")
    extract: dict[str, str] = {}
    for i, w in enumerate(words):
        for q, f in w.fields:
            extract[q] = _extract(f"w{i}", w, f)
    return Plan(st, tuple(words), extract)


@dataclass(frozen=True, slots=True)
class CompiledLayout:
    """One header's generated functions.

    ``unpack(buf, off)`` returns an instance of ``cls`` (a tuple of field values when there is
    no class); ``pack(buf, off, obj)`` writes it (``pack(buf, off, *values)`` without a class).
    Neither checks bounds: callers do (the codec raises WireError).
    """

    layout: Layout
    size: int
    plan: Plan
    unpack: Callable[..., Any]
    pack: Callable[..., None]
    source: str


def compile_layout(layout: Layout, cls: type | None = None) -> CompiledLayout:
    """Generate pack/unpack for one header; with ``cls`` values map to its attributes."""
    names = [f.name for f in layout.fields]
    if cls is not None and [f.name for f in fields(cls)] != names:
        raise ValueError(f"{cls.__name__} attributes differ from layout {layout.name}")
    plan = plan_stack([("", layout)])
    values = ", ".join(plan.extract[n] for n in names)
    if cls is not None:
        ret = f"_cls({values})"
        pack_args = "obj"
        words = plan.insert(lambda q: f"obj.{q}")
    else:
        ret = f"({values}{',' if len(names) == 1 else ''})"
        pack_args = ", ".join(names)
        words = plan.insert(lambda q: q)
    lname = layout.name.lower()
    source = (
        f"def unpack_{lname}(buf, off, _u=_st.unpack_from, _cls=_cls):\n"
        f"    {plan.word_vars} = _u(buf, off)\n"
        f"    return {ret}\n"
        f"def pack_{lname}(buf, off, {pack_args}, _p=_st.pack_into):\n"
        f"    _p(buf, off, {', '.join(words)})\n"
    )
    ns = generate(source, f"layout {layout.name}", _st=plan.struct, _cls=cls)
    return CompiledLayout(
        layout, layout.size, plan, ns[f"unpack_{lname}"], ns[f"pack_{lname}"], source
    )


def generate(source: str, what: str, **env: Any) -> dict[str, Any]:
    """Execute generated source in a namespace holding ``env``; return the namespace."""
    namespace: dict[str, Any] = dict(env)
    exec(compile(source, f"<wire {what}>", "exec"), namespace)
    return namespace

"""BMv2 JSON expressions -> Python expressions, with BMv2's value semantics.

BMv2 evaluates expressions on arbitrary-precision integers (GMP) and truncates only when a
value is written to a field (src/bm_sim/expressions.cpp, include/bm/bm_sim/data.h); Python
ints behave the same way for + - * & | ^ ~ << >> (two's complement, floor shifts), so most
operators map one to one. The exceptions are helpers in ``switch.p4json.ops`` (shifts by
run-time amounts, division, saturating and two's complement casts).

Every header instance ``h`` (index i) lives in local variables of the generated function:
``v<i>`` validity (0/1), ``b<i>`` its wire image when it was last extracted / made valid /
assigned, ``d<i>`` whether a field was written since, and ``f<i>_<j>`` the value of each
field the program touches (signed fields hold their signed value). A header stack also has
``n<k>``, its next index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from switch.p4json import program as pm
from switch.p4json.errors import ConfigError, Unsupported

DATA, BOOL, HEADER, STACK, UNION, USTACK = "data", "bool", "header", "stack", "union", "ustack"
MAX_CONST_SHIFT = 1 << 16
ARCH_FIELDS = ("egress_spec", "mcast_grp", "priority")


@dataclass(frozen=True)
class HeaderRef:
    """A header operand: one instance, or a stack element chosen by a run-time index."""

    static: str | None = None
    stack: str | None = None
    index: str | None = None  # Python expression of the index (``stack`` set)
    cond: str | None = None  # ``cond ? then : other`` of two header operands
    then: HeaderRef | None = None
    other: HeaderRef | None = None

    def elements(self, prog: pm.Program) -> list[tuple[int, str]]:
        if self.static is not None:
            return [(-1, self.static)]
        assert self.stack is not None
        return list(enumerate(prog.stacks[self.stack].headers))


@dataclass(frozen=True)
class UnionRef:
    static: str | None = None
    ustack: str | None = None
    index: str | None = None

    def elements(self, prog: pm.Program) -> list[tuple[int, str]]:
        if self.static is not None:
            return [(-1, self.static)]
        assert self.ustack is not None
        return list(enumerate(prog.union_stacks[self.ustack].unions))


@dataclass
class Typed:
    code: str
    type: str
    ref: HeaderRef | UnionRef | str | None = None  # header / union / stack(name) operands


def choose(index: str, options: list[tuple[int, str]], default: str = "0") -> str:
    """``options[index]`` as a chain of conditional expressions (out of range -> default)."""
    if not options:
        return default
    out = default
    for i, code in reversed(options):
        out = f"({code} if {index} == {i} else {out})"
    return out


@dataclass
class Names:
    """Variable names of the generated code, and which fields the program touches."""

    prog: pm.Program
    hid: dict[str, int] = field(default_factory=dict)
    sid: dict[str, int] = field(default_factory=dict)
    touched: dict[str, set[int]] = field(default_factory=dict)
    image: Callable[[str], str] | None = None  # header -> expression of its wire bytes

    def __post_init__(self) -> None:
        for i, name in enumerate(self.prog.headers):
            self.hid[name] = i
        for i, name in enumerate(self.prog.stacks):
            self.sid[name] = i

    def valid(self, h: str) -> str:
        return f"v{self.hid[h]}"

    def base(self, h: str) -> str:
        return f"b{self.hid[h]}"

    def dirty(self, h: str) -> str:
        return f"d{self.hid[h]}"

    def vlw(self, h: str) -> str:
        """Width in bits of the variable-length field of ``h`` (a run-time value)."""
        return f"w{self.hid[h]}"

    def field(self, h: str, f: str) -> str:
        header = self.prog.header(h)
        idx = header.type.index.get(f)
        if idx is None:
            raise ConfigError(f"header {h} has no field {f}")
        return f"f{self.hid[h]}_{idx}"

    def field_at(self, h: str, idx: int) -> str:
        return f"f{self.hid[h]}_{idx}"

    def next(self, stack: str) -> str:
        return f"n{self.sid[stack]}"

    def fields_of(self, h: str) -> list[int]:
        """Indexes of the fields of ``h`` that get variables (the touched ones)."""
        return sorted(self.touched.get(h, set()))

    def is_touched(self, h: str, idx: int) -> bool:
        return idx in self.touched.get(h, set())


def hexstr(text: str) -> str:
    return str(pm.parse_hexstr(text))


class ExprCompiler:
    """Compiles JSON expressions in one context (action parameters are ``p<k>``)."""

    def __init__(self, names: Names, params: tuple[pm.Param, ...] = (), where: str = "") -> None:
        self.names = names
        self.prog = names.prog
        self.params = params
        self.where = where

    # -- entry points ------------------------------------------------------------------------
    def data(self, node: pm.Json) -> str:
        t = self.compile(node)
        if t.type == BOOL:
            return f"(1 if {t.code} else 0)"
        if t.type != DATA:
            raise ConfigError(f"{self.where}: expected a value, got a {t.type}")
        return t.code

    def boolean(self, node: pm.Json) -> str:
        t = self.compile(node)
        if t.type == BOOL:
            return t.code
        if t.type == DATA:
            return f"({t.code} != 0)"
        raise ConfigError(f"{self.where}: expected a condition, got a {t.type}")

    def header(self, node: pm.Json) -> HeaderRef:
        t = self.compile(node)
        if t.type != HEADER or not isinstance(t.ref, HeaderRef):
            raise ConfigError(f"{self.where}: expected a header, got a {t.type}")
        return t.ref

    def union(self, node: pm.Json) -> UnionRef:
        t = self.compile(node)
        if t.type != UNION or not isinstance(t.ref, UnionRef):
            raise ConfigError(f"{self.where}: expected a header union, got a {t.type}")
        return t.ref

    # -- operands ----------------------------------------------------------------------------
    def field_value(self, h: str, f: str) -> str:
        if f == "$valid$":
            self.prog.header(h)
            return self.names.valid(h)
        spec = self.prog.field_spec(h, f)
        del spec
        return self.names.field(h, f)

    def valid_of(self, ref: HeaderRef) -> str:
        if ref.cond is not None:
            assert ref.then is not None and ref.other is not None
            return f"({self.valid_of(ref.then)} if {ref.cond} else {self.valid_of(ref.other)})"
        if ref.static is not None:
            return self.names.valid(ref.static)
        assert ref.index is not None
        return choose(ref.index, [(i, self.names.valid(h)) for i, h in ref.elements(self.prog)])

    def field_of(self, ref: HeaderRef, offset: int) -> str:
        if ref.cond is not None:
            assert ref.then is not None and ref.other is not None
            return (f"({self.field_of(ref.then, offset)} if {ref.cond} "
                    f"else {self.field_of(ref.other, offset)})")
        if ref.static is not None:
            htype = self.prog.header(ref.static).type
            if not 0 <= offset < len(htype.fields):
                raise ConfigError(f"{self.where}: field offset {offset} out of range")
            return self.names.field_at(ref.static, offset)
        assert ref.index is not None
        return choose(
            ref.index, [(i, self.names.field_at(h, offset)) for i, h in ref.elements(self.prog)]
        )

    def stack_last_field(self, stack: str, f: str) -> str:
        st = self.prog.stacks.get(stack)
        if st is None:
            raise ConfigError(f"{self.where}: unknown header stack {stack}")
        idx = st.type.index.get(f)
        if idx is None:
            raise ConfigError(f"{self.where}: stack {stack} has no field {f}")
        n = self.names.next(stack)
        return choose(f"{n} - 1", [(i, self.names.field_at(h, idx)) for i, h in enumerate(st.headers)])

    def compile(self, node: pm.Json) -> Typed:
        if node is None:
            raise ConfigError(f"{self.where}: empty expression")
        kind = node.get("type")
        value = node.get("value")
        if kind == "expression":
            if isinstance(value, dict) and "op" not in value and "type" in value:
                return self.compile(value)  # primitive parameters wrap expressions twice
            return self._op(value)
        if kind == "field":
            h, f = value
            if h not in self.prog.headers:
                raise ConfigError(f"{self.where}: unknown header {h}")
            return Typed(self.field_value(h, f), DATA)
        if kind == "hexstr":
            return Typed(hexstr(value), DATA)
        if kind == "bool":
            return Typed("True" if value else "False", BOOL)
        if kind in ("local", "runtime_data"):
            idx = int(value)
            if not 0 <= idx < len(self.params):
                raise ConfigError(f"{self.where}: action parameter {idx} out of range")
            return Typed(f"p{idx}", DATA)
        if kind == "header":
            if value not in self.prog.headers:
                raise ConfigError(f"{self.where}: unknown header {value}")
            return Typed("", HEADER, HeaderRef(static=value))
        if kind == "header_stack":
            if value not in self.prog.stacks:
                raise ConfigError(f"{self.where}: unknown header stack {value}")
            return Typed("", STACK, value)
        if kind == "stack_field":
            return Typed(self.stack_last_field(value[0], value[1]), DATA)
        if kind == "header_union":
            if value not in self.prog.unions:
                raise ConfigError(f"{self.where}: unknown header union {value}")
            return Typed("", UNION, UnionRef(static=value))
        if kind == "header_union_stack":
            if value not in self.prog.union_stacks:
                raise ConfigError(f"{self.where}: unknown header union stack {value}")
            return Typed("", USTACK, value)
        if kind == "register":
            name, index = value
            reg = self._register(name)
            return Typed(f"_reg_read({reg}, {self.data(index)})", DATA)
        raise Unsupported(f"expression operand type {kind!r}", self.where)

    def _register(self, name: str) -> str:
        spec = self.prog.registers.get(name)
        if spec is None:
            raise ConfigError(f"{self.where}: unknown register array {name}")
        return f"R{spec.id}"

    # -- operators ---------------------------------------------------------------------------
    def _op(self, e: pm.Json) -> Typed:
        op = e.get("op")
        left, right = e.get("left"), e.get("right")
        if op == "?":
            cond = self.boolean(e["cond"])
            a, b = self.compile(left), self.compile(right)
            if a.type != b.type:
                raise ConfigError(f"{self.where}: ?: branches of types {a.type} and {b.type}")
            if a.type == HEADER and isinstance(a.ref, HeaderRef) and isinstance(b.ref, HeaderRef):
                return Typed("", HEADER, HeaderRef(cond=cond, then=a.ref, other=b.ref))
            if a.type not in (DATA, BOOL):
                raise Unsupported(f"?: on {a.type} operands", self.where)
            return Typed(f"({a.code} if {cond} else {b.code})", a.type)
        if op in ("+", "-") and left is None:
            return Typed(f"({op}{self.data(right)})", DATA)
        if op in ("+", "-", "*", "&", "|", "^"):
            return Typed(f"({self.data(left)} {op} {self.data(right)})", DATA)
        if op == "<<":
            amount = right.get("value") if right.get("type") == "hexstr" else None
            if amount is not None:
                k = pm.parse_hexstr(amount)
                if 0 <= k <= MAX_CONST_SHIFT:
                    return Typed(f"({self.data(left)} << {k})", DATA)
            return Typed(f"_shl({self.data(left)}, {self.data(right)})", DATA)
        if op == ">>":
            amount = right.get("value") if right.get("type") == "hexstr" else None
            if amount is not None and pm.parse_hexstr(amount) >= 0:
                return Typed(f"({self.data(left)} >> {pm.parse_hexstr(amount)})", DATA)
            return Typed(f"_shr({self.data(left)}, {self.data(right)})", DATA)
        if op == "%":
            return Typed(f"_mod({self.data(left)}, {self.data(right)})", DATA)
        if op == "/":
            return Typed(f"_div({self.data(left)}, {self.data(right)})", DATA)
        if op == "~":
            return Typed(f"(~{self.data(right)})", DATA)
        if op in ("==", "!="):
            return self._equality(op, left, right)
        if op in ("<", "<=", ">", ">="):
            return Typed(f"({self.data(left)} {op} {self.data(right)})", BOOL)
        if op == "and":
            return Typed(f"({self.boolean(left)} and {self.boolean(right)})", BOOL)
        if op == "or":
            return Typed(f"({self.boolean(left)} or {self.boolean(right)})", BOOL)
        if op == "not":
            return Typed(f"(not {self.boolean(right)})", BOOL)
        if op == "d2b":
            return Typed(f"({self.data(right)} != 0)", BOOL)
        if op == "b2d":
            return Typed(f"(1 if {self.boolean(right)} else 0)", DATA)
        if op == "valid":
            t = self.compile(right)
            if t.type == HEADER and isinstance(t.ref, HeaderRef):
                return Typed(f"({self.valid_of(t.ref)} != 0)", BOOL)
            if t.type == UNION and isinstance(t.ref, UnionRef):
                return Typed(self.union_valid(t.ref), BOOL)
            raise ConfigError(f"{self.where}: valid() of a {t.type}")
        if op == "valid_union":
            return Typed(self.union_valid(self.union(right)), BOOL)
        if op == "two_comp_mod":
            width = self._const_width(right, op)
            half = 1 << (width - 1)
            return Typed(f"((({self.data(left)} + {half}) & {(1 << width) - 1}) - {half})", DATA)
        if op == "usat_cast":
            width = self._const_width(right, op)
            return Typed(f"min(max({self.data(left)}, 0), {(1 << width) - 1})", DATA)
        if op == "sat_cast":
            width = self._const_width(right, op)
            half = 1 << (width - 1)
            return Typed(f"min(max({self.data(left)}, {-half}), {half - 1})", DATA)
        if op in ("dereference_header_stack", "dereference_stack"):
            st = self.compile(left)
            if st.type != STACK or not isinstance(st.ref, str):
                raise ConfigError(f"{self.where}: {op} of a {st.type}")
            return Typed("", HEADER, HeaderRef(stack=st.ref, index=self.data(right)))
        if op == "access_field":
            ref = self.header(left)
            return Typed(self.field_of(ref, int(right)), DATA)
        if op in ("last_stack_index", "size_stack"):
            st = self.compile(right)
            if st.type != STACK or not isinstance(st.ref, str):
                raise ConfigError(f"{self.where}: {op} of a {st.type}")
            n = self.names.next(st.ref)
            if op == "size_stack":
                return Typed(n, DATA)
            return Typed(f"(({n} - 1) & 0xFFFFFFFFFFFFFFFF)", DATA)  # size_t, as in BMv2
        if op == "dereference_union_stack":
            us = self.compile(left)
            if us.type != USTACK or not isinstance(us.ref, str):
                raise ConfigError(f"{self.where}: {op} of a {us.type}")
            return Typed("", UNION, UnionRef(ustack=us.ref, index=self.data(right)))
        if op == "access_union_header":
            u = self.union(left)
            pos = int(right)
            if u.static is not None:
                members = self.prog.unions[u.static].members
                if not 0 <= pos < len(members):
                    raise ConfigError(f"{self.where}: union member {pos} out of range")
                return Typed("", HEADER, HeaderRef(static=members[pos][1]))
            raise Unsupported("header access in a union stack element chosen at run time", self.where)
        raise Unsupported(f"expression operator {op!r}", self.where)

    def _const_width(self, node: pm.Json, op: str) -> int:
        if node.get("type") != "hexstr":
            raise Unsupported(f"{op} with a width computed at run time", self.where)
        width = pm.parse_hexstr(node["value"])
        if width < 1:
            raise ConfigError(f"{self.where}: {op} width {width}")
        return width

    def union_valid(self, ref: UnionRef) -> str:
        def any_valid(u: str) -> str:
            members = self.prog.unions[u].members
            if not members:
                return "False"
            return "(" + " or ".join(f"{self.names.valid(h)} != 0" for _, h in members) + ")"

        if ref.static is not None:
            return any_valid(ref.static)
        assert ref.index is not None
        return choose(ref.index, [(i, any_valid(u)) for i, u in ref.elements(self.prog)], "False")

    def _equality(self, op: str, left: pm.Json, right: pm.Json) -> Typed:
        a, b = self.compile(left), self.compile(right)
        neg = op == "!="
        if a.type in (DATA, BOOL) and b.type in (DATA, BOOL):
            if a.type == BOOL and b.type == BOOL:
                code = f"(bool({a.code}) {op} bool({b.code}))"
            else:
                code = f"({self.data(left)} {op} {self.data(right)})"
            return Typed(code, BOOL)
        if a.type == HEADER and b.type == HEADER:
            assert isinstance(a.ref, HeaderRef) and isinstance(b.ref, HeaderRef)
            code = self.header_equal(a.ref, b.ref)
            return Typed(f"(not {code})" if neg else code, BOOL)
        if a.type == UNION and b.type == UNION:
            assert isinstance(a.ref, UnionRef) and isinstance(b.ref, UnionRef)
            if a.ref.static is None or b.ref.static is None:
                raise Unsupported("comparing union stack elements chosen at run time", self.where)
            code = self.union_equal(a.ref.static, b.ref.static)
            return Typed(f"(not {code})" if neg else code, BOOL)
        raise ConfigError(f"{self.where}: {op} between {a.type} and {b.type}")

    def header_image(self, h: str) -> str:
        if self.names.image is None:
            raise ConfigError(f"{self.where}: header images are not available here")
        return self.names.image(h)

    def header_equal(self, a: HeaderRef, b: HeaderRef) -> str:
        """BMv2 Header::cmp: same type, both valid, equal fields."""
        if a.static is None or b.static is None:
            raise Unsupported("comparing stack elements chosen at run time", self.where)
        ta, tb = self.prog.header(a.static).type, self.prog.header(b.static).type
        if ta.name != tb.name:
            return "False"
        va, vb = self.names.valid(a.static), self.names.valid(b.static)
        return f"({va} != 0 and {vb} != 0 and {self.header_image(a.static)} == {self.header_image(b.static)})"

    def union_equal(self, a: str, b: str) -> str:
        """BMv2 HeaderUnion::cmp: both valid, the same member valid in both, equal headers."""
        ma, mb = self.prog.unions[a].members, self.prog.unions[b].members
        if len(ma) != len(mb):
            return "False"
        terms = []
        for (_, ha), (_, hb) in zip(ma, mb):
            eq = self.header_equal(HeaderRef(static=ha), HeaderRef(static=hb))
            terms.append(eq)
        return "(" + " or ".join(terms) + ")" if terms else "False"


def collect_fields(prog: pm.Program) -> dict[str, set[int]]:
    """Fields each header's variables must hold: every field the JSON names anywhere, plus
    (conservatively) the fields of stack elements and union members reached at run time."""
    touched: dict[str, set[int]] = {}

    def add(h: str, f: str) -> None:
        header = prog.headers.get(h)
        if header is None or f == "$valid$":
            return
        idx = header.type.index.get(f)
        if idx is not None:
            touched.setdefault(h, set()).add(idx)

    def add_all(h: str) -> None:
        header = prog.headers.get(h)
        if header is not None:
            touched.setdefault(h, set()).update(range(len(header.type.fields)))

    def walk(node: pm.Json) -> None:
        if isinstance(node, dict):
            kind = node.get("type")
            value = node.get("value")
            if kind == "field" and isinstance(value, list) and len(value) == 2:
                add(value[0], value[1])
            elif kind == "stack_field" and isinstance(value, list):
                st = prog.stacks.get(value[0])
                if st is not None:
                    for h in st.headers:
                        add(h, value[1])
            elif kind == "expression" and isinstance(value, dict):
                if value.get("op") == "access_field":
                    _access_field_targets(prog, value, add_all)
                elif value.get("op") == "access_union_header":
                    _union_targets(prog, value.get("left"), add_all)
            elif kind in ("header_stack", "header_union_stack", "header_union"):
                _aggregate_targets(prog, kind, value, add_all)
            for key, child in node.items():
                if key == "source_info":
                    continue
                walk(child)
        elif isinstance(node, list):
            if len(node) == 2 and all(isinstance(x, str) for x in node) and node[0] in prog.headers:
                add(node[0], node[1])
            for child in node:
                walk(child)

    for f in ARCH_FIELDS:  # simple_switch reads these after ingress / egress
        add("standard_metadata", f)
    raw = prog.raw or {}
    for key in ("parsers", "pipelines", "actions", "calculations", "checksums", "field_lists",
                "learn_lists", "meter_arrays"):
        walk(raw.get(key))
    for header in prog.headers.values():
        if header.type.vl_index is not None:
            add_all(header.name)  # variable-length headers are rebuilt from their fields
    for st in prog.stacks.values():  # elements shift into each other: same fields everywhere
        shared: set[int] = set()
        for name in st.headers:
            shared |= touched.get(name, set())
        for name in st.headers:
            touched.setdefault(name, set()).update(shared)
    return touched


AddAll = Callable[[str], None]


def _access_field_targets(prog: pm.Program, e: pm.Json, add_all: AddAll) -> None:
    left = e.get("left") or {}
    if left.get("type") == "expression":
        inner = left.get("value", {})
        if inner.get("op") in ("dereference_header_stack", "dereference_stack"):
            st = prog.stacks.get(str((inner.get("left") or {}).get("value")))
            if st is not None:
                for h in st.headers:
                    add_all(h)
                return
        if inner.get("op") == "access_union_header":
            _union_targets(prog, inner.get("left"), add_all)
            return
    if left.get("type") == "header":
        add_all(str(left.get("value")))


def _union_targets(prog: pm.Program, node: pm.Json, add_all: AddAll) -> None:
    if not isinstance(node, dict):
        return
    if node.get("type") == "header_union":
        union = prog.unions.get(str(node.get("value")))
        for _, h in union.members if union else ():
            add_all(h)
    elif node.get("type") == "expression":
        inner = node.get("value", {})
        us = prog.union_stacks.get(str((inner.get("left") or {}).get("value")))
        for uname in us.unions if us else ():
            for _, h in prog.unions[uname].members:
                add_all(h)


def _aggregate_targets(prog: pm.Program, kind: str, value: object, add_all: AddAll) -> None:
    """Whole stacks / unions passed to primitives (assign, push, pop) move all fields."""
    if kind == "header_stack":
        st = prog.stacks.get(str(value))
        for h in st.headers if st else ():
            add_all(h)
    elif kind == "header_union":
        union = prog.unions.get(str(value))
        for _, h in union.members if union else ():
            add_all(h)
    elif kind == "header_union_stack":
        us = prog.union_stacks.get(str(value))
        for un in us.unions if us else ():
            for _, h in prog.unions[un].members:
                add_all(h)

"""JSON expressions -> C expressions on unsigned __int128, with BMv2's exact values.

BMv2 computes on unbounded integers. C code computes modulo 2**128, which gives the same low
bits for + - * << & | ^ ~; it differs for >>, comparisons, / and % when a value does not fit.
So every expression carries the interval of its exact value: an operand of a non-ring
operator must be *exact* (its interval inside [0, 2**128)), and ``& mask`` or a store into a
field brings any value back to an exact one. A program whose expressions cannot be proven so
is not compiled to C (``NotEligible``) and runs in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from switch.p4json import exprs as ex
from switch.p4json import program as pm

U128 = 1 << 128


class NotEligible(Exception):
    """The program uses something the C backend does not do; it runs in Python."""


@dataclass(frozen=True)
class CVal:
    code: str
    lo: int
    hi: int

    @property
    def exact(self) -> bool:
        return self.lo >= 0 and self.hi < U128

    @property
    def const(self) -> int | None:
        return self.lo if self.lo == self.hi and self.code.startswith("P4C(") else None


def literal(value: int) -> str:
    """A u128 constant (values must be in [0, 2**128))."""
    if value < 1 << 64:
        return f"P4C({value}ULL)"
    return f"P4C2({value >> 64}ULL, {value & ((1 << 64) - 1)}ULL)"


def const(value: int) -> CVal:
    if value < 0:
        return CVal(f"((u128)0 - {literal(-value % U128)})", value, value)
    if value >= U128:
        raise NotEligible(f"constant {value:#x} wider than 128 bits")
    return CVal(literal(value), value, value)


def mask_val(v: CVal, width: int) -> CVal:
    m = (1 << width) - 1
    if v.exact and v.hi <= m:
        return v
    return CVal(f"({v.code} & {literal(m)})", 0, m)


class CExprCompiler:
    """Compiles expressions of one context (action parameters are ``p<k>``)."""

    def __init__(self, names: ex.Names, params: tuple[pm.Param, ...] = (), where: str = "") -> None:
        self.names = names
        self.prog = names.prog
        self.params = params
        self.where = where

    def _no(self, what: str) -> NotEligible:
        return NotEligible(f"{what} ({self.where})")

    # -- entry points ----------------------------------------------------------------------
    def data(self, node: pm.Json) -> CVal:
        kind, v = self._compile(node)
        if kind == "bool":
            assert isinstance(v, str)
            return CVal(f"((u128)({v} ? 1 : 0))", 0, 1)
        if kind != "data" or not isinstance(v, CVal):
            raise self._no(f"a {kind} where a value is needed")
        return v

    def exact(self, node: pm.Json) -> CVal:
        v = self.data(node)
        if not v.exact:
            raise self._no("a value that may not fit 128 bits where its exact value matters")
        return v

    def index(self, node: pm.Json) -> CVal:
        """An array index, compared with ``< size`` as u128: a negative exact value must land
        above every array (sizes are at most 2**24), so it must be at least -2**127."""
        v = self.data(node)
        if not (v.lo >= -(1 << 127) and v.hi < U128):
            raise self._no("an array index that may not fit 128 bits")
        return v

    def boolean(self, node: pm.Json) -> str:
        kind, v = self._compile(node)
        if kind == "bool":
            assert isinstance(v, str)
            return v
        if kind == "data":
            assert isinstance(v, CVal)
            if not v.exact:
                raise self._no("a truth value of a value that may not fit 128 bits")
            return f"({v.code} != 0)"
        raise self._no(f"a {kind} as a condition")

    def header(self, node: pm.Json) -> ex.HeaderRef:
        kind, v = self._compile(node)
        if kind != "header" or not isinstance(v, ex.HeaderRef):
            raise self._no(f"a {kind} where a header is needed")
        return v

    # -- operands ----------------------------------------------------------------------------
    def field(self, h: str, f: str) -> CVal:
        if f == "$valid$":
            self.prog.header(h)
            return CVal(f"((u128){self.names.valid(h)})", 0, 1)
        spec = self.prog.field_spec(h, f)
        return CVal(self.names.field(h, f), 0, (1 << spec.width) - 1)

    def field_at(self, h: str, idx: int) -> CVal:
        spec = self.prog.header(h).type.fields[idx]
        return CVal(self.names.field_at(h, idx), 0, (1 << spec.width) - 1)

    def choose(self, index: str, options: list[tuple[int, CVal]]) -> CVal:
        if not options:
            return const(0)
        code = literal(0)
        for i, v in reversed(options):
            code = f"(({index}) == {i} ? {v.code} : {code})"
        return CVal(code, min(0, *(v.lo for _, v in options)), max(0, *(v.hi for _, v in options)))

    def field_of(self, ref: ex.HeaderRef, offset: int) -> CVal:
        if ref.cond is not None:
            raise self._no("?: on headers")
        if ref.static is not None:
            return self.field_at(ref.static, offset)
        assert ref.index is not None
        return self.choose(ref.index, [(i, self.field_at(h, offset)) for i, h in ref.elements(self.prog)])

    def valid_of(self, ref: ex.HeaderRef) -> str:
        if ref.cond is not None:
            raise self._no("?: on headers")
        if ref.static is not None:
            return self.names.valid(ref.static)
        assert ref.index is not None
        out = "0"
        for i, h in reversed(ref.elements(self.prog)):
            out = f"(({ref.index}) == {i} ? {self.names.valid(h)} : {out})"
        return out

    def stack_last(self, stack: str, f: str) -> CVal:
        st = self.prog.stacks.get(stack)
        if st is None:
            raise self._no(f"unknown stack {stack}")
        idx = st.type.index[f]
        n = self.names.next(stack)
        return self.choose(f"({n} - 1)", [(i, self.field_at(h, idx)) for i, h in enumerate(st.headers)])

    def _compile(self, node: pm.Json) -> tuple[str, CVal | str | ex.HeaderRef | None]:
        kind = node.get("type")
        value = node.get("value")
        if kind == "expression":
            if isinstance(value, dict) and "op" not in value and "type" in value:
                return self._compile(value)
            return self._op(value)
        if kind == "field":
            return "data", self.field(value[0], value[1])
        if kind == "hexstr":
            return "data", const(pm.parse_hexstr(value))
        if kind == "bool":
            return "bool", "1" if value else "0"
        if kind in ("local", "runtime_data"):
            idx = int(value)
            if not 0 <= idx < len(self.params):
                raise self._no(f"parameter {idx} out of range")
            return "data", CVal(f"p{idx}", 0, (1 << self.params[idx].width) - 1)
        if kind == "header":
            self.prog.header(value)
            return "header", ex.HeaderRef(static=value)
        if kind == "header_stack":
            if value not in self.prog.stacks:
                raise self._no(f"unknown stack {value}")
            return "stack", value
        if kind == "stack_field":
            return "data", self.stack_last(value[0], value[1])
        if kind == "register":
            name, index = value
            spec = self.prog.registers.get(name)
            if spec is None or spec.width > 64:
                raise self._no(f"register operand {name}")
            i = self.exact(index)
            return "data", CVal(f"p4_reg(S->R{spec.id}C, S->R{spec.id}N, {i.code})", 0,
                                (1 << spec.width) - 1)
        raise self._no(f"expression operand {kind!r}")

    def _op(self, e: pm.Json) -> tuple[str, CVal | str | ex.HeaderRef | None]:
        op = e.get("op")
        left, right = e.get("left"), e.get("right")
        if op == "?":
            cond = self.boolean(e["cond"])
            ka, a = self._compile(left)
            kb, b = self._compile(right)
            if ka == kb == "data":
                assert isinstance(a, CVal) and isinstance(b, CVal)
                return "data", CVal(f"({cond} ? {a.code} : {b.code})", min(a.lo, b.lo),
                                    max(a.hi, b.hi))
            if ka == kb == "bool":
                return "bool", f"({cond} ? {a} : {b})"
            raise self._no(f"?: on {ka} operands")
        if op in ("+", "-") and left is None:
            r = self.data(right)
            if op == "+":
                return "data", r
            return "data", CVal(f"((u128)0 - {r.code})", -r.hi, -r.lo)
        if op in ("+", "-", "*"):
            a, b = self.data(left), self.data(right)
            if op == "+":
                lo, hi = a.lo + b.lo, a.hi + b.hi
            elif op == "-":
                lo, hi = a.lo - b.hi, a.hi - b.lo
            else:
                prods = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
                lo, hi = min(prods), max(prods)
            return "data", CVal(f"({a.code} {op} {b.code})", lo, hi)
        if op == "&":
            a, b = self.data(left), self.data(right)
            bounds = [v.hi for v in (a, b) if v.lo >= 0]
            if bounds:
                return "data", CVal(f"({a.code} & {b.code})", 0, min(bounds))
            return "data", CVal(f"({a.code} & {b.code})", min(a.lo, b.lo), max(a.hi, b.hi, 0))
        if op in ("|", "^"):
            a, b = self.data(left), self.data(right)
            if a.lo >= 0 and b.lo >= 0:
                top = (1 << max(a.hi.bit_length(), b.hi.bit_length())) - 1
                return "data", CVal(f"({a.code} {op} {b.code})", 0, top)
            width = max(abs(a.lo), abs(a.hi), abs(b.lo), abs(b.hi)).bit_length() + 1
            return "data", CVal(f"({a.code} {op} {b.code})", -(1 << width), 1 << width)
        if op == "~":
            r = self.data(right)
            return "data", CVal(f"(~{r.code})", -r.hi - 1, -r.lo - 1)
        if op == "<<":
            a = self.data(left)
            b = self.exact(right)
            if b.lo == b.hi:
                k = b.lo
                if k >= 128:
                    return "data", CVal(literal(0), 0, 0) if a.lo >= 0 else self._wide(a, k)
                return "data", CVal(f"({a.code} << {k})", min(a.lo << k, 0), max(a.hi << k, 0))
            top = min(b.hi, 4096)
            return "data", CVal(f"p4_shl({a.code}, {b.code})", min(a.lo << top, 0),
                                max(a.hi << top, 0))
        if op == ">>":
            a, b = self.exact(left), self.exact(right)
            if b.lo == b.hi:
                k = b.lo
                if k >= 128:
                    return "data", const(0)
                return "data", CVal(f"({a.code} >> {k})", a.lo >> k, a.hi >> k)
            return "data", CVal(f"p4_shr({a.code}, {b.code})", 0, a.hi)
        if op in ("%", "/"):
            a, b = self.exact(left), self.exact(right)
            fn = "p4_mod" if op == "%" else "p4_div"
            return "data", CVal(f"{fn}({a.code}, {b.code})", 0, a.hi)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            ka, a = self._compile(left)
            kb, b = self._compile(right)
            if ka == kb == "bool" and op in ("==", "!="):
                return "bool", f"((!!{a}) {op} (!!{b}))"
            if ka == "header" or kb == "header":
                raise self._no("header comparison")
            va, vb = self.data(left), self.data(right)
            if not (va.exact and vb.exact):
                raise self._no("a comparison of values that may not fit 128 bits")
            return "bool", f"({va.code} {op} {vb.code})"
        if op == "and":
            return "bool", f"({self.boolean(left)} && {self.boolean(right)})"
        if op == "or":
            return "bool", f"({self.boolean(left)} || {self.boolean(right)})"
        if op == "not":
            return "bool", f"(!{self.boolean(right)})"
        if op == "d2b":
            r = self.exact(right)
            return "bool", f"({r.code} != 0)"
        if op == "b2d":
            return "data", CVal(f"((u128)({self.boolean(right)} ? 1 : 0))", 0, 1)
        if op == "valid":
            kind, v = self._compile(right)
            if kind != "header" or not isinstance(v, ex.HeaderRef):
                raise self._no(f"valid() of a {kind}")
            return "bool", f"({self.valid_of(v)} != 0)"
        if op == "usat_cast":
            a = self.exact(left)
            width = pm.parse_hexstr(right["value"]) if right.get("type") == "hexstr" else -1
            if width < 1 or width > 128:
                raise self._no("usat_cast width")
            m = (1 << width) - 1
            return "data", CVal(f"({a.code} > {literal(m)} ? {literal(m)} : {a.code})", 0, m)
        if op in ("dereference_header_stack", "dereference_stack"):
            kind, st = self._compile(left)
            if kind != "stack" or not isinstance(st, str):
                raise self._no(f"{op} of a {kind}")
            idx = self.exact(right)
            return "header", ex.HeaderRef(stack=st, index=f"(long)({idx.code})")
        if op == "access_field":
            ref = self.header(left)
            return "data", self.field_of(ref, int(right))
        if op in ("last_stack_index", "size_stack"):
            kind, st = self._compile(right)
            if kind != "stack" or not isinstance(st, str):
                raise self._no(f"{op} of a {kind}")
            n = self.names.next(st)
            if op == "size_stack":
                return "data", CVal(f"((u128){n})", 0, len(self.prog.stacks[st].headers))
            return "data", CVal(f"((u128)(uint64_t)({n} - 1))", 0, (1 << 64) - 1)
        raise self._no(f"expression operator {op!r}")

    def _wide(self, a: CVal, k: int) -> CVal:
        raise self._no(f"a shift by {k} of a value that may be negative")

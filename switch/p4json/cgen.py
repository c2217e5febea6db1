"""Generate a CPython extension module (C source) running a program's common path.

The module has one function, ``fast(state, frame, in_port, now_us, ilen, qdepth)``, with the
contract of the generated Python ``fast`` (switch.p4json.codegen): the parser, ingress and,
for a packet that leaves as one unicast copy, egress and the deparser, in C; ``new(objects)``
binds the engine's tables, profiles, counters and registers into a state capsule. Header
fields and metadata are C locals (``u128``); headers keep a pointer to their wire image (into
the frame, a zero image, or a copy in a per-packet arena) and a dirty flag, as in Python;
parser states and control nodes are labels (goto). Programs using anything listed in
``NotEligible`` messages (clones, resubmit, recirculation, digests, multicast, meters,
checksums, unions, signed or variable-length or over-128-bit fields, ...) are not compiled:
they run in Python. The generated Python stays the reference (tests compare the two).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.cexprs import CExprCompiler, CVal, NotEligible, literal, mask_val
from switch.p4json.gen_base import MAX_PARSER_STEPS, find_qdepth_bytes, stack_shift
from switch.p4json.gen_parser import _has_cycle

RUNTIME = (Path(__file__).with_name("cruntime.h")).read_text()
ALGOS = {"crc16": 0, "crc32": 1, "crcCCITT": 2, "csum16": 3, "cksum16": 3, "identity": 4,
         "xor16": 5, "xor32": 6}
ARENA = 8192
PRIMITIVES = {
    "assign", "modify_field", "assign_header", "copy_header", "add_header", "remove_header",
    "exit", "mark_to_drop", "drop", "no_op", "count", "register_read", "register_write",
    "modify_field_with_hash_based_offset", "truncate", "push", "pop", "add_header_fast",
}


class W:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 1

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:;")


class CGen:
    """C source of one program's ``fast`` path; raises NotEligible in the constructor or in
    ``source()`` when the program needs something the C backend does not do."""

    def __init__(self, prog: pm.Program, module: str) -> None:
        self.prog = prog
        self.module = module
        self.names = ex.Names(prog)
        self.names.touched = ex.collect_fields(prog)
        self.tmp = 0
        self.objects: list[tuple[str, str, str]] = []  # (C name, kind, engine object name)
        self._seen: set[str] = set()
        self.drop_port = prog.drop_port
        self._check()

    # -- eligibility ---------------------------------------------------------------------------
    def _check(self) -> None:
        p = self.prog
        if p.unions or p.union_stacks:
            raise NotEligible("header unions")
        if p.checksums:
            raise NotEligible("checksums")
        if p.meters:
            raise NotEligible("meters")
        if p.learn_lists:
            raise NotEligible("digests")
        if p.vsets:
            raise NotEligible("parser value sets")
        for h in p.headers.values():
            if h.type.fixed_bits // 8 > 1024:
                raise NotEligible(f"header {h.name} longer than 1024 bytes")
            for f in h.type.fields:
                if f.vl or f.signed or f.width > 128:
                    raise NotEligible(f"field {h.name}.{f.name} (signed, varbit or > 128 bits)")
        for r in p.registers.values():
            if r.width > 64:
                raise NotEligible(f"register {r.name} wider than 64 bits")
        for a in p.actions.values():
            for prim in a.primitives:
                if prim.get("op") not in PRIMITIVES:
                    raise NotEligible(f"primitive {prim.get('op')}")
                params = prim.get("parameters", [])
                if prim.get("op") in ("assign", "modify_field") and params and params[0].get(
                        "value") == ["standard_metadata", "mcast_grp"]:
                    raise NotEligible("multicast")
        for t in p.all_tables():
            if t.with_counters or t.direct_meter:
                raise NotEligible(f"direct counters or meters of {t.name}")
            if t.profile is not None:
                sel = p.profile(t.profile).selector
                if sel is not None and sel.algo not in ALGOS:
                    raise NotEligible(f"selector hash {sel.algo}")
        for c in p.calculations.values():
            if c.algo not in ALGOS:
                raise NotEligible(f"hash algorithm {c.algo}")
            if any(i.get("type") == "payload" for i in c.inputs):
                raise NotEligible("payload in a calculation")

    # -- helpers -------------------------------------------------------------------------------
    def fresh(self, stem: str = "t") -> str:
        self.tmp += 1
        return f"_{stem}{self.tmp}"

    def obj(self, cname: str, kind: str, name: str) -> str:
        if cname not in self._seen:
            self._seen.add(cname)
            self.objects.append((cname, kind, name))
        return f"S->{cname}"

    def err(self, name: str) -> int:
        code = self.prog.errors.get(name)
        if code is None:
            raise NotEligible(f"the program declares no error {name}")
        return code

    def sm(self, f: str) -> str | None:
        sm = self.prog.header("standard_metadata").type.index
        if f not in sm or not self.names.is_touched("standard_metadata", sm[f]):
            return None
        return self.names.field_at("standard_metadata", sm[f])

    def set_sm(self, w: W, f: str, value: str) -> None:
        var = self.sm(f)
        if var is not None:
            width = self.prog.field_spec("standard_metadata", f).width
            w(f"{var} = ((u128)({value})) & {literal((1 << width) - 1)};")

    def hsize(self, h: str) -> int:
        return self.prog.header(h).type.fixed_bits // 8

    # -- headers -------------------------------------------------------------------------------
    def load_fields(self, w: W, h: str, src: str) -> None:
        t = self.prog.header(h).type
        offs = t.bit_offsets()
        for i in self.names.fields_of(h):
            f = t.fields[i]
            o, wd = offs[i], f.width
            var = self.names.field_at(h, i)
            if o % 8 == 0 and wd == 8:
                w(f"{var} = {src}[{o // 8}];")
            elif o % 8 == 0 and wd == 16:
                w(f"{var} = (u128)({src}[{o // 8}] << 8 | {src}[{o // 8 + 1}]);")
            else:
                w(f"{var} = p4_bits({src}, {o}, {wd});")

    def set_valid(self, w: W, h: str, value: int) -> None:
        w(f"{self.names.valid(h)} = {value};")

    def header_state(self, h: str) -> list[tuple[str, str]]:
        """(C type, variable) of a header's state, for swaps."""
        n = self.names
        out = [("int", n.valid(h)), ("const uint8_t *", n.base(h)), ("int", n.dirty(h))]
        out += [("u128", n.field_at(h, i)) for i in n.fields_of(h)]
        return out

    def image_to(self, w: W, h: str, dst: str) -> None:
        """Write header ``h``'s current bytes to ``dst`` (its image, dirty fields patched)."""
        n = self.names
        size = self.hsize(h)
        w(f"memcpy({dst}, {n.base(h)}, {size});")
        touched = n.fields_of(h)
        if touched:
            offs = self.prog.header(h).type.bit_offsets()
            fields = self.prog.header(h).type.fields
            w(f"if ({n.dirty(h)}) {{")
            for i in touched:
                w(f"    p4_put({dst}, {offs[i]}, {fields[i].width}, {n.field_at(h, i)});")
            w("}")

    def assign_header(self, w: W, dst: str, src: str) -> None:
        pd, ps = self.prog.header(dst), self.prog.header(src)
        if pd.type.name != ps.type.name:
            raise NotEligible(f"assign_header {dst} <- {src}: types differ")
        if pd.metadata or ps.metadata:
            raise NotEligible("assign_header with metadata")
        n = self.names
        size = self.hsize(dst)
        w(f"if ({n.valid(src)}) {{")
        w(f"    if (arena_used + {size} > {ARENA}) goto arena_full;")
        img = self.fresh("img")
        w(f"    uint8_t *{img} = arena + arena_used; arena_used += {size};")
        self.image_to(W_indent(w), src, img)
        w(f"    {n.base(dst)} = {img}; {n.dirty(dst)} = 0;")
        for i in n.fields_of(dst):
            if n.is_touched(src, i):
                w(f"    {n.field_at(dst, i)} = {n.field_at(src, i)};")
            else:
                f = pd.type.fields[i]
                w(f"    {n.field_at(dst, i)} = p4_bits({img}, {pd.type.bit_offsets()[i]}, {f.width});")
        w(f"    {n.valid(dst)} = 1;")
        w("} else {")
        w(f"    {n.valid(dst)} = 0;")
        w("}")

    def swap(self, w: W, a: str, b: str) -> None:
        sa, sb = self.header_state(a), self.header_state(b)
        for (ta, va), (_, vb) in zip(sa, sb):
            t = self.fresh("s")
            w(f"{{ {ta} {t} = {va}; {va} = {vb}; {vb} = {t}; }}")

    def on_header(self, w: W, ref: ex.HeaderRef, fn: object) -> None:
        if ref.cond is not None:
            raise NotEligible("?: on headers")
        if ref.static is not None:
            fn(ref.static)  # type: ignore[operator]
            return
        assert ref.index is not None
        idx = self.fresh("i")
        w(f"{{ long {idx} = {ref.index};")
        for i, h in ref.elements(self.prog):
            w(f"if ({idx} == {i}) {{")
            fn(h)  # type: ignore[operator]
            w("}")
        w("}")

    # -- primitives ----------------------------------------------------------------------------
    def store(self, w: W, dst: pm.Json, value: CVal, cx: CExprCompiler) -> None:
        kind = dst.get("type")
        if kind == "expression":
            e = dst["value"]
            while isinstance(e, dict) and "op" not in e and e.get("type") == "expression":
                e = e["value"]
            if e.get("type") in ("field", "stack_field"):
                self.store(w, e, value, cx)
                return
            if e.get("op") != "access_field":
                raise NotEligible("assignment to an expression")
            ref = cx.header(e["left"])
            off = int(e["right"])
            t = self.fresh("v")
            w(f"{{ u128 {t} = {value.code};")
            self.on_header(w, ref, lambda h: self._store_field(w, h, off, CVal(t, value.lo, value.hi)))
            w("}")
            return
        if kind == "stack_field":
            st = self.prog.stacks[dst["value"][0]]
            idx = st.type.index[dst["value"][1]]
            t = self.fresh("v")
            w(f"{{ u128 {t} = {value.code};")
            n = self.names.next(st.name)
            for pos, h in enumerate(st.headers):
                w(f"if ({n} - 1 == {pos}) {{")
                self._store_field(w, h, idx, CVal(t, value.lo, value.hi))
                w("}")
            w("}")
            return
        if kind != "field":
            raise NotEligible(f"assignment target {kind}")
        h, f = dst["value"]
        if f == "$valid$":
            raise NotEligible("assignment to $valid$")
        self._store_field(w, h, self.prog.header(h).type.index[f], value)

    def _store_field(self, w: W, h: str, idx: int, value: CVal) -> None:
        header = self.prog.header(h)
        spec = header.type.fields[idx]
        if not self.names.is_touched(h, idx):
            return
        w(f"{self.names.field_at(h, idx)} = {mask_val(value, spec.width).code};")
        if not header.metadata:
            w(f"{self.names.dirty(h)} = 1;")

    def calc(self, w: W, inputs: list[pm.Json] | tuple[pm.Json, ...], cx: CExprCompiler) -> str:
        buf = self.fresh("bb")
        w(f"p4_bitbuf {buf}; {buf}.bits = 0; {buf}.overflow = 0;")
        for inp in inputs:
            kind = inp.get("type")
            if kind == "field":
                h, f = inp["value"]
                header = self.prog.header(h)
                v = cx.field(h, f)
                width = 1 if f == "$valid$" else self.prog.field_spec(h, f).width
                line = f"p4_append(&{buf}, {width}, {v.code});"
                w(line if header.metadata else f"if ({self.names.valid(h)}) {line}")
            elif kind == "hexstr":
                width = int(inp["bitwidth"])
                value = pm.parse_hexstr(inp["value"]) & ((1 << width) - 1)
                if width > 128:
                    raise NotEligible("a constant wider than 128 bits in a calculation")
                w(f"p4_append(&{buf}, {width}, {literal(value)});")
            elif kind == "header":
                h = inp["value"]
                if self.prog.header(h).metadata:
                    raise NotEligible("metadata header in a calculation")
                img = self.fresh("hi")
                w(f"if ({self.names.valid(h)}) {{ uint8_t {img}[{max(1, self.hsize(h))}];")
                self.image_to(W_indent(w), h, img)
                w(f"    p4_append_bytes(&{buf}, {img}, {self.hsize(h)}); }}")
            else:
                raise NotEligible(f"calculation input {kind}")
        w(f"if ({buf}.overflow) goto arena_full;")
        return buf

    def primitive(self, w: W, prim: pm.Json, cx: CExprCompiler, stage: str) -> None:
        op = prim.get("op")
        params = prim.get("parameters", [])
        if op in ("assign", "modify_field"):
            src = params[1]
            if src.get("type") == "field" and src["value"][1] != "$valid$" and self.prog.field_spec(
                    *src["value"]).vl:
                raise NotEligible("varbit assignment")
            self.store(w, params[0], cx.data(src), cx)
        elif op in ("assign_header", "copy_header"):
            dst, src = cx.header(params[0]), cx.header(params[1])
            if src.static is None:
                raise NotEligible("assign_header from a run-time stack element")
            self.on_header(w, dst, lambda h: self.assign_header(w, h, src.static or ""))
        elif op in ("add_header", "add_header_fast"):
            ref = cx.header(params[0])
            self.on_header(w, ref, lambda h: self.add_header(w, h, op == "add_header_fast"))
        elif op == "remove_header":
            ref = cx.header(params[0])
            self.on_header(w, ref, lambda h: self.remove_header(w, h))
        elif op == "exit":
            w("ex = 1;")
        elif op in ("mark_to_drop", "drop"):
            self.set_sm(w, "egress_spec", str(self.drop_port))
            self.set_sm(w, "mcast_grp", "0")
        elif op == "no_op":
            pass
        elif op == "count":
            name = params[0]["value"]
            cspec = self.prog.counters[name]
            if cspec.direct_table is not None:
                raise NotEligible("count on a direct counter")
            c = f"C{cspec.id}"
            self.obj(c, "counter", name)
            i = self.fresh("i")
            w(f"{{ u128 {i} = {cx.index(params[1]).code};")
            w(f"  if ({i} < (u128)S->{c}N) {{ S->{c}P[(size_t){i}] += 1; S->{c}B[(size_t){i}] += (uint64_t)ilen; }} }}")
        elif op == "register_read":
            name = params[1]["value"]
            spec = self.prog.registers[name]
            r = f"R{spec.id}"
            self.obj(r, "register", name)
            i = self.fresh("i")
            w(f"{{ u128 {i} = {cx.index(params[2]).code};")
            w(f"  if ({i} < (u128)S->{r}N) {{")
            self.store(w, params[0], CVal(f"((u128)S->{r}C[(size_t){i}])", 0, (1 << spec.width) - 1), cx)
            w("  } }")
        elif op == "register_write":
            name = params[0]["value"]
            spec = self.prog.registers[name]
            r = f"R{spec.id}"
            self.obj(r, "register", name)
            i = self.fresh("i")
            v = mask_val(cx.data(params[2]), spec.width)
            w(f"{{ u128 {i} = {cx.index(params[1]).code};")
            w(f"  if ({i} < (u128)S->{r}N) S->{r}C[(size_t){i}] = (uint64_t)({v.code}); }}")
        elif op == "modify_field_with_hash_based_offset":
            calc = self.prog.calculations[params[2]["value"]]
            w("{")
            buf = self.calc(w, calc.inputs, cx)
            size, base = cx.exact(params[3]), cx.exact(params[1])
            sz = self.fresh("sz")
            w(f"u128 {sz} = {size.code}; if ({sz} == 0) {sz} = 1;")
            h = f"(p4_hash_buf({ALGOS[calc.algo]}, &{buf}) % {sz} + {base.code})"
            self.store(w, params[0], CVal(h, 0, (1 << 64) + base.hi), cx)
            w("}")
        elif op == "truncate":
            v = cx.exact(params[0])
            t = self.fresh("tr")
            w(f"{{ u128 {t} = {v.code}; if ({t} > (u128)PY_SSIZE_T_MAX) {t} = PY_SSIZE_T_MAX;")
            w(f"  if (trunc < 0 || (Py_ssize_t){t} < trunc) trunc = (Py_ssize_t){t}; }}")
        elif op in ("push", "pop"):
            self.stack_shift(w, params, cx, op == "push")
        else:
            raise NotEligible(f"primitive {op}")

    def add_header(self, w: W, h: str, fast: bool) -> None:
        header = self.prog.header(h)
        if header.metadata:
            return
        n = self.names
        if fast:
            w(f"{n.valid(h)} = 1;")
            return
        w(f"if (!{n.valid(h)}) {{")
        for i in n.fields_of(h):
            w(f"    {n.field_at(h, i)} = 0;")
        w(f"    {n.base(h)} = p4_zero; {n.dirty(h)} = 0; {n.valid(h)} = 1;")
        w(f"    plen += {self.hsize(h)};")
        w("}")

    def remove_header(self, w: W, h: str) -> None:
        if self.prog.header(h).metadata:
            return
        n = self.names
        w(f"if ({n.valid(h)}) {{ plen -= {self.hsize(h)}; {n.valid(h)} = 0; }}")

    def stack_shift(self, w: W, params: list[pm.Json], cx: CExprCompiler, push: bool) -> None:
        if params[0].get("type") != "header_stack" or params[1].get("type") != "hexstr":
            raise NotEligible("push/pop of a union stack or by a run-time count")
        st = self.prog.stacks[params[0]["value"]]
        num = pm.parse_hexstr(params[1]["value"])
        size = len(st.headers)
        nv = self.names.next(st.name)
        if num <= 0:
            return
        if push:
            w(f"{nv} = {nv} + {num} < {size} ? {nv} + {num} : {size};")
        else:
            w(f"{nv} = {nv} > {num} ? {nv} - {num} : 0;")
        swaps, invalid = stack_shift(size, num, push)
        for i, j in swaps:
            self.swap(w, st.headers[i], st.headers[j])
        for i in invalid:
            self.set_valid(w, st.headers[i], 0)

    def action_body(self, w: W, action: pm.Action, stage: str) -> None:
        cx = CExprCompiler(self.names, action.params, f"action {action.name}")
        for prim in action.primitives:
            self.primitive(w, prim, cx, stage)

    # -- parser --------------------------------------------------------------------------------
    def parser(self, w: W) -> None:
        p = self.prog.parser
        too_short = self.err("PacketTooShort")
        looping = _has_cycle({n: [t.next for t in s.transitions if t.next]
                              for n, s in p.states.items()})
        w(f"goto ps_{self._sid(p.init)};")
        for name, state in p.states.items():
            w.label(f"ps_{self._sid(name)}")
            if looping:
                timeout = self.prog.errors.get("ParserTimeout", too_short)
                w(f"if (++steps > {MAX_PARSER_STEPS}) {{ perr = {timeout}; goto parse_done; }}")
            cx = CExprCompiler(self.names, where=f"parse state {name}")
            for op in state.ops:
                self.parser_op(w, op, cx, too_short)
            self.transition(w, state, cx)
        w.label("parse_done")

    def _sid(self, name: str) -> int:
        return list(self.prog.parser.states).index(name)

    def _goto(self, nxt: str | None) -> str:
        return "goto parse_done;" if nxt is None else f"goto ps_{self._sid(nxt)};"

    def transition(self, w: W, state: pm.ParseState, cx: CExprCompiler) -> None:
        if not state.key:
            d = next((t for t in state.transitions if t.kind == "default"), None)
            w(self._goto(d.next if d else None))
            return
        parts: list[tuple[str, int]] = []
        nbytes = 0
        for k in reversed(state.key):
            kind, value = k["type"], k["value"]
            if kind == "field":
                v = cx.field(value[0], value[1])
                width = 1 if value[1] == "$valid$" else self.prog.field_spec(*value).width
                code = v.code
            elif kind == "stack_field":
                st = self.prog.stacks[value[0]]
                width = st.type.fields[st.type.index[value[1]]].width
                code = cx.stack_last(value[0], value[1]).code
            elif kind == "lookahead":
                off, width = int(value[0]), int(value[1])
                code = f"p4_peek(frame, flen, pos * 8 + {off}, {width})"
            else:
                raise NotEligible(f"select key {kind}")
            parts.append((code, nbytes * 8))
            nbytes += (width + 7) // 8
        if nbytes > 16:
            raise NotEligible("a select key longer than 16 bytes")
        key = self.fresh("k")
        w(f"{{ u128 {key} = " + " | ".join(f"({c} << {s})" if s else f"({c})" for c, s in parts)
          + ";")
        default = "goto parse_done;"
        for t in state.transitions:
            if t.kind == "default":
                default = self._goto(t.next)
                continue
            if t.kind != "hexstr":
                raise NotEligible("value sets")
            assert isinstance(t.value, int)
            if t.mask is None:
                w(f"  if ({key} == {literal(t.value)}) {self._goto(t.next)}")
            else:
                w(f"  if (({key} & {literal(t.mask)}) == {literal(t.value & t.mask)}) "
                  f"{self._goto(t.next)}")
        w(f"  {default} }}")

    def parser_op(self, w: W, op: pm.ParserOp, cx: CExprCompiler, too_short: int) -> None:
        if op.op == "extract":
            target = op.params[0]
            if target.get("type") == "regular":
                self.extract(w, target["value"], too_short)
            elif target.get("type") == "stack":
                st = self.prog.stacks[target["value"]]
                n = self.names.next(st.name)
                w(f"if ({n} >= {len(st.headers)}) {{ perr = {self.err('StackOutOfBounds')}; goto parse_done; }}")
                for i, h in enumerate(st.headers):
                    w(f"if ({n} == {i}) {{")
                    self.extract(w, h, too_short)
                    w("}")
                w(f"{n} += 1;")
            else:
                raise NotEligible(f"extract into {target.get('type')}")
        elif op.op == "set":
            dst, src = op.params
            if src.get("type") == "lookahead":
                off, width = int(src["value"][0]), int(src["value"][1])
                if width > 128:
                    raise NotEligible("a lookahead wider than 128 bits")
                w(f"if (flen - pos < {(width + 7) // 8}) {{ perr = {too_short}; goto parse_done; }}")
                value = CVal(f"p4_peek(frame, flen, pos * 8 + {off}, {width})", 0, (1 << width) - 1)
                self.store(w, dst, value, cx)
            else:
                self.store(w, dst, cx.data(src), cx)
        elif op.op == "verify":
            cond, error = op.params
            code = cx.exact(error).code if isinstance(error, dict) else str(int(error))
            w(f"if (!{cx.boolean(cond)}) {{ perr = (long)({code}); goto parse_done; }}")
        elif op.op in ("advance", "shift"):
            amount = literal(int(op.params[0]) * 8) if op.op == "shift" else cx.exact(op.params[0]).code
            t = self.fresh("adv")
            w(f"{{ u128 {t} = {amount};")
            w(f"  if ({t} % 8) {{ perr = {self.err('ParserInvalidArgument')}; goto parse_done; }}")
            w(f"  if ((u128)(flen - pos) < {t} / 8) {{ perr = {too_short}; goto parse_done; }}")
            w(f"  pos += (Py_ssize_t)({t} / 8); }}")
        elif op.op == "primitive":
            self.primitive(w, op.params[0], cx, "parser")
        else:
            raise NotEligible(f"parser operation {op.op}")

    def extract(self, w: W, h: str, too_short: int) -> None:
        header = self.prog.header(h)
        if header.metadata or header.type.vl_index is not None:
            raise NotEligible(f"extract of {h}")
        n = self.names
        size = self.hsize(h)
        w(f"if (flen - pos < {size}) {{ perr = {too_short}; goto parse_done; }}")
        w(f"{n.base(h)} = frame + pos; {n.dirty(h)} = 0;")
        self.load_fields(w, h, n.base(h))
        w(f"{n.valid(h)} = 1; pos += {size};")

    # -- controls --------------------------------------------------------------------------------
    def control(self, w: W, pipeline: pm.Pipeline, stage: str) -> None:
        pre = stage[:3]
        end = f"{pre}_end"
        w(f"goto {self._node(pre, pipeline.init, end)};")
        for c in pipeline.conditionals.values():
            w.label(f"{pre}_{self._nid(pipeline, c.name)}")
            cx = CExprCompiler(self.names, where=f"condition {c.name}")
            w(f"if ({cx.boolean(c.expression)}) goto {self._node(pre, c.true_next, end)};")
            w(f"goto {self._node(pre, c.false_next, end)};")
        for t in pipeline.tables.values():
            w.label(f"{pre}_{self._nid(pipeline, t.name)}")
            self.table(w, pipeline, t, stage, pre, end)
        w.label(end)

    def _nid(self, pipeline: pm.Pipeline, name: str) -> int:
        nodes = list(pipeline.tables) + list(pipeline.conditionals)
        return nodes.index(name)

    def _node(self, pre: str, name: str | None, end: str) -> str:
        if name is None:
            return end
        pipeline = self.prog.pipelines["ingress" if pre == "ing" else "egress"]
        return f"{pre}_{self._nid(pipeline, name)}"

    def table(self, w: W, pipeline: pm.Pipeline, t: pm.Table, stage: str, pre: str, end: str) -> None:
        w(f"/* table {t.name} */")
        exits = any(p.get("op") == "exit" for aid in t.action_ids for p in self.prog.actions[aid].primitives)
        const_default = (not t.keys and t.kind == "simple" and t.default_action is not None
                         and t.default_const and t.default_entry_const)
        if const_default:
            assert t.default_action is not None
            action = self.prog.actions[t.default_action]
            w("{")
            for i, arg in enumerate(t.default_args):
                w(f"u128 p{i} = {literal(arg)}; (void)p{i};")
            self.action_body(w, action, stage)
            w("}")
            if exits:
                w(f"if (ex) goto {end};")
            nxt = t.next_tables.get("__MISS__") if t.hit_miss else t.next_tables.get(action.name)
            w(f"goto {self._node(pre, nxt, end)};")
            return
        tid = f"T{t.id}{pre[0]}"
        tobj = self.obj(tid, "table", t.name)
        cx = CExprCompiler(self.names, where=f"table {t.name}")
        keys = []
        for k in t.keys:
            h, f = k.target
            v = cx.field(h, f)
            code = v.code if k.mask is None else f"({v.code} & {literal(k.mask)})"
            keys.append(code)
        mode = ("ternary" if any(k.match_type in ("ternary", "range") for k in t.keys)
                else "lpm" if any(k.match_type == "lpm" for k in t.keys) else "exact")
        w("{ PyObject *e = NULL, *eref = NULL, *call = NULL, *pa = NULL; long a = -1; int hit;")
        if keys:
            w(f"  u128 kv[{len(keys)}] = {{{', '.join(keys)}}};")
        if not keys:
            pass
        elif mode == "exact" and len(keys) == 1:
            self.obj(tid + "X", "exact", t.name)
            w(f"  e = p4_get1(S->{tid}X, kv[0]);")
        elif mode == "exact":
            self.obj(tid + "X", "exact", t.name)
            w(f"  e = p4_getn(S->{tid}X, {len(keys)}, kv);")
        elif mode == "lpm" and len(keys) == 1:
            self.obj(tid + "B", "by_len", t.name)
            self.obj(tid + "L", "lens", t.name)
            w(f"  e = p4_lpm1(S->{tid}B, S->{tid}L, {t.keys[0].width}, kv[0]);")
        else:
            meth = "s_lookup_lpm" if mode == "lpm" else "s_lookup_ternary"
            w(f"  e = eref = p4_call({tobj}, {meth}, {len(keys)}, kv);")  # tuple of key values
            w("  if (e == Py_None) e = NULL;")
        w("  if (e == NULL && PyErr_Occurred()) { Py_XDECREF(eref); goto py_error; }")
        w("  if (e == NULL) {")
        w("    hit = 0;")
        w(f"    call = PyObject_GetAttr({tobj}, s_default);")
        w("    if (call == NULL) { goto py_error; }")
        w("    p4_call_of(call, &a, &pa);")
        w("  } else {")
        w("    hit = 1;")
        if t.kind == "simple":
            w("    call = PyObject_GetAttr(e, s_call);")
            w("    if (call == NULL) { Py_XDECREF(eref); goto py_error; }")
            w("    p4_call_of(call, &a, &pa);")
        else:
            self.indirect(w, t, cx, pre)
        w("  }")
        first = True
        for aid in t.action_ids:
            action = self.prog.actions[aid]
            w(f"  {'if' if first else 'else if'} (a == {aid}) {{")
            for i in range(len(action.params)):
                w(f"    u128 p{i} = p4_arg(pa, {i}); (void)p{i};")
            self.action_body(w, action, stage)
            w("  }")
            first = False
        w("  Py_XDECREF(call); Py_XDECREF(eref);")
        if exits:
            w(f"  if (ex) goto {end};")
        if t.hit_miss:
            w(f"  if (hit) goto {self._node(pre, t.next_tables.get('__HIT__'), end)};")
            w(f"  goto {self._node(pre, t.next_tables.get('__MISS__'), end)};")
        else:
            for aid in t.action_ids:
                nxt = t.next_tables.get(self.prog.actions[aid].name)
                w(f"  if (a == {aid}) goto {self._node(pre, nxt, end)};")
            w(f"  goto {self._node(pre, t.base_default_next, end)};")
        w("}")

    def indirect(self, w: W, t: pm.Table, cx: CExprCompiler, pre: str) -> None:
        assert t.profile is not None
        prof = self.prog.profile(t.profile)
        pobj = self.obj(f"P{prof.id}{pre[0]}", "profile", prof.name)
        w("    long mbr = p4_attr_long(e, s_member);")
        w("    if (mbr >= 0) {")
        w(f"      PyObject *mm = PyObject_GetAttr({pobj}, s_members);")
        w("      if (mm == NULL) { Py_XDECREF(eref); goto py_error; }")
        w("      PyObject *key = PyLong_FromLong(mbr);")
        w("      PyObject *c = key ? PyDict_GetItemWithError(mm, key) : NULL; Py_XDECREF(key);")
        w("      Py_XINCREF(c); Py_DECREF(mm); call = c;")
        w("      if (call == NULL && PyErr_Occurred()) { Py_XDECREF(eref); goto py_error; }")
        w("      p4_call_of(call, &a, &pa);")
        w("    } else {")
        w("      long grp = p4_attr_long(e, s_group);")
        w(f"      PyObject *chs = PyObject_GetAttr({pobj}, s_choices);")
        w("      if (chs == NULL) { Py_XDECREF(eref); goto py_error; }")
        w("      PyObject *key = PyLong_FromLong(grp);")
        w("      PyObject *ch = key ? PyDict_GetItemWithError(chs, key) : NULL; Py_XDECREF(key);")
        w("      if (ch != NULL && PyTuple_Check(ch) && PyTuple_GET_SIZE(ch) > 0) {")
        if prof.selector is None:
            w("        call = PyTuple_GET_ITEM(ch, 0);")
        else:
            inputs = [{"type": "field", "value": list(v)} for v in prof.selector.inputs]
            buf = self.calc(W_indent(W_indent(w, 2), 2), inputs, cx)
            w(f"        u128 hh = p4_hash_buf({ALGOS[prof.selector.algo]}, &{buf});")
            w("        call = PyTuple_GET_ITEM(ch, (Py_ssize_t)(hh % (u128)PyTuple_GET_SIZE(ch)));")
        w("        Py_INCREF(call);")
        w("      }")
        w("      Py_DECREF(chs);")
        w("      if (PyErr_Occurred()) { Py_XDECREF(call); Py_XDECREF(eref); goto py_error; }")
        w("      p4_call_of(call, &a, &pa);")
        w("    }")

    # -- deparser ------------------------------------------------------------------------------
    def deparse(self, w: W) -> None:
        n = self.names
        order = [h for h in self.prog.deparser.order if not self.prog.header(h).metadata]
        w("{ Py_ssize_t total = flen - pay;")
        for h in order:
            w(f"  if ({n.valid(h)}) total += {self.hsize(h)};")
        w("  out = PyBytes_FromStringAndSize(NULL, total);")
        w("  if (out == NULL) goto py_error;")
        w("  uint8_t *o = (uint8_t *)PyBytes_AS_STRING(out);")
        for h in order:
            w(f"  if ({n.valid(h)}) {{")
            self.image_to(W_indent(w), h, "o")
            w(f"    o += {self.hsize(h)}; }}")
        w("  memcpy(o, frame + pay, (size_t)(flen - pay));")
        w("  cut = trunc >= 0 && total > trunc;")
        w("  if (cut && _PyBytes_Resize(&out, trunc) < 0) goto py_error; }")

    # -- the function ----------------------------------------------------------------------------
    def declarations(self, w: W) -> None:
        n = self.names
        for h in self.prog.headers.values():
            if not h.metadata:
                w(f"int {n.valid(h.name)} = 0, {n.dirty(h.name)} = 0; "
                  f"const uint8_t *{n.base(h.name)} = p4_zero;")
            else:
                w(f"int {n.valid(h.name)} = 1; (void){n.valid(h.name)};")
            for i in n.fields_of(h.name):
                w(f"u128 {n.field_at(h.name, i)} = 0;")
        for s in self.prog.stacks:
            w(f"int {n.next(s)} = 0;")
        w("Py_ssize_t pos = 0, pay = 0, plen = ilen, trunc = -1; long perr = 0; int ex = 0, cut = 0;")
        w(f"int steps = 0; (void)steps; size_t arena_used = 0; uint8_t arena[{ARENA}];")
        w("PyObject *out = NULL;")

    def body(self) -> list[str]:
        w = W()
        self.declarations(w)
        self.set_sm(w, "ingress_port", "in_port")
        self.set_sm(w, "packet_length", "ilen")
        self.set_sm(w, "instance_type", "0")
        self.set_sm(w, "ingress_global_timestamp", "now_us")
        self.parser(w)
        w("pay = pos;")
        self.set_sm(w, "parser_error", "perr")
        self.control(w, self.prog.pipelines["ingress"], "ingress")
        spec = self.sm("egress_spec") or "P4C(0)"
        prio = self.sm("priority") or "P4C(0)"
        w(f"if ({spec} == {self.drop_port}) return Py_BuildValue(\"(iO)\", 0, Py_None);")
        w(f"long eport = (long){spec}; long prio = (long){prio};")
        w("u128 enq = 0, enq_bytes = 0;")
        w("{ PyObject *qa[2] = {PyLong_FromLong(eport), PyLong_FromLong(prio)};")
        w("  PyObject *qr = (qa[0] && qa[1]) ? PyObject_Vectorcall(qdepth, qa, 2, NULL) : NULL;")
        w("  Py_XDECREF(qa[0]); Py_XDECREF(qa[1]);")
        w("  if (qr == NULL) goto py_error;")
        w("  if (!PyTuple_Check(qr) || PyTuple_GET_SIZE(qr) != 2) { Py_DECREF(qr);"
          " PyErr_SetString(PyExc_TypeError, \"qdepth must return (packets, bytes)\"); goto py_error; }")
        w("  enq = p4_u128(PyTuple_GET_ITEM(qr, 0)); enq_bytes = p4_u128(PyTuple_GET_ITEM(qr, 1));"
          " Py_DECREF(qr); }")
        w("ex = 0;")
        for f, value in (("egress_port", "eport"), ("egress_spec", str(self.drop_port + 1)),
                         ("packet_length", "plen"), ("instance_type", "0"),
                         ("enq_qdepth", "enq"), ("deq_qdepth", "enq"),
                         ("enq_timestamp", "now_us"), ("deq_timedelta", "0"),
                         ("egress_global_timestamp", "now_us")):
            self.set_sm(w, f, value)
        qb, qmax = find_qdepth_bytes(self.prog, self.names)
        if qb is not None:
            top = literal(qmax)
            w(f"{qb} = enq_bytes > {top} ? {top} : enq_bytes;")
        self.control(w, self.prog.pipelines["egress"], "egress")
        espec = self.sm("egress_spec")
        if espec is not None:
            w(f"if ({espec} == {self.drop_port}) return Py_BuildValue(\"(iO)\", 0, Py_None);")
        self.deparse(w)
        w("return Py_BuildValue(\"(i(llNO))\", 0, eport, (long)(%s), out, cut ? Py_True : Py_False);"
          % (self.sm("priority") or "P4C(0)"))
        w.label("arena_full")
        w("PyErr_SetString(PyExc_RuntimeError, \"p4json C backend: per-packet arena exhausted\");")
        w.label("py_error")
        w("Py_XDECREF(out);")
        w("return NULL;")
        return w.lines

    def source(self) -> str:
        body = self.body()  # fills self.objects
        fields = []
        for cname, kind, _ in self.objects:
            if kind in ("counter",):
                fields += [f"uint64_t *{cname}P;", f"uint64_t *{cname}B;", f"Py_ssize_t {cname}N;",
                           f"Py_buffer {cname}Pv, {cname}Bv;"]
            elif kind == "register":
                fields += [f"uint64_t *{cname}C;", f"Py_ssize_t {cname}N;", f"Py_buffer {cname}Cv;"]
            else:
                fields.append(f"PyObject *{cname};")
        binds = []
        for i, (cname, kind, _) in enumerate(self.objects):
            item = f"PyTuple_GET_ITEM(objs, {i})"
            if kind == "counter":
                binds.append(f"{{ PyObject *c = {item}; Py_ssize_t n2;"
                             f" if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 2"
                             f" || p4_buffer(PyTuple_GET_ITEM(c, 0), &S->{cname}Pv, &S->{cname}P,"
                             f" &S->{cname}N) < 0"
                             f" || p4_buffer(PyTuple_GET_ITEM(c, 1), &S->{cname}Bv, &S->{cname}B,"
                             f" &n2) < 0) goto bad;"
                             f" if (n2 < S->{cname}N) S->{cname}N = n2; }}")
            elif kind == "register":
                binds.append(f"if (p4_buffer({item}, &S->{cname}Cv, &S->{cname}C, &S->{cname}N) < 0)"
                             " goto bad;")
            else:
                binds.append(f"S->{cname} = {item}; Py_INCREF(S->{cname});")
        decref = []
        for c, k, _ in self.objects:
            if k == "counter":
                decref += [f"p4_release(&S->{c}Pv);", f"p4_release(&S->{c}Bv);"]
            elif k == "register":
                decref.append(f"p4_release(&S->{c}Cv);")
            else:
                decref.append(f"Py_XDECREF(S->{c});")
        init_name = self.module.rsplit(".", 1)[-1]
        out = [
            f"/* generated by switch.p4json.cgen for {self.module}; do not edit */",
            RUNTIME,
            "static PyObject *s_call, *s_lookup_lpm, *s_lookup_ternary;",
            "static inline u128 P4C(unsigned long long v) { return (u128)v; }",
            "static inline u128 P4C2(unsigned long long h, unsigned long long l) "
            "{ return ((u128)h << 64) | l; }",
            "static inline u128 p4_shl(u128 a, u128 b) { return b >= 128 ? 0 : a << (unsigned)b; }",
            "static inline u128 p4_shr(u128 a, u128 b) { return b >= 128 ? 0 : a >> (unsigned)b; }",
            "static inline u128 p4_div(u128 a, u128 b) { return b == 0 ? 0 : a / b; }",
            "static inline u128 p4_mod(u128 a, u128 b) { return b == 0 ? 0 : a % b; }",
            "static inline u128 p4_reg(const uint64_t *c, Py_ssize_t n, u128 i) "
            "{ return i < (u128)n ? c[(size_t)i] : 0; }",
            "typedef struct {",
            *("    " + f for f in fields),
            "    int unused;",
            "} State;",
            "static void state_free(PyObject *cap) {",
            "    State *S = (State *)PyCapsule_GetPointer(cap, \"p4json.state\");",
            "    if (S == NULL) return;",
            *("    " + d for d in decref),
            "    PyMem_Free(S);",
            "}",
            "static PyObject *new_state(PyObject *self, PyObject *objs) {",
            f"    if (!PyTuple_Check(objs) || PyTuple_GET_SIZE(objs) != {len(self.objects)}) {{",
            "        PyErr_SetString(PyExc_TypeError, \"wrong objects tuple\"); return NULL; }",
            "    State *S = PyMem_Calloc(1, sizeof(State));",
            "    if (S == NULL) return PyErr_NoMemory();",
            *("    " + b for b in binds),
            "    PyObject *cap = PyCapsule_New(S, \"p4json.state\", state_free);",
            "    if (cap == NULL) goto bad;",
            "    return cap;",
            "bad:",
            *("    " + d for d in decref),
            "    PyMem_Free(S);",
            "    return NULL;",
            "}",
            "static PyObject *fast(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {",
            "    if (nargs != 6) { PyErr_SetString(PyExc_TypeError, \"fast() takes 6 arguments\"); return NULL; }",
            "    State *S = (State *)PyCapsule_GetPointer(args[0], \"p4json.state\");",
            "    if (S == NULL) return NULL;",
            "    if (!PyBytes_Check(args[1])) { PyErr_SetString(PyExc_TypeError, \"frame must be bytes\"); return NULL; }",
            "    const uint8_t *frame = (const uint8_t *)PyBytes_AS_STRING(args[1]);",
            "    Py_ssize_t flen = PyBytes_GET_SIZE(args[1]);",
            "    long in_port = PyLong_AsLong(args[2]);",
            "    unsigned long long now_us = PyLong_AsUnsignedLongLongMask(args[3]);",
            "    Py_ssize_t ilen = PyLong_AsSsize_t(args[4]);",
            "    PyObject *qdepth = args[5];",
            "    if (PyErr_Occurred()) return NULL;",
            *body,
            "}",
            "static PyMethodDef methods[] = {",
            "    {\"new\", new_state, METH_O, \"bind the engine objects (tuple)\"},",
            "    {\"fast\", (PyCFunction)(void (*)(void))fast, METH_FASTCALL, \"one packet\"},",
            "    {NULL, NULL, 0, NULL}",
            "};",
            f"static struct PyModuleDef moddef = {{PyModuleDef_HEAD_INIT, \"{self.module}\", NULL, -1, methods}};",
            f"PyMODINIT_FUNC PyInit_{init_name}(void) {{",
            "    if (p4_strings() < 0) return NULL;",
            "    if ((s_call = PyUnicode_InternFromString(\"call\")) == NULL) return NULL;",
            "    if ((s_lookup_lpm = PyUnicode_InternFromString(\"lookup_lpm\")) == NULL) return NULL;",
            "    if ((s_lookup_ternary = PyUnicode_InternFromString(\"lookup_ternary\")) == NULL) return NULL;",
            "    p4_tables_init();",
            "    PyObject *m = PyModule_Create(&moddef);",
            "    if (m == NULL) return NULL;",
            f"    if (PyModule_AddStringConstant(m, \"SOURCE_HASH\", \"{self.digest}\") < 0) return NULL;",
            "    return m;",
            "}",
        ]
        return "\n".join(out) + "\n"

    @property
    def digest(self) -> str:
        """Hash of the program JSON this module was generated from (checked when loading)."""
        import json

        return hashlib.sha256(json.dumps(self.prog.raw, sort_keys=True).encode()).hexdigest()[:16]


class W_indent(W):
    """A writer appending to another writer's lines, ``depth`` levels deeper."""

    def __init__(self, parent: W, depth: int = 1) -> None:
        self.lines = parent.lines
        self.level = parent.level + depth


def eligible_reason(prog: pm.Program) -> str:
    """'' when the program compiles to C, else why not."""
    try:
        CGen(prog, "_probe").body()
    except NotEligible as exc:
        return str(exc)
    return ""


"""Code generation for the parser: a state loop, extracts, sets, verifies, advances,
selects on fields / stack fields / lookaheads with BMv2's byte-padded keys and masks."""

from __future__ import annotations

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError, Unsupported
from switch.p4json.gen_base import MAX_PARSER_STEPS, Writer
from switch.p4json.gen_primitives import PrimitiveGen


class ParserGen(PrimitiveGen):
    def parser(self, w: Writer) -> None:
        p = self.prog.parser
        order = list(p.states)
        sid = {name: i for i, name in enumerate(order)}
        too_short = self.err("PacketTooShort")
        w("pos = 0")
        w("flen = len(frame)")
        w(f"st = {sid[p.init]}")
        looping = _has_cycle({name: [t.next for t in s.transitions if t.next]
                              for name, s in p.states.items()})
        if looping:
            w("steps = 0")
        w("while True:")
        w.indent()
        if looping:  # a loop that extracts nothing must not hang the switch
            timeout = self.error_codes.get("ParserTimeout", self.err("PacketTooShort"))
            w("steps += 1")
            w(f"if steps > {MAX_PARSER_STEPS}: perr = {timeout}; break")
        first = True
        for name in order:
            state = p.states[name]
            w(f"{'if' if first else 'elif'} st == {sid[name]}:")
            first = False
            w.indent()
            cx = ex.ExprCompiler(self.names, where=f"parse state {name}")
            for op in state.ops:
                self.parser_op(w, op, cx, too_short)
            self.transition(w, state, cx, sid)
            w.dedent()
        w("else:")
        w("    break")
        w.dedent()

    def transition(self, w: Writer, state: pm.ParseState, cx: ex.ExprCompiler,
                   sid: dict[str, int]) -> None:
        def goto(nxt: str | None) -> str:
            return "break" if nxt is None else f"st = {sid[nxt]}"

        if not state.key:
            fallback = next((t for t in state.transitions if t.kind == "default"), None)
            w(goto(fallback.next if fallback else None))
            return
        parts, nbytes = [], 0
        for k in reversed(state.key):
            code, width = self.key_element(w, k, cx)
            nb = (width + 7) // 8
            parts.append(f"({code}) << {nbytes * 8}" if nbytes else f"({code})")
            nbytes += nb
        key = self.fresh("k")
        w(f"{key} = {' | '.join(parts)}")
        first = True
        default = "break"
        for t in state.transitions:
            if t.kind == "default":
                default = goto(t.next)
                continue
            if t.kind == "hexstr":
                assert isinstance(t.value, int)
                cond = (f"{key} == {t.value}" if t.mask is None
                        else f"{key} & {t.mask} == {t.value & t.mask}")
            else:
                vs = self.prog.vsets[str(t.value)]
                g = f"VS{vs.id}"
                self.g.vsets[g] = vs.name
                cond = f"{key} in {g}" if t.mask is None else f"{key} & {t.mask} in {g}"
            w(f"{'if' if first else 'elif'} {cond}: {goto(t.next)}")
            first = False
        if first:
            w(default)
        else:
            w(f"else: {default}")

    def key_element(self, w: Writer, k: pm.Json, cx: ex.ExprCompiler) -> tuple[str, int]:
        kind, value = k["type"], k["value"]
        if kind == "field":
            h, f = value
            if f == "$valid$":
                return self.names.valid(h), 1
            spec = self.prog.field_spec(h, f)
            if spec.vl:
                raise Unsupported("select on a variable-length field", cx.where)
            if spec.signed:
                return f"{cx.field_value(h, f)} & {(1 << spec.width) - 1}", spec.width
            return cx.field_value(h, f), spec.width
        if kind == "stack_field":
            st = self.prog.stacks[value[0]]
            spec = st.type.fields[st.type.index[value[1]]]
            return f"({cx.stack_last_field(value[0], value[1])}) & {(1 << spec.width) - 1}", spec.width
        if kind == "lookahead":
            offset, width = int(value[0]), int(value[1])
            tmp = self.fresh("la")
            w(f"{tmp} = _peek(frame, pos * 8 + {offset}, {width})")
            return tmp, width
        raise Unsupported(f"select key {kind!r}", cx.where)

    def parser_op(self, w: Writer, op: pm.ParserOp, cx: ex.ExprCompiler, too_short: int) -> None:
        if op.op in ("extract", "extract_VL"):
            target = op.params[0]
            vl_bits = None
            if op.op == "extract_VL":
                vl = op.params[1]
                if vl.get("type") != "expression":
                    raise ConfigError(f"{cx.where}: extract_VL length is not an expression")
                vl_bits = self.fresh("vl")
                w(f"{vl_bits} = {cx.data(vl['value'])}")
            kind = target.get("type")
            if kind == "regular":
                self.extract(w, target["value"], vl_bits, too_short, cx)
            elif kind == "stack":
                st = self.prog.stacks.get(target["value"])
                if st is None:
                    raise ConfigError(f"{cx.where}: unknown stack {target['value']}")
                n = self.names.next(st.name)
                w(f"if {n} >= {len(st.headers)}: perr = {self.err('StackOutOfBounds')}; break")
                for i, h in enumerate(st.headers):
                    w(f"{'if' if i == 0 else 'elif'} {n} == {i}:")
                    w.indent()
                    self.extract(w, h, vl_bits, too_short, cx)
                    w.dedent()
                w(f"{n} += 1")
            elif kind == "union_stack":
                us_name, member = target["value"]
                us = self.prog.union_stacks.get(us_name)
                if us is None:
                    raise ConfigError(f"{cx.where}: unknown union stack {us_name}")
                n = self.union_stack_next(us_name)
                w(f"if {n} >= {len(us.unions)}: perr = {self.err('StackOutOfBounds')}; break")
                for i, u in enumerate(us.unions):
                    h = dict(self.prog.unions[u].members)[member]
                    w(f"{'if' if i == 0 else 'elif'} {n} == {i}:")
                    w.indent()
                    self.extract(w, h, vl_bits, too_short, cx)
                    w.dedent()
                w(f"{n} += 1")
            else:
                raise Unsupported(f"extract into a {kind!r}", cx.where)
        elif op.op == "set":
            dst, src = op.params
            if dst.get("type") != "field":
                raise ConfigError(f"{cx.where}: parser set into a {dst.get('type')}")
            if src.get("type") == "lookahead":
                offset, width = int(src["value"][0]), int(src["value"][1])
                nbytes = (width + 7) // 8
                w(f"if flen - pos < {nbytes}: perr = {too_short}; break")
                tmp = self.fresh("la")
                w(f"{tmp} = _peek(frame, pos * 8 + {offset}, {width})")
                self.assign(w, dst, tmp, cx, None)
            else:
                value = cx.data(src) if not self._is_vl(src) else None
                self.assign(w, dst, value, cx, src)
        elif op.op == "verify":
            cond, error = op.params
            w(f"if not {cx.boolean(cond)}: perr = {cx.data(error) if isinstance(error, dict) else int(error)}; break")
        elif op.op in ("advance", "shift"):
            amount = str(int(op.params[0]) * 8) if op.op == "shift" else cx.data(op.params[0])
            bits = self.fresh("adv")
            w(f"{bits} = {amount}")
            w(f"if {bits} % 8 or {bits} < 0: perr = {self.err('ParserInvalidArgument')}; break")
            w(f"if flen - pos < {bits} // 8: perr = {too_short}; break")
            w(f"pos += {bits} // 8")
        elif op.op == "primitive":
            self.primitive(w, op.params[0], cx, "parser")
        else:
            raise Unsupported(f"parser operation '{op.op}'", cx.where)


def _has_cycle(succ: dict[str, list[str]]) -> bool:
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(n: str) -> bool:
        state[n] = 1
        for s in succ.get(n, []):
            if state.get(s) == 1 or (s not in state and visit(s)):
                return True
        state[n] = 2
        return False

    return any(n not in state and visit(n) for n in succ)

"""Code generation for action primitives (BMv2 core and simple_switch's v1model ones),
assignments with BMv2's truncation, calculations (hash and checksum inputs), checksums."""

from __future__ import annotations

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError, Unsupported
from switch.p4json.gen_base import CLONE_VALID, Writer, stack_shift
from switch.p4json.gen_headers import HeaderGen


class PrimitiveGen(HeaderGen):
    def calc_bytes(self, w: Writer, inputs: tuple[pm.Json, ...] | list[pm.Json], where: str) -> str:
        """Emit code building a calculation's input bytes; returns the variable holding them.

        Fields are packed MSB first at bit granularity; fields and headers of invalid
        headers are skipped; the result is zero padded to a whole byte; a payload input
        appends the unparsed rest of the packet."""
        acc, nb = self.fresh("acc"), self.fresh("nb")
        w(f"{acc} = 0")
        w(f"{nb} = 0")
        payload = False
        static_bits: int | None = 0
        for inp in inputs:
            kind = inp.get("type")
            if kind == "field":
                h, f = inp["value"]
                header = self.prog.header(h)
                spec = self.prog.field_spec(h, f)
                var = ex.ExprCompiler(self.names, where=where).field_value(h, f)
                if spec.vl:
                    vw = self.names.vlw(h)
                    line = f"{acc} = {acc} << {vw} | ({var} & ((1 << {vw}) - 1)); {nb} += {vw}"
                else:
                    line = (f"{acc} = {acc} << {spec.width} | ({var} & {(1 << spec.width) - 1}); "
                            f"{nb} += {spec.width}")
                if header.metadata:
                    w(line)
                    if static_bits is not None:
                        static_bits += spec.width
                else:
                    w(f"if {self.names.valid(h)}: {line}")
                    static_bits = None
            elif kind == "hexstr":
                width = int(inp["bitwidth"])
                value = pm.parse_hexstr(inp["value"]) & ((1 << width) - 1)
                w(f"{acc} = {acc} << {width} | {value}; {nb} += {width}")
                if static_bits is not None:
                    static_bits += width
            elif kind == "header":
                h = inp["value"]
                self.prog.header(h)
                img = self.fresh("img")
                bits = f"(len({img}) * 8)"
                w(f"if {self.names.valid(h)}:")
                w(f"    {img} = {self.image(h)}")
                w(f"    {acc} = {acc} << {bits} | int.from_bytes({img}, 'big'); {nb} += {bits}")
                static_bits = None
            elif kind == "payload":
                payload = True
            else:
                raise Unsupported(f"calculation input {kind!r}", where)
        out = self.fresh("buf")
        w(f"{out} = ({acc} << (-{nb} % 8)).to_bytes(({nb} + 7) // 8, 'big')")
        if payload:
            w(f"{out} = {out} + frame[pay:]")
        return out

    def hash_call(self, algo: str, buf: str, cache: bool) -> str:
        name = f"H{len(self.g.hashes)}"
        self.g.hashes[name] = algo
        return f"{name}({buf})"

    def primitive(self, w: Writer, prim: pm.Json, cx: ex.ExprCompiler, stage: str) -> None:
        op = prim.get("op")
        params = prim.get("parameters", [])
        where = f"{cx.where}: {op}"
        if op in ("assign", "modify_field"):
            self.assign(w, params[0], cx.data(params[1]) if not self._is_vl(params[1]) else None,
                        cx, params[1])
        elif op == "assign_VL":
            self.assign(w, params[0], None, cx, params[1])
        elif op in ("assign_header", "copy_header"):
            dst, src = cx.header(params[0]), cx.header(params[1])
            if src.static is None:
                tmp_refs = src
                if src.cond is not None:
                    self._assign_header_cond(w, dst, src)
                    return
                self.on_header(w, dst, lambda d: self.on_header(
                    w, tmp_refs, lambda s: self.assign_header(w, d, s)))
            else:
                self.on_header(w, dst, lambda d: self.assign_header(w, d, src.static or ""))
        elif op == "assign_union":
            du, su = cx.union(params[0]), cx.union(params[1])
            if du.static is None or su.static is None:
                raise Unsupported("assign_union on union stack elements chosen at run time", where)
            for (_, hd), (_, hs) in zip(self.prog.unions[du.static].members,
                                        self.prog.unions[su.static].members):
                self.assign_header(w, hd, hs)
        elif op == "assign_header_stack":
            ds, ss = self._stack_param(params[0], cx), self._stack_param(params[1], cx)
            dstack, sstack = self.prog.stacks[ds], self.prog.stacks[ss]
            w(f"{self.names.next(ds)} = {self.names.next(ss)}")
            for hd, hs in zip(dstack.headers, sstack.headers):
                self.assign_header(w, hd, hs)
        elif op == "assign_union_stack":
            raise Unsupported("assign_union_stack", where)
        elif op in ("push", "pop"):
            self.stack_shift(w, params, cx, op == "push", where)
        elif op in ("add_header", "add_header_fast"):
            ref = cx.header(params[0])
            self.on_header(w, ref, lambda h: self.add_header(w, h, op == "add_header_fast"))
        elif op == "remove_header":
            ref = cx.header(params[0])
            self.on_header(w, ref, lambda h: self.remove_header(w, h))
        elif op == "exit":
            w("ex = 1")
        elif op in ("assert", "assume"):
            w(f"if not {cx.boolean(params[0])}: raise _Abort({op!r} + ' failed: ' + {cx.where!r})")
        elif op == "log_msg":
            fmt = params[0].get("value", "")
            values = [cx.data(v) for v in (params[1].get("value") or [])] if len(params) > 1 else []
            w(f"_log({fmt!r}, ({''.join(v + ', ' for v in values)}))")
        elif op in ("mark_to_drop", "drop"):
            spec_var = self.sm("egress_spec")
            if spec_var is not None:
                w(f"{spec_var} = {self.drop_port}")
            grp = self.sm("mcast_grp")
            if grp is not None:
                w(f"{grp} = 0")
        elif op == "no_op":
            pass
        elif op == "count":
            cname = self._array(params[0], "counter_array", where)
            cspec = self.prog.counters[cname]
            if cspec.direct_table is not None:
                raise ConfigError(f"{where}: count() on direct counter {cname}")
            g = f"C{cspec.id}"
            self.g.counters[g] = cname
            i = self.fresh("i")
            w(f"{i} = {cx.data(params[1])}")
            w(f"if 0 <= {i} < {cspec.size}: {g}P[{i}] += 1; {g}B[{i}] += ilen")
        elif op == "register_read":
            rname = self._array(params[1], "register_array", where)
            rspec = self.prog.registers[rname]
            g = f"R{rspec.id}"
            self.g.registers[g] = rname
            i = self.fresh("i")
            w(f"{i} = {cx.data(params[2])}")
            tmp = self.fresh("r")
            w(f"if 0 <= {i} < {rspec.size}:")
            w(f"    {tmp} = {g}C[{i}]")
            w.indent()
            self.assign(w, params[0], tmp, cx, None)
            w.dedent()
        elif op == "register_write":
            rname = self._array(params[0], "register_array", where)
            rspec = self.prog.registers[rname]
            g = f"R{rspec.id}"
            self.g.registers[g] = rname
            i = self.fresh("i")
            w(f"{i} = {cx.data(params[1])}")
            w(f"if 0 <= {i} < {rspec.size}: "
              f"{g}C[{i}] = ({cx.data(params[2])}) & {(1 << rspec.width) - 1}")
        elif op == "execute_meter":
            mname = self._array(params[0], "meter_array", where)
            mspec = self.prog.meters[mname]
            g = f"M{mspec.id}"
            self.g.meters[g] = mname
            tmp = self.fresh("m")
            w(f"{tmp} = {g}.execute({cx.data(params[1])}, now_us * 1e-6, ilen)")
            self.assign(w, params[2], tmp, cx, None)
        elif op == "modify_field_with_hash_based_offset":
            calc = self._calc(params[2], where)
            buf = self.calc_bytes(w, calc.inputs, where)
            size = self.fresh("sz")
            w(f"{size} = {cx.data(params[3])}")
            w(f"if {size} == 0: {size} = 1")
            value = f"({self.hash_call(calc.algo, buf, True)} % {size} + {cx.data(params[1])})"
            self.assign(w, params[0], value, cx, None)
        elif op == "modify_field_rng_uniform":
            lo, hi = self.fresh("lo"), self.fresh("hi")
            w(f"{lo} = {cx.data(params[1])}")
            w(f"{hi} = {cx.data(params[2])}")
            w(f"if {lo} <= {hi}:")
            w.indent()
            self.assign(w, params[0], f"_rand({lo}, {hi})", cx, None)
            w.dedent()
        elif op == "truncate":
            w(f"trunc = min(trunc, {cx.data(params[0])}) if trunc >= 0 else {cx.data(params[0])}")
        elif op == "clone_ingress_pkt_to_egress":
            if stage != "ingress":
                raise Unsupported("clone_ingress_pkt_to_egress outside ingress", where)
            w(f"cl_sid = (({cx.data(params[0])}) & 0xFFFF) | {CLONE_VALID}")
            w(f"cl_fl = {cx.data(params[1])}")
        elif op == "clone_egress_pkt_to_egress":
            if stage != "egress":
                raise Unsupported("clone_egress_pkt_to_egress outside egress", where)
            w(f"cl_sid = (({cx.data(params[0])}) & 0xFFFF) | {CLONE_VALID}")
            w(f"cl_fl = {cx.data(params[1])}")
        elif op == "resubmit":
            if stage != "ingress":
                raise Unsupported("resubmit outside ingress", where)
            w(f"rs_fl = {cx.data(params[0])}")
        elif op == "recirculate":
            if stage != "egress":
                raise Unsupported("recirculate outside egress", where)
            w(f"rc_fl = {cx.data(params[0])}")
        elif op == "generate_digest":
            if stage != "ingress":
                raise Unsupported("digest outside ingress", where)
            w(f"lf_id = {cx.data(params[1])}")
        elif op in ("add_to_field", "subtract_from_field"):
            sign = "+" if op == "add_to_field" else "-"
            cur = cx.data(params[0])
            self.assign(w, params[0], f"({cur} {sign} {cx.data(params[1])})", cx, None)
        elif op in ("add", "subtract", "bit_xor", "bit_or", "bit_and", "shift_left", "shift_right"):
            sym = {"add": "+", "subtract": "-", "bit_xor": "^", "bit_or": "|", "bit_and": "&"}.get(op)
            a, b = cx.data(params[1]), cx.data(params[2])
            if sym is not None:
                value = f"({a} {sym} {b})"
            else:
                value = f"_shl({a}, {b})" if op == "shift_left" else f"_shr({a}, {b})"
            self.assign(w, params[0], value, cx, None)
        else:
            raise Unsupported(f"primitive '{op}'", cx.where)

    def _assign_header_cond(self, w: Writer, dst: ex.HeaderRef, src: ex.HeaderRef) -> None:
        """``dst = cond ? a : b`` on headers: the condition is evaluated once, before."""
        assert src.cond is not None and src.then is not None and src.other is not None
        c = self.fresh("c")
        w(f"{c} = {src.cond}")
        then, other = src.then, src.other
        for test, ref in ((f"if {c}:", then), ("else:", other)):
            def body(ref: ex.HeaderRef = ref) -> None:
                if ref.static is None or ref.cond is not None:
                    raise Unsupported("nested ?: or run-time indexes in a header assignment",
                                      "assign_header")
                self.on_header(w, dst, lambda d: self.assign_header(w, d, ref.static or ""))
            w.block(test, body)

    def _is_vl(self, node: pm.Json) -> bool:
        if node.get("type") != "field":
            return False
        h, f = node["value"]
        if f == "$valid$":
            return False
        return self.prog.field_spec(h, f).vl

    def _array(self, node: pm.Json, kind: str, where: str) -> str:
        if node.get("type") != kind:
            raise ConfigError(f"{where}: expected a {kind}, got {node.get('type')}")
        name = str(node.get("value"))
        known: set[str] = {"counter_array": set(self.prog.counters),
                           "register_array": set(self.prog.registers),
                           "meter_array": set(self.prog.meters)}[kind]
        if name not in known:
            raise ConfigError(f"{where}: unknown {kind} {name}")
        return name

    def _calc(self, node: pm.Json, where: str) -> pm.Calculation:
        if node.get("type") != "calculation" or node.get("value") not in self.prog.calculations:
            raise ConfigError(f"{where}: expected a calculation")
        return self.prog.calculations[node["value"]]

    def _stack_param(self, node: pm.Json, cx: ex.ExprCompiler) -> str:
        t = cx.compile(node)
        if t.type != ex.STACK or not isinstance(t.ref, str):
            raise ConfigError(f"{cx.where}: expected a header stack")
        return t.ref

    def assign(self, w: Writer, dst: pm.Json, value: str | None, cx: ex.ExprCompiler,
               src_node: pm.Json | None) -> None:
        """``dst = value`` with BMv2's truncation; ``value`` None copies a VL field."""
        kind = dst.get("type")
        if kind == "field":
            h, f = dst["value"]
            if f == "$valid$":
                raise ConfigError(f"{cx.where}: assignment to {h}.$valid$")
            self._store(w, h, self.prog.header(h).type.index[f], value, cx, src_node)
        elif kind == "stack_field":
            st = self.prog.stacks[dst["value"][0]]
            idx = st.type.index[dst["value"][1]]
            n = self.names.next(st.name)
            sel = self.fresh("i")
            w(f"{sel} = {n} - 1")
            for pos, h in enumerate(st.headers):
                w(f"{'if' if pos == 0 else 'elif'} {sel} == {pos}:")
                w.indent()
                self._store(w, h, idx, value, cx, src_node)
                w.dedent()
        elif kind == "expression":
            e = dst["value"]
            while isinstance(e, dict) and "op" not in e and e.get("type") == "expression":
                e = e["value"]
            if e.get("type") == "field" or e.get("type") == "stack_field":
                self.assign(w, e, value, cx, src_node)
                return
            if e.get("op") != "access_field":
                raise Unsupported(f"assignment to a {e.get('op')} expression", cx.where)
            ref = cx.header(e["left"])
            offset = int(e["right"])
            if value is not None and ref.static is None:
                tmp = self.fresh("v")
                w(f"{tmp} = {value}")
                value = tmp
            self.on_header(w, ref, lambda h: self._store(w, h, offset, value, cx, src_node))
        else:
            raise Unsupported(f"assignment target {kind!r}", cx.where)

    def _store(self, w: Writer, h: str, idx: int, value: str | None, cx: ex.ExprCompiler,
               src_node: pm.Json | None) -> None:
        header = self.prog.header(h)
        spec = header.type.fields[idx]
        var = self.names.field_at(h, idx)
        if spec.vl:
            if src_node is None or src_node.get("type") != "field":
                raise Unsupported("assigning a computed value to a variable-length field", cx.where)
            sh, sf = src_node["value"]
            sspec = self.prog.field_spec(sh, sf)
            if not sspec.vl:
                raise Unsupported("assigning a fixed-width value to a variable-length field", cx.where)
            w(f"{var} = {self.names.field(sh, sf)}")
            w(f"{self.names.vlw(h)} = {self.names.vlw(sh)}")
        else:
            if value is None:
                raise Unsupported("assigning a variable-length value to a fixed-width field", cx.where)
            w(f"{var} = {self.mask_of(spec, value)}")
        if not header.metadata:
            w(f"{self.names.dirty(h)} = 1")

    def stack_shift(self, w: Writer, params: list[pm.Json], cx: ex.ExprCompiler, push: bool,
                    where: str) -> None:
        """push_front / pop_front with BMv2's P4_16 stacks (src/bm_sim/stacks.cpp)."""
        t = cx.compile(params[0])
        if t.type == ex.USTACK:
            raise Unsupported("push/pop on header union stacks", where)
        if t.type != ex.STACK or not isinstance(t.ref, str):
            raise ConfigError(f"{where}: push/pop of a {t.type}")
        if params[1].get("type") != "hexstr":
            raise Unsupported("push/pop by a count computed at run time", where)
        num = pm.parse_hexstr(params[1]["value"])
        st = self.prog.stacks[t.ref]
        size = len(st.headers)
        n = self.names.next(t.ref)
        if num <= 0:
            return
        w(f"{n} = min({size}, {n} + {num})" if push else f"{n} = {n} - min({n}, {num})")
        swaps, invalid = stack_shift(size, num, push)
        for i, j in swaps:
            self.swap_headers(w, st.headers[i], st.headers[j])
        for i in invalid:
            self.set_valid_flag(w, st.headers[i], 0)

    def action_body(self, w: Writer, action: pm.Action, stage: str) -> None:
        cx = ex.ExprCompiler(self.names, action.params, f"action {action.name}")
        before = len(w.lines)
        for prim in action.primitives:
            self.primitive(w, prim, cx, stage)
        if len(w.lines) == before:
            w("pass")

    def verify_checksums(self, w: Writer) -> None:
        flag = self.sm("checksum_error")
        for c in self.prog.checksums:
            if not c.verify:
                continue
            calc = self.prog.calculations[c.calculation]
            h, f = c.target
            cx = ex.ExprCompiler(self.names, where=f"checksum {c.name}")
            cond = f"{self.names.valid(h)}"
            if c.condition is not None:
                cond += f" and {cx.boolean(c.condition)}"

            def body(c: pm.Checksum = c, calc: pm.Calculation = calc, h: str = h,
                     f: str = f, cx: ex.ExprCompiler = cx) -> None:
                buf = self.calc_bytes(w, calc.inputs, f"checksum {c.name}")
                spec = self.prog.field_spec(h, f)
                value = f"({cx.field_value(h, f)} & {(1 << spec.width) - 1})"
                w(f"if {self.hash_call(calc.algo, buf, False)} != {value}: cksum_err = 1")

            w.block(f"if {cond}:", body)
        if flag is not None:
            w(f"{flag} = cksum_err")

    def update_checksums(self, w: Writer) -> None:
        for c in self.prog.checksums:
            if not c.update:
                continue
            calc = self.prog.calculations[c.calculation]
            cx = ex.ExprCompiler(self.names, where=f"checksum {c.name}")

            def body(c: pm.Checksum = c, calc: pm.Calculation = calc,
                     cx: ex.ExprCompiler = cx) -> None:
                buf = self.calc_bytes(w, calc.inputs, f"checksum {c.name}")
                dst = {"type": "field", "value": list(c.target)}
                self.assign(w, dst, self.hash_call(calc.algo, buf, False), cx, None)

            if c.condition is not None:
                w.block(f"if {cx.boolean(c.condition)}:", body)
            else:
                body()

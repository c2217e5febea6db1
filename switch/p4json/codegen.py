"""Generate the Python source of a program's per-packet functions (compiled once per load).

Two functions come out, both plain straight-line Python over local variables (names in
``switch.p4json.exprs``), with tables, counters and registers bound as globals:

``ingress(frame, in_port, itype, pres, now_us, ilen, reparse)``
    the parser (a state loop), checksum verification and the ingress control;
    returns an ``IngressOut`` tuple (see ``INGRESS_OUT``).
``egress(frame, phv, pres, itype, eport, rid, enq, enq_bytes, now_us, ilen, plen, pay, trunc)``
    the egress control, checksum update and the deparser; returns ``EGRESS_OUT``.

``phv`` carries every header and metadata variable from ingress to egress (the v1model
traffic manager sits between them); ``pres`` = (field list id, values) restores preserved
metadata after a resubmit, recirculation or clone. Controls become structured if/else code
(join points are immediate post-dominators), each action inlined where its table is applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from switch.p4json import exprs as ex
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError, Unsupported

# v1model instance types (simple_switch.cpp PktInstanceType)
NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
INGRESS_OUT = (
    "phv", "egress_spec", "mcast_grp", "clone_sid", "clone_fl", "clone_vals", "resub_fl",
    "resub_vals", "learn_id", "learn_vals", "plen", "pay", "trunc", "parser_error",
)
EGRESS_OUT = (
    "data", "priority", "egress_spec", "clone_sid", "clone_fl", "clone_phv", "clone_vals",
    "recirc_fl", "recirc_vals",
)
CLONE_VALID = 1 << 15  # BMv2 RegisterAccess::MIRROR_SESSION_ID_VALID_MASK
MAX_PARSER_STEPS = 4096  # parser states visited per packet before ParserTimeout
NODE_BUDGET = 40  # structured code may repeat a node at most this many times over


class Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str) -> None:
        self.lines.append("    " * self.level + line)

    def indent(self) -> Writer:
        self.level += 1
        return self

    def dedent(self) -> None:
        self.level -= 1

    def block(self, header: str, body: Callable[[], None]) -> None:
        self(header)
        self.level += 1
        before = len(self.lines)
        body()
        if len(self.lines) == before:
            self("pass")
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class Globals:
    """Objects the generated code refers to by name (filled by the engine from its state)."""

    tables: dict[str, str] = field(default_factory=dict)  # global name -> table name
    profiles: dict[str, str] = field(default_factory=dict)
    counters: dict[str, str] = field(default_factory=dict)
    registers: dict[str, str] = field(default_factory=dict)
    meters: dict[str, str] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # global -> algorithm name
    vsets: dict[str, str] = field(default_factory=dict)
    consts: dict[str, object] = field(default_factory=dict)


class Generator:
    """Builds the source of one program; ``source()`` returns it, ``globals`` what it needs."""

    def __init__(self, prog: pm.Program) -> None:
        self.prog = prog
        self.names = ex.Names(prog)
        self.names.touched = ex.collect_fields(prog)
        self.names.image = self.image
        self.g = Globals()
        self.tmp = 0
        self.drop_port = prog.drop_port
        sm = prog.header("standard_metadata").type.index
        self.sm_fields = set(sm)
        self.user_qbytes = self._find_qdepth_bytes()
        for h in prog.headers.values():
            if h.union is not None and h.stack is not None:
                raise Unsupported("a header both in a union and a stack", h.name)
        self.error_codes = prog.errors
        self.exit_actions = {
            aid for aid, a in prog.actions.items() if any(p.get("op") == "exit" for p in a.primitives)
        }

    # ---- helpers ---------------------------------------------------------------------------
    def fresh(self, stem: str = "t") -> str:
        self.tmp += 1
        return f"_{stem}{self.tmp}"

    def err(self, name: str) -> int:
        code = self.error_codes.get(name)
        if code is None:
            raise ConfigError(f"the program declares no error '{name}'")
        return code

    def _find_qdepth_bytes(self) -> str | None:
        """A user metadata field named ``enq_qdepth_bytes``: the embedded target fills it with
        the bytes queued at enqueue (docs/switch.md, intrinsic metadata)."""
        for h in self.prog.headers.values():
            if not h.metadata or h.name == "standard_metadata":
                continue
            for i, f in enumerate(h.type.fields):
                named = f.name == "enq_qdepth_bytes" or f.name.endswith(".enq_qdepth_bytes")
                if named and self.names.is_touched(h.name, i):
                    return self.names.field_at(h.name, i)
        return None

    def sm(self, f: str) -> str | None:
        """Variable of standard_metadata.f when the program touches it, else None."""
        if f not in self.sm_fields:
            return None
        idx = self.prog.header("standard_metadata").type.index[f]
        if not self.names.is_touched("standard_metadata", idx):
            return None
        return self.names.field_at("standard_metadata", idx)

    def set_sm(self, w: Writer, f: str, value: str) -> None:
        """standard_metadata.f = value, truncated to the field as BMv2's Field::set does."""
        var = self.sm(f)
        if var is not None:
            spec = self.prog.field_spec("standard_metadata", f)
            w(f"{var} = {self.mask_of(spec, value)}")

    def mask_of(self, spec: pm.FieldSpec, code: str) -> str:
        """``code`` truncated to the field's width as BMv2's Field::export_bytes does."""
        if spec.vl:
            return code
        m = (1 << spec.width) - 1
        if spec.signed:
            half = 1 << (spec.width - 1)
            return f"((({code}) + {half} & {m}) - {half})"
        return f"(({code}) & {m})"

    def header_bytes(self, h: str) -> str:
        """Byte length of header ``h`` (run-time for variable-length headers)."""
        t = self.prog.header(h).type
        if t.vl_index is None:
            return str(t.fixed_bits // 8)
        return f"(({t.fixed_bits} + {self.names.vlw(h)}) // 8)"

    # ---- header images ---------------------------------------------------------------------
    def image(self, h: str) -> str:
        """Expression of the current wire bytes of header ``h``."""
        header = self.prog.header(h)
        t = header.type
        n = self.names
        if t.vl_index is not None:
            acc = "0"
            for i, f in enumerate(t.fields):
                var = n.field_at(h, i)
                if f.vl:
                    w = n.vlw(h)
                    acc = f"(({acc}) << {w} | ({var} & ((1 << {w}) - 1)))"
                else:
                    acc = f"(({acc}) << {f.width} | ({var} & {(1 << f.width) - 1}))"
            return f"({acc}).to_bytes({self.header_bytes(h)}, 'big')"
        nbytes = t.fixed_bits // 8
        touched = n.fields_of(h)
        if not touched:
            return n.base(h)
        offsets = t.bit_offsets()
        total = t.fixed_bits
        keep = (1 << total) - 1
        parts = []
        for i in touched:
            f = t.fields[i]
            shift = total - offsets[i] - f.width
            keep &= ~(((1 << f.width) - 1) << shift)
            parts.append(f"({n.field_at(h, i)} & {(1 << f.width) - 1}) << {shift}")
        if keep:
            parts.insert(0, f"(int.from_bytes({n.base(h)}, 'big') & {keep})")
        rebuilt = f"({' | '.join(parts)}).to_bytes({nbytes}, 'big')"
        return f"({rebuilt} if {n.dirty(h)} else {n.base(h)})"

    def load_fields(self, w: Writer, h: str, src: str) -> None:
        """Set the touched field variables of fixed-size header ``h`` from bytes ``src``."""
        t = self.prog.header(h).type
        offsets = t.bit_offsets()
        for i in self.names.fields_of(h):
            f = t.fields[i]
            w(f"{self.names.field_at(h, i)} = {self._field_from(src, offsets[i], f)}")

    def _field_from(self, src: str, offset: int, f: pm.FieldSpec) -> str:
        width = f.width
        first, last = offset // 8, (offset + width + 7) // 8
        shift = last * 8 - (offset + width)
        if last - first == 1:
            raw = f"{src}[{first}]"
        elif last - first == 2:
            raw = f"({src}[{first}] << 8 | {src}[{first + 1}])"
        else:
            raw = f"int.from_bytes({src}[{first}:{last}], 'big')"
        if shift:
            raw = f"({raw} >> {shift})"
        if shift or offset % 8:
            raw = f"({raw} & {(1 << width) - 1})"
        if f.signed:
            half = 1 << (width - 1)
            raw = f"(({raw} ^ {half}) - {half})"
        return raw

    def set_valid_flag(self, w: Writer, h: str, value: int) -> None:
        """Validity of ``h``; a member of a union made valid invalidates the others."""
        header = self.prog.header(h)
        w(f"{self.names.valid(h)} = {value}")
        if value and header.union is not None:
            for _, other in self.prog.unions[header.union].members:
                if other != h:
                    w(f"{self.names.valid(other)} = 0")

    def reset_fields(self, w: Writer, h: str) -> None:
        header = self.prog.header(h)
        for i in self.names.fields_of(h):
            w(f"{self.names.field_at(h, i)} = 0")
        if not header.metadata:
            if header.type.vl_index is None:
                w(f"{self.names.base(h)} = {self.zero_name(h)}")
            w(f"{self.names.dirty(h)} = 0")

    def zero_name(self, h: str) -> str:
        t = self.prog.header(h).type
        name = f"_Z{t.fixed_bits // 8}"
        self.g.consts[name] = bytes(t.fixed_bits // 8)
        return name

    def header_state(self, h: str) -> list[str]:
        """Every variable holding header ``h``'s state (for swaps and PHV transfer)."""
        header = self.prog.header(h)
        n = self.names
        out = [n.valid(h)] if not header.metadata else []
        if not header.metadata:
            if header.type.vl_index is None:
                out.append(n.base(h))
            else:
                out.append(n.vlw(h))
            out.append(n.dirty(h))
        out += [n.field_at(h, i) for i in n.fields_of(h)]
        return out

    def assign_header(self, w: Writer, dst: str, src: str) -> None:
        """BMv2 core assign_header: src invalid -> dst invalid; else copy every field."""
        pd, ps = self.prog.header(dst), self.prog.header(src)
        if pd.type.name != ps.type.name:
            raise ConfigError(f"assign_header {dst} <- {src}: different types")
        n = self.names

        def copy() -> None:
            if pd.metadata or ps.metadata:
                for i in n.fields_of(dst):
                    w(f"{n.field_at(dst, i)} = {self._field_or_image(src, i)}")
                if not pd.metadata:
                    w(f"{n.dirty(dst)} = 1")
                self.set_valid_flag(w, dst, 1)
                return
            if pd.type.vl_index is not None:
                for i in range(len(pd.type.fields)):
                    w(f"{n.field_at(dst, i)} = {n.field_at(src, i)}")
                w(f"{n.vlw(dst)} = {n.vlw(src)}")
                w(f"{n.dirty(dst)} = 1")
            else:
                img = self.fresh("img")
                w(f"{img} = {self.image(src)}")
                w(f"{n.base(dst)} = {img}")
                w(f"{n.dirty(dst)} = 0")
                for i in n.fields_of(dst):
                    if n.is_touched(src, i):
                        w(f"{n.field_at(dst, i)} = {n.field_at(src, i)}")
                    else:
                        f = pd.type.fields[i]
                        w(f"{n.field_at(dst, i)} = {self._field_from(img, pd.type.bit_offsets()[i], f)}")
            self.set_valid_flag(w, dst, 1)

        if ps.metadata:
            copy()
            return
        w.block(f"if {n.valid(src)}:", copy)
        w.block("else:", lambda: self.set_valid_flag(w, dst, 0))

    def _field_or_image(self, h: str, i: int) -> str:
        if self.names.is_touched(h, i):
            return self.names.field_at(h, i)
        header = self.prog.header(h)
        if header.metadata:
            return "0"
        return self._field_from(self.image(h), header.type.bit_offsets()[i], header.type.fields[i])

    def swap_headers(self, w: Writer, a: str, b: str) -> None:
        sa, sb = self.header_state(a), self.header_state(b)
        if len(sa) != len(sb):
            raise ConfigError(f"cannot swap {a} and {b}: different layouts")
        if sa:
            w(f"{', '.join(sa)} = {', '.join(sb)}")

    # ---- per-element dispatch for run-time stack indexes ------------------------------------
    def on_header(self, w: Writer, ref: ex.HeaderRef, fn: Callable[[str], None]) -> None:
        if ref.cond is not None:
            assert ref.then is not None and ref.other is not None
            then, other = ref.then, ref.other
            w.block(f"if {ref.cond}:", lambda: self.on_header(w, then, fn))
            w.block("else:", lambda: self.on_header(w, other, fn))
            return
        if ref.static is not None:
            fn(ref.static)
            return
        assert ref.index is not None
        idx = self.fresh("i")
        w(f"{idx} = {ref.index}")
        first = True
        for i, h in ref.elements(self.prog):
            w.block(f"{'if' if first else 'elif'} {idx} == {i}:", _bind(fn, h))
            first = False

    # ---- calculations (hash / checksum input, BMv2 BufBuilder) ------------------------------
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

    # ---- primitives --------------------------------------------------------------------------
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

    def add_header(self, w: Writer, h: str, fast: bool) -> None:
        """add_header: make valid, zero every field, count its bytes in the packet length."""
        header = self.prog.header(h)
        if header.metadata:
            return
        if fast:
            self.set_valid_flag(w, h, 1)
            return

        def body() -> None:
            self.reset_fields(w, h)
            self.set_valid_flag(w, h, 1)
            w(f"plen += {self.header_bytes(h)}")

        w.block(f"if not {self.names.valid(h)}:", body)

    def remove_header(self, w: Writer, h: str) -> None:
        header = self.prog.header(h)
        if header.metadata:
            return

        def body() -> None:
            w(f"plen -= {self.header_bytes(h)}")
            self.set_valid_flag(w, h, 0)

        w.block(f"if {self.names.valid(h)}:", body)

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
        if push:
            w(f"{n} = min({size}, {n} + {num})")
            for i in range(size - 1, num - 1, -1):
                self.swap_headers(w, st.headers[i], st.headers[i - num])
            for i in range(min(size, num)):
                self.set_valid_flag(w, st.headers[i], 0)
        else:
            w(f"{n} = {n} - min({n}, {num})")
            i = 0
            if num < size:
                for i in range(size - num):
                    self.swap_headers(w, st.headers[i], st.headers[i + num])
                i = size - num
            for j in range(i, size):
                self.set_valid_flag(w, st.headers[j], 0)

    def action_body(self, w: Writer, action: pm.Action, stage: str) -> None:
        cx = ex.ExprCompiler(self.names, action.params, f"action {action.name}")
        before = len(w.lines)
        for prim in action.primitives:
            self.primitive(w, prim, cx, stage)
        if len(w.lines) == before:
            w("pass")

    # ---- parser ------------------------------------------------------------------------------
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

    def union_stack_next(self, name: str) -> str:
        idx = list(self.prog.union_stacks).index(name)
        return f"un{idx}"

    def extract(self, w: Writer, h: str, vl_bits: str | None, too_short: int,
                cx: ex.ExprCompiler) -> None:
        header = self.prog.header(h)
        t = header.type
        n = self.names
        if header.metadata:
            raise ConfigError(f"{cx.where}: extract into metadata {h}")
        if t.vl_index is None:
            if vl_bits is not None:
                raise ConfigError(f"{cx.where}: extract_VL into fixed-size header {h}")
            size = t.fixed_bits // 8
            w(f"if flen - pos < {size}: perr = {too_short}; break")
            base = n.base(h)
            w(f"{base} = frame[pos:pos + {size}]")
            self.load_fields(w, h, base)
            w(f"{n.dirty(h)} = 0")
            self.set_valid_flag(w, h, 1)
            w(f"pos += {size}")
            return
        if vl_bits is None:
            raise ConfigError(f"{cx.where}: extract of variable-length header {h} without a length")
        invalid = self.err("ParserInvalidArgument")
        w(f"if {vl_bits} % 8 or {vl_bits} < 0: perr = {invalid}; break")
        nbytes = self.fresh("sz")
        w(f"{nbytes} = {t.fixed_bits // 8} + {vl_bits} // 8")
        w(f"if flen - pos < {nbytes}: perr = {too_short}; break")
        w(f"if {nbytes} > {t.max_bytes}: perr = {self.err('HeaderTooShort')}; break")
        x = self.fresh("x")
        w(f"{x} = int.from_bytes(frame[pos:pos + {nbytes}], 'big')")
        w(f"{n.vlw(h)} = {vl_bits}")
        total = self.fresh("tb")
        w(f"{total} = {nbytes} * 8")
        at = "0"
        for i, f in enumerate(t.fields):
            width = n.vlw(h) if f.vl else str(f.width)
            shift = f"({total} - {at} - {width})"
            mask = f"((1 << {width}) - 1)" if f.vl else str((1 << f.width) - 1)
            value = f"(({x} >> {shift}) & {mask})"
            if f.signed and not f.vl:
                half = 1 << (f.width - 1)
                value = f"(({value} ^ {half}) - {half})"
            w(f"{n.field_at(h, i)} = {value}")
            at = f"({at} + {width})"
        w(f"{n.dirty(h)} = 1")
        self.set_valid_flag(w, h, 1)
        w(f"pos += {nbytes}")

    # ---- controls ------------------------------------------------------------------------------
    def control(self, w: Writer, pipeline: pm.Pipeline, stage: str) -> None:
        """The pipeline as structured code inside ``while True: ... break`` (exit = break)."""
        successors: dict[str, list[str | None]] = {}
        for t in pipeline.tables.values():
            successors[t.name] = self._table_successors(t)
        for c in pipeline.conditionals.values():
            successors[c.name] = [c.true_next, c.false_next]
        ipdom = _post_dominators(pipeline.init, successors)
        budget = [NODE_BUDGET * max(1, len(successors))]
        w("while True:")
        w.indent()
        self._region(w, pipeline, pipeline.init, None, ipdom, successors, budget, stage)
        w("break")
        w.dedent()

    def _table_successors(self, t: pm.Table) -> list[str | None]:
        if t.hit_miss:
            return [t.next_tables.get("__HIT__"), t.next_tables.get("__MISS__")]
        out: list[str | None] = []
        for aid in t.action_ids:
            out.append(t.next_tables.get(self.prog.actions[aid].name))
        if t.default_action is None or t.kind != "simple":
            out.append(t.base_default_next)
        return out

    def _region(self, w: Writer, pipeline: pm.Pipeline, node: str | None, stop: str | None,
                ipdom: dict[str, str | None], succ: dict[str, list[str | None]],
                budget: list[int], stage: str) -> None:
        while node is not None and node != stop:
            budget[0] -= 1
            if budget[0] < 0:
                raise Unsupported("a control flow graph that is not structured", pipeline.name)
            join = ipdom[node]
            if node in pipeline.conditionals:
                c = pipeline.conditionals[node]
                cx = ex.ExprCompiler(self.names, where=f"condition {c.name}")
                cond = cx.boolean(c.expression)
                branches = [(cond, c.true_next), ("", c.false_next)]
            else:
                t = pipeline.tables[node]
                branches = self.table(w, t, stage)
            targets = {b for _, b in branches}
            if len(targets) == 1:
                node = next(iter(targets))
                if node is None:
                    return
                continue
            first = True
            for cond, target in branches:
                header = "else:" if cond == "" else f"{'if' if first else 'elif'} {cond}:"

                def branch(target: str | None = target, join: str | None = join) -> None:
                    self._region(w, pipeline, target, join, ipdom, succ, budget, stage)

                w.block(header, branch)
                first = False
            node = join

    def table(self, w: Writer, t: pm.Table, stage: str) -> list[tuple[str, str | None]]:
        """Apply table ``t``; returns the branches (condition, next node) that follow it."""
        g = f"T{t.id}_{t.pipeline[0]}"
        self.g.tables[g] = t.name
        w(f"# table {t.name}")
        exits = any(aid in self.exit_actions for aid in t.action_ids)
        const_default = (
            not t.keys and t.kind == "simple" and t.default_action is not None
            and t.default_const and t.default_entry_const
        )
        if const_default:
            assert t.default_action is not None
            action = self.prog.actions[t.default_action]
            for i, v in enumerate(t.default_args):
                w(f"p{i} = {v}")
            self.action_body(w, action, stage)
            if exits:
                w("if ex: break")
            if t.hit_miss:
                return [("", t.next_tables.get("__MISS__"))]
            return [("", t.next_tables.get(action.name))]
        keys = []
        cx = ex.ExprCompiler(self.names, where=f"table {t.name}")
        for k in t.keys:
            h, f = k.target
            if f == "$valid$":
                code = self.names.valid(h)
            else:
                code = cx.field_value(h, f)
                if self.prog.field_spec(h, f).signed:
                    code = f"({code} & {(1 << k.width) - 1})"
            if k.mask is not None:
                code = f"({code} & {k.mask})"
            keys.append(code)
        mode = ("ternary" if any(k.match_type in ("ternary", "range") for k in t.keys)
                else "lpm" if any(k.match_type == "lpm" for k in t.keys) else "exact")
        if not keys:
            w("e = None")
        elif mode == "exact":
            key = keys[0] if len(keys) == 1 else f"({', '.join(keys)},)"
            w(f"e = {g}X.get({key})")
        elif mode == "lpm":
            key = keys[0] if len(keys) == 1 else f"({', '.join(keys)},)"
            w(f"e = {g}.lookup_lpm({key})")
        else:
            w(f"e = {g}.lookup_ternary(({', '.join(keys)},))")
        w("if e is None:")
        w("    hit = 0")
        w(f"    a, pa = {g}.default or _NOACT")
        w("else:")
        w.indent()
        w("hit = 1")
        if t.with_counters:
            w("ec = e.counter; ec[0] += 1; ec[1] += ilen")
        if t.kind == "simple":
            w("a = e.action; pa = e.args")
        else:
            self.indirect_resolve(w, t, g)
        if t.direct_meter is not None:
            spec = self.prog.meters[t.direct_meter]
            if spec.result is not None:
                tmp = self.fresh("m")
                w(f"{tmp} = e.meter.execute(now_us * 1e-6, 1 if {spec.kind == 'packets'} else ilen) if e.meter is not None else 0")
                self.assign(w, {"type": "field", "value": list(spec.result)}, tmp, cx, None)
        w.dedent()
        first = True
        for aid in t.action_ids:
            action = self.prog.actions[aid]

            def body(action: pm.Action = action) -> None:
                if action.params:
                    names = ", ".join(f"p{i}" for i in range(len(action.params)))
                    w(f"{names}, = pa")
                self.action_body(w, action, stage)

            w.block(f"{'if' if first else 'elif'} a == {aid}:", body)
            first = False
        if exits:
            w("if ex: break")
        if t.hit_miss:
            return [("hit", t.next_tables.get("__HIT__")), ("", t.next_tables.get("__MISS__"))]
        by_next: dict[str | None, list[int]] = {}
        for aid in t.action_ids:
            by_next.setdefault(t.next_tables.get(self.prog.actions[aid].name), []).append(aid)
        always_acts = t.kind == "simple" and t.default_action is not None
        groups = list(by_next.items())
        if not always_acts:
            groups.append((t.base_default_next, []))
        if len({target for target, _ in groups}) == 1:
            return [("", groups[0][0])]
        branches: list[tuple[str, str | None]] = []
        for target, aids in groups[:-1]:
            branches.append((" or ".join(f"a == {aid}" for aid in aids), target))
        branches.append(("", groups[-1][0]))
        return branches

    def indirect_resolve(self, w: Writer, t: pm.Table, g: str) -> None:
        """Member -> its action; group -> the selector hash picks among the live members."""
        assert t.profile is not None
        profile = self.prog.profile(t.profile)
        pg = f"P{profile.id}_{t.pipeline[0]}"
        self.g.profiles[pg] = profile.name
        w("if e.member is not None:")
        w(f"    a, pa = {pg}.members.get(e.member) or _NOACT")
        w("else:")
        w.indent()
        w(f"ch = {pg}.choices.get(e.group)")
        w("if ch:")
        w.indent()
        if profile.selector is None:
            w("a, pa = ch[0]")
        else:
            inputs = [{"type": "field", "value": list(v)} for v in profile.selector.inputs]
            buf = self.calc_bytes(w, inputs, f"selector {profile.name}")
            w(f"a, pa = ch[{self.hash_call(profile.selector.algo, buf, True)} % len(ch)]")
        w.dedent()
        w("else:")
        w("    a, pa = _NOACT")
        w.dedent()

    # ---- checksums ------------------------------------------------------------------------
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

    # ---- deparser ------------------------------------------------------------------------
    def deparse(self, w: Writer) -> None:
        w("parts = []")
        for h in self.prog.deparser.order:
            header = self.prog.header(h)
            if header.metadata:
                continue
            w(f"if {self.names.valid(h)}: parts.append({self.image(h)})")
        w("parts.append(frame[pay:])")
        w("data = b''.join(parts)")
        w("if trunc >= 0 and len(data) > trunc: data = data[:trunc]")

    # ---- state layout ----------------------------------------------------------------------
    def all_state(self) -> list[str]:
        out: list[str] = []
        for h in self.prog.headers.values():
            if h.metadata:
                out += [self.names.field_at(h.name, i) for i in self.names.fields_of(h.name)]
            else:
                out += self.header_state(h.name)
        out += [self.names.next(s) for s in self.prog.stacks]
        out += [self.union_stack_next(u) for u in self.prog.union_stacks]
        return out

    def metadata_vars(self) -> set[str]:
        out: set[str] = set()
        for h in self.prog.headers.values():
            if h.metadata:
                out.update(self.names.field_at(h.name, i) for i in self.names.fields_of(h.name))
        return out

    def initial_values(self, state: list[str]) -> tuple[object, ...]:
        values: list[object] = []
        zeros: dict[str, bytes] = {}
        for h in self.prog.headers.values():
            if not h.metadata and h.type.vl_index is None:
                zeros[self.names.base(h.name)] = bytes(h.type.fixed_bits // 8)
        for var in state:
            values.append(zeros.get(var, 0))
        return tuple(values)

    def field_list_code(self, w: Writer, fl_var: str, out: str) -> None:
        """``out`` = the values of the fields of field list ``fl_var`` (None when unknown)."""
        w(f"{out} = None")
        first = True
        for fid, fields in self.prog.field_lists.items():
            vals = [self._fl_field(h, f) for h, f in fields]
            w(f"{'if' if first else 'elif'} {fl_var} == {fid}: {out} = ({''.join(v + ', ' for v in vals)})")
            first = False

    def _fl_field(self, h: str, f: str) -> str:
        return ex.ExprCompiler(self.names, where="field list").field_value(h, f)

    def restore_preserved(self, w: Writer) -> None:
        """Apply ``pres`` = (field list id, values) to the metadata fields of that list."""
        if not self.prog.field_lists:
            return
        w("if pres is not None:")
        w.indent()
        w("pfl, pvals = pres")
        first = True
        for fid, fields in self.prog.field_lists.items():
            if not fields:
                continue
            targets = []
            for h, f in fields:
                if f == "$valid$":
                    raise Unsupported("validity bits in a field list", f"field list {fid}")
                targets.append(self.names.field(h, f))
            w(f"{'if' if first else 'elif'} pfl == {fid}: {', '.join(targets)}, = pvals")
            first = False
        if first:
            w("pass")
        w.dedent()

    # ---- the two functions ---------------------------------------------------------------
    def source(self) -> str:
        state = self.all_state()
        meta = self.metadata_vars()
        self.g.consts["_INIT"] = self.initial_values(state)
        self.g.consts["_STATE"] = tuple(state)
        w = Writer()
        ingress_body = self._ingress(state, meta)
        egress_body = self._egress(state, meta)
        w.lines += ingress_body
        w.lines += egress_body
        return w.text()

    def _init_state(self, w: Writer, state: list[str]) -> None:
        if state:
            w(f"{', '.join(state)}, = _INIT")
        for h in self.prog.headers.values():
            if h.metadata and h.name != "standard_metadata":
                pass
        for h in self.prog.headers.values():
            if h.metadata:
                w(f"{self.names.valid(h.name)} = 1")

    def _ingress(self, state: list[str], meta: set[str]) -> list[str]:
        w = Writer()
        w("def ingress(frame, in_port, itype, pres, now_us, ilen, reparse):")
        w.indent()
        self._init_state(w, state)
        w("perr = 0; cksum_err = 0; ex = 0; plen = ilen; trunc = -1")
        w("cl_sid = 0; cl_fl = 0; rs_fl = 0; lf_id = 0; rc_fl = 0")
        for f, value in (("ingress_port", "in_port"), ("packet_length", "ilen"),
                         ("instance_type", "itype"), ("ingress_global_timestamp", "now_us")):
            self.set_sm(w, f, value)
        self.restore_preserved(w)
        self.parser(w)
        w("pay = pos")
        err_var = self.sm("parser_error")
        self.verify_checksums(w)
        w("if reparse:")
        w.indent()
        for var in sorted(meta):
            w(f"{var} = 0")
        w(f"return ({', '.join(state)}{',' if state else ''}), pay, plen")
        w.dedent()
        if err_var is not None:
            w(f"{err_var} = perr")
        self.control(w, self.prog.pipelines["ingress"], "ingress")
        spec = self.sm("egress_spec") or "0"
        grp = self.sm("mcast_grp") or "0"
        self.field_list_code(w, "cl_fl", "cl_vals") if self.prog.field_lists else w("cl_vals = None")
        self.field_list_code(w, "rs_fl", "rs_vals") if self.prog.field_lists else w("rs_vals = None")
        w("lf_vals = None")
        if self.prog.learn_lists:
            first = True
            for lid, (_, fields) in self.prog.learn_lists.items():
                vals = [self._fl_field(h, f) for h, f in fields]
                w(f"{'if' if first else 'elif'} lf_id == {lid}: lf_vals = ({''.join(v + ', ' for v in vals)})")
                first = False
        w(f"return (({', '.join(state)}{',' if state else ''}), {spec}, {grp}, cl_sid, cl_fl, "
          "cl_vals, rs_fl, rs_vals, lf_id, lf_vals, plen, pay, trunc, perr)")
        return w.lines

    def _egress(self, state: list[str], meta: set[str]) -> list[str]:
        w = Writer()
        w("def egress(frame, phv, pres, itype, eport, rid, enq, enq_bytes, now_us, ilen, plen, "
          "pay, trunc):")
        w.indent()
        if state:
            w(f"{', '.join(state)}, = phv")
        for h in self.prog.headers.values():
            if h.metadata:
                w(f"{self.names.valid(h.name)} = 1")
        w("ex = 0; cl_sid = 0; cl_fl = 0; rc_fl = 0; lf_id = 0; rs_fl = 0")
        self.restore_preserved(w)
        sets = (
            ("egress_port", "eport"), ("egress_spec", str(self.drop_port + 1)),
            ("packet_length", "plen"), ("instance_type", "itype"),
            ("enq_qdepth", "enq"), ("deq_qdepth", "enq"),
            ("enq_timestamp", "now_us"), ("deq_timedelta", "0"),
            ("egress_global_timestamp", "now_us"),
        )
        for f, value in sets:
            self.set_sm(w, f, value)
        rid_var = self.sm("egress_rid")
        if rid_var is not None:
            w(f"if rid >= 0: {rid_var} = rid")
        if self.user_qbytes is not None:
            w(f"{self.user_qbytes} = min(enq_bytes, 0xFFFFFFFF)")
        self.control(w, self.prog.pipelines["egress"], "egress")
        spec = self.sm("egress_spec")
        prio = self.sm("priority") or "0"
        if self.prog.field_lists:
            self.field_list_code(w, "cl_fl", "cl_vals")
            self.field_list_code(w, "rc_fl", "rc_vals")
        else:
            w("cl_vals = None; rc_vals = None")
        w("cl_phv = None")
        w("if cl_sid:")
        w.indent()
        cloned = ["0" if var in meta else var for var in state]
        w(f"cl_phv = ({', '.join(cloned)}{',' if cloned else ''})")
        w.dedent()
        out_spec = spec or "0"
        if spec is not None:
            w(f"if {spec} == {self.drop_port}:")
            w(f"    return (None, {prio}, {spec}, cl_sid, cl_fl, cl_phv, cl_vals, rc_fl, rc_vals)")
        self.update_checksums(w)
        self.deparse(w)
        w(f"return (data, {prio}, {out_spec}, cl_sid, cl_fl, cl_phv, cl_vals, rc_fl, rc_vals)")
        return w.lines


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


def _bind(fn: Callable[[str], None], arg: str) -> Callable[[], None]:
    return lambda: fn(arg)


def _post_dominators(init: str | None, succ: dict[str, list[str | None]]) -> dict[str, str | None]:
    """Immediate post-dominator of every node of a DAG (None = the pipeline's end)."""
    order: list[str] = []
    seen: set[str] = set()
    onpath: set[str] = set()

    def visit(n: str) -> None:
        stack: list[tuple[str, int]] = [(n, 0)]
        onpath.add(n)
        seen.add(n)
        while stack:
            node, i = stack[-1]
            nexts = [s for s in succ.get(node, []) if s is not None]
            if i < len(nexts):
                stack[-1] = (node, i + 1)
                s = nexts[i]
                if s in onpath:
                    raise Unsupported("a control flow graph with a loop", node)
                if s not in seen:
                    seen.add(s)
                    onpath.add(s)
                    stack.append((s, 0))
            else:
                stack.pop()
                onpath.discard(node)
                order.append(node)

    for n in ([init] if init else []) + sorted(succ):
        if n is not None and n not in seen:
            visit(n)
    pdom: dict[str | None, frozenset[str | None]] = {None: frozenset([None])}
    for n in order:  # successors come first in this order
        sets = [pdom[s] for s in succ.get(n, [])]
        common = frozenset.intersection(*sets) if sets else frozenset([None])
        pdom[n] = common | {n}
    ipdom: dict[str, str | None] = {}
    for n in order:
        others = pdom[n] - {n}
        best: str | None = None
        size = -1
        for m in others:
            if len(pdom[m]) > size:
                best, size = m, len(pdom[m])
        ipdom[n] = best
    return ipdom

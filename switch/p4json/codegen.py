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

from switch.p4json import exprs as ex
from switch.p4json.errors import Unsupported
from switch.p4json.gen_base import (
    CLONE_VALID,
    EGRESS_CLONE,
    EGRESS_OUT,
    INGRESS_CLONE,
    INGRESS_OUT,
    NORMAL,
    RECIRC,
    REPLICATION,
    RESUBMIT,
    Globals,
    Writer,
)
from switch.p4json.gen_control import ControlGen
from switch.p4json.gen_parser import ParserGen

__all__ = [
    "CLONE_VALID", "EGRESS_CLONE", "EGRESS_OUT", "INGRESS_CLONE", "INGRESS_OUT", "NORMAL",
    "RECIRC", "REPLICATION", "RESUBMIT", "Generator", "Globals", "Writer",
]


class Generator(ParserGen, ControlGen):
    """Builds the source of one program; ``source()`` returns it, ``g`` what it needs."""

    def deparse(self, w: Writer) -> None:
        w("parts = []")
        for h in self.prog.deparser.order:
            header = self.prog.header(h)
            if header.metadata:
                continue
            w(f"if {self.names.valid(h)}: parts.append({self.image(h)})")
        w("parts.append(frame[pay:])")
        w("data = b''.join(parts)")
        w("cut = trunc >= 0 and len(data) > trunc")
        w("if cut: data = data[:trunc]")

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

    def source(self) -> str:
        state = self.all_state()
        meta = self.metadata_vars()
        self.g.consts["_INIT"] = self.initial_values(state)
        self.g.consts["_STATE"] = tuple(state)
        w = Writer()
        w.lines += self._ingress(state, meta)
        w.lines += self._egress(state, meta)
        w.lines += self._fast(state, meta)
        return w.text()

    def _init_state(self, w: Writer, state: list[str]) -> None:
        if state:
            w(f"{', '.join(state)}, = _INIT")
        for h in self.prog.headers.values():
            if h.metadata:
                w(f"{self.names.valid(h.name)} = 1")

    def _ingress_body(self, w: Writer, state: list[str], meta: set[str], fused: bool) -> None:
        """Metadata set-up, parser, checksum verification, ingress control."""
        self._init_state(w, state)
        w("perr = 0; cksum_err = 0; ex = 0; plen = ilen; trunc = -1")
        w("cl_sid = 0; cl_fl = 0; rs_fl = 0; lf_id = 0; rc_fl = 0")
        for f, value in (("ingress_port", "in_port"), ("packet_length", "ilen"),
                         ("instance_type", "0" if fused else "itype"),
                         ("ingress_global_timestamp", "now_us")):
            self.set_sm(w, f, value)
        if not fused:
            self.restore_preserved(w)
        self.parser(w)
        w("pay = pos")
        err_var = self.sm("parser_error")
        self.verify_checksums(w)
        if not fused:
            w("if reparse:")
            w.indent()
            for var in sorted(meta):
                w(f"{var} = 0")
            w(f"return ({', '.join(state)}{',' if state else ''}), pay, plen")
            w.dedent()
        if err_var is not None:
            w(f"{err_var} = perr")
        self.control(w, self.prog.pipelines["ingress"], "ingress")

    def _ingress_result(self, w: Writer, state: list[str]) -> str:
        """Emit the field-list / digest values; returns the ingress result tuple."""
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
        return (f"(({', '.join(state)}{',' if state else ''}), {spec}, {grp}, cl_sid, cl_fl, "
                "cl_vals, rs_fl, rs_vals, lf_id, lf_vals, plen, pay, trunc, perr)")

    def _ingress(self, state: list[str], meta: set[str]) -> list[str]:
        w = Writer()
        w("def ingress(frame, in_port, itype, pres, now_us, ilen, reparse):")
        w.indent()
        self._ingress_body(w, state, meta, fused=False)
        w(f"return {self._ingress_result(w, state)}")
        return w.lines

    def _egress_body(self, w: Writer, state: list[str], meta: set[str], fused: bool) -> None:
        """Egress metadata, the egress control, clone state, checksum update, deparser; the
        returns: ``egress`` returns EGRESS_OUT, ``fast`` (0, (port, prio, data, truncated)),
        (0, None) when dropped, (2, EGRESS_OUT) when a clone or recirculation follows."""
        for h in self.prog.headers.values():
            if h.metadata:
                w(f"{self.names.valid(h.name)} = 1")
        w("ex = 0; cl_sid = 0; cl_fl = 0; rc_fl = 0; lf_id = 0; rs_fl = 0")
        if not fused:
            self.restore_preserved(w)
        sets = (
            ("egress_port", "eport"), ("egress_spec", str(self.drop_port + 1)),
            ("packet_length", "plen"), ("instance_type", "0" if fused else "itype"),
            ("enq_qdepth", "enq"), ("deq_qdepth", "enq"),
            ("enq_timestamp", "now_us"), ("deq_timedelta", "0"),
            ("egress_global_timestamp", "now_us"),
        )
        for f, value in sets:
            self.set_sm(w, f, value)
        rid_var = self.sm("egress_rid")
        if rid_var is not None and not fused:
            w(f"if rid >= 0: {rid_var} = rid")
        if self.user_qbytes is not None:
            w(f"{self.user_qbytes} = min(enq_bytes, {self.user_qbytes_max})")
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
        result = "(data, {prio}, cut, cl_sid, cl_fl, cl_phv, cl_vals, rc_fl, rc_vals)"
        dropped = f"(None, {prio}, False, cl_sid, cl_fl, cl_phv, cl_vals, rc_fl, rc_vals)"
        if spec is not None:
            w(f"if {spec} == {self.drop_port}:")
            if fused:
                w(f"    if cl_sid: return (2, ({dropped}, eport, plen, pay, trunc))")
                w("    return (0, None)")
            else:
                w(f"    return {dropped}")
        self.update_checksums(w)
        self.deparse(w)
        if fused:
            w(f"if cl_sid or rc_fl: return (2, ({result.format(prio=prio)}, eport, plen, pay, "
              "trunc))")
            w(f"return (0, (eport, {prio}, data, cut))")
        else:
            w(f"return {result.format(prio=prio)}")

    def _egress(self, state: list[str], meta: set[str]) -> list[str]:
        w = Writer()
        w("def egress(frame, phv, pres, itype, eport, rid, enq, enq_bytes, now_us, ilen, plen, "
          "pay, trunc):")
        w.indent()
        if state:
            w(f"{', '.join(state)}, = phv")
        self._egress_body(w, state, meta, fused=False)
        return w.lines

    def _fast(self, state: list[str], meta: set[str]) -> list[str]:
        """Ingress and egress in one function for a received packet that leaves as one
        unicast copy (no clone, resubmit, digest, multicast): no PHV tuple between them.
        Anything else returns (1, INGRESS_OUT) and the engine goes on from there."""
        w = Writer()
        w("def fast(frame, in_port, now_us, ilen, qdepth):")
        w.indent()
        self._ingress_body(w, state, meta, fused=True)
        spec = self.sm("egress_spec") or "0"
        grp = self.sm("mcast_grp") or "0"
        w(f"if cl_sid or rs_fl or lf_id or {grp} or {spec} == {self.drop_port}:")
        w.indent()
        w(f"return (1, {self._ingress_result(w, state)})")
        w.dedent()
        prio = self.sm("priority") or "0"
        w(f"eport = {spec}")
        w(f"enq, enq_bytes = qdepth(eport, {prio})")
        self._egress_body(w, state, meta, fused=True)
        return w.lines

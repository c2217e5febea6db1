"""How a P4Runtime program (its P4Info, as a ``Program``) maps onto a loaded BMv2 JSON
program: which engine table, action, profile, counter and register each P4Info object is.

p4c writes the same fully qualified names into both files (tables, actions, key fields,
profiles, counters, registers), so objects are matched by name and checked for the same
match kinds, widths, sizes and parameters. A P4Info that does not describe the JSON raises
``Mismatch`` naming the first difference (the config push then fails).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.p4schema.model import (
    Action,
    ActionProfile,
    ActionRef,
    Counter,
    MatchField,
    Param,
    Program,
    Register,
    Table,
)
from common.proto.p4.config.v1 import p4info_pb2
from switch.p4json import program as pm
from switch.p4json.engine import Engine
from switch.p4json.runtime import ActionProfile as EngineProfile
from switch.p4json.runtime import CounterArray, MatchTable, RegisterArray

KIND_OF_JSON = {"exact": "exact", "lpm": "lpm", "ternary": "ternary", "range": "range",
                "valid": "exact"}


class Mismatch(Exception):
    """The P4Info and the BMv2 JSON describe different programs."""


@dataclass
class Binding:
    """P4Info ids -> engine objects (and P4Info action ids -> JSON action ids)."""

    tables: dict[int, MatchTable] = field(default_factory=dict)
    table_actions: dict[int, dict[int, int]] = field(default_factory=dict)
    profiles: dict[int, EngineProfile] = field(default_factory=dict)
    profile_actions: dict[int, dict[int, int]] = field(default_factory=dict)
    counters: dict[int, CounterArray] = field(default_factory=dict)
    registers: dict[int, RegisterArray] = field(default_factory=dict)


def bind(program: Program, engine: Engine) -> Binding:
    prog = engine.prog
    out = Binding()
    for t in program.tables:
        tid = program.id(t.name)
        try:
            jt = prog.table(t.name)
        except KeyError:
            raise Mismatch(f"table {t.name} is not in the device config") from None
        if len(jt.keys) != len(t.match_fields):
            raise Mismatch(f"table {t.name}: {len(t.match_fields)} match fields in the P4Info, "
                           f"{len(jt.keys)} in the device config")
        for mf, k in zip(t.match_fields, jt.keys):
            kind = "ternary" if mf.kind == "optional" else mf.kind
            if KIND_OF_JSON[k.match_type] != kind or k.width != mf.bitwidth:
                raise Mismatch(f"table {t.name}: field {mf.name} is {mf.kind}/{mf.bitwidth} in "
                               f"the P4Info, {k.match_type}/{k.width} in the device config")
        by_name = {prog.actions[aid].name: aid for aid in jt.action_ids}
        amap = {}
        for ref in t.actions:
            if ref.name not in by_name:
                raise Mismatch(f"table {t.name}: action {ref.name} is not one of its actions "
                               "in the device config")
            amap[program.id(ref.name)] = by_name[ref.name]
        if (t.implementation is None) != (jt.kind == "simple"):
            raise Mismatch(f"table {t.name}: direct in one file, indirect in the other")
        if t.implementation is not None and t.implementation != jt.profile:
            raise Mismatch(f"table {t.name}: action profile {t.implementation} vs {jt.profile}")
        out.tables[tid] = engine.tables[t.name]
        out.table_actions[tid] = amap
    for ap in program.action_profiles:
        pid = program.id(ap.name)
        if ap.name not in engine.profiles:
            raise Mismatch(f"action profile {ap.name} is not in the device config")
        amap = {}
        for tname in ap.tables:
            tmap = out.table_actions.get(program.id(tname), {})
            for p4id, jid in tmap.items():
                if amap.get(p4id, jid) != jid:
                    raise Mismatch(f"action profile {ap.name}: its tables use different copies "
                                   "of an action (not supported)")
                amap[p4id] = jid
        out.profiles[pid] = engine.profiles[ap.name]
        out.profile_actions[pid] = amap
    for c in program.counters:
        arr = engine.counters.get(c.name)
        if arr is None or arr.size != c.size:
            raise Mismatch(f"counter {c.name} is not an indirect counter of size {c.size} in the "
                           "device config")
        out.counters[program.id(c.name)] = arr
    for r in program.registers:
        reg = engine.registers.get(r.name)
        if reg is None or reg.size != r.size or reg.width != r.bitwidth:
            raise Mismatch(f"register {r.name} is not a {r.size} x {r.bitwidth}-bit register in "
                           "the device config")
        out.registers[program.id(r.name)] = reg
    return out


_MATCH_KINDS = {p4info_pb2.MatchField.EXACT: "exact", p4info_pb2.MatchField.LPM: "lpm",
                p4info_pb2.MatchField.TERNARY: "ternary", p4info_pb2.MatchField.RANGE: "range",
                p4info_pb2.MatchField.OPTIONAL: "optional"}
_UNITS = {p4info_pb2.CounterSpec.BYTES: "bytes", p4info_pb2.CounterSpec.PACKETS: "packets",
          p4info_pb2.CounterSpec.BOTH: "both"}
_SCOPES = {p4info_pb2.ActionRef.TABLE_ONLY: "TABLE_ONLY",
           p4info_pb2.ActionRef.DEFAULT_ONLY: "DEFAULT_ONLY"}


def program_from_p4info(info: p4info_pb2.P4Info, name: str,
                        source: pm.Program | None = None) -> Program:
    """The ``Program`` a P4Info describes, with the P4Info's own ids. Each table's default
    action is the device config's (``source``) when given."""
    actions = {a.preamble.id: a for a in info.actions}
    profiles = {p.preamble.id: p for p in info.action_profiles}
    tables = {t.preamble.id: t for t in info.tables}
    try:
        out_actions = tuple(
            Action(a.preamble.name, tuple(Param(p.name, p.bitwidth) for p in a.params))
            for a in info.actions
        )
        out_tables = []
        for t in info.tables:
            refs = tuple(ActionRef(actions[r.id].preamble.name, _SCOPES.get(r.scope,
                                                                             "TABLE_AND_DEFAULT"))
                         for r in t.action_refs)
            names = [r.name for r in refs]
            default = _default_action(t, names, actions, source)
            impl = profiles[t.implementation_id].preamble.name if t.implementation_id else None
            out_tables.append(Table(
                t.preamble.name,
                tuple(MatchField(m.name, m.bitwidth, _MATCH_KINDS[m.match_type])
                      for m in t.match_fields),
                refs, t.size or 1024, default, bool(t.const_default_action_id), impl,
            ))
        out_profiles = tuple(
            ActionProfile(p.preamble.name, tuple(tables[i].preamble.name for i in p.table_ids),
                          p.size, p.with_selector, p.max_group_size)
            for p in info.action_profiles
        )
        counters = tuple(Counter(c.preamble.name, c.size, _UNITS.get(c.spec.unit, "both"))
                         for c in info.counters)
        registers = tuple(Register(r.preamble.name, r.size, r.type_spec.bitstring.bit.bitwidth)
                          for r in info.registers)
        program = Program(name, out_actions, tuple(out_tables), out_profiles, counters,
                          registers, info.pkg_info.arch or "v1model")
    except (KeyError, ValueError, IndexError) as exc:
        raise Mismatch(f"inconsistent P4Info: {exc}") from None
    ids = {o.preamble.name: o.preamble.id for kind in (info.actions, info.tables,
                                                      info.action_profiles, info.counters,
                                                      info.registers) for o in kind}
    if ids != program.ids:
        object.__setattr__(program, "ids", ids)  # @id annotations: keep the P4Info's ids
    return program


def _default_action(t: p4info_pb2.Table, names: list[str],
                    actions: dict[int, p4info_pb2.Action], source: pm.Program | None) -> str:
    if t.const_default_action_id in actions:
        return actions[t.const_default_action_id].preamble.name
    if source is not None:
        try:
            jt = source.table(t.preamble.name)
        except KeyError:
            jt = None
        if jt is not None and jt.default_action is not None:
            jname = source.actions[jt.default_action].name
            if jname in names:
                return jname
    return "NoAction" if "NoAction" in names else names[0]

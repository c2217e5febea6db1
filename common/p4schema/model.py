"""Data model of a P4 program's control-plane shape, and its P4Info rendering.

Names are the fully qualified control-plane names p4c gives (``Control.object``); ids follow
p4c's rule: 8-bit P4Runtime type prefix + the low 24 bits of the Jenkins one-at-a-time hash of
the name, names hashed in sorted order, collisions resolved by linear probing. Aliases are the
shortest unique dot-suffix. The P4Info in use is the one p4c wrote (``Program.to_p4info``,
p4/<name>.p4info.txtpb); the schema's own rendering (``render_p4info``) must equal it byte for
byte in canonical order (tests/unit/test_p4schema.py), so the ids, names and widths the target
and the controller take from the schema are p4c's.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TypeVar

import common.p4schema.compiled as compiled
from common.proto.p4.config.v1 import p4info_pb2


class Prefix(IntEnum):
    """P4Runtime id type prefixes (p4info.proto, P4Ids.Prefix)."""

    ACTION = 0x01
    TABLE = 0x02
    VALUE_SET = 0x03
    CONTROLLER_HEADER = 0x04
    ACTION_PROFILE = 0x11
    COUNTER = 0x12
    DIRECT_COUNTER = 0x13
    METER = 0x14
    DIRECT_METER = 0x15
    REGISTER = 0x16
    DIGEST = 0x17


MATCH_KINDS = {
    "exact": p4info_pb2.MatchField.EXACT,
    "lpm": p4info_pb2.MatchField.LPM,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}

COUNTER_UNITS = {
    "bytes": p4info_pb2.CounterSpec.BYTES,
    "packets": p4info_pb2.CounterSpec.PACKETS,
    "both": p4info_pb2.CounterSpec.BOTH,
}


@dataclass(frozen=True)
class Param:
    name: str
    bitwidth: int


@dataclass(frozen=True)
class Action:
    name: str
    params: tuple[Param, ...] = ()
    annotations: tuple[str, ...] = ()  # P4Info preamble annotations p4c writes


@dataclass(frozen=True)
class MatchField:
    name: str
    bitwidth: int
    kind: str  # exact | lpm | ternary | range | optional


@dataclass(frozen=True)
class ActionRef:
    name: str
    scope: str = "TABLE_AND_DEFAULT"  # or TABLE_ONLY / DEFAULT_ONLY


@dataclass(frozen=True)
class Table:
    name: str
    match_fields: tuple[MatchField, ...]
    actions: tuple[ActionRef, ...]
    size: int
    default_action: str = "NoAction"
    const_default_action: bool = False
    implementation: str | None = None  # action profile / selector name
    selector_fields: tuple[str, ...] = ()  # data-plane only (not in P4Info)


@dataclass(frozen=True)
class ActionProfile:
    name: str
    tables: tuple[str, ...]
    size: int
    with_selector: bool = True
    max_group_size: int = 0


@dataclass(frozen=True)
class Counter:
    name: str
    size: int
    unit: str = "both"


@dataclass(frozen=True)
class Register:
    name: str
    size: int
    bitwidth: int


@dataclass(frozen=True)
class Program:
    """A P4 program's control-plane shape; ids are computed on construction."""

    name: str
    actions: tuple[Action, ...]
    tables: tuple[Table, ...]
    action_profiles: tuple[ActionProfile, ...] = ()
    counters: tuple[Counter, ...] = ()
    registers: tuple[Register, ...] = ()
    arch: str = "v1model"
    ids: dict[str, int] = field(init=False, compare=False, repr=False)
    aliases: dict[str, str] = field(init=False, compare=False, repr=False)
    _tables: dict[str, Table] = field(init=False, compare=False, repr=False)
    _actions: dict[str, Action] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        kinds: list[tuple[Prefix, list[str]]] = [
            (Prefix.ACTION, [a.name for a in self.actions]),
            (Prefix.TABLE, [t.name for t in self.tables]),
            (Prefix.ACTION_PROFILE, [p.name for p in self.action_profiles]),
            (Prefix.COUNTER, [c.name for c in self.counters]),
            (Prefix.REGISTER, [r.name for r in self.registers]),
        ]
        ids: dict[str, int] = {}
        used: set[int] = set()
        all_names: list[str] = []
        for prefix, names in kinds:
            for name in sorted(names):
                if name in ids:
                    raise ValueError(f"duplicate control-plane name {name}")
                ids[name] = _probe_id(prefix, jenkins_one_at_a_time(name), used)
                used.add(ids[name])
                all_names.append(name)
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "aliases", {n: shortest_unique_suffix(n, all_names) for n in all_names})
        object.__setattr__(self, "_tables", {t.name: t for t in self.tables})
        object.__setattr__(self, "_actions", {a.name: a for a in self.actions})
        self._check()

    def _check(self) -> None:
        actions = {a.name for a in self.actions}
        profiles = {p.name for p in self.action_profiles}
        for t in self.tables:
            for ref in t.actions:
                if ref.name not in actions:
                    raise ValueError(f"table {t.name}: unknown action {ref.name}")
            if t.default_action not in {r.name for r in t.actions}:
                raise ValueError(f"table {t.name}: default action not in its action list")
            if t.implementation is not None and t.implementation not in profiles:
                raise ValueError(f"table {t.name}: unknown action profile {t.implementation}")

    def id(self, name: str) -> int:
        """The P4Runtime id of any control-plane object; ValueError naming near names."""
        return _by_name(self.ids, name, "control-plane object", self.name)

    def table(self, name: str) -> Table:
        return _by_name(self._tables, name, "table", self.name)

    def action(self, name: str) -> Action:
        return _by_name(self._actions, name, "action", self.name)

    def to_p4info(self) -> p4info_pb2.P4Info:
        """The P4Info p4c wrote for this program (a fresh copy of p4/<name>.p4info.txtpb)."""
        return compiled.load_p4info(self.name)

    def render_p4info(self) -> p4info_pb2.P4Info:
        """The P4Info this schema describes, objects in id order; it equals p4c's file in
        canonical order (common.p4schema.canonical)."""
        info = p4info_pb2.P4Info()
        info.pkg_info.arch = self.arch
        action_by_name = {a.name: a for a in self.actions}
        for t in sorted(self.tables, key=lambda t: self.ids[t.name]):
            pt = info.tables.add()
            self._preamble(pt.preamble, t.name)
            for i, mf in enumerate(t.match_fields, start=1):
                m = pt.match_fields.add(id=i, name=mf.name, bitwidth=mf.bitwidth)
                m.match_type = MATCH_KINDS[mf.kind]
            for ref in t.actions:
                ar = pt.action_refs.add(id=self.ids[ref.name])
                if ref.scope == "DEFAULT_ONLY":
                    ar.scope = p4info_pb2.ActionRef.DEFAULT_ONLY
                    ar.annotations.append("@defaultonly")
                elif ref.scope == "TABLE_ONLY":
                    ar.scope = p4info_pb2.ActionRef.TABLE_ONLY
                    ar.annotations.append("@tableonly")
            if t.const_default_action:
                pt.const_default_action_id = self.ids[t.default_action]
            if t.implementation is not None:
                pt.implementation_id = self.ids[t.implementation]
            pt.size = t.size
        for a in sorted(self.actions, key=lambda a: self.ids[a.name]):
            pa = info.actions.add()
            self._preamble(pa.preamble, a.name)
            pa.preamble.annotations.extend(a.annotations)
            for i, p in enumerate(action_by_name[a.name].params, start=1):
                pa.params.add(id=i, name=p.name, bitwidth=p.bitwidth)
        for ap in sorted(self.action_profiles, key=lambda p: self.ids[p.name]):
            pp = info.action_profiles.add()
            self._preamble(pp.preamble, ap.name)
            pp.table_ids.extend(self.ids[t] for t in ap.tables)
            pp.with_selector = ap.with_selector
            pp.size = ap.size
            if ap.max_group_size:
                pp.max_group_size = ap.max_group_size
        for c in sorted(self.counters, key=lambda c: self.ids[c.name]):
            pc = info.counters.add()
            self._preamble(pc.preamble, c.name)
            pc.spec.unit = COUNTER_UNITS[c.unit]
            pc.size = c.size
        for r in sorted(self.registers, key=lambda r: self.ids[r.name]):
            pr = info.registers.add()
            self._preamble(pr.preamble, r.name)
            pr.type_spec.bitstring.bit.bitwidth = r.bitwidth
            pr.size = r.size
        info.type_info.SetInParent()  # p4c always writes one, empty for these programs
        return info

    def _preamble(self, pre: p4info_pb2.Preamble, name: str) -> None:
        pre.id = self.ids[name]
        pre.name = name
        pre.alias = self.aliases[name]


_V = TypeVar("_V")


def _by_name(index: Mapping[str, _V], name: str, kind: str, program: str) -> _V:
    """``index[name]``, or a ValueError that names the nearest names (a typo is the usual cause)."""
    try:
        return index[name]
    except KeyError:
        near = difflib.get_close_matches(name, list(index), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else f" (it has {len(index)})"
        raise ValueError(f"{program} has no {kind} {name!r}{hint}") from None


def jenkins_one_at_a_time(name: str) -> int:
    """Bob Jenkins' one-at-a-time hash (32 bits), as p4c uses for P4Runtime ids."""
    h = 0
    for byte in name.encode():
        h = (h + byte) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


def _probe_id(prefix: Prefix, name_hash: int, used: set[int]) -> int:
    for step in range(1 << 24):
        candidate = (int(prefix) << 24) | ((name_hash + step) & 0xFFFFFF)
        if candidate not in used:
            return candidate
    raise ValueError("no free P4Runtime id")


def shortest_unique_suffix(name: str, names: list[str]) -> str:
    """The shortest dot-suffix of ``name`` no other name shares (p4c's alias rule)."""
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        suffix = ".".join(parts[-n:])
        clash = [o for o in names if o != name and (o == suffix or o.endswith("." + suffix))]
        if not clash:
            return suffix
    return name

"""Switch tables (topologies.routes) -> named P4Runtime writes for p4/mrc_switch.p4.

Pure translation, checked against the single control-plane definition in common/p4schema:
every table, match field, action and parameter name must exist and every value must fit its
width, otherwise ``ProgramError``. The controller's southbound applies the result with
common/p4runtime_client.py (groups first, then table entries, so references resolve).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.p4schema.model import Program
from common.p4schema.mrc_switch import PROGRAM, dscp_class_write, dscp_default_write
from topologies.routes import NextHop, RouteEcmp, RouteEv, SetNextHop, SwitchTables

Match = dict[str, int | tuple[int, int]]  # exact value, or (value, prefix_len) for LPM

ECMP_SELECTOR = "MrcIngress.ecmp_selector"
INSERT = 1  # p4.v1.Update.INSERT
MODIFY = 2  # p4.v1.Update.MODIFY (the only update a default entry takes)


class P4RuntimeClientLike(Protocol):
    """The part of common.p4runtime_client.P4RuntimeClient that ``apply`` uses."""

    def insert_group(
        self, profile: str, group_id: int, members: Sequence[tuple[int, str, Mapping[str, int]]]
    ) -> None: ...
    def table_entry(self, table: str, match: Any = None, action: str | None = None,
                    params: Any = None, *, group_id: int | None = None,
                    default: bool = False) -> Any: ...  # fmt: skip
    def update(self, kind: int, **entity: object) -> Any: ...
    def write(self, updates: Sequence[Any]) -> None: ...


class ProgramError(ValueError):
    """The tables do not fit the P4 program's control-plane shape."""


@dataclass(frozen=True)
class TableWrite:
    table: str
    match: Match
    action: str | None = None  # direct action, or None with ``group_id``
    params: dict[str, int] = field(default_factory=dict)
    group_id: int | None = None  # action-selector group (MrcIngress.ecmp)
    default: bool = False  # the table's default action (empty match, written with MODIFY)


@dataclass(frozen=True)
class GroupWrite:
    profile: str
    group_id: int
    members: tuple[tuple[int, str, dict[str, int]], ...]  # (member id, action, params)


@dataclass
class SwitchProgram:
    switch: str
    groups: list[GroupWrite]
    entries: list[TableWrite]


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


def _nexthop(hop: NextHop) -> dict[str, int]:
    return {"port": hop.port, "smac": _mac(hop.smac), "dmac": _mac(hop.dmac)}


def program_for(tables: SwitchTables, program: Program = PROGRAM) -> SwitchProgram:
    """All writes that realise ``tables`` on one switch running ``program``."""
    groups: list[GroupWrite] = []
    entries: list[TableWrite] = []
    member_id = 0
    for gid, members in sorted(tables.ecmp_groups.items()):
        ms = []
        for hop in members:
            member_id += 1
            ms.append((member_id, "MrcIngress.set_nexthop", _nexthop(hop)))
        groups.append(GroupWrite(ECMP_SELECTOR, gid, tuple(ms)))
        entries.append(TableWrite("MrcIngress.ecmp", {"meta.next_group": gid}, group_id=gid))
    for gid, values in sorted(tables.ev_groups.items()):
        for value, hop in sorted(values.items()):
            match: Match = {"meta.ev_group": gid, "meta.ev_field": value}
            entries.append(
                TableWrite("MrcIngress.ev_uplink", match, "MrcIngress.set_nexthop", _nexthop(hop))
            )
    for route in tables.routes:
        match = {"hdr.ipv6.dst_addr": (int(route.prefix.network_address), route.prefix.prefixlen)}
        action = route.action
        if isinstance(action, SetNextHop):
            entries.append(
                TableWrite(
                    "MrcIngress.ipv6_route",
                    match,
                    "MrcIngress.set_nexthop",
                    _nexthop(action.nexthop),
                )
            )
        elif isinstance(action, RouteEcmp):
            entries.append(
                TableWrite(
                    "MrcIngress.ipv6_route", match, "MrcIngress.route_ecmp", {"group": action.group}
                )
            )
        elif isinstance(action, RouteEv):
            params = {
                "group": action.group,
                "shift": action.shift,
                "mask": action.mask,
                "fallback": action.fallback,
            }
            entries.append(
                TableWrite("MrcIngress.ipv6_route", match, "MrcIngress.route_ev", params)
            )
    for entry in tables.usid_entries:
        match = {"hdr.ipv6.dst_addr": (int(entry.prefix.network_address), entry.prefix.prefixlen)}
        action_name = (
            "MrcIngress.usid_shift" if entry.action == "shift" else "MrcIngress.usid_decap"
        )
        entries.append(TableWrite("MrcIngress.my_usid", match, action_name))
    for row in tables.dscp_classes:
        entries.append(TableWrite(*dscp_class_write(row)))
    table, action_name, params = dscp_default_write()
    entries.append(TableWrite(table, {}, action_name, params, default=True))
    for port, cfg in sorted(tables.port_config.items()):
        params = {
            "ecn_threshold_bytes": cfg.ecn_threshold_bytes,
            "trim_threshold_bytes": cfg.trim_threshold_bytes,
            "last_hop": int(cfg.last_hop),
            "trim_dscp": cfg.trim_dscp,
            "trim_priority": cfg.trim_priority,
        }
        match = {"standard_metadata.egress_port": port}
        entries.append(
            TableWrite("MrcEgress.port_config", match, "MrcEgress.set_port_params", params)
        )
    prog = SwitchProgram(tables.switch, groups, entries)
    check(prog, program)
    return prog


def _check_params(program: Program, where: str, action: str, params: dict[str, int]) -> None:
    schema = next((a for a in program.actions if a.name == action), None)
    if schema is None:
        raise ProgramError(f"{where}: {program.name} has no action {action}")
    names = {p.name for p in schema.params}
    if set(params) != names:
        raise ProgramError(f"{where}: {action} takes {sorted(names)}, got {sorted(params)}")
    for p in schema.params:
        if not 0 <= params[p.name] < 1 << p.bitwidth:
            raise ProgramError(
                f"{where}: {action}.{p.name}={params[p.name]} does not fit {p.bitwidth} bits"
            )


def check(prog: SwitchProgram, program: Program = PROGRAM) -> None:
    """Validate names, kinds, widths and table sizes against the program's schema."""
    tables = {t.name: t for t in program.tables}
    counts: dict[str, int] = {}
    for g in prog.groups:
        if g.profile not in {p.name for p in program.action_profiles}:
            raise ProgramError(f"{prog.switch}: no action profile {g.profile}")
        for _, action, params in g.members:
            _check_params(program, f"{prog.switch} group {g.group_id}", action, params)
    for e in prog.entries:
        where = f"{prog.switch} {e.table}"
        schema = tables.get(e.table)
        if schema is None:
            raise ProgramError(f"{where}: no such table")
        if e.default:
            if e.match or e.action is None:
                raise ProgramError(f"{where}: a default entry has no match and one action")
            if e.action not in {r.name for r in schema.actions if r.scope != "TABLE_ONLY"}:
                raise ProgramError(f"{where}: action {e.action} cannot be the default")
            _check_params(program, where, e.action, e.params)
            continue
        counts[e.table] = counts.get(e.table, 0) + 1
        if counts[e.table] > schema.size:
            raise ProgramError(f"{where}: more than {schema.size} entries")
        fields = {m.name: m for m in schema.match_fields}
        if set(e.match) != set(fields):
            raise ProgramError(f"{where}: match on {sorted(fields)}, got {sorted(e.match)}")
        for name, value in e.match.items():
            mf = fields[name]
            if mf.kind == "lpm":
                if (
                    not isinstance(value, tuple)
                    or not 0 <= value[1] <= mf.bitwidth
                    or value[0] >> mf.bitwidth
                ):
                    raise ProgramError(
                        f"{where}: {name} needs (value, prefix_len) within {mf.bitwidth} bits"
                    )
            elif isinstance(value, tuple) or not 0 <= value < 1 << mf.bitwidth:
                raise ProgramError(f"{where}: {name}={value} does not fit {mf.bitwidth} bits")
        if e.group_id is not None:
            if schema.implementation is None:
                raise ProgramError(f"{where}: table has no action selector for group {e.group_id}")
            continue
        if e.action not in {r.name for r in schema.actions if r.scope != "DEFAULT_ONLY"}:
            raise ProgramError(f"{where}: action {e.action} not allowed in entries")
        _check_params(program, where, e.action, e.params)


def apply(client: P4RuntimeClientLike, prog: SwitchProgram) -> None:
    """Write a switch program through a connected, primary P4Runtime client (pipeline pushed):
    action-selector groups first, then every table entry in one Write."""
    for g in prog.groups:
        client.insert_group(g.profile, g.group_id, list(g.members))
    updates = []
    for e in prog.entries:
        if e.group_id is not None:
            te = client.table_entry(e.table, e.match, group_id=e.group_id)
        else:
            te = client.table_entry(e.table, e.match, e.action, e.params, default=e.default)
        updates.append(client.update(MODIFY if e.default else INSERT, table_entry=te))
    if updates:
        client.write(updates)

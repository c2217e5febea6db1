"""Run an STF test on the embedded target: the p4json engine, in this process.

Commands are applied in file order; each ``packet`` runs through the engine at once (no
queues: the STF format has none), its outputs collected per port.
"""

from __future__ import annotations

from switch.p4json.engine import Engine
from switch.p4json.errors import ConfigError, Unsupported
from switch.p4json.runtime import EntryError
from switch.stf import keys
from switch.stf.parse import Add, Command, Direct, Packet, SetDefault
from switch.stf.verdict import check, interfaces


class SetupError(Exception):
    """A command the target refused (p4c's driver would see the CLI fail)."""


def run(json_text: str | bytes, commands: list[Command], name: str = "program",
        backend: str = "auto") -> tuple[str, str]:
    """(status, reason): "pass" | "fail" | "unsupported". ``backend``: see Engine."""
    try:
        engine = Engine(json_text, name=name, clock=lambda: 0.0, backend=backend)
    except Unsupported as exc:
        return "unsupported", str(exc)
    except ConfigError as exc:
        return "fail", f"refused the JSON: {exc}"
    try:
        received = execute(engine, commands)
    except SetupError as exc:
        return "fail", str(exc)
    if engine.stats.errors:
        return "fail", f"{engine.stats.errors} internal error(s) (see the log)"
    why = check(commands, received)
    return ("pass", "") if why is None else ("fail", why)


def execute(engine: Engine, commands: list[Command]) -> dict[int, list[bytes]]:
    """Apply ``commands`` in order; the packets sent to each STF interface, in order."""
    ports = interfaces(commands)
    received: dict[int, list[bytes]] = {}
    for cmd in commands:
        try:
            if isinstance(cmd, Packet):
                for out in engine.process(cmd.data, cmd.port, 0.0):
                    if out.port in ports:
                        received.setdefault(out.port, []).append(out.data)
            elif isinstance(cmd, Add):
                add(engine, cmd)
            elif isinstance(cmd, SetDefault):
                set_default(engine, cmd)
            elif isinstance(cmd, Direct):
                direct(engine, cmd)
        except (keys.KeyError_, EntryError) as exc:
            raise SetupError(f"line {cmd.line}: {exc}") from None
    return received


def add(engine: Engine, cmd: Add) -> None:
    table = keys.find_table(engine.prog, cmd.table)
    action = keys.find_action(engine.prog, table, cmd.action)
    parts = keys.key_parts(table, cmd.keys)
    args = keys.action_args(action, cmd.args)
    runtime = engine.tables[table.name]
    runtime.add(parts, keys.bmv2_priority(table, cmd.priority), action.id, args)


def set_default(engine: Engine, cmd: SetDefault) -> None:
    table = keys.find_table(engine.prog, cmd.table)
    action = keys.find_action(engine.prog, table, cmd.action)
    engine.tables[table.name].set_default(action.id, keys.action_args(action, cmd.args))


def direct(engine: Engine, cmd: Direct) -> None:
    a = cmd.args
    try:
        if cmd.name == "mirroring_add":
            engine.mirroring_add(keys.number(a[0]), keys.number(a[1]))
        elif cmd.name == "mirroring_add_mc":
            engine.mirroring_add_mc(keys.number(a[0]), keys.number(a[1]))
        elif cmd.name == "mirroring_delete":
            engine.mirroring_delete(keys.number(a[0]))
        elif cmd.name == "mc_mgrp_create":
            engine.mc_group_create(keys.number(a[0]))
        elif cmd.name == "mc_node_create":
            engine.mc_node_create(keys.number(a[0]), [keys.number(p) for p in a[1:]])
        elif cmd.name == "mc_node_update":
            engine.mc_node_update(keys.number(a[0]), [keys.number(p) for p in a[1:]])
        elif cmd.name == "mc_node_associate":
            engine.mc_node_associate(keys.number(a[0]), keys.number(a[1]))
        elif cmd.name == "register_write":
            reg = _by_suffix(engine.registers, a[0])
            index, value = keys.number(a[1]), keys.number(a[2])
            if not 0 <= index < reg.size:
                raise SetupError(f"register {reg.name} index {index} out of range")
            reg.cells[index] = value & reg.mask
        elif cmd.name == "register_reset":
            _by_suffix(engine.registers, a[0]).reset()
        elif cmd.name == "counter_write":
            ctr = _by_suffix(engine.counters, a[0])
            index = keys.number(a[1])
            if not 0 <= index < ctr.size:
                raise SetupError(f"counter {ctr.name} index {index} out of range")
            ctr.packets[index], ctr.bytes[index] = keys.number(a[2]), keys.number(a[3])
        # reads (register_read, counter_read, meter_get_rates, mirroring_get) print only
        elif cmd.name in ("meter_set_rates", "meter_array_set_rates"):
            _meter_rates(engine, cmd)
        elif cmd.name.startswith(("act_prof_", "table_indirect_")):
            _action_profile(engine, cmd)
    except (IndexError, KeyError) as exc:
        raise SetupError(f"{cmd.name}: {exc}") from None


def _action_profile(engine: Engine, cmd: Direct) -> None:
    """simple_switch_CLI's action profile commands; handles count from 0 like BMv2's."""
    a = cmd.args
    if cmd.name.startswith("table_indirect_"):
        table = keys.find_table(engine.prog, a[0])
        arrow = a.index("=>")
        parts = keys.cli_key(table, a[1:arrow])
        handle = keys.number(a[arrow + 1])
        runtime = engine.tables[table.name]
        if cmd.name == "table_indirect_add":
            runtime.add(parts, 0, None, member=handle)
        else:
            runtime.add(parts, 0, None, group=handle)
        return
    profile = _by_suffix(engine.profiles, a[0])
    if cmd.name == "act_prof_create_member":
        table = next(t for t in engine.prog.all_tables() if t.profile == profile.name)
        action = keys.find_action(engine.prog, table, a[1])
        values = tuple(keys.number(v) for v in a[2:])
        profile.members[len(profile.members)] = (action.id, values)
    elif cmd.name == "act_prof_create_group":
        profile.groups[len(profile.groups)] = []
    elif cmd.name == "act_prof_add_member_to_group":
        from switch.p4json.runtime import GroupMember

        profile.groups[keys.number(a[2])].append(GroupMember(keys.number(a[1])))
    profile.rebuild()


def _by_suffix(objects: dict, name: str):  # type: ignore[no-untyped-def,type-arg]
    if name in objects:
        return objects[name]
    found = [k for k in objects if k.endswith(name)]
    if len(found) != 1:
        raise SetupError(f"no unique object named {name}")
    return objects[found[0]]


def _meter_rates(engine: Engine, cmd: Direct) -> None:
    meters = _by_suffix(engine.meters, cmd.args[0])
    rest = cmd.args[1:]
    cells = list(range(meters.size))
    if cmd.name == "meter_set_rates":
        cells = [keys.number(rest[0])]
        rest = rest[1:]
    rates = []
    for r in rest:
        rate, burst = r.split(":")
        rates.append((float(rate), int(burst)))
    for i in cells:
        meters.cells[i].set_rates(rates, 0.0)

"""Parse p4c's STF test files (the format p4c's tools/stf and backends/bmv2/bmv2stf.py read).

One command per line, ``#`` starts a comment, keywords are case-insensitive:

    add TABLE [PRIORITY] FIELD:VALUE... ACTION(PARAM:VALUE, ...) [= ID]
    setdefault TABLE ACTION(PARAM:VALUE, ...)
    packet PORT HEX...
    expect PORT [HEX...]        (``*`` = any nibble; a trailing ``$`` = exact length)
    wait | remove all | check_counter ... (ignored, as p4c's BMv2 driver does)
    mirroring_add S PORT | mirroring_add_mc S MGID | mirroring_delete S
    mc_mgrp_create G | mc_node_create RID PORT... | mc_node_update H PORT... |
    mc_node_associate G H
    act_prof_create_member P ACTION ARGS... | act_prof_create_group P |
    act_prof_add_member_to_group P M G | table_indirect_add[_with_group] T KEY... => M|G
        (simple_switch_CLI commands beyond p4c's grammar, for action selectors)
    register_write R I V | register_reset R | register_read R I | counter_read C I |
    counter_write C I P B | meter_set_rates / meter_array_set_rates / meter_get_rates ...

Values keep their STF spelling (``0x0a**``, ``10/8``, ``0b1``): how a value is read depends
on the key's match kind, which only the program knows (``switch.stf.keys``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class StfError(Exception):
    """A line the parser cannot read; the message gives the file line."""


@dataclass
class Add:
    table: str
    priority: int | None
    keys: list[tuple[str, str]]
    action: str
    args: list[tuple[str, str]]
    line: int = 0


@dataclass
class SetDefault:
    table: str
    action: str
    args: list[tuple[str, str]]
    line: int = 0


@dataclass
class Packet:
    port: int
    data: bytes
    line: int = 0


@dataclass
class Expect:
    port: int
    pattern: str | None  # hex digits and '*' (None: any packet)
    exact: bool = False
    line: int = 0


@dataclass
class Direct:
    """A command p4c passes to simple_switch_CLI unchanged (mirroring, multicast, registers)."""

    name: str
    args: list[str] = field(default_factory=list)
    line: int = 0


Command = Add | SetDefault | Packet | Expect | Direct

DIRECT = {
    "mirroring_add", "mirroring_add_mc", "mirroring_delete", "mirroring_get", "mc_mgrp_create",
    "mc_node_create", "mc_node_update", "mc_node_associate", "counter_read", "counter_write",
    "register_read", "register_write", "register_reset", "meter_get_rates", "meter_set_rates",
    "meter_array_set_rates",
    # simple_switch_CLI action profile commands (not in p4c's STF grammar; passed through)
    "act_prof_create_member", "act_prof_create_group", "act_prof_add_member_to_group",
    "table_indirect_add", "table_indirect_add_with_group",
}
IGNORED = {"wait", "remove", "check_counter"}
_ACTION = re.compile(r"^(?P<name>[A-Za-z_$\"][^()]*)\((?P<args>.*)\)\s*(=\s*\S+)?\s*$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def parse_file(path: str) -> list[Command]:
    with open(path, encoding="utf-8") as f:
        return parse_text(f.read())


def parse_text(text: str) -> list[Command]:
    out: list[Command] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        cmd = word.lower()
        rest = rest.strip()
        try:
            parsed = _command(cmd, rest, lineno)
        except (ValueError, IndexError) as exc:
            raise StfError(f"line {lineno}: {exc}: {raw.strip()}") from None
        if parsed is not None:
            out.append(parsed)
    return out


def _command(cmd: str, rest: str, lineno: int) -> Command | None:
    if cmd == "packet":
        port, _, data = rest.partition(" ")
        digits = "".join(data.split())
        if not _HEX.match(digits or "x") or len(digits) % 2:
            raise ValueError("packet data must be an even number of hex digits")
        return Packet(int(port), bytes.fromhex(digits), lineno)
    if cmd == "expect":
        port, _, data = rest.partition(" ")
        digits = "".join(data.split())
        if not digits:
            return Expect(int(port), None, False, lineno)
        exact = digits.endswith("$")
        if exact:
            digits = digits[:-1]
        if not re.match(r"^[0-9a-fA-F*]*$", digits):
            raise ValueError("expected data must be hex digits or '*'")
        return Expect(int(port), digits.upper(), exact, lineno)
    if cmd == "add":
        return _add(rest, lineno)
    if cmd == "setdefault":
        table, _, action = rest.partition(" ")
        name, args = _action(action.strip())
        return SetDefault(table, name, args, lineno)
    if cmd in DIRECT:
        return Direct(cmd, rest.split(), lineno)
    if cmd in IGNORED or cmd == "no_packet":
        return None
    raise ValueError(f"unknown command '{cmd}'")


def _action(text: str) -> tuple[str, list[tuple[str, str]]]:
    m = _ACTION.match(text)
    if m is None:
        raise ValueError(f"expected ACTION(args), got '{text}'")
    args = []
    body = m.group("args").strip()
    if body:
        for part in body.split(","):
            name, sep, value = part.partition(":")
            if not sep:
                raise ValueError(f"action argument '{part.strip()}' is not NAME:VALUE")
            args.append((name.strip(), value.strip()))
    return m.group("name").strip().strip('"'), args


def _add(rest: str, lineno: int) -> Add:
    paren = rest.find("(")
    if paren < 0:
        raise ValueError("add without an action")
    head = rest[:paren]
    words = head.split()
    if len(words) < 2:
        raise ValueError("add needs a table and an action")
    table, action_name = words[0], words[-1]
    middle = words[1:-1]
    priority = None
    if middle and re.fullmatch(r"\d+", middle[0]):
        priority = int(middle[0])
        middle = middle[1:]
    keys = []
    for word in middle:
        name, sep, value = word.rpartition(":")
        if not sep or not name:
            raise ValueError(f"match '{word}' is not FIELD:VALUE")
        keys.append((name, value))
    name, args = _action(action_name + rest[paren:])
    return Add(table, priority, keys, name, args, lineno)

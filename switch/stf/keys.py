"""STF names and values -> the program's tables, actions and key parts.

The rules are those of p4c's backends/bmv2/bmv2stf.py followed by simple_switch_CLI:
tables and actions match by full name, else by a unique suffix; key fields by name, by
``name$`` / ``name.$valid$``, or by suffix (``$N`` spells a stack index ``[N]``); key fields
an ``add`` leaves out are 0 (exact), ``0/0`` (lpm) or ``0&&&0`` (ternary). Ternary values
written in hex, binary or octal give ``*`` digits a zero mask; an LPM value without ``/len``
gets one prefix digit per written digit. STF priorities count up (higher wins): p4c's driver
passes ``10000 - priority`` to BMv2, where a lower number wins.
"""

from __future__ import annotations

import re

from switch.p4json import program as pm

PRIORITY_BASE = 10000


class KeyError_(Exception):
    """An STF name or value that does not fit the program."""


def find_table(prog: pm.Program, name: str) -> pm.Table:
    tables = [t for p in (prog.pipelines["ingress"], prog.pipelines["egress"])
              for t in p.tables.values()]
    for t in tables:
        if t.name == name:
            return t
    found = [t for t in tables if t.name.endswith(name)]
    if len(found) > 1:
        raise KeyError_(f"table name {name} is ambiguous ({found[0].name}, {found[1].name})")
    if not found:
        raise KeyError_(f"no table {name}")
    return found[0]


def find_action(prog: pm.Program, table: pm.Table, name: str) -> pm.Action:
    actions = [prog.actions[aid] for aid in table.action_ids]
    for a in actions:
        if a.name == name:
            return a
    found = [a for a in actions if a.name.endswith(name)]
    if len(found) > 1:
        raise KeyError_(f"action name {name} is ambiguous in {table.name}")
    if not found:
        raise KeyError_(f"no action {name} in table {table.name}")
    return found[0]


def _key_names(table: pm.Table) -> list[str]:
    return [k.name for k in table.keys]


def resolve_field(table: pm.Table, key: str) -> int:
    """Index in ``table.keys`` of the STF key field ``key`` (bmv2stf TableKeyInstance.set)."""
    names = _key_names(table)
    m = re.match(r"(.*)\$([0-9]+)(.*)", key)
    if m:
        key = m.group(1) + "[" + m.group(2) + "]" + m.group(3)
    if key in names:
        return names.index(key)
    for alt in (key + "$", key + ".$valid$"):
        if alt in names:
            return names.index(alt)
    if key.endswith(".valid") and key[:-5] + "$valid$" in names:
        return names.index(key[:-5] + "$valid$")
    found = None
    for i, n in enumerate(names):
        if n.endswith("." + key) or n.endswith("." + key + "$") or (key == "valid" and n.endswith(".$valid$")):
            found = i
    if found is None and key == "valid" and "$valid$" in names:
        found = names.index("$valid$")
    if found is None:
        raise KeyError_(f"table {table.name} has no key field {key} ({', '.join(names)})")
    return found


def number(text: str) -> int:
    """A CLI number: 0x.., 0b.., 0o.. or decimal."""
    try:
        return int(text, 0)
    except ValueError:
        try:
            return int(text, 10)
        except ValueError:
            raise KeyError_(f"not a number: {text}") from None


def _ternary(text: str) -> tuple[int, int]:
    if "&&&" in text:
        v, m = text.split("&&&", 1)
        return number(v), number(m)
    for prefix, digit_bits in (("0x", 4), ("0b", 1), ("0o", 3)):
        if text.lower().startswith(prefix):
            body = text[2:]
            base = {4: 16, 1: 2, 3: 8}[digit_bits]
            full = (1 << digit_bits) - 1
            value = mask = 0
            for ch in body:
                value <<= digit_bits
                mask <<= digit_bits
                if ch != "*":
                    value |= int(ch, base)
                    mask |= full
            return value, mask
    raise KeyError_(f"decimal value {text} not supported for a ternary key")


def _lpm(text: str, width: int) -> tuple[int, int]:
    if "/" in text:
        v, plen = text.split("/", 1)
        return number(v.replace("*", "0")), int(plen)
    for prefix, digit_bits in (("0x", 4), ("0b", 1), ("0o", 3)):
        if text.lower().startswith(prefix):
            digits = len(text) - 2 - text.count("*")
            return number(text.replace("*", "0")), digits * digit_bits
    value = int(text)
    digits = len(hex(value)) - 2
    return value, digits * 4


def key_parts(table: pm.Table, keys: list[tuple[str, str]]) -> tuple[object, ...]:
    """The engine key (see switch.p4json.runtime) of an STF ``add``'s match fields."""
    parts: list[object] = []
    for k in table.keys:
        if k.match_type == "ternary" or k.match_type == "lpm":
            parts.append((0, 0))
        elif k.match_type == "range":
            parts.append((0, (1 << k.width) - 1))
        else:
            parts.append(0)
    for name, text in keys:
        i = resolve_field(table, name)
        k = table.keys[i]
        if k.match_type == "ternary":
            parts[i] = _ternary(text)
        elif k.match_type == "lpm":
            value, plen = _lpm(text, k.width)
            parts[i] = (value, plen)
        elif k.match_type == "range":
            if "->" not in text:
                v = number(text)
                parts[i] = (v, v)
            else:
                lo, hi = text.split("->", 1)
                parts[i] = (number(lo), number(hi))
        else:
            parts[i] = number(text)
    return tuple(parts)


def action_args(action: pm.Action, args: list[tuple[str, str]]) -> tuple[int, ...]:
    given = {}
    names = [p.name for p in action.params]
    for name, text in args:
        if name not in names:
            raise KeyError_(f"action {action.name} has no parameter {name}")
        given[name] = number(text)
    missing = [n for n in names if n not in given]
    if missing:
        raise KeyError_(f"action {action.name}: missing parameter(s) {missing}")
    return tuple(given[n] for n in names)


def bmv2_priority(table: pm.Table, stf_priority: int | None) -> int:
    """The priority p4c's driver gives BMv2 (ternary tables only; others ignore it)."""
    if table.match_type != "ternary" or stf_priority is None:
        return 0
    return PRIORITY_BASE - stf_priority


def cli_key(table: pm.Table, words: list[str]) -> tuple[object, ...]:
    """A simple_switch_CLI match key (one word per field: V, V/LEN, V&&&M, LO->HI)."""
    if len(words) != len(table.keys):
        raise KeyError_(f"table {table.name} takes {len(table.keys)} key fields")
    parts: list[object] = []
    for k, word in zip(table.keys, words):
        if k.match_type == "lpm":
            v, _, plen = word.partition("/")
            parts.append((number(v), int(plen) if plen else k.width))
        elif k.match_type == "ternary":
            v, _, m = word.partition("&&&")
            parts.append((number(v), number(m) if m else (1 << k.width) - 1))
        elif k.match_type == "range":
            lo, _, hi = word.partition("->")
            parts.append((number(lo), number(hi or lo)))
        else:
            parts.append(number(word))
    return tuple(parts)

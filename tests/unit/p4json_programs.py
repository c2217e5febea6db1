"""Hand-made BMv2 JSON programs for the engine's unit tests (no p4c needed).

``Builder`` writes the JSON objects p4c would: header types (standard_metadata included),
a parser, actions, keyless "dummy" tables that run one action (p4c's way of calling an
action from a control), match tables, conditionals and a deparser. Tests execute the result
with ``switch.p4json.engine.Engine`` and compare with an independent computation.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest

Json = Any

STANDARD_METADATA = [
    ["ingress_port", 9, False], ["egress_spec", 9, False], ["egress_port", 9, False],
    ["instance_type", 32, False], ["packet_length", 32, False], ["enq_timestamp", 32, False],
    ["enq_qdepth", 19, False], ["deq_timedelta", 32, False], ["deq_qdepth", 19, False],
    ["ingress_global_timestamp", 48, False], ["egress_global_timestamp", 48, False],
    ["mcast_grp", 16, False], ["egress_rid", 16, False], ["checksum_error", 1, False],
    ["parser_error", 32, False], ["priority", 3, False], ["_padding", 3, False],
]
ERRORS = [["NoError", 0], ["PacketTooShort", 1], ["NoMatch", 2], ["StackOutOfBounds", 3],
          ["HeaderTooShort", 4], ["ParserTimeout", 5], ["ParserInvalidArgument", 6]]


def hexstr(value: int, width: int = 32) -> Json:
    nbytes = max(1, (width + 7) // 8)
    if value < 0:
        return {"type": "hexstr", "value": "-0x" + format(-value, f"0{nbytes * 2}x")}
    return {"type": "hexstr", "value": "0x" + format(value, f"0{nbytes * 2}x")}


def field(header: str, name: str) -> Json:
    return {"type": "field", "value": [header, name]}


def param(index: int) -> Json:
    return {"type": "runtime_data", "value": index}


def local(index: int) -> Json:
    return {"type": "local", "value": index}


def op(name: str, left: Json | None, right: Json, cond: Json | None = None) -> Json:
    value: dict[str, Json] = {"op": name, "left": left, "right": right}
    if cond is not None:
        value["cond"] = cond
    return {"type": "expression", "value": value}


def wrap(e: Json) -> Json:
    """A primitive parameter holding an expression (p4c wraps them twice)."""
    return {"type": "expression", "value": e}


def assign(dst: Json, src: Json) -> Json:
    return {"op": "assign", "parameters": [dst, wrap(src) if src.get("type") == "expression" else src]}


def prim(name: str, *params: Json) -> Json:
    return {"op": name, "parameters": list(params)}


class Builder:
    """A v1model program: ``h`` headers parsed in order, then ingress/egress controls."""

    def __init__(self) -> None:
        self.header_types: list[Json] = [
            {"name": "scalars_0", "id": 0, "fields": []},
            {"name": "standard_metadata", "id": 1, "fields": copy.deepcopy(STANDARD_METADATA)},
        ]
        self.headers: list[Json] = [
            {"name": "scalars", "id": 0, "header_type": "scalars_0", "metadata": True},
            {"name": "standard_metadata", "id": 1, "header_type": "standard_metadata",
             "metadata": True},
        ]
        self.stacks: list[Json] = []
        self.states: list[Json] = []
        self.actions: list[Json] = []
        self.tables: dict[str, list[Json]] = {"ingress": [], "egress": []}
        self.conditionals: dict[str, list[Json]] = {"ingress": [], "egress": []}
        self.profiles: dict[str, list[Json]] = {"ingress": [], "egress": []}
        self.init: dict[str, str | None] = {"ingress": None, "egress": None}
        self.order: list[str] = []
        self.registers: list[Json] = []
        self.counters: list[Json] = []
        self.meters: list[Json] = []
        self.calculations: list[Json] = []
        self.checksums: list[Json] = []
        self.field_lists: list[Json] = []
        self.learn_lists: list[Json] = []
        self._ids = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def scalar(self, name: str, width: int, signed: bool = False) -> Json:
        self.header_types[0]["fields"].append([name, width, signed])
        return field("scalars", name)

    def header_type(self, name: str, fields: list[tuple[str, int | str] | tuple[str, int, bool]],
                    max_length: int | None = None) -> None:
        entry: Json = {"name": name, "id": len(self.header_types),
                       "fields": [list(f) + ([False] if len(f) == 2 and f[1] != "*" else [])
                                  for f in fields]}
        if max_length is not None:
            entry["max_length"] = max_length
        self.header_types.append(entry)

    def header(self, name: str, type_name: str, metadata: bool = False) -> int:
        hid = len(self.headers)
        self.headers.append({"name": name, "id": hid, "header_type": type_name,
                             "metadata": metadata})
        return hid

    def stack(self, name: str, type_name: str, size: int) -> None:
        ids = [self.header(f"{name}[{i}]", type_name) for i in range(size)]
        self.stacks.append({"name": name, "id": len(self.stacks), "header_type": type_name,
                            "header_ids": ids})

    def state(self, name: str, ops: list[Json], key: list[Json] | None = None,
              transitions: list[Json] | None = None) -> None:
        self.states.append({
            "name": name, "id": len(self.states), "parser_ops": ops,
            "transition_key": key or [],
            "transitions": transitions or [{"type": "default", "value": None, "mask": None,
                                            "next_state": None}],
        })

    def action(self, name: str, primitives: list[Json],
               params: list[tuple[str, int]] | None = None) -> int:
        aid = len(self.actions)
        self.actions.append({"name": name, "id": aid,
                             "runtime_data": [{"name": n, "bitwidth": w} for n, w in params or []],
                             "primitives": primitives})
        return aid

    def call(self, pipeline: str, name: str, primitives: list[Json], nxt: str | None = None) -> str:
        """A keyless table with a const default action: p4c's direct action call."""
        aid = self.action(name, primitives)
        tname = f"tbl_{name}"
        self.tables[pipeline].append({
            "name": tname, "id": self.next_id(), "key": [], "match_type": "exact",
            "type": "simple", "max_size": 1024, "with_counters": False,
            "support_timeout": False, "direct_meters": None, "action_ids": [aid],
            "actions": [name], "base_default_next": nxt, "next_tables": {name: nxt},
            "default_entry": {"action_id": aid, "action_const": True, "action_data": [],
                              "action_entry_const": True},
        })
        return tname

    def table(self, pipeline: str, name: str, keys: list[tuple[str, list[str]]],
              action_ids: list[int], default: int | None, *, nxt: dict[str, str | None] | None = None,
              match_type: str | None = None, entries: list[Json] | None = None,
              kind: str = "simple", profile: str | None = None, counters: bool = False,
              default_args: list[int] | None = None, size: int = 1024) -> str:
        kinds = [k for k, _ in keys]
        mt = match_type or ("range" if "range" in kinds else "ternary" if "ternary" in kinds
                            else "lpm" if "lpm" in kinds else "exact")
        names = [self.actions[a]["name"] for a in action_ids]
        t: Json = {
            "name": name, "id": self.next_id(),
            "key": [{"match_type": k, "name": ".".join(target), "target": target, "mask": None}
                    for k, target in keys],
            "match_type": mt, "type": kind, "max_size": size, "with_counters": counters,
            "support_timeout": False, "direct_meters": None, "action_ids": action_ids,
            "actions": names, "base_default_next": None,
            "next_tables": nxt if nxt is not None else {n: None for n in names},
        }
        if profile is not None:
            t["action_profile"] = profile
        if default is not None:
            t["default_entry"] = {"action_id": default, "action_const": False,
                                  "action_data": [hex(v) for v in default_args or []],
                                  "action_entry_const": False}
        if entries is not None:
            t["entries"] = entries
        self.tables[pipeline].append(t)
        return name

    def conditional(self, pipeline: str, name: str, expression: Json, true_next: str | None,
                    false_next: str | None) -> str:
        self.conditionals[pipeline].append({
            "name": name, "id": self.next_id(), "expression": expression,
            "true_next": true_next, "false_next": false_next,
        })
        return name

    def chain(self, pipeline: str, names: list[str]) -> None:
        """Apply nodes in order (each table's every next points at the following one)."""
        for a, b in zip(names, [*names[1:], None]):
            for t in self.tables[pipeline]:
                if t["name"] == a:
                    t["base_default_next"] = b
                    t["next_tables"] = {k: b for k in t["next_tables"]}
        self.init[pipeline] = names[0] if names else None

    def json(self) -> Json:
        pipelines = []
        for name in ("ingress", "egress"):
            pipelines.append({
                "name": name, "id": len(pipelines), "init_table": self.init[name],
                "tables": self.tables[name], "action_profiles": self.profiles[name],
                "conditionals": self.conditionals[name],
            })
        return {
            "__meta__": {"version": [2, 23], "compiler": "tests"},
            "header_types": self.header_types, "headers": self.headers,
            "header_stacks": self.stacks, "header_union_types": [], "header_unions": [],
            "header_union_stacks": [], "field_lists": self.field_lists, "errors": ERRORS,
            "enums": [],
            "parsers": [{"name": "parser", "id": 0, "init_state": self.states[0]["name"],
                         "parse_states": self.states}],
            "parse_vsets": [],
            "deparsers": [{"name": "deparser", "id": 0, "order": self.order, "primitives": []}],
            "meter_arrays": self.meters, "counter_arrays": self.counters,
            "register_arrays": self.registers, "calculations": self.calculations,
            "learn_lists": self.learn_lists, "actions": self.actions, "pipelines": pipelines,
            "checksums": self.checksums, "force_arith": [], "extern_instances": [],
            "field_aliases": [],
        }


def extract(header: str) -> Json:
    return {"op": "extract", "parameters": [{"type": "regular", "value": header}]}


def one_header(fields: list[tuple[str, int] | tuple[str, int, bool]]) -> Builder:
    """A program parsing one header ``h`` of type ``h_t`` and emitting it; out port 1."""
    b = Builder()
    b.header_type("h_t", fields)  # type: ignore[arg-type]
    b.header("h", "h_t")
    b.state("start", [extract("h")])
    b.order = ["h"]
    return b


def to_port(port: int) -> Json:
    return assign(field("standard_metadata", "egress_spec"), hexstr(port, 9))


@cache
def c_backend_missing() -> str:
    """'' when the engine's C backend builds here, else why not (no compiler, ...)."""
    from switch.p4json.engine import Engine

    b = one_header([("a", 8)])
    b.chain("ingress", [b.call("ingress", "fwd", [to_port(1)])])
    engine = Engine(b.json(), backend="auto")
    return "" if engine.backend == "c" else engine.backend_reason


# parametrize a test over the engine's backends (the C one where it builds)
BACKENDS = [
    pytest.param("python"),
    pytest.param("c", marks=pytest.mark.skipif(
        c_backend_missing() != "", reason=f"C backend unavailable: {c_backend_missing()}")),
]

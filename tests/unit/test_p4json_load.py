"""Loading BMv2 JSON: features the engine does not execute are refused by name at load time,
malformed JSON is a ConfigError, and no mutation of a valid program crashes the loader or
the data path."""

from __future__ import annotations

import copy
import json
import random

import pytest

from switch.p4json.engine import Engine
from switch.p4json.errors import ConfigError, Unsupported
from tests.unit.p4json_programs import Builder, assign, extract, field, hexstr, op, prim, to_port


def small() -> Builder:
    b = Builder()
    b.header_type("h_t", [("a", 8), ("b", 16)])
    b.header("h", "h_t")
    b.state("start", [extract("h")])
    b.order = ["h"]
    b.chain("ingress", [b.call("ingress", "fwd", [
        to_port(1), assign(field("h", "b"), op("+", field("h", "b"), field("h", "a")))])])
    return b


def test_small_program_runs() -> None:
    out = Engine(small().json()).process(bytes([2, 0, 5]), 0)
    assert [(o.port, o.data) for o in out] == [(1, bytes([2, 0, 7]))]


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda j: j.update(extern_instances=[{"name": "e", "id": 0, "type": "my_extern"}]),
         "extern instances"),
        (lambda j: j["actions"][0]["primitives"].append({"op": "_jump", "parameters": [
            {"type": "hexstr", "value": "0x0"}]}), "primitive '_jump'"),
        (lambda j: j["actions"][0]["primitives"].append({"op": "my_extern_call",
                                                         "parameters": []}),
         "primitive 'my_extern_call'"),
        (lambda j: j["__meta__"].update(version=[3, 0]), "BMv2 JSON version"),
        (lambda j: j["calculations"].append({"name": "c", "id": 0, "algo": "xxh64",
                                             "input": []}), "hash algorithm 'xxh64'"),
        (lambda j: j["pipelines"].append({"name": "extra", "id": 2, "init_table": None,
                                          "tables": [], "action_profiles": [],
                                          "conditionals": []}), "pipelines ['extra']"),
        (lambda j: j["header_types"][2]["fields"].append(["s", 8, False, True]),
         "saturating fields"),
        (lambda j: j["parsers"][0]["parse_states"][0]["parser_ops"].append(
            {"op": "wait", "parameters": []}), "parser operation 'wait'"),
        (lambda j: j["actions"][0]["primitives"].append(
            assign(field("h", "a"), op("sqrt", None, hexstr(4)))), "expression operator 'sqrt'"),
        (lambda j: j["meter_arrays"].append({"name": "m", "id": 0, "type": "packets",
                                             "rate_count": 3, "size": 1, "is_direct": False}),
         "meters with 3 rates"),
        (lambda j: j["deparsers"][0].update(primitives=[{"op": "x", "parameters": []}]),
         "method calls in the deparser"),
    ],
)
def test_unsupported_features_are_refused_by_name(mutate: object, named: str) -> None:
    j = small().json()
    mutate(j)  # type: ignore[operator]
    with pytest.raises(Unsupported) as exc:
        Engine(j)
    assert named in str(exc.value)


def test_malformed_json_is_a_config_error() -> None:
    for bad in (b"", b"[]", b"{", b'{"__meta__": {"version": [2, 23]}}', "\xff"):
        with pytest.raises(ConfigError):
            Engine(bad)
    j = small().json()
    j["pipelines"][0]["tables"][0]["next_tables"] = {"fwd": "nowhere"}
    with pytest.raises(ConfigError, match="unknown next node"):
        Engine(j)


def _mutations(obj: object, rng: random.Random) -> None:
    """Change one random leaf or key of a JSON tree in place."""
    path: list[tuple[object, object]] = []
    node = obj
    while isinstance(node, (dict, list)) and node:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append((node, key))
        if rng.random() < 0.3:
            break
        node = node[key]  # type: ignore[index]
    if not path:
        return
    parent, key = path[-1]
    choice = rng.randrange(5)
    if choice == 0 and isinstance(parent, dict):
        del parent[key]
    elif choice == 1:
        parent[key] = rng.choice([None, 0, -1, 1 << 40, "", "x", [], {}, True, "0x-1"])  # type: ignore[index]
    elif choice == 2:
        parent[key] = rng.choice(["0xff", "0x0", "-0x5"])  # type: ignore[index]
    elif choice == 3 and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))  # type: ignore[index]
    else:
        parent[key] = {"type": "hexstr", "value": "0x10"}  # type: ignore[index]


def test_mutated_programs_load_or_are_refused_and_never_crash_the_data_path() -> None:
    rng = random.Random(11)
    base = small()
    base.checksums.append({"name": "u", "id": 0, "target": ["h", "b"], "type": "generic",
                           "calculation": "c", "verify": True, "update": True, "if_cond": None})
    base.calculations.append({"name": "c", "id": 0, "algo": "csum16",
                              "input": [field("h", "a")]})
    base.registers.append({"name": "r", "id": 0, "size": 4, "bitwidth": 8})
    base.tables["ingress"][0]["key"] = []
    base.actions[0]["primitives"].append(prim("register_write", {"type": "register_array",
                                                                 "value": "r"},
                                              hexstr(1), field("h", "a")))
    text = json.dumps(base.json())
    loaded = 0
    for _ in range(400):
        j = json.loads(text)
        for _ in range(rng.randint(1, 3)):
            _mutations(j, rng)
        try:
            engine = Engine(j)
        except ConfigError:
            continue
        loaded += 1
        for _ in range(5):
            engine.process(rng.randbytes(rng.randint(0, 12)), rng.randint(0, 3))
        assert engine.stats.errors == 0
    assert loaded > 20  # the mutations leave many programs valid

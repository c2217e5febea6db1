"""Reading a collective plan's JSON: types and shapes of its fields, ``PlanError`` naming the
field that is wrong. The consistency of the parts is common/collective_plan/rules.py's job."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import common.collective_plan.parts as parts
from common.collective_plan.parts import PlanError


def fields(value: Any, where: str, required: Sequence[str],
            optional: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise PlanError(f"{where} must be a JSON object, got {type(value).__name__}")
    missing = [k for k in required if k not in value]
    if missing:
        raise PlanError(f"{where} lacks {', '.join(repr(k) for k in missing)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise PlanError(f"{where} has unknown field(s) {', '.join(repr(k) for k in unknown)}")
    return value


def items(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise PlanError(f"{where} must be a list, got {value!r}")
    return value


def integer(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise PlanError(f"{where} must be an integer, got {value!r}")
    return value


def number(value: Any, where: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) \
            or not math.isfinite(value):
        raise PlanError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{where} must be a string, got {value!r}")
    return value


def integers(value: Any, where: str) -> tuple[int, ...]:
    return tuple(integer(x, f"{where}[{i}]") for i, x in enumerate(items(value, where)))


def pair_key(key: Any, where: str) -> parts.Pair:
    s, sep, t = str(key).partition(">")
    if not sep or not s.isdecimal() or not t.isdecimal():
        raise PlanError(f"{where}: route key {key!r} is not 'source>destination'")
    return int(s), int(t)


def route(value: Any, where: str) -> parts.Route:
    d = fields(value, where, ("paths", "buckets"))
    paths = []
    for i, path in enumerate(items(d["paths"], f"{where} 'paths'")):
        hops = []
        for j, hop in enumerate(items(path, f"{where} path {i}")):
            pair = integers(hop, f"{where} path {i} hop {j}")
            if len(pair) != 2:
                raise PlanError(f"{where} path {i} hop {j} must be [gpu, port], got {hop!r}")
            hops.append((pair[0], pair[1]))
        paths.append(tuple(hops))
    return parts.Route(tuple(paths), integers(d["buckets"], f"{where} 'buckets'"))


STEP_FIELDS = ("step", "interval", "kind", "sends", "blocks", "theta", "hops", "model_s",
                "volume_bytes", "routes")


def step(value: Any, i: int) -> parts.PlanStep:
    where = f"plan step {i}"
    d = fields(value, where, STEP_FIELDS, ("reconfigure_after", "hidden_reconfiguration_s",
                                           "ack_s"))
    sends = tuple(None if v is None else integer(v, f"{where} 'sends'[{u}]")
                  for u, v in enumerate(items(d["sends"], f"{where} 'sends'")))
    blocks = tuple(integers(b, f"{where} 'blocks'[{u}]")
                   for u, b in enumerate(items(d["blocks"], f"{where} 'blocks'")))
    routes_in = d["routes"]
    if not isinstance(routes_in, dict):
        raise PlanError(f"{where} 'routes' must be a JSON object")
    routes = {pair_key(k, where): route(r, f"{where} route {k!r}") for k, r in routes_in.items()}
    after = d.get("reconfigure_after")
    hidden = d.get("hidden_reconfiguration_s")
    return parts.PlanStep(
        integer(d["step"], f"{where} 'step'"), integer(d["interval"], f"{where} 'interval'"),
        string(d["kind"], f"{where} 'kind'"), sends, blocks, number(d["theta"], f"{where} 'theta'"),
        integer(d["hops"], f"{where} 'hops'"), number(d["model_s"], f"{where} 'model_s'"),
        number(d["volume_bytes"], f"{where} 'volume_bytes'"), routes,
        None if after is None else integers(after, f"{where} 'reconfigure_after'"),
        None if hidden is None else number(hidden, f"{where} 'hidden_reconfiguration_s'"),
        number(d.get("ack_s", 0.0), f"{where} 'ack_s'"))


def interval(value: Any, k: int) -> parts.Interval:
    where = f"plan interval {k}"
    d = fields(value, where, ("steps", "edges", "circuits"))
    span = integers(d["steps"], f"{where} 'steps'")
    if len(span) != 2:
        raise PlanError(f"{where} 'steps' must be [first, last], got {d['steps']!r}")
    edges = []
    for j, e in enumerate(items(d["edges"], f"{where} 'edges'")):
        triple = integers(e, f"{where} edge {j}")
        if len(triple) != 3:
            raise PlanError(f"{where} edge {j} must be [u, v, circuits], got {e!r}")
        edges.append((triple[0], triple[1], triple[2]))
    circuits = []
    for j, c in enumerate(items(d["circuits"], f"{where} 'circuits'")):
        quad = integers(c, f"{where} circuit {j}")
        if len(quad) != 4:
            raise PlanError(f"{where} circuit {j} must be [u, u_port, v, v_port], got {c!r}")
        circuits.append(parts.Circuit(*quad))
    return parts.Interval(span[0], span[1], tuple(edges), tuple(circuits))


def model(value: Any) -> parts.PlanModel:
    where = "plan 'model'"
    d = fields(value, where, ("bandwidth_bps", "alpha_s", "delta_s", "alpha_r_s", "model_s",
                               "reconfigurations"), ("hidden_reconfiguration_s", "ack_hop_s"))
    hidden = d.get("hidden_reconfiguration_s")
    return parts.PlanModel(
        bandwidth_bps=number(d["bandwidth_bps"], f"{where} 'bandwidth_bps'"),
        alpha_s=number(d["alpha_s"], f"{where} 'alpha_s'"),
        delta_s=number(d["delta_s"], f"{where} 'delta_s'"),
        alpha_r_s=number(d["alpha_r_s"], f"{where} 'alpha_r_s'"),
        model_s=number(d["model_s"], f"{where} 'model_s'"),
        reconfigurations=integer(d["reconfigurations"], f"{where} 'reconfigurations'"),
        hidden_reconfiguration_s=None if hidden is None
        else number(hidden, f"{where} 'hidden_reconfiguration_s'"),
        ack_hop_s=number(d.get("ack_hop_s", 0.0), f"{where} 'ack_hop_s'"))


__all__ = ["STEP_FIELDS", "fields", "integer", "integers", "interval", "items", "model",
           "number", "pair_key", "route", "step", "string"]

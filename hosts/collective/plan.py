"""The collective plan as a GPU reads it: steps, per-step routes, buffers' shape.

Validated on load (``PlanError`` names the problem): version, collective and phase known to
``common.collectives``, rank count and step count matching it, routes well formed. The
schema is documented in controller/harvest/runplan.py and docs/harvest.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.collectives import Collective, CollectiveError, Step, build
from hosts.agent.router import NextPorts, RouteError, next_ports_for

PLAN_VERSION = 1
CUSTOM = "custom"  # a plan that spells out its steps (calibration runs)
ITEM_SIZE = {"int32": 4, "float32": 4}


class PlanError(ValueError):
    """A collective plan this GPU cannot run; the message says what is wrong."""


@dataclass(frozen=True)
class StepPlan:
    step: int  # 1-based
    interval: int
    model_s: float
    paths: dict[tuple[int, int], tuple[list[list[tuple[int, int]]], list[int]]]


@dataclass(frozen=True)
class CollectivePlan:
    collective: Collective
    size_bytes: int
    dtype: str
    buckets: int
    degree: int
    ranks: tuple[str, ...]
    schedule: str
    steps: tuple[StepPlan, ...]
    raw: dict[str, Any]

    @property
    def n(self) -> int:
        return self.collective.n

    @property
    def block_bytes(self) -> int:
        return self.size_bytes // self.n

    def interval_changes(self) -> list[int]:
        """1-based steps before which the topology changes (reconfigurations)."""
        return [st.step for prev, st in zip(self.steps, self.steps[1:])
                if st.interval != prev.interval]

    def router_tables(self, rank: int) -> dict[int, dict[tuple[int, int], NextPorts]]:
        """Per step: this GPU's next-hop table (for hosts.agent.router.CircuitRouter)."""
        out = {}
        for st in self.steps:
            try:
                out[st.step] = next_ports_for(rank, self.n, self.buckets, st.paths)
            except RouteError as exc:
                raise PlanError(f"step {st.step}: {exc}") from None
        return out


def _custom_step(st: Any, n: int) -> Step:
    """A step spelled out in the plan: kind, sends[u] (rank or null), blocks[u]."""
    try:
        kind = str(st["kind"])
        sends = tuple(None if v is None else int(v) for v in st["sends"])
        blocks = tuple(tuple(int(b) for b in bl) for bl in st["blocks"])
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"step {st.get('step') if isinstance(st, dict) else '?'}: needs kind, "
                        f"sends and blocks ({exc})") from None
    if kind not in ("reduce-scatter", "all-gather", "all-to-all"):
        raise PlanError(f"step kind {kind!r} is not reduce-scatter, all-gather or all-to-all")
    if len(sends) != n or len(blocks) != n:
        raise PlanError(f"a step needs sends and blocks for each of the {n} GPUs")
    for u, v in enumerate(sends):
        if v is not None and not (0 <= v < n and v != u):
            raise PlanError(f"GPU {u} sends to {v}: not another of the {n} GPUs")
        if any(not 0 <= b < n for b in blocks[u]):
            raise PlanError(f"GPU {u}: block numbers must be 0..{n - 1}")
    return Step(kind, sends, blocks, n)


def _int(d: Mapping[str, Any], key: str) -> int:
    value = d.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PlanError(f"plan field {key!r} must be an integer, got {value!r}")
    return value


def parse_plan(data: Any) -> CollectivePlan:
    if not isinstance(data, dict):
        raise PlanError("a collective plan is a JSON object")
    if data.get("version") != PLAN_VERSION:
        raise PlanError(f"plan version {data.get('version')!r}; this agent reads version "
                        f"{PLAN_VERSION}")
    n = _int(data, "gpus")
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list):
        raise PlanError("plan 'steps' must be a list")
    try:
        if data.get("collective") == CUSTOM:
            coll = Collective(CUSTOM, CUSTOM, n, tuple(_custom_step(st, n) for st in raw_steps))
        else:
            coll = build(str(data.get("collective")), n, str(data.get("phase", "allreduce")))
    except CollectiveError as exc:
        raise PlanError(str(exc)) from None
    dtype = data.get("dtype")
    if dtype not in ITEM_SIZE:
        raise PlanError(f"dtype must be one of {', '.join(ITEM_SIZE)}, got {dtype!r}")
    size = _int(data, "size_bytes")
    if size <= 0 or size % (n * ITEM_SIZE[dtype]):
        raise PlanError(f"size_bytes {size} is not a positive multiple of {n} blocks of "
                        f"{dtype}")
    buckets = _int(data, "buckets")
    ranks = data.get("ranks")
    if not isinstance(ranks, list) or len(ranks) != n:
        raise PlanError(f"plan 'ranks' must list the {n} GPUs in rank order")
    if len(raw_steps) != len(coll.steps):
        raise PlanError(f"the plan has {len(raw_steps)} steps; {coll.name} {coll.phase} on "
                        f"{n} GPUs has {len(coll.steps)}")
    for i, (st, cs) in enumerate(zip(raw_steps, coll.steps), start=1):
        if isinstance(st, dict) and "sends" in st and _custom_step(st, n) != cs:
            raise PlanError(f"plan step {i} is not step {i} of {coll.name} {coll.phase}")
    steps = []
    for i, st in enumerate(raw_steps, start=1):
        if not isinstance(st, dict) or st.get("step") != i:
            raise PlanError(f"plan step {i} is missing or out of order")
        paths: dict[tuple[int, int], tuple[list[list[tuple[int, int]]], list[int]]] = {}
        routes = st.get("routes")
        if not isinstance(routes, dict):
            raise PlanError(f"step {i}: 'routes' must be an object")
        try:
            for key, route in routes.items():
                s_txt, _, t_txt = key.partition(">")
                plist = [[(int(g), int(p)) for g, p in path] for path in route["paths"]]
                bmap = [int(b) for b in route["buckets"]]
                if any(not 0 <= b < len(plist) for b in bmap):
                    raise PlanError(f"step {i}, {key}: bucket names no path")
                paths[(int(s_txt), int(t_txt))] = (plist, bmap)
        except PlanError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"step {i}: malformed routes ({exc})") from None
        steps.append(StepPlan(i, _int(st, "interval"), float(st.get("model_s", 0.0)), paths))
    return CollectivePlan(coll, size, dtype, buckets, _int(data, "degree"),
                          tuple(str(r) for r in ranks), str(data.get("schedule", "")),
                          tuple(steps), data)


def load_plan(path: str | Path) -> CollectivePlan:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise PlanError(f"collective plan {path}: {exc}") from None
    return parse_plan(data)

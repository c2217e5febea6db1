"""A schedule made executable: the collective plan a run hands to the controller and the GPUs.

The plan is JSON (one file per collective run, ``collective-plan.json`` in the run folder):

```
{"version": 1, "collective": "rd", "phase": "allreduce", "gpus": 8, "degree": 1,
 "size_bytes": 1048576, "dtype": "int32", "buckets": 64, "schedule": "harvest",
 "ranks": ["g0", ..., "g7"],
 "intervals": [{"steps": [1, 2], "edges": [[u, v, circuits], ...],
                "circuits": [[u, u_port, v, v_port], ...]}, ...],
 "steps": [{"step": 1, "interval": 0, "theta": 1.0, "hops": 1, "model_s": ...,
            "volume_bytes": ..., "routes": {"0>1": {"paths": [[[0, 0]], ...],
                                                   "buckets": [0, 0, ...]}, ...}}, ...],
 "model": {"bandwidth_bps": ..., "alpha_s": ..., "delta_s": ..., "alpha_r_s": ...,
           "model_s": ..., "reconfigurations": k}}
```

``circuits`` name GPU ports (rank, port): the controller turns them into OCS cross-connects;
a path is the hop list ``[[gpu, out_port], ...]`` from source towards destination, and
``buckets[b]`` the path EV bucket b takes (routes of every ordered pair: the step's demand
with the model's split, everything else one shortest path). GPUs build their router tables
from the routes and run the steps of ``common.collectives`` for (collective, phase, gpus).

``with_barrier(plan, "early")`` adds ``"barrier": "early"`` and, to every step that starts a
new interval, ``reconfigure_after`` (the GPUs whose arrival at the step's barrier lets the
controller start the reconfiguration: ``early_ranks``) and ``hidden_reconfiguration_s``
(the dark time the model overlaps with the previous step, subtracted from ``model_s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.collectives import Collective

from .model import HarvestError, Pattern, demands_of
from .routing import PortCircuit, assign_ports, step_routes
from .schedules import Schedule

PLAN_VERSION = 1
DTYPES = ("int32", "float32")
BARRIERS = ("all", "early")
DEFAULT_BUCKETS = 64


def build_plan(
    coll: Collective, schedule: Schedule, message_bytes: int, degree: int, ranks: Sequence[str],
    dtype: str = "int32", buckets: int = DEFAULT_BUCKETS, bandwidth_bps: float = 0.0,
    alpha_s: float = 0.0, delta_s: float = 0.0,
) -> dict[str, Any]:
    """The plan of ``schedule`` for ``coll`` on GPUs ``ranks`` (rank i = ranks[i])."""
    if len(ranks) != coll.n:
        raise HarvestError(f"the collective has {coll.n} ranks, the fabric {len(ranks)} GPUs")
    if dtype not in DTYPES:
        raise HarvestError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    item = 4
    if message_bytes <= 0 or message_bytes % (coll.n * item):
        raise HarvestError(f"the message size must be a positive multiple of {coll.n * item} "
                           f"bytes ({coll.n} blocks of {dtype}), got {message_bytes}")
    demands = demands_of(coll, message_bytes)
    intervals = []
    circuits_of: list[tuple[PortCircuit, ...]] = []
    for iv in schedule.intervals:
        # circuits that stay keep their ports: only the ports whose circuit changes go dark
        circuits = assign_ports(iv.topology, degree, circuits_of[-1] if circuits_of else ())
        circuits_of.append(circuits)
        intervals.append({
            "steps": [iv.first, iv.last],
            "edges": iv.topology.as_json(),
            "circuits": [[c.src, c.src_port, c.dst, c.dst_port] for c in circuits],
        })
    steps = []
    for idx, iv in enumerate(schedule.intervals):
        circuits = circuits_of[idx]
        for st in iv.steps:
            pattern: Pattern = demands[st.step - 1].pattern
            routes = step_routes(iv.topology, circuits, pattern, st.hops, buckets, st.theta)
            cs = coll.steps[st.step - 1]
            steps.append({
                "step": st.step,
                "interval": idx,
                "kind": cs.kind,
                "sends": list(cs.sends),
                "blocks": [list(b) for b in cs.blocks],
                "theta": st.theta,
                "hops": st.hops,
                "model_s": st.time_s,
                "volume_bytes": st.volume_bytes,
                "routes": {
                    f"{s}>{t}": {
                        "paths": [[[circuits[k].src, circuits[k].src_port] for k in path]
                                  for path in pr.paths],
                        "buckets": list(pr.buckets),
                    }
                    for (s, t), pr in sorted(routes.pairs.items())
                },
            })
    return {
        "version": PLAN_VERSION,
        "collective": coll.name,
        "phase": coll.phase,
        "gpus": coll.n,
        "degree": degree,
        "size_bytes": message_bytes,
        "dtype": dtype,
        "buckets": buckets,
        "schedule": schedule.name,
        "ranks": list(ranks),
        "intervals": intervals,
        "steps": steps,
        "model": {
            "bandwidth_bps": bandwidth_bps,
            "alpha_s": alpha_s,
            "delta_s": delta_s,
            "alpha_r_s": schedule.alpha_r_s,
            "model_s": schedule.model_s,
            "reconfigurations": schedule.reconfigurations,
        },
    }


def changing_circuits(plan: dict[str, Any], before: int, after: int) -> set[tuple[int, int]]:
    """GPU ports (rank, port) whose circuit differs between two intervals: the OCS input
    ports a reconfiguration darkens."""
    def of(k: int) -> dict[tuple[int, int], tuple[int, int]]:
        return {(u, pu): (v, pv) for u, pu, v, pv in plan["intervals"][k]["circuits"]}

    old, new = of(before), of(after)
    return {src for src in old.keys() | new.keys() if old.get(src) != new.get(src)}


def early_ranks(plan: dict[str, Any], step: int) -> list[int]:
    """The GPUs that must have finished step ``step - 1`` before the reconfiguration into
    ``step`` may start (barrier "early"): both ends of every transfer of that step that has
    no path avoiding every changing circuit, for its data or for the acknowledgements
    coming back (the route of the reverse pair). A transfer with such a path may still be
    sending when its other paths go dark: what meets a dark port is dropped and MRC resends
    it on the paths that work."""
    prev, cur = plan["steps"][step - 2], plan["steps"][step - 1]
    changed = changing_circuits(plan, prev["interval"], cur["interval"])
    routes = prev["routes"]

    def survives(src: int, dst: int) -> bool:
        route = routes.get(f"{src}>{dst}")
        if route is None:
            return False
        used = {int(b) for b in route["buckets"]}
        return any(all((g, port) not in changed for g, port in route["paths"][i])
                   for i in used)

    need: set[int] = set()
    for u, v in enumerate(prev["sends"]):
        if v is not None and not (survives(u, v) and survives(v, u)):
            need |= {u, int(v)}
    return sorted(need)


def hidden_reconfiguration_s(plan: dict[str, Any], step: int, required: Sequence[int]) -> float:
    """The model's share of a reconfiguration's dark time that overlaps step ``step - 1``
    under barrier "early": the reconfiguration starts when the last of ``required`` (or,
    without any, the first GPU) finished, every GPU with a transfer finishing at the step's
    model time and an idle one at once."""
    prev = plan["steps"][step - 2]
    t = float(prev["model_s"])
    active = {u for u, v in enumerate(prev["sends"]) if v is not None}
    active |= {int(v) for v in prev["sends"] if v is not None}
    finish = [t if u in active else 0.0 for u in range(len(prev["sends"]))]
    start = max([min(finish), *(finish[u] for u in required)])
    return max(0.0, min(float(plan["model"]["alpha_r_s"]), t - start))


def with_barrier(plan: dict[str, Any], barrier: str) -> dict[str, Any]:
    """The plan under barrier ``all`` (every reconfiguration waits for every GPU) or
    ``early`` (each reconfiguring step lists ``reconfigure_after``, its ``early_ranks``, and
    the model subtracts the dark time that overlaps the previous step)."""
    if barrier not in BARRIERS:
        raise HarvestError(f"barrier must be one of {', '.join(BARRIERS)}, got {barrier!r}")
    plan["barrier"] = barrier
    if barrier == "all":
        return plan
    hidden_total = 0.0
    steps = plan["steps"]
    for i in range(1, len(steps)):
        if steps[i]["interval"] == steps[i - 1]["interval"]:
            continue
        required = early_ranks(plan, i + 1)
        hidden = hidden_reconfiguration_s(plan, i + 1, required)
        steps[i]["reconfigure_after"] = required
        steps[i]["hidden_reconfiguration_s"] = hidden
        hidden_total += hidden
    plan["model"]["hidden_reconfiguration_s"] = hidden_total
    plan["model"]["model_s"] = float(plan["model"]["model_s"]) - hidden_total
    return plan


def circuit_text(plan: dict[str, Any], interval: int) -> list[str]:
    """The interval's circuits as 'gpu:port -> gpu:port' (the controller's circuit syntax)."""
    ranks = plan["ranks"]
    return [f"{ranks[u]}:{pu} -> {ranks[v]}:{pv}"
            for u, pu, v, pv in plan["intervals"][interval]["circuits"]]


__all__ = ["BARRIERS", "DEFAULT_BUCKETS", "DTYPES", "PLAN_VERSION", "build_plan",
           "changing_circuits", "circuit_text", "early_ranks", "hidden_reconfiguration_s",
           "with_barrier"]

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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from common.collectives import Collective

from .model import HarvestError, Pattern, demands_of
from .routing import assign_ports, step_routes
from .schedules import Schedule

PLAN_VERSION = 1
DTYPES = ("int32", "float32")
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
    circuits_of = []
    for iv in schedule.intervals:
        circuits = assign_ports(iv.topology, degree)
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


def circuit_text(plan: dict[str, Any], interval: int) -> list[str]:
    """The interval's circuits as 'gpu:port -> gpu:port' (the controller's circuit syntax)."""
    ranks = plan["ranks"]
    return [f"{ranks[u]}:{pu} -> {ranks[v]}:{pv}"
            for u, pu, v, pv in plan["intervals"][interval]["circuits"]]


__all__ = ["DEFAULT_BUCKETS", "DTYPES", "PLAN_VERSION", "build_plan", "circuit_text"]

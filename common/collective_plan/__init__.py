"""The collective run plan: one schema for the side that writes it and the GPUs that read it.

A Harvest schedule made executable (controller/harvest/runplan.py builds it) is written as
JSON, one file per collective run (``collectives/<tag>/plan.json`` in the run folder), and
read back by every GPU's collective job (hosts/collective). Both ends use these dataclasses
(``parts``, ``plan``): ``RunPlan.to_json`` and ``save`` write, ``RunPlan.from_json`` and
``load`` read and refuse a malformed plan with a ``PlanError`` naming the field
(``reading``). Building a ``RunPlan`` checks that its parts agree (``rules``: the collective
and its steps, intervals, circuits, routes, barrier), so the writer cannot produce a plan its
readers refuse.

```
{"version": 1, "collective": "rd", "phase": "allreduce", "gpus": 8, "degree": 1,
 "size_bytes": 1048576, "dtype": "int32", "buckets": 64, "schedule": "harvest",
 "ranks": ["g0", ..., "g7"],
 "intervals": [{"steps": [1, 2], "edges": [[u, v, circuits], ...],
                "circuits": [[u, u_port, v, v_port], ...]}, ...],
 "steps": [{"step": 1, "interval": 0, "kind": "reduce-scatter", "sends": [1, 0, ...],
            "blocks": [[1, 3, ...], ...], "theta": 1.0, "hops": 1, "model_s": ...,
            "volume_bytes": ..., "routes": {"0>1": {"paths": [[[0, 0]], ...],
                                                   "buckets": [0, 0, ...]}, ...}}, ...],
 "model": {"bandwidth_bps": ..., "alpha_s": ..., "delta_s": ..., "alpha_r_s": ...,
           "model_s": ..., "reconfigurations": k},
 "barrier": "all", "dark_s": 0.03, "predicted_unix": ...}
```

``circuits`` name GPU ports (rank, port): the controller turns them into OCS cross-connects.
A path is the hop list ``[[gpu, out_port], ...]`` from source towards destination along the
interval's circuits, and ``buckets[b]`` the path EV bucket b takes. ``kind``, ``sends`` and
``blocks`` are step i of ``common.collectives`` for (collective, phase, gpus), or, for the
collective ``custom``, the steps themselves (calibration runs). Under barrier ``early`` each
step that starts a new interval has ``reconfigure_after`` (the GPUs the reconfiguration waits
for) and ``hidden_reconfiguration_s``, and the model ``hidden_reconfiguration_s``.
``barrier`` (default ``all``), ``dark_s`` (the dark time the controller applies, default 0)
and ``predicted_unix`` (when the model's prediction was made) may be absent.
"""


from common.collective_plan.parts import (
    BARRIERS,
    CUSTOM,
    DTYPES,
    ITEM_BYTES,
    PLAN_VERSION,
    STEP_KINDS,
    Circuit,
    Hop,
    Interval,
    Pair,
    PlanError,
    PlanModel,
    PlanStep,
    Route,
)
from common.collective_plan.plan import RunPlan

__all__ = ["BARRIERS", "CUSTOM", "DTYPES", "ITEM_BYTES", "PLAN_VERSION", "STEP_KINDS",
           "Circuit", "Hop", "Interval", "Pair", "PlanError", "PlanModel", "PlanStep", "Route",
           "RunPlan"]

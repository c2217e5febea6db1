"""A schedule made executable: the collective run plan a run hands to the controller and GPUs.

``build_plan`` turns a Harvest schedule into a ``common.collective_plan.RunPlan`` (the one
schema both ends use; its module documents the JSON): per interval the circuits between GPU
ports (``routing.assign_ports``), per step the routes of every ordered pair (the step's demand
with the model's split, everything else one shortest path). GPUs build their router tables
from the routes and run the steps of ``common.collectives`` for (collective, phase, gpus).

``with_barrier(plan, "early")`` marks every step that starts a new interval with
``reconfigure_after`` (the GPUs whose arrival at the step's barrier lets the controller start
the reconfiguration: ``early_ranks``) and ``hidden_reconfiguration_s`` (the dark time the
model overlaps with the previous step, subtracted from ``model_s``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from common.collective_plan import (
    BARRIERS,
    DTYPES,
    ITEM_BYTES,
    Circuit,
    Interval,
    PlanError,
    PlanModel,
    PlanStep,
    Route,
    RunPlan,
)
from common.collectives import Collective

from .model import HarvestError, Pattern, demands_of
from .routing import PairRoute, PortCircuit, assign_ports, step_routes
from .schedules import Schedule

DEFAULT_BUCKETS = 64


def build_plan(
    coll: Collective, schedule: Schedule, message_bytes: int, degree: int, ranks: Sequence[str],
    dtype: str = "int32", buckets: int = DEFAULT_BUCKETS, bandwidth_bps: float = 0.0,
    alpha_s: float = 0.0, delta_s: float = 0.0, dark_s: float = 0.0, ack_hop_s: float = 0.0,
) -> RunPlan:
    """The plan of ``schedule`` for ``coll`` on GPUs ``ranks`` (rank i = ranks[i]).

    ``ack_hop_s`` > 0 adds to each step's prediction the acknowledgements' return: that many
    seconds per hop of the step's longest acknowledgement route (the route of a transfer's
    reverse pair: circuits are one-way, so on a ring it goes the rest of the way round). The
    Harvest model the schedule was chosen with has no such term; the prediction of the run
    does (``model_s`` of the steps and of the plan, ``ack_s`` per step)."""
    if len(ranks) != coll.n:
        raise HarvestError(f"the collective has {coll.n} ranks, the fabric {len(ranks)} GPUs")
    if dtype not in DTYPES:
        raise HarvestError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    item = ITEM_BYTES[dtype]
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
        intervals.append(Interval(
            iv.first, iv.last, tuple((u, v, c) for u, v, c in iv.topology.edges),
            tuple(Circuit(c.src, c.src_port, c.dst, c.dst_port) for c in circuits)))
    steps = []
    ack_total = 0.0
    for idx, iv in enumerate(schedule.intervals):
        circuits = circuits_of[idx]
        for st in iv.steps:
            pattern: Pattern = demands[st.step - 1].pattern
            routes = step_routes(iv.topology, circuits, pattern, st.hops, buckets, st.theta)
            cs = coll.steps[st.step - 1]
            ack_s = ack_hop_s * ack_hops(routes.pairs, pattern.pairs) if ack_hop_s else 0.0
            ack_total += ack_s
            steps.append(PlanStep(
                step=st.step, interval=idx, kind=cs.kind, sends=cs.sends, blocks=cs.blocks,
                theta=float(st.theta), hops=int(st.hops), model_s=float(st.time_s) + ack_s,
                volume_bytes=float(st.volume_bytes), ack_s=ack_s,
                routes={pair: Route(tuple(tuple((circuits[k].src, circuits[k].src_port)
                                                for k in path) for path in pr.paths),
                                    tuple(pr.buckets))
                        for pair, pr in sorted(routes.pairs.items())}))
    model = PlanModel(bandwidth_bps=float(bandwidth_bps), alpha_s=float(alpha_s),
                      delta_s=float(delta_s), alpha_r_s=float(schedule.alpha_r_s),
                      model_s=float(schedule.model_s) + ack_total,
                      reconfigurations=schedule.reconfigurations, ack_hop_s=float(ack_hop_s))
    try:
        return RunPlan(collective=coll.name, phase=coll.phase, gpus=coll.n, degree=degree,
                       size_bytes=message_bytes, dtype=dtype, buckets=buckets,
                       schedule=schedule.name, ranks=tuple(ranks), intervals=tuple(intervals),
                       steps=tuple(steps), model=model, dark_s=float(dark_s))
    except PlanError as exc:
        raise HarvestError(f"schedule {schedule.name} makes no valid plan: {exc}") from None


def ack_hops(routes: Mapping[tuple[int, int], PairRoute], pairs: Sequence[tuple[int, int]]) -> int:
    """Hops of the longest acknowledgement route of a step: over its transfers (u, v), the
    longest path of the reverse pair (v, u) that a bucket uses."""
    longest = 0
    for u, v in pairs:
        back = routes.get((v, u))
        if back is not None:
            used = set(back.buckets)
            longest = max([longest, *(len(back.paths[i]) for i in used)])
    return longest


def changing_circuits(plan: RunPlan, before: int, after: int) -> set[tuple[int, int]]:
    """GPU ports (rank, port) whose circuit differs between two intervals: the OCS input
    ports a reconfiguration darkens."""
    def of(k: int) -> dict[tuple[int, int], tuple[int, int]]:
        return {(c.src, c.src_port): (c.dst, c.dst_port) for c in plan.intervals[k].circuits}

    old, new = of(before), of(after)
    return {src for src in old.keys() | new.keys() if old.get(src) != new.get(src)}


def early_ranks(plan: RunPlan, step: int) -> list[int]:
    """The GPUs that must have finished step ``step - 1`` before the reconfiguration into
    ``step`` may start (barrier "early"): both ends of every transfer of that step that has
    no path avoiding every changing circuit, for its data or for the acknowledgements
    coming back (the route of the reverse pair). A transfer with such a path may still be
    sending when its other paths go dark: what meets a dark port is dropped and MRC resends
    it on the paths that work."""
    prev, cur = plan.steps[step - 2], plan.steps[step - 1]
    changed = changing_circuits(plan, prev.interval, cur.interval)

    def survives(src: int, dst: int) -> bool:
        route = prev.routes.get((src, dst))
        if route is None:
            return False
        return any(all(hop not in changed for hop in route.paths[i])
                   for i in set(route.buckets))

    need: set[int] = set()
    for u, v in enumerate(prev.sends):
        if v is not None and not (survives(u, v) and survives(v, u)):
            need |= {u, v}
    return sorted(need)


def hidden_reconfiguration_s(plan: RunPlan, step: int, required: Sequence[int]) -> float:
    """The model's share of a reconfiguration's dark time that overlaps step ``step - 1``
    under barrier "early": the reconfiguration starts when the last of ``required`` (or,
    without any, the first GPU) finished, every GPU with a transfer finishing at the step's
    model time and an idle one at once."""
    prev = plan.steps[step - 2]
    t = prev.model_s
    active = {u for u, v in enumerate(prev.sends) if v is not None}
    active |= {v for v in prev.sends if v is not None}
    finish = [t if u in active else 0.0 for u in range(len(prev.sends))]
    start = max([min(finish), *(finish[u] for u in required)])
    return max(0.0, min(plan.model.alpha_r_s, t - start))


def with_barrier(plan: RunPlan, barrier: str) -> RunPlan:
    """The plan under barrier ``all`` (every reconfiguration waits for every GPU) or
    ``early`` (each reconfiguring step lists ``reconfigure_after``, its ``early_ranks``, and
    the model subtracts the dark time that overlaps the previous step)."""
    if barrier not in BARRIERS:
        raise HarvestError(f"barrier must be one of {', '.join(BARRIERS)}, got {barrier!r}")
    # from the plan as barrier "all" has it: applying a barrier twice changes nothing
    plain = [dataclasses.replace(st, reconfigure_after=None, hidden_reconfiguration_s=None)
             for st in plan.steps]
    full = plan.model.model_s + (plan.model.hidden_reconfiguration_s or 0.0)
    base = dataclasses.replace(plan, barrier="all", steps=tuple(plain), model=dataclasses.replace(
        plan.model, model_s=full, hidden_reconfiguration_s=None))
    if barrier == "all":
        return base
    hidden_total = 0.0
    steps = list(plain)
    for i in range(1, len(steps)):
        if steps[i].interval == steps[i - 1].interval:
            continue
        required = early_ranks(base, i + 1)
        hidden = hidden_reconfiguration_s(base, i + 1, required)
        steps[i] = dataclasses.replace(steps[i], reconfigure_after=tuple(required),
                                       hidden_reconfiguration_s=hidden)
        hidden_total += hidden
    model = dataclasses.replace(base.model, hidden_reconfiguration_s=hidden_total,
                                model_s=base.model.model_s - hidden_total)
    return dataclasses.replace(base, barrier="early", steps=tuple(steps), model=model)


def circuit_text(plan: RunPlan, interval: int) -> list[str]:
    """The interval's circuits as 'gpu:port -> gpu:port' (the controller's circuit syntax)."""
    ranks = plan.ranks
    return [f"{ranks[c.src]}:{c.src_port} -> {ranks[c.dst]}:{c.dst_port}"
            for c in plan.intervals[interval].circuits]


__all__ = ["DEFAULT_BUCKETS", "ack_hops", "build_plan", "changing_circuits", "circuit_text",
           "early_ranks", "hidden_reconfiguration_s", "with_barrier"]

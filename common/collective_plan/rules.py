"""The rules a collective plan's readers rely on: the collective and its steps, intervals
that cover the steps, circuits that realise the edges, routes that follow the circuits, the
barrier's marks. Each function raises ``PlanError`` naming the field."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import common.collective_plan.parts as parts
from common.collective_plan.parts import PlanError
from common.collectives import Collective, CollectiveError, build


@dataclass(frozen=True)
class Shape:
    """What the parts are checked against: the plan's GPUs, ports per GPU, EV buckets and
    barrier."""

    gpus: int
    degree: int
    buckets: int
    barrier: str


def in_range(values: Iterable[int], n: int, where: str) -> None:
    bad = [v for v in values if not 0 <= v < n]
    if bad:
        raise PlanError(f"{where}: {bad[0]} is not one of 0..{n - 1}")


def nonnegative(value: float, where: str) -> None:
    if value < 0:
        raise PlanError(f"{where} must not be negative, got {value!r}")


def algorithm(name: str, phase: str, n: int, steps: Sequence[parts.PlanStep]) -> Collective:
    """The collective a plan runs: built from ``common.collectives``, or spelled out by the
    plan's steps (``custom``), whose shape is checked here."""
    if name != parts.CUSTOM:
        try:
            coll = build(name, n, phase)
        except CollectiveError as exc:
            raise PlanError(f"plan collective: {exc}") from None
    else:
        if phase != parts.CUSTOM:
            raise PlanError(f"a custom collective has phase {parts.CUSTOM!r}, got {phase!r}")
        for st in steps:
            _check_custom_step(st, n)
        coll = Collective(parts.CUSTOM, parts.CUSTOM, n, tuple(st.pattern for st in steps))
    if len(steps) != len(coll.steps):
        raise PlanError(f"the plan has {len(steps)} steps; {coll.name} {coll.phase} on {n} "
                        f"GPUs has {len(coll.steps)}")
    return coll


def _check_custom_step(st: parts.PlanStep, n: int) -> None:
    where = f"plan step {st.step}"
    if st.kind not in parts.STEP_KINDS:
        raise PlanError(f"{where}: kind {st.kind!r} is not one of "
                        f"{', '.join(parts.STEP_KINDS)}")
    if len(st.sends) != n or len(st.blocks) != n:
        raise PlanError(f"{where}: 'sends' and 'blocks' need one entry for each of the {n} "
                        f"GPUs")
    for u, v in enumerate(st.sends):
        if v is not None and not (0 <= v < n and v != u):
            raise PlanError(f"{where}: GPU {u} sends to {v}, not another of the {n} GPUs")
        in_range(st.blocks[u], n, f"{where} blocks of GPU {u}")


def check_intervals(intervals: Sequence[parts.Interval], shape: Shape, steps: int) -> None:
    """The intervals cover steps 1..``steps`` in order; their circuits join distinct GPUs'
    ports, one circuit per port and direction, and realise the edges."""
    if not intervals:
        raise PlanError("plan 'intervals' is empty")
    expect = 1
    for k, iv in enumerate(intervals):
        where = f"plan interval {k}"
        if iv.first != expect or iv.last < iv.first:
            raise PlanError(f"{where} covers steps {iv.first}..{iv.last}; intervals must "
                            f"cover the steps in order, this one from step {expect}")
        expect = iv.last + 1
        for u, v, count in iv.edges:
            in_range((u, v), shape.gpus, f"{where} edge {u}->{v}")
            if count <= 0:
                raise PlanError(f"{where} edge {u}->{v}: {count} circuits")
        _check_circuits(iv, shape, where)
    if expect != steps + 1:
        raise PlanError(f"plan intervals cover steps 1..{expect - 1}, the plan has {steps}")


def _check_circuits(iv: parts.Interval, shape: Shape, where: str) -> None:
    outs: set[parts.Hop] = set()
    ins: set[parts.Hop] = set()
    for c in iv.circuits:
        name = f"{where} circuit {c.to_json()}"
        in_range((c.src, c.dst), shape.gpus, name)
        in_range((c.src_port, c.dst_port), shape.degree, f"{name} port")
        if c.src == c.dst:
            raise PlanError(f"{name} joins a GPU to itself")
        if (c.src, c.src_port) in outs or (c.dst, c.dst_port) in ins:
            raise PlanError(f"{name}: a port carries one circuit each way")
        outs.add((c.src, c.src_port))
        ins.add((c.dst, c.dst_port))
    if Counter((c.src, c.dst) for c in iv.circuits) != {(u, v): c for u, v, c in iv.edges}:
        raise PlanError(f"{where}: the circuits do not realise the edges")


def check_route(st: parts.PlanStep, pair: parts.Pair, route: parts.Route,
                links: Mapping[parts.Hop, parts.Circuit], shape: Shape) -> None:
    """Every path of the pair follows the step's circuits from source to destination, no
    GPU twice, and every EV bucket names one of them."""
    s, t = pair
    where = f"plan step {st.step} route '{s}>{t}'"
    in_range(pair, shape.gpus, where)
    if s == t:
        raise PlanError(f"{where} joins a GPU to itself")
    if not route.paths:
        raise PlanError(f"{where} has no path")
    if len(route.buckets) != shape.buckets:
        raise PlanError(f"{where} maps {len(route.buckets)} EV buckets, the plan has "
                        f"{shape.buckets}")
    in_range(route.buckets, len(route.paths), f"{where} bucket path")
    for i, path in enumerate(route.paths):
        at, seen = s, {s}
        for gpu, port in path:
            link = links.get((gpu, port))
            if gpu != at or link is None:
                raise PlanError(f"{where} path {i}: hop ({gpu}, {port}) is not a circuit out "
                                f"of GPU {at} in interval {st.interval}")
            at = link.dst
            if at in seen:
                raise PlanError(f"{where} path {i} visits GPU {at} twice")
            seen.add(at)
        if at != t:
            raise PlanError(f"{where} path {i} ends at GPU {at}")


def check_steps(steps: Sequence[parts.PlanStep], coll: Collective,
                intervals: Sequence[parts.Interval], shape: Shape) -> None:
    """Step i is the collective's step i, on an interval that covers it, with routes along
    that interval's circuits, and the barrier's marks exactly where a new interval starts."""
    early = shape.barrier == "early"
    for i, (st, cs) in enumerate(zip(steps, coll.steps), start=1):
        where = f"plan step {i}"
        if st.step != i:
            raise PlanError(f"{where} is numbered {st.step}: steps must be 1, 2, ... in order")
        if st.pattern != cs:
            raise PlanError(f"{where} is not step {i} of {coll.name} {coll.phase}")
        if not 0 <= st.interval < len(intervals):
            raise PlanError(f"{where}: interval {st.interval} does not exist")
        iv = intervals[st.interval]
        if not iv.first <= i <= iv.last:
            raise PlanError(f"{where} names interval {st.interval}, which covers steps "
                            f"{iv.first}..{iv.last}")
        if st.hops < 1:
            raise PlanError(f"{where} 'hops' must be at least 1, got {st.hops}")
        for name in ("theta", "model_s", "volume_bytes", "ack_s"):
            nonnegative(getattr(st, name), f"{where} {name!r}")
        links = {(c.src, c.src_port): c for c in iv.circuits}
        for pair, route in st.routes.items():
            check_route(st, pair, route, links, shape)
        marked = early and i > 1 and st.interval != steps[i - 2].interval
        if (st.reconfigure_after is not None) != marked \
                or (st.hidden_reconfiguration_s is not None) != marked:
            raise PlanError(f"{where}: 'reconfigure_after' and 'hidden_reconfiguration_s' "
                            f"belong to the steps that start a new interval under barrier "
                            f"'early', and only to them")
        if st.reconfigure_after is not None:
            in_range(st.reconfigure_after, shape.gpus, f"{where} 'reconfigure_after'")
        if st.hidden_reconfiguration_s is not None:
            nonnegative(st.hidden_reconfiguration_s, f"{where} 'hidden_reconfiguration_s'")


__all__ = ["Shape", "algorithm", "check_intervals", "check_route", "check_steps", "in_range",
           "nonnegative"]

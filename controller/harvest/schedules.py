"""Executable schedules: which topology serves which steps, with the model's time per step.

A :class:`Schedule` is what a run applies to the OCS: consecutive step intervals, one topology
each, a reconfiguration before every interval but the first. Four sources:

- ``static``: the best single topology for all steps (the engine's cost(1, s));
- ``every-step``: each step on its own best topology (the direct topology d x M_i), steps with
  the same matrix as the previous one kept on it (as the engine's every-step baseline);
- ``harvest``: the dynamic program's optimum (:func:`controller.harvest.engine.synthesize`);
- a schedule file: the JSON ``mrcnet harvest --json`` prints (its ``schedule`` list), checked
  against the collective and the fabric and re-evaluated with the run's parameters.

Model times use the same step-time formula as the engine (alpha + min_L delta L + 8m/(c theta_L)).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.collectives import Collective

from .engine import Synthesizer
from .model import CircuitTopology, HarvestError, Params, StepDemand, best_point, demands_of
from .search import Evaluator

SCHEDULE_KINDS = ("static", "every-step", "harvest")


@dataclass(frozen=True)
class StepModel:
    """The model's view of one step on the topology that serves it."""

    step: int  # 1-based
    volume_bytes: float
    theta: float
    hops: int
    time_s: float  # alpha + delta * hops + 8 m / (c theta)


@dataclass(frozen=True)
class ScheduledInterval:
    first: int  # 1-based, inclusive
    last: int
    topology: CircuitTopology
    steps: tuple[StepModel, ...]

    @property
    def time_s(self) -> float:
        return sum(st.time_s for st in self.steps)


@dataclass(frozen=True)
class Schedule:
    name: str
    intervals: tuple[ScheduledInterval, ...]
    alpha_r_s: float

    @property
    def reconfigurations(self) -> int:
        return len(self.intervals) - 1

    @property
    def model_s(self) -> float:
        return sum(iv.time_s for iv in self.intervals) + self.reconfigurations * self.alpha_r_s

    def steps(self) -> list[StepModel]:
        return [st for iv in self.intervals for st in iv.steps]

    def interval_of(self, step: int) -> int:
        """Index of the interval serving 1-based ``step``."""
        for i, iv in enumerate(self.intervals):
            if iv.first <= step <= iv.last:
                return i
        raise HarvestError(f"step {step} is not in schedule {self.name}")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_s": self.model_s,
            "reconfigurations": self.reconfigurations,
            "alpha_r_s": self.alpha_r_s,
            "schedule": [
                {
                    "steps": [iv.first, iv.last],
                    "edges": iv.topology.as_json(),
                    "step_times": [
                        {"step": st.step, "theta": st.theta, "hops": st.hops,
                         "time_s": st.time_s, "volume_bytes": st.volume_bytes}
                        for st in iv.steps
                    ],
                }
                for iv in self.intervals
            ],
        }


def _interval(
    first: int, last: int, topo: CircuitTopology, demands: Sequence[StepDemand], params: Params,
    evaluator: Evaluator,
) -> ScheduledInterval:
    models = []
    for i in range(first, last + 1):
        st = demands[i - 1]
        hops, theta, t = best_point(evaluator(topo, st.pattern), st.volume_bytes, params)
        if not math.isfinite(t):
            raise HarvestError(f"step {i} cannot be routed on the topology of steps "
                               f"{first}..{last}")
        models.append(StepModel(i, st.volume_bytes, theta, hops, t))
    return ScheduledInterval(first, last, topo, tuple(models))


def evaluate(
    name: str, coll: Collective, message_bytes: float, params: Params,
    intervals: Sequence[tuple[int, int, CircuitTopology]], evaluator: Evaluator | None = None,
) -> Schedule:
    """Schedule ``name`` of the given (first, last, topology) intervals, with model times."""
    params.validate()
    demands = demands_of(coll, message_bytes)
    check_intervals(coll, params.degree, intervals)
    ev = evaluator or Evaluator()
    ivs = tuple(_interval(a, b, t, demands, params, ev) for a, b, t in intervals)
    return Schedule(name, ivs, params.alpha_r)


def check_intervals(
    coll: Collective, degree: int, intervals: Sequence[tuple[int, int, CircuitTopology]]
) -> None:
    """Raise HarvestError saying what does not fit: step coverage, rank count, degree."""
    s = len(coll.steps)
    if not intervals:
        raise HarvestError("the schedule has no intervals")
    expect = 1
    for a, b, topo in intervals:
        if a != expect or b < a:
            raise HarvestError(
                f"schedule intervals must cover steps 1..{s} in order; got steps {a}..{b} "
                f"where step {expect} was expected")
        if topo.n != coll.n:
            raise HarvestError(f"the topology of steps {a}..{b} has {topo.n} GPUs, the "
                               f"collective {coll.n}")
        out_deg, in_deg = topo.max_degrees()
        if max(out_deg, in_deg) > degree:
            raise HarvestError(
                f"the topology of steps {a}..{b} needs degree {max(out_deg, in_deg)}, the "
                f"schedule is for degree {degree}")
        for u, v, c in topo.edges:
            if u == v or c < 1:
                raise HarvestError(f"steps {a}..{b}: bad edge {u} -> {v} x {c}")
        expect = b + 1
    if expect != s + 1:
        raise HarvestError(f"the schedule covers steps 1..{expect - 1}, the collective "
                           f"{coll.name} {coll.phase} on {coll.n} GPUs has {s} steps")


def builtin(kind: str, synth: Synthesizer) -> Schedule:
    """``static``, ``every-step`` or ``harvest`` from a prepared Synthesizer."""
    coll, params = synth.coll, synth.params
    s = len(synth.steps)
    solve = synth.solver.solve
    if kind == "static":
        topo = solve(0, s - 1).topology
        if topo is None:
            raise HarvestError("no single topology routes every step")
        return evaluate(kind, coll, synth.message_bytes, params, [(1, s, topo)],
                        synth.solver.evaluator)
    if kind == "every-step":
        ivs: list[tuple[int, int, CircuitTopology]] = []
        for a in range(s):
            if ivs and synth.steps[a].pattern == synth.steps[a - 1].pattern:
                first, _, topo = ivs[-1]
                ivs[-1] = (first, a + 1, topo)
                continue
            topo = solve(a, a).topology
            if topo is None:
                raise HarvestError(f"step {a + 1} is not routable")
            ivs.append((a + 1, a + 1, topo))
        return evaluate(kind, coll, synth.message_bytes, params, ivs, synth.solver.evaluator)
    if kind == "harvest":
        res = synth.result()
        ivs = [(iv.first, iv.last, iv.topology) for iv in res.schedule]
        return evaluate(kind, coll, synth.message_bytes, params, ivs, synth.solver.evaluator)
    raise HarvestError(f"unknown schedule {kind!r}; choose {', '.join(SCHEDULE_KINDS)} or a "
                       "schedule file (mrcnet harvest --json)")


def from_file(
    path: str | Path, coll: Collective, message_bytes: float, params: Params
) -> Schedule:
    """A schedule saved by ``mrcnet harvest --json``, checked against ``coll`` and ``params``."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise HarvestError(f"schedule file {path}: {exc}") from None
    return from_json(data, coll, message_bytes, params, name=f"file:{Path(path).name}")


def from_json(
    data: Mapping[str, Any], coll: Collective, message_bytes: float, params: Params,
    name: str = "file",
) -> Schedule:
    if not isinstance(data, Mapping) or not isinstance(data.get("schedule"), list):
        raise HarvestError("a schedule file is the JSON of 'mrcnet harvest --json' (with a "
                           "'schedule' list)")
    for key, want in (("collective", coll.name), ("phase", coll.phase), ("gpus", coll.n)):
        if key in data and data[key] != want:
            raise HarvestError(f"the schedule is for {key} {data[key]!r}, the run is for "
                               f"{want!r}")
    if "degree" in data and isinstance(data["degree"], int) and data["degree"] > params.degree:
        raise HarvestError(f"the schedule is for degree {data['degree']}, the run uses "
                           f"degree {params.degree}")
    ivs: list[tuple[int, int, CircuitTopology]] = []
    for k, item in enumerate(data["schedule"]):
        try:
            a, b = (int(x) for x in item["steps"])
            counts: dict[tuple[int, int], int] = {}
            for u, v, c in item["edges"]:
                if not (0 <= int(u) < coll.n and 0 <= int(v) < coll.n):
                    raise HarvestError(f"interval {k}: edge {u} -> {v} is outside the "
                                       f"{coll.n} GPUs")
                counts[(int(u), int(v))] = counts.get((int(u), int(v)), 0) + int(c)
        except HarvestError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise HarvestError(f"schedule interval {k} must have 'steps': [a, b] and 'edges': "
                               f"[[u, v, circuits], ...] ({exc})") from None
        ivs.append((a, b, CircuitTopology.from_counts(coll.n, counts)))
    return evaluate(name, coll, message_bytes, params, ivs)


__all__ = ["SCHEDULE_KINDS", "Schedule", "ScheduledInterval", "StepModel", "builtin",
           "check_intervals", "evaluate", "from_file", "from_json"]

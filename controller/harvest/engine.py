"""Harvest synthesis: collective + parameters -> reconfiguration schedule with bounds."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common.collectives import Collective

from .dp import plan
from .model import (
    CircuitTopology,
    Evaluation,
    HarvestError,
    Params,
    StepDemand,
    best_point,
    demands_of,
)
from .search import IntervalSolution, IntervalSolver

REL_TOL = 1e-6


@dataclass(frozen=True)
class StepReport:
    step: int  # 1-based
    theta: float
    hops: int
    alpha_s: float
    propagation_s: float
    transfer_s: float
    volume_bytes: float

    @property
    def total_s(self) -> float:
        return self.alpha_s + self.propagation_s + self.transfer_s


@dataclass(frozen=True)
class Interval:
    first: int  # 1-based, inclusive
    last: int
    topology: CircuitTopology
    method: str
    proven: bool
    cost_s: float
    steps: tuple[StepReport, ...]


@dataclass(frozen=True)
class Result:
    collective: str
    phase: str
    n: int
    params: Params
    message_bytes: float
    completion_time_s: float
    reconfigurations: int
    schedule: tuple[Interval, ...]
    lower_bound_s: float
    optimal: bool
    methods: tuple[str, ...]
    static_s: float
    static_proven: bool
    every_step_s: float
    every_step_proven: bool
    seconds: float

    @property
    def method(self) -> str:
        return "+".join(self.methods)

    def speedup_static(self) -> float:
        return _ratio(self.static_s, self.completion_time_s)

    def speedup_every_step(self) -> float:
        return _ratio(self.every_step_s, self.completion_time_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "collective": self.collective,
            "phase": self.phase,
            "gpus": self.n,
            "degree": self.params.degree,
            "size_bytes": self.message_bytes,
            "bandwidth_bps": self.params.bandwidth_bps,
            "alpha_s": self.params.alpha,
            "delta_s": self.params.delta,
            "alpha_r_s": self.params.alpha_r,
            "completion_time_s": _num(self.completion_time_s),
            "reconfigurations": self.reconfigurations,
            "schedule": [
                {
                    "steps": [iv.first, iv.last],
                    "edges": iv.topology.as_json(),
                    "method": iv.method,
                    "optimal": iv.proven,
                    "time_s": _num(iv.cost_s),
                    "step_times": [
                        {
                            "step": st.step,
                            "theta": st.theta,
                            "hops": st.hops,
                            "alpha_s": st.alpha_s,
                            "propagation_s": st.propagation_s,
                            "transfer_s": _num(st.transfer_s),
                        }
                        for st in iv.steps
                    ],
                }
                for iv in self.schedule
            ],
            "baselines": {
                "static_s": _num(self.static_s),
                "every_step_s": _num(self.every_step_s),
                "static_optimal": self.static_proven,
                "every_step_optimal": self.every_step_proven,
            },
            "speedup": {
                "vs_static": _num(self.speedup_static()),
                "vs_every_step": _num(self.speedup_every_step()),
            },
            "lower_bound_s": _num(self.lower_bound_s),
            "method": self.method,
            "optimal": self.optimal,
            "synthesis_s": self.seconds,
        }


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _ratio(a: float, b: float) -> float:
    if b <= 0 or not math.isfinite(b):
        return math.nan
    return a / b


def _reports(
    sol: IntervalSolution, steps: Sequence[StepDemand], first: int, p: Params
) -> tuple[StepReport, ...]:
    out = []
    for i, (ev, st) in enumerate(zip(sol.evals, steps)):
        hops, theta, total = best_point(ev, st.volume_bytes, p)
        transfer = total - p.alpha - p.delta * hops if math.isfinite(total) else math.inf
        out.append(StepReport(first + i + 1, theta, hops, p.alpha, p.delta * hops,
                              max(0.0, transfer), st.volume_bytes))
    return tuple(out)


class Synthesizer:
    """Holds the interval cache of one (collective, degree, size) so alpha_r sweeps are cheap."""

    def __init__(
        self,
        coll: Collective,
        message_bytes: float,
        params: Params,
        method: str = "auto",
        exact_max_n: int = 4,
        time_limit: float = 60.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        params.validate()
        self.coll = coll
        self.message_bytes = message_bytes
        self.params = params
        self.steps = demands_of(coll, message_bytes)
        if not self.steps:
            raise HarvestError("collective has no steps")
        self.solver = IntervalSolver(
            coll.n, self.steps, params, method, exact_max_n, time_limit, progress
        )
        self.progress = progress
        self._elapsed = 0.0
        self._prepared = False

    def prepare(self) -> None:
        """Solve every interval subproblem once (progress per interval length)."""
        if self._prepared:
            return
        s = len(self.steps)
        t0 = time.perf_counter()
        if self._uniform():
            self.solver.solve(0, s - 1)
            for a in range(s):
                self.solver.solve(a, a)
        else:
            total = s * (s + 1) // 2
            done = 0
            for length in range(1, s + 1):
                for a in range(0, s - length + 1):
                    self.solver.solve(a, a + length - 1)
                    done += 1
                if self.progress:
                    self.progress(f"subproblems {done}/{total}")
        self._prepared = True
        self._elapsed += time.perf_counter() - t0

    def _uniform(self) -> bool:
        first = self.steps[0].pattern
        return all(st.pattern == first for st in self.steps) and first.out_degree_ok()

    def result(self, alpha_r: float | None = None) -> Result:
        p = (
            self.params
            if alpha_r is None
            else Params(
                self.params.degree,
                self.params.bandwidth_bps,
                self.params.alpha,
                self.params.delta,
                alpha_r,
            )
        )
        p.validate()
        self.prepare()
        t0 = time.perf_counter()
        s = len(self.steps)
        solve = self.solver.solve
        if self._uniform():
            # Same direct pattern every step: the direct topology is optimal for each step, so
            # one interval reaches every per-step optimum and any cut only adds alpha_r.
            chosen = plan(1, lambda a, b: solve(0, s - 1).cost, p.alpha_r)
            chosen_iv: tuple[tuple[int, int], ...] = ((0, s - 1),)
            lb_total = solve(0, s - 1).lower_bound
            total = chosen.total
        else:
            ub_plan = plan(s, lambda a, b: solve(a, b).cost, p.alpha_r)
            lb_plan = plan(s, lambda a, b: solve(a, b).lower_bound, p.alpha_r)
            chosen_iv, total, lb_total = ub_plan.intervals, ub_plan.total, lb_plan.total
        if not math.isfinite(total):
            raise HarvestError("no schedule found: some step is not routable on any candidate")
        intervals = []
        methods: list[str] = []
        for a, b in chosen_iv:
            sol = solve(a, b)
            assert sol.topology is not None
            intervals.append(
                Interval(
                    a + 1,
                    b + 1,
                    sol.topology,
                    sol.method,
                    sol.proven,
                    sol.cost,
                    _reports(sol, self.steps[a : b + 1], a, p),
                )
            )
        for sol in self.solver.solved():
            if sol.method not in methods:
                methods.append(sol.method)
        static = solve(0, s - 1)
        every = [solve(a, a) for a in range(s)]
        # Reconfigure before every step whose matrix differs from the previous step's.
        changes = sum(1 for a in range(1, s) if self.steps[a].pattern != self.steps[a - 1].pattern)
        every_s = sum(x.cost for x in every) + changes * p.alpha_r
        optimal = total <= lb_total * (1 + REL_TOL) + 1e-15
        self._elapsed += time.perf_counter() - t0
        return Result(
            collective=self.coll.name,
            phase=self.coll.phase,
            n=self.coll.n,
            params=p,
            message_bytes=self.message_bytes,
            completion_time_s=total,
            reconfigurations=len(intervals) - 1,
            schedule=tuple(intervals),
            lower_bound_s=lb_total,
            optimal=optimal,
            methods=tuple(sorted(methods)),
            static_s=static.cost,
            static_proven=static.proven,
            every_step_s=every_s,
            every_step_proven=all(x.proven for x in every),
            seconds=self._elapsed,
        )



def synthesize(
    coll: Collective,
    message_bytes: float,
    params: Params,
    method: str = "auto",
    exact_max_n: int = 4,
    time_limit: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Optimal (or bounded) reconfiguration schedule for ``coll`` under ``params``."""
    return Synthesizer(
        coll, message_bytes, params, method, exact_max_n, time_limit, progress
    ).result()


__all__ = ["Evaluation", "Result", "Synthesizer", "synthesize"]

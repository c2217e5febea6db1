"""Per-interval topology choice: direct, circulant theorem, exact conic program, restricted search.

Every answer carries an upper bound (the exact model cost of the returned topology) and a lower
bound on the best possible cost of the interval; ``proven`` means the two meet.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from common.collectives import is_power_of_two

from . import bounds, exchange, exhaustive, misocp
from .circulant import shift_on_circulant, swing_on_local
from .flow import evaluate_lp
from .model import CircuitTopology, Evaluation, HarvestError, Params, Pattern, StepDemand, step_time
from .unipath import evaluate_unipath, successors

LP_MAX_N = 64  # general LP evaluation beyond this size is too slow to be useful
PROOF_RTOL = 1e-6


@dataclass(frozen=True)
class IntervalSolution:
    topology: CircuitTopology | None
    evals: tuple[Evaluation, ...]
    cost: float  # sum of step times of the interval on ``topology`` (inf if none)
    lower_bound: float
    method: str
    proven: bool


class Evaluator:
    """(theta, hops) of a pattern on a topology, cached, using the fastest exact method."""

    def __init__(self) -> None:
        self._cache: dict[tuple[object, Pattern], Evaluation] = {}

    def __call__(self, topo: CircuitTopology, pat: Pattern) -> Evaluation:
        key: object = (topo.kind, topo.gens) if topo.kind != "matrix" else topo.edges
        hit = self._cache.get((key, pat))
        if hit is None:
            hit = self._evaluate(topo, pat)
            self._cache[(key, pat)] = hit
        return hit

    @staticmethod
    def _evaluate(topo: CircuitTopology, pat: Pattern) -> Evaluation:
        kind, value = pat.shape
        distinct = len(set(topo.gens))
        if topo.kind == "circulant" and kind == "shift" and distinct <= 2:
            return shift_on_circulant(topo.n, topo.gens, value)
        if (
            topo.kind == "local"
            and kind == "swing"
            and distinct <= 2
            and all(h % 2 for h in topo.gens)
            and value % 2
        ):
            return swing_on_local(topo.n, topo.gens, value)
        if successors(topo) is not None:
            return evaluate_unipath(topo, pat)
        if topo.n > LP_MAX_N:
            raise HarvestError(f"no fast evaluator for this topology at n={topo.n}")
        return evaluate_lp(topo, pat)


def interval_cost(evals: Sequence[Evaluation], steps: Sequence[StepDemand], p: Params) -> float:
    return sum(step_time(ev, st.volume_bytes, p) for ev, st in zip(evals, steps))


def trivial_lower_bound(steps: Sequence[StepDemand], p: Params) -> float:
    """Each step alone: theta <= d (a rank injects at most d circuits), hops >= 1."""
    return sum(step_time(Evaluation(float(p.degree), 1), st.volume_bytes, p) for st in steps)


def direct_topology(pat: Pattern, d: int) -> CircuitTopology:
    kind, value = pat.shape
    if kind == "shift":
        return CircuitTopology.circulant(pat.n, [value] * d)
    if kind == "swing":
        return CircuitTopology.local(pat.n, [value] * d)
    return CircuitTopology.from_counts(pat.n, {(u, v): d for u, v in pat.pairs})


def rd_theorem_applies(n: int, patterns: Sequence[Pattern], d: int) -> bool:
    """Degree-1 intervals of power-of-two shifts on n = 2^q ranks (proof in docs/harvest.md)."""
    if d != 1 or not is_power_of_two(n):
        return False
    return all(
        p.shape[0] == "shift" and is_power_of_two(p.shape[1]) and 0 < p.shape[1] < n
        for p in patterns
    )


Candidate = tuple[str, tuple[int, ...]]  # ("circulant" | "local", generators)


def structured_candidates(n: int, patterns: Sequence[Pattern], d: int,
                          all_patterns: Sequence[Pattern]) -> list[Candidate] | None:
    """Circulant-type candidates for shift or Swing intervals, None for other patterns."""
    shapes = {p.shape[0] for p in patterns}
    if shapes == {"shift"}:
        shifts = {1} | {1 << j for j in range(n.bit_length()) if (1 << j) < n}
        shifts |= {p.shape[1] for p in all_patterns if p.shape[0] == "shift"}
        return [("circulant", gens) for gens in _multisets(sorted(shifts), d)]
    if shapes == {"swing"} and n % 2 == 0:
        rhos = {p.shape[1] for p in all_patterns if p.shape[0] == "swing"}
        pool = sorted({1, n - 1} | rhos | {(n - r) % n for r in rhos})
        out: list[Candidate] = [("local", gens) for gens in _multisets(pool, d)]
        if d == 1:
            out += [("circulant", (g,)) for g in pool]
        return out
    return None


def candidates(n: int, patterns: Sequence[Pattern], d: int,
               all_patterns: Sequence[Pattern]) -> list[CircuitTopology]:
    """Restricted candidate set (labelled, not claimed optimal unless the bounds meet)."""
    structured = structured_candidates(n, patterns, d, all_patterns)
    if structured is not None:
        return [CircuitTopology.circulant(n, g) if k == "circulant" else CircuitTopology.local(n, g)
                for k, g in structured]
    out: list[CircuitTopology] = []
    # Unstructured steps: direct matchings of the interval's patterns, their unions, a ring.
    out.append(CircuitTopology.circulant(n, [1] * d))
    mats = [p for p in patterns if p.out_degree_ok()]
    for combo in _multisets(list(range(len(mats))), d):
        counts: dict[tuple[int, int], int] = {}
        for i in combo:
            for u, v in mats[i].pairs:
                counts[(u, v)] = counts.get((u, v), 0) + 1
        out.append(CircuitTopology.from_counts(n, counts))
    return out


def _multisets(pool: Sequence[int], d: int) -> list[tuple[int, ...]]:
    """Multisets of size d with at most two distinct values (closed forms exist for those)."""
    out = []
    for combo in itertools.combinations_with_replacement(pool, d):
        if len(set(combo)) <= 2:
            out.append(combo)
    return out


class IntervalSolver:
    """Solves and caches the topology subproblem of every interval for one collective."""

    def __init__(
        self,
        n: int,
        steps: Sequence[StepDemand],
        params: Params,
        method: str = "auto",
        exact_max_n: int = 4,
        time_limit: float = 60.0,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        if method not in ("auto", "exact", "restricted"):
            raise HarvestError(f"unknown method {method!r}; choose auto, exact or restricted")
        self.n = n
        self.steps = list(steps)
        self.params = params
        self.method = method
        self.exact_max_n = exact_max_n
        self.time_limit = time_limit
        self.progress = progress
        self.evaluator = Evaluator()
        self.all_patterns = list(dict.fromkeys(st.pattern for st in self.steps))
        self._cache: dict[tuple[int, int], IntervalSolution] = {}
        self._table: exhaustive.DerangementTable | None = None
        self._topos: dict[Candidate, CircuitTopology] = {}
        self._tables: dict[tuple[Candidate, ...], tuple[
            list[CircuitTopology], list[list[Evaluation]], np.ndarray]] = {}

    def _candidates(self, patterns: Sequence[Pattern]) -> list[CircuitTopology]:
        """Candidates, with structured topologies built once per solver (n can be 1024)."""
        structured = structured_candidates(self.n, patterns, self.params.degree,
                                           self.all_patterns)
        if structured is None:
            return candidates(self.n, patterns, self.params.degree, self.all_patterns)
        out = []
        for kind, gens in structured:
            topo = self._topos.get((kind, gens))
            if topo is None:
                topo = (CircuitTopology.circulant(self.n, gens) if kind == "circulant"
                        else CircuitTopology.local(self.n, gens))
                self._topos[(kind, gens)] = topo
            out.append(topo)
        return out

    def _restricted(self, a: int, b: int, patterns: Sequence[Pattern]
                    ) -> tuple[CircuitTopology | None, tuple[Evaluation, ...], float]:
        """Best candidate for steps a..b; structured families use one step-time table."""
        structured = structured_candidates(self.n, patterns, self.params.degree,
                                           self.all_patterns)
        if structured is None:
            return self._best_of(self._candidates(patterns), self.steps[a : b + 1])
        key = tuple(structured)
        table = self._tables.get(key)
        if table is None:
            topos = self._candidates(patterns)
            evals = [[self.evaluator(t, st.pattern) for st in self.steps] for t in topos]
            times = np.array([[step_time(ev, st.volume_bytes, self.params)
                               for ev, st in zip(row, self.steps)] for row in evals])
            table = (topos, evals, times)
            self._tables[key] = table
        topos, evals, times = table
        with np.errstate(invalid="ignore"):
            costs = times[:, a : b + 1].sum(axis=1)
        i = int(np.argmin(costs))
        if not math.isfinite(float(costs[i])):
            return None, (), math.inf
        return topos[i], tuple(evals[i][a : b + 1]), float(costs[i])

    def solved(self) -> list[IntervalSolution]:
        return list(self._cache.values())

    def solve(self, a: int, b: int) -> IntervalSolution:
        key = (a, b)
        if key not in self._cache:
            self._cache[key] = self._solve(a, b)
        return self._cache[key]

    def _best_of(
        self, cands: Sequence[CircuitTopology], steps: Sequence[StepDemand]
    ) -> tuple[CircuitTopology | None, tuple[Evaluation, ...], float]:
        best: tuple[CircuitTopology | None, tuple[Evaluation, ...], float] = (None, (), math.inf)
        for topo in cands:
            evals = tuple(self.evaluator(topo, st.pattern) for st in steps)
            cost = interval_cost(evals, steps, self.params)
            if cost < best[2]:
                best = (topo, evals, cost)
        return best

    def _solve(self, a: int, b: int) -> IntervalSolution:
        p = self.params
        steps = self.steps[a : b + 1]
        patterns = list(dict.fromkeys(st.pattern for st in steps))
        lb = trivial_lower_bound(steps, p)
        if bounds.applies(patterns):
            lb = max(lb, bounds.interval_bound(steps, p))
        if len(patterns) == 1 and patterns[0].out_degree_ok():
            direct = direct_topology(patterns[0], p.degree)
            evals = tuple(Evaluation(float(p.degree), 1) for _ in steps)
            cost = interval_cost(evals, steps, p)
            return IntervalSolution(direct, evals, cost, lb, "direct", True)
        if self.method != "exact" and rd_theorem_applies(self.n, patterns, p.degree):
            g = min(pt.shape[1] for pt in patterns)
            circ = CircuitTopology.circulant(self.n, [g])
            evals = tuple(self.evaluator(circ, st.pattern) for st in steps)
            cost = interval_cost(evals, steps, p)
            return IntervalSolution(circ, evals, cost, cost, "circulant-theorem", True)
        if self.method != "exact" and exchange.applies(patterns, p.degree):
            found = exchange.solve(self.n, steps, p)
            if found is not None:
                cyc, evals, cost, bound, proven = found
                return IntervalSolution(cyc, evals, cost, bound, "orbit-cycles", proven)
        if self.method == "auto" and p.degree == 1 and self.n <= exhaustive.MAX_N:
            if self._table is None:
                self._table = exhaustive.DerangementTable(self.n)
            perm, evals, cost = self._table.best(steps, p)
            return IntervalSolution(perm, evals, cost, cost, "exhaustive", True)
        topo, evals, cost = self._restricted(a, b, patterns)
        use_exact = self.method == "exact" or (
            self.method == "auto" and self.n <= self.exact_max_n and misocp.available())
        if not use_exact:
            proven = cost <= lb * (1 + PROOF_RTOL)
            return IntervalSolution(topo, evals, cost, lb, "restricted-circulant", proven)
        if self.progress:
            self.progress(f"conic program for steps {a + 1}..{b + 1}")
        cutoff = cost - p.alpha * len(steps) if math.isfinite(cost) else None
        res = misocp.solve_interval(self.n, steps, p, self.time_limit, hint=topo, cutoff=cutoff)
        if res.topology is not None:
            ev2 = tuple(self.evaluator(res.topology, st.pattern) for st in steps)
            cost2 = interval_cost(ev2, steps, p)
            if cost2 < cost:
                topo, evals, cost = res.topology, ev2, cost2
        lb = max(lb, res.lower_bound + p.alpha * len(steps))
        proven = res.solved and cost <= lb * (1 + PROOF_RTOL) + 1e-15
        return IntervalSolution(topo, evals, cost, lb, "misocp", proven)

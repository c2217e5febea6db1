"""Engine optimum vs independent brute force: every topology, every cut set (n = 4 and 8).

The brute force here shares no code with the engine's evaluators: degree-1 routes are walked
hop by hop, degree-2 throughput comes from a path-based LP over all simple paths.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from scipy.optimize import linprog

from common.collectives import build
from controller.harvest import bounds
from controller.harvest.engine import Synthesizer
from controller.harvest.model import Params, demands_of

Pairs = tuple[tuple[int, int], ...]


def step_pairs(name: str, n: int, phase: str) -> tuple[list[Pairs], list[float]]:
    coll = build(name, n, phase)
    return [tuple(s.pairs) for s in coll.steps], [s.fraction for s in coll.steps]


Frontier = list[tuple[int, float]]  # (hop limit L, max concurrent flow over routes <= L hops)


def walk_eval(perm: Sequence[int], pairs: Pairs) -> Frontier:
    n = len(perm)
    load = [0] * n
    longest = 0
    for s, t in pairs:
        u, hops = s, 0
        while u != t:
            load[u] += 1
            u = perm[u]
            hops += 1
            if hops > n:
                return []
        longest = max(longest, hops)
    return [(longest, 1.0 / max(load))]


def path_lp_eval(n: int, x: dict[tuple[int, int], int], pairs: Pairs) -> Frontier:
    """theta_L over all simple paths of at most L hops, for every L."""
    arcs = [e for e, c in x.items() if c > 0]

    def paths(s: int, t: int) -> list[tuple[tuple[int, int], ...]]:
        out = []
        others = [v for v in range(n) if v not in (s, t)]
        for k in range(len(others) + 1):
            for mid in itertools.permutations(others, k):
                seq = (s, *mid, t)
                hops = tuple(itertools.pairwise(seq))
                if all(h in x and x[h] > 0 for h in hops):
                    out.append(hops)
        return out

    per = [paths(s, t) for s, t in pairs]
    if any(not p for p in per):
        return []

    def theta(limit: int) -> float:
        cols = [(k, p) for k, ps in enumerate(per) for p in ps if len(p) <= limit]
        if len({k for k, _ in cols}) < len(pairs):
            return 0.0
        nv = len(cols) + 1
        a_ub = np.zeros((len(arcs), nv))
        for j, (_, p) in enumerate(cols):
            for h in p:
                a_ub[arcs.index(h), j] += 1
        a_eq = np.zeros((len(pairs), nv))
        for j, (k, _) in enumerate(cols):
            a_eq[k, j] = 1
        a_eq[:, -1] = -1
        c = np.zeros(nv)
        c[-1] = -1
        res = linprog(c, A_ub=a_ub, b_ub=[x[e] for e in arcs], A_eq=a_eq,
                      b_eq=np.zeros(len(pairs)), bounds=(0, None), method="highs")
        return float(-res.fun)

    return [(limit, value) for limit in range(1, n) if (value := theta(limit)) > 0]


def step_cost(front: Frontier, fraction: float, size: float, p: Params) -> float:
    """Best hop limit for this step: alpha + delta L + m / (c theta_L)."""
    return min((p.alpha + p.delta * hops + 8 * fraction * size / (p.bandwidth_bps * th)
                for hops, th in front), default=math.inf)


def brute_optimum(evals: list[list[Frontier]], fractions: list[float], size: float,
                  p: Params) -> float:
    """evals[topology][step] -> frontier; minimum over all cut sets and topologies."""
    s = len(fractions)
    cost = np.array([[step_cost(fr, f, size, p) for fr, f in zip(row, fractions)]
                     for row in evals])
    interval = {(a, b): float(np.min(cost[:, a : b + 1].sum(axis=1)))
                for a in range(s) for b in range(a, s)}
    best = math.inf
    for mask in range(1 << (s - 1)):
        cuts = [i for i in range(s - 1) if mask >> i & 1]
        bounds = [-1, *cuts, s - 1]
        total = sum(interval[(bounds[j] + 1, bounds[j + 1])] for j in range(len(bounds) - 1))
        best = min(best, total + len(cuts) * p.alpha_r)
    return best


def derangements(n: int) -> list[tuple[int, ...]]:
    return [q for q in itertools.permutations(range(n)) if all(q[u] != u for u in range(n))]


def degree2_topologies(n: int) -> list[dict[tuple[int, int], int]]:
    """Every maximal topology: zero diagonal, row and column sums at most 2, and no circuit can
    be added. Adding a circuit never lowers theta_L for any L, so some optimum is maximal."""
    arcs = [(u, v) for u in range(n) for v in range(n) if u != v]
    out = []

    def rec(i: int, row: list[int], col: list[int], chosen: dict[tuple[int, int], int]) -> None:
        if i == len(arcs):
            if not any(row[u] < 2 and col[v] < 2 for u, v in arcs):
                out.append(dict(chosen))
            return
        u, v = arcs[i]
        for c in range(0, 3):
            if row[u] + c > 2 or col[v] + c > 2:
                break
            if c:
                chosen[(u, v)] = c
            row[u] += c
            col[v] += c
            rec(i + 1, row, col, chosen)
            row[u] -= c
            col[v] -= c
            chosen.pop((u, v), None)

    rec(0, [0] * n, [0] * n, {})
    return out


# (alpha, delta) pairs, each checked at several reconfiguration delays (units of m/c = 1 s)
DELAYS = [(0.0, 0.0), (0.01, 0.04), (0.0, 0.2), (0.02, 0.01)]
ALPHA_R = [0.0, 0.05, 0.1, 0.3, 5.0]


def check_against(brute: Callable[[str, str], tuple[list[list[Frontier]], list[float]]],
                  n: int, d: int, cases: list[tuple[str, str]],
                  delays: list[tuple[float, float]], require_optimal: bool) -> None:
    for name, phase in cases:
        evals, fractions = brute(name, phase)
        for alpha, delta in delays:
            synth = Synthesizer(build(name, n, phase), 1.0, Params(d, 8.0, alpha, delta),
                                time_limit=30)
            check_bounds(evals, fractions, Params(d, 8.0, alpha, delta), name, n, phase)
            for alpha_r in ALPHA_R:
                p = Params(d, 8.0, alpha, delta, alpha_r)
                want = brute_optimum(evals, fractions, 1.0, p)
                got = synth.result(alpha_r)
                assert got.completion_time_s >= want * (1 - 1e-6) - 1e-12, (name, phase, p)
                if got.optimal or require_optimal:
                    assert got.completion_time_s == pytest.approx(want, rel=1e-6), (name, p)
                if require_optimal:
                    assert got.optimal


def check_bounds(evals: list[list[Frontier]], fractions: list[float], p: Params, name: str,
                 n: int, phase: str) -> None:
    """The capacity lower bound never exceeds the brute-force interval optimum."""
    steps = demands_of(build(name, n, phase), 1.0)
    cost = np.array([[step_cost(fr, f, 1.0, p) for fr, f in zip(row, fractions)]
                     for row in evals])
    checked = 0
    for a in range(len(steps)):
        for b in range(a + 1, len(steps)):
            pats = list(dict.fromkeys(st.pattern for st in steps[a : b + 1]))
            if bounds.applies(pats):
                best = float(np.min(cost[:, a : b + 1].sum(axis=1)))
                assert bounds.interval_bound(steps[a : b + 1], p) <= best * (1 + 1e-9)
                checked += 1
    assert checked > 0


def _d1_brute(n: int) -> Callable[[str, str], tuple[list[list[Frontier]], list[float]]]:
    perms = derangements(n)

    def brute(name: str, phase: str) -> tuple[list[list[Frontier]], list[float]]:
        pairs, fractions = step_pairs(name, n, phase)
        memo: dict[Pairs, list[Frontier]] = {}
        for pr in pairs:
            if pr not in memo:
                memo[pr] = [walk_eval(q, pr) for q in perms]
        return [[memo[pr][i] for pr in pairs] for i in range(len(perms))], fractions

    return brute


CASES = [("rd", "allreduce"), ("swing", "allreduce"), ("swing", "reduce-scatter"),
         ("rd", "all-gather")]


def test_degree1_n4_matches_brute_force() -> None:
    check_against(_d1_brute(4), 4, 1, CASES, DELAYS, require_optimal=True)


@pytest.mark.slow
def test_degree1_n8_matches_brute_force() -> None:
    check_against(_d1_brute(8), 8, 1, [("rd", "allreduce"), ("swing", "allreduce")],
                  DELAYS, require_optimal=True)


@pytest.mark.slow
def test_degree2_n4_matches_brute_force() -> None:
    topos = degree2_topologies(4)
    assert len(topos) > 10

    def brute(name: str, phase: str) -> tuple[list[list[Frontier]], list[float]]:
        pairs, fractions = step_pairs(name, 4, phase)
        memo: dict[Pairs, list[Frontier]] = {}
        for pr in pairs:
            if pr not in memo:
                memo[pr] = [path_lp_eval(4, x, pr) for x in topos]
        return [[memo[pr][i] for pr in pairs] for i in range(len(topos))], fractions

    # the conic program (hop-indexed when delta > 0) is exact and must prove it
    check_against(brute, 4, 2, [("rd", "allreduce"), ("swing", "allreduce")],
                  [(0.0, 0.0), (0.01, 0.04), (0.0, 0.3)], require_optimal=True)


def test_degree1_random_patterns_match_brute_force() -> None:
    """Unstructured matrices take the derangement search; same brute force as above."""
    import random

    from common.collectives import Collective, Step

    rnd = random.Random(17)
    n = 6
    perms = derangements(n)
    for trial in range(3):
        steps = []
        for i in range(4):
            dst = list(rnd.choice(perms))
            steps.append(Step("reduce-scatter", tuple(dst), tuple((u,) for u in range(n)), 2 + i))
        coll = Collective(f"random{trial}", "allreduce", n, tuple(steps))
        pairs = [tuple(s.pairs) for s in coll.steps]
        fractions = [s.fraction for s in coll.steps]
        evals = [[walk_eval(q, pr) for pr in pairs] for q in perms]
        synth = Synthesizer(coll, 1.0, Params(1, 8.0, 0.01, 0.05))
        for alpha_r in ALPHA_R:
            p = Params(1, 8.0, 0.01, 0.05, alpha_r)
            got = synth.result(alpha_r)
            assert got.optimal
            assert got.completion_time_s == pytest.approx(brute_optimum(evals, fractions, 1.0, p))
        assert "exhaustive" in got.method

"""Exact topology subproblem as a mixed-integer second-order cone program, solved by SCIP.

For the steps of one interval, grouped by distinct pattern p (W_p = summed per-pair bytes,
N_p = number of steps):

    min  sum_p (8 W_p / c) r_p + delta * sum_p N_p * hops_p        (+ alpha per step)
    s.t. x_uv integer in [0, d], sum_v x_uv <= d, sum_u x_uv <= d, x_uu = 0
         theta_p * r_p >= 1                   (rotated second-order cone: r_p >= 1 / theta_p)
         one concurrent-flow system per p routing theta_p per demand, sharing capacities x

With delta > 0 the flows are hop-indexed (layer h = h-th hop of a route) and binary y_ph marks
layer h as used, so hops_p = sum_h y_ph bounds every route of pattern p. Minimising
delta * hops_p + transfer_p over the routing is exactly the step time of the model (the hop limit
L that minimises delta L + m / (c theta_L), docs/harvest.md), so the program is exact for any
delta; with delta = 0 the plain edge-flow formulation is used.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .model import CircuitTopology, HarvestError, Params, Pattern, StepDemand


@dataclass(frozen=True)
class ConicResult:
    topology: CircuitTopology | None
    lower_bound: float  # SCIP dual bound on sum over the steps of delta*hops + transfer
    solved: bool  # SCIP proved optimality (gap 0 within its tolerances)
    seconds: float
    status: str


def available() -> bool:
    try:
        import pyscipopt  # noqa: F401
    except ImportError:
        return False
    return True


def solve_interval(
    n: int,
    steps: Sequence[StepDemand],
    params: Params,
    time_limit: float = 60.0,
    hint: CircuitTopology | None = None,
    cutoff: float | None = None,
) -> ConicResult:
    """``cutoff``: a known achievable objective (excl. alpha); SCIP prunes anything worse."""
    try:
        from pyscipopt import Model, quicksum
    except ImportError as exc:  # pragma: no cover - dependency is pinned
        raise HarvestError("pyscipopt (SCIP) is not installed") from exc
    d = params.degree
    groups: dict[Pattern, tuple[float, int]] = {}
    for st in steps:
        w, k = groups.get(st.pattern, (0.0, 0))
        groups[st.pattern] = (w + st.volume_bytes, k + 1)
    layered = params.delta > 0
    t0 = time.perf_counter()
    m = Model("harvest-interval")
    m.hideOutput()
    m.setParam("limits/time", max(1.0, time_limit))
    m.setParam("limits/gap", 0.0)
    arcs = [(u, v) for u in range(n) for v in range(n) if u != v]
    x = {e: m.addVar(f"x_{e[0]}_{e[1]}", vtype="I", lb=0, ub=d) for e in arcs}
    for u in range(n):
        m.addCons(quicksum(x[(u, v)] for v in range(n) if v != u) <= d)
        m.addCons(quicksum(x[(v, u)] for v in range(n) if v != u) <= d)
    objective = []
    for pi, (pat, (weight, count)) in enumerate(groups.items()):
        dests: dict[int, list[int]] = {}
        for s, t in pat.pairs:
            dests.setdefault(s, []).append(t)
        npairs = len(pat.pairs)
        # Any routable topology has theta >= 1/npairs (one path per demand), so r <= npairs.
        th = m.addVar(f"theta_{pi}", lb=1.0 / npairs, ub=float(d))
        r = m.addVar(f"r_{pi}", lb=1.0 / d, ub=float(npairs))
        m.addCons(th * r >= 1)
        objective.append((8.0 * weight / params.bandwidth_bps) * r)
        per_arc: dict[tuple[int, int], list[Any]] = {e: [] for e in arcs}
        if not layered:
            for s, ts in dests.items():
                f = {e: m.addVar(f"f_{pi}_{s}_{e[0]}_{e[1]}", lb=0) for e in arcs if e[1] != s}
                for v in range(n):
                    out = quicksum(f[e] for e in f if e[0] == v)
                    inn = quicksum(f[e] for e in f if e[1] == v)
                    coef = len(ts) if v == s else (-1 if v in ts else 0)
                    m.addCons(out - inn == coef * th)
                for e, var in f.items():
                    per_arc[e].append(var)
        else:
            if any(len(ts) != 1 for ts in dests.values()):
                raise HarvestError("hop-indexed program needs one destination per source")
            hmax = n - 1
            y = [m.addVar(f"y_{pi}_{h}", vtype="B") for h in range(1, hmax + 1)]
            m.addCons(y[0] == 1)
            for h in range(1, hmax):
                m.addCons(y[h] <= y[h - 1])
            layer_flow: list[list[Any]] = [[] for _ in range(hmax)]
            for s, ts in dests.items():
                t = ts[0]
                fl: dict[tuple[int, int, int], Any] = {}
                for h in range(1, hmax + 1):
                    for u, v in arcs:
                        if v == s or u == t or (h == 1 and u != s) or (h > 1 and u == s):
                            continue
                        fl[(u, v, h)] = m.addVar(f"g_{pi}_{s}_{u}_{v}_{h}", lb=0)
                m.addCons(quicksum(var for k, var in fl.items() if k[2] == 1) == th)
                m.addCons(quicksum(var for k, var in fl.items() if k[1] == t) == th)
                into: dict[tuple[int, int], list[Any]] = {}
                outof: dict[tuple[int, int], list[Any]] = {}
                for (u, v, h), var in fl.items():
                    into.setdefault((v, h), []).append(var)
                    outof.setdefault((u, h), []).append(var)
                    per_arc[(u, v)].append(var)
                    layer_flow[h - 1].append(var)
                for v in range(n):
                    if v in (s, t):
                        continue
                    for h in range(1, hmax + 1):
                        inn = into.get((v, h), [])
                        out = outof.get((v, h + 1), [])
                        if inn or out:
                            m.addCons(quicksum(inn) == quicksum(out))
            for h in range(hmax):
                if layer_flow[h]:
                    m.addCons(quicksum(layer_flow[h]) <= npairs * d * y[h])
            objective.append(params.delta * count * quicksum(y))
        for e in arcs:
            if per_arc[e]:
                m.addCons(quicksum(per_arc[e]) <= x[e])
    m.setObjective(quicksum(objective), "minimize")
    if hint is not None:
        _add_hint(m, x, hint)
    if cutoff is not None and cutoff > 0:
        m.setObjlimit(cutoff * (1 + 1e-7))
    m.optimize()
    status = m.getStatus()
    seconds = time.perf_counter() - t0
    topo: CircuitTopology | None = None
    if m.getNSols() > 0:
        sol = m.getBestSol()
        counts = {e: round(m.getSolVal(sol, x[e])) for e in arcs}
        topo = CircuitTopology.from_counts(n, {e: c for e, c in counts.items() if c > 0})
    lb = float(m.getDualbound())
    return ConicResult(topo, lb, status == "optimal", seconds, status)


def _add_hint(m: Any, x: dict[tuple[int, int], Any], hint: CircuitTopology) -> None:
    """Offer a known topology as a partial start; SCIP completes the flows or discards it."""
    counts = hint.counts()
    sol = m.createPartialSol()
    for e, var in x.items():
        m.setSolVal(sol, var, float(counts.get(e, 0)))
    m.addSol(sol)

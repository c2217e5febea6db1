"""Maximum concurrent flow as a linear program (HiGHS through scipy), exact for any topology.

theta(G, M): the largest t such that t units can be routed from every source to each of its
destinations at once, flows splittable, the sum over commodities on edge (u, v) at most the number
of circuits x_uv. Commodities are aggregated by source (exact for splittable flows).

theta_L(G, M): the same with routes of at most L hops (hop-indexed "layered" LP). The step time
uses the L that minimises delta L + m / (c theta_L); hops(G, M) is the smallest L with
theta_L = theta.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from .model import CircuitTopology, Evaluation, HarvestError, Pattern

REL_TOL = 1e-7


def _by_source(pairs: tuple[tuple[int, int], ...]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for u, v in pairs:
        out.setdefault(u, []).append(v)
    return out


def _solve(
    c: np.ndarray,
    rows: list[int],
    cols: list[int],
    vals: list[float],
    n_rows: int,
    b_eq_mask: np.ndarray,
    rhs: np.ndarray,
    n_vars: int,
) -> float:
    a = coo_matrix((vals, (rows, cols)), shape=(n_rows, n_vars)).tocsr()
    eq = np.flatnonzero(b_eq_mask)
    ub = np.flatnonzero(~b_eq_mask)
    res = linprog(
        c,
        A_ub=a[ub] if len(ub) else None,
        b_ub=rhs[ub] if len(ub) else None,
        A_eq=a[eq] if len(eq) else None,
        b_eq=rhs[eq] if len(eq) else None,
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise HarvestError(f"max-concurrent-flow LP failed: {res.message}")
    return float(-res.fun)


def _maximise_theta(
    rows: list[int],
    cols: list[int],
    vals: list[float],
    r: int,
    eq_mask: list[bool],
    rhs: list[float],
    n_vars: int,
    th: int,
    total_capacity: float,
) -> float:
    """Close a concurrent-flow LP: bound theta by the total capacity (keeps the LP bounded
    when a source has no out-edge) and maximise it."""
    rows.append(r)
    cols.append(th)
    vals.append(1.0)
    eq_mask.append(False)
    rhs.append(total_capacity + 1.0)
    c = np.zeros(n_vars)
    c[th] = -1.0
    return _solve(c, rows, cols, vals, r + 1, np.array(eq_mask), np.array(rhs), n_vars)


def max_concurrent_flow(topo: CircuitTopology, pattern: Pattern) -> float:
    """theta(G, M) by the edge-flow LP."""
    edges = [(u, v, c) for u, v, c in topo.edges if c > 0]
    n = topo.n
    srcs = _by_source(pattern.pairs)
    if not srcs:
        raise HarvestError("a step with no demands has no concurrent flow")
    ne = len(edges)
    src_list = sorted(srcs)
    n_vars = len(src_list) * ne + 1
    th = n_vars - 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    r = 0
    eq_mask: list[bool] = []
    rhs: list[float] = []
    for k, s in enumerate(src_list):
        base = k * ne
        node_row = {v: r + v for v in range(n)}
        for j, (u, v, _) in enumerate(edges):
            rows += [node_row[u], node_row[v]]
            cols += [base + j, base + j]
            vals += [1.0, -1.0]
        rows.append(node_row[s])
        cols.append(th)
        vals.append(-float(len(srcs[s])))
        for t in srcs[s]:
            rows.append(node_row[t])
            cols.append(th)
            vals.append(1.0)
        r += n
        eq_mask += [True] * n
        rhs += [0.0] * n
    for j, (_, _, cap) in enumerate(edges):
        for k in range(len(src_list)):
            rows.append(r)
            cols.append(k * ne + j)
            vals.append(1.0)
        r += 1
        eq_mask.append(False)
        rhs.append(float(cap))
    total = float(sum(c for _, _, c in edges))
    return _maximise_theta(rows, cols, vals, r, eq_mask, rhs, n_vars, th, total)


def hop_limited_flow(topo: CircuitTopology, pattern: Pattern, max_hops: int) -> float:
    """theta_L: maximum concurrent flow using only routes of at most ``max_hops`` hops."""
    edges = [(u, v, c) for u, v, c in topo.edges if c > 0]
    n = topo.n
    srcs = _by_source(pattern.pairs)
    src_list = sorted(srcs)
    L = max_hops
    var: dict[tuple[int, int, int], int] = {}  # (source idx, edge idx, layer) -> column
    absorb: dict[tuple[int, int, int], int] = {}  # (source idx, dest, layer) -> column
    for k, s in enumerate(src_list):
        for h in range(1, L + 1):
            for j, (u, v, _) in enumerate(edges):
                if v == s or (h == 1 and u != s) or (h > 1 and u == s):
                    continue
                var[(k, j, h)] = len(var)
        for t in srcs[s]:
            for h in range(1, L + 1):
                absorb[(k, t, h)] = -1
    n_f = len(var)
    for i, key in enumerate(absorb):
        absorb[key] = n_f + i
    th = n_f + len(absorb)
    n_vars = th + 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    eq_mask: list[bool] = []
    rhs: list[float] = []
    r = 0
    for k, s in enumerate(src_list):
        # source: layer-1 outflow = |D(s)| theta
        for j, (u, _v, _) in enumerate(edges):
            if u == s and (k, j, 1) in var:
                rows.append(r)
                cols.append(var[(k, j, 1)])
                vals.append(1.0)
        rows.append(r)
        cols.append(th)
        vals.append(-float(len(srcs[s])))
        eq_mask.append(True)
        rhs.append(0.0)
        r += 1
        # node (v, h): inflow at layer h = absorbed + outflow at layer h+1
        row_of = {(v, h): r + (h - 1) * n + v for h in range(1, L + 1) for v in range(n)}
        for (kk, j, h), col in var.items():
            if kk != k:
                continue
            u, v, _ = edges[j]
            rows.append(row_of[(v, h)])
            cols.append(col)
            vals.append(1.0)
            if h > 1:
                rows.append(row_of[(u, h - 1)])
                cols.append(col)
                vals.append(-1.0)
        for t in srcs[s]:
            for h in range(1, L + 1):
                rows.append(row_of[(t, h)])
                cols.append(absorb[(k, t, h)])
                vals.append(-1.0)
        r += L * n
        eq_mask += [True] * (L * n)
        rhs += [0.0] * (L * n)
        for t in srcs[s]:
            for h in range(1, L + 1):
                rows.append(r)
                cols.append(absorb[(k, t, h)])
                vals.append(1.0)
            rows.append(r)
            cols.append(th)
            vals.append(-1.0)
            eq_mask.append(True)
            rhs.append(0.0)
            r += 1
    cap_row = {j: r + j for j in range(len(edges))}
    for (_k, j, _h), col in var.items():
        rows.append(cap_row[j])
        cols.append(col)
        vals.append(1.0)
    r += len(edges)
    eq_mask += [False] * len(edges)
    rhs += [float(c) for _, _, c in edges]
    total = float(sum(c for _, _, c in edges))
    return _maximise_theta(rows, cols, vals, r, eq_mask, rhs, n_vars, th, total)


def shortest_hops(topo: CircuitTopology, pattern: Pattern) -> int | None:
    """Largest BFS distance over the demand pairs (None if some pair is unreachable)."""
    adj: dict[int, list[int]] = {}
    for u, v, c in topo.edges:
        if c > 0:
            adj.setdefault(u, []).append(v)
    worst = 0
    for s, dests in _by_source(pattern.pairs).items():
        dist = {s: 0}
        q = deque([s])
        while q:
            u = q.popleft()
            for v in adj.get(u, ()):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    q.append(v)
        for t in dests:
            if t not in dist:
                return None
            worst = max(worst, dist[t])
    return worst


def evaluate_lp(topo: CircuitTopology, pattern: Pattern) -> Evaluation:
    """Exact theta_L for every useful hop limit L: one flow LP plus one layered LP per L."""
    lo = shortest_hops(topo, pattern)
    if lo is None:
        return Evaluation(0.0, 0)
    theta = max_concurrent_flow(topo, pattern)
    frontier: list[tuple[int, float]] = []
    for limit in range(lo, topo.n):  # simple routes have at most n-1 hops
        value = theta if limit == topo.n - 1 else hop_limited_flow(topo, pattern, limit)
        if value >= theta * (1 - REL_TOL):
            frontier.append((limit, theta))
            break
        if value > 0 and (not frontier or value > frontier[-1][1] * (1 + REL_TOL)):
            frontier.append((limit, value))
    return Evaluation(theta, frontier[-1][0], tuple(frontier))

"""Exact evaluation on topologies where every rank has at most one out-neighbour.

Every route is then the unique walk along successors, so theta = min over used links of
circuits / load and hops = the longest route: no LP needed, O(n) per step.
"""

from __future__ import annotations

import math

import numpy as np

from .model import CircuitTopology, Evaluation, Pattern


def successors(topo: CircuitTopology) -> tuple[list[int], list[int]] | None:
    """(succ, circuits) when every rank has at most one distinct out-neighbour, else None."""
    succ = [-1] * topo.n
    mult = [0] * topo.n
    for u, v, c in topo.edges:
        if c <= 0:
            continue
        if succ[u] != -1:
            return None
        succ[u] = v
        mult[u] = c
    return succ, mult


def evaluate_unipath(topo: CircuitTopology, pattern: Pattern) -> Evaluation:
    found = successors(topo)
    if found is None:
        raise ValueError("topology has a rank with more than one out-neighbour")
    succ, mult = found
    n = topo.n
    indeg = [0] * n
    for v in succ:
        if v >= 0:
            indeg[v] += 1
    if max(indeg) > 1:
        return _walk(succ, mult, pattern)
    # Disjoint cycles and paths: give every rank a component and a position in it.
    comp = [-1] * n
    pos = [0] * n
    start: list[int] = []  # global index of each component's first rank
    length: list[int] = []
    cyclic: list[bool] = []
    order: list[int] = []
    heads = [u for u in range(n) if indeg[u] == 0] + list(range(n))
    for h in heads:
        if comp[h] != -1:
            continue
        cid = len(length)
        start.append(len(order))
        u, p = h, 0
        while u != -1 and comp[u] == -1:
            comp[u] = cid
            pos[u] = p
            order.append(u)
            p += 1
            u = succ[u]
        length.append(p)
        cyclic.append(u == h)
    diff = np.zeros(n + 1, dtype=np.int64)
    worst = 0
    for s, t in pattern.pairs:
        if comp[s] != comp[t]:
            return Evaluation(0.0, 0)
        cid = comp[s]
        d = pos[t] - pos[s]
        if cyclic[cid]:
            d %= length[cid]
        elif d <= 0:
            return Evaluation(0.0, 0)
        worst = max(worst, d)
        a = start[cid] + pos[s]
        end = pos[s] + d
        if end <= length[cid]:
            diff[a] += 1
            diff[a + d] -= 1
        else:
            diff[a] += 1
            diff[start[cid] + length[cid]] -= 1
            diff[start[cid]] += 1
            diff[start[cid] + end - length[cid]] -= 1
    load = np.cumsum(diff[:n])
    caps = np.array([mult[u] for u in order], dtype=float)
    used = load > 0
    theta = float(np.min(caps[used] / load[used])) if used.any() else math.inf
    return Evaluation(theta, worst)


def _walk(succ: list[int], mult: list[int], pattern: Pattern) -> Evaluation:
    """General functional graph (in-degree may exceed one): walk each route."""
    n = len(succ)
    load = [0] * n
    worst = 0
    for s, t in pattern.pairs:
        u, d = s, 0
        while u != t:
            if succ[u] == -1 or d >= n:
                return Evaluation(0.0, 0)
            load[u] += 1
            u = succ[u]
            d += 1
        worst = max(worst, d)
    theta = min((mult[u] / load[u] for u in range(n) if load[u] > 0), default=math.inf)
    return Evaluation(theta, worst)

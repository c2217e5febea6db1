"""Degree-1 topologies for exchange collectives (Swing): one cycle per orbit, proven optimal.

In a Swing step every rank exchanges with one peer (both directions). On a degree-1 topology (a
permutation, docs/harvest.md) the two routes of a pair go round its cycle C once between them,
so every link of C carries exactly |C|/2 routes of the step: theta = 2/|C| whatever the order
on the cycle, and the longer route of a pair has >= |C|/2 hops. Cycles must be unions of orbits
of the interval's matchings (else some pair is unroutable), so cycles = orbits gives the least
load for every step at once; a larger cycle (>= 2K ranks, all orbits having K ranks) has both
more load and longer routes (>= K hops, the orbit cycle needs at most K-1). Only the order inside
an orbit is left, and it only changes hop lengths: for K <= 8 all orders are tried (proven), for
larger orbits a few orders are tried and the bound K/2 hops per step is reported.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .model import CircuitTopology, Evaluation, Params, Pattern, StepDemand, step_time

EXHAUSTIVE_ORBIT = 8


def applies(patterns: Sequence[Pattern], d: int) -> bool:
    return d == 1 and all(p.shape[0] == "swing" for p in patterns)


@functools.lru_cache(maxsize=4096)
def _orbits(n: int, patterns: tuple[Pattern, ...]) -> tuple[tuple[int, ...], ...]:
    rows = [u for p in patterns for u, _ in p.pairs]
    cols = [v for p in patterns for _, v in p.pairs]
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, label = connected_components(graph, directed=False)
    groups: dict[int, list[int]] = {}
    for u in range(n):
        groups.setdefault(int(label[u]), []).append(u)
    return tuple(sorted(tuple(g) for g in groups.values()))


def _peer_array(pat: Pattern) -> np.ndarray:
    peer = np.arange(pat.n)
    for u, v in pat.pairs:
        peer[u] = v
    return peer


def _longest_routes(order: Sequence[int], n: int, peers: Sequence[np.ndarray]) -> list[int]:
    """Longest route of each pattern on the cycle ``order`` (one orbit)."""
    k = len(order)
    idx = np.asarray(order, dtype=np.int64)
    pos = np.zeros(n, dtype=np.int64)
    pos[idx] = np.arange(k)
    return [int(((pos[peer[idx]] - pos[idx]) % k).max()) for peer in peers]


def solve(n: int, steps: Sequence[StepDemand], p: Params
          ) -> tuple[CircuitTopology, tuple[Evaluation, ...], float, float, bool] | None:
    """(topology, evaluations, cost, lower bound, proven), or None when orbits differ in size."""
    patterns = tuple(dict.fromkeys(st.pattern for st in steps))
    orbits = _orbits(n, patterns)
    k = len(orbits[0])
    if any(len(o) != k for o in orbits):
        return None
    weights = [sum(1 for st in steps if st.pattern == pat) for pat in patterns]
    peers = [dict(pat.pairs) for pat in patterns]
    arrays = [_peer_array(pat) for pat in patterns]
    first = list(orbits[0])
    if k <= EXHAUSTIVE_ORBIT:
        best = _best_order_exhaustive(first, weights, peers)
    else:
        orders = [first, _walk_order(n, patterns)]
        best = min(orders, key=lambda o: sum(
            w * h for w, h in zip(weights, _longest_routes(o, n, arrays))))
    # Carry the order to every orbit by the even rotation that maps the first orbit's smallest
    # even rank onto the orbit's; even rotations preserve every Swing matching.
    anchor = min(u for u in first if u % 2 == 0)
    succ: dict[tuple[int, int], int] = {}
    for orbit in orbits:
        t = min(u for u in orbit if u % 2 == 0) - anchor
        mapped = [(u + t) % n for u in best]
        if tuple(sorted(mapped)) != orbit:
            return None
        for i, u in enumerate(mapped):
            succ[(u, mapped[(i + 1) % k])] = 1
    topo = CircuitTopology.from_counts(n, succ)
    # Every orbit is the same cycle up to rotation: theta = 2/k, hops from the first orbit.
    hops = dict(zip(patterns, _longest_routes(best, n, arrays)))
    evals = tuple(Evaluation(2.0 / k, hops[st.pattern]) for st in steps)
    cost = sum(step_time(ev, st.volume_bytes, p) for ev, st in zip(evals, steps))
    bound = sum(step_time(Evaluation(2.0 / k, math.ceil(k / 2)), st.volume_bytes, p)
                for st in steps)
    proven = k <= EXHAUSTIVE_ORBIT or p.delta == 0 or cost <= bound * (1 + 1e-9)
    return topo, evals, cost, (cost if proven else bound), proven


@functools.lru_cache(maxsize=4096)
def _walk_order(n: int, patterns: tuple[Pattern, ...]) -> list[int]:
    """Depth-first order through the matchings of the first orbit (keeps partners apart)."""
    peers = [dict(p.pairs) for p in patterns]
    seen: list[int] = []
    mark = set()
    stack = [_orbits(n, patterns)[0][0]]
    while stack:
        u = stack.pop()
        if u in mark:
            continue
        mark.add(u)
        seen.append(u)
        for peer in reversed(peers):
            if peer[u] not in mark:
                stack.append(peer[u])
    return seen


def _best_order_exhaustive(orbit: Sequence[int], weights: Sequence[int],
                           peers: Sequence[dict[int, int]]) -> list[int]:
    """All cyclic orders of a small orbit (first element fixed), scored with numpy."""
    k = len(orbit)
    index = {u: i for i, u in enumerate(orbit)}
    perms = np.array([(0, *rest) for rest in itertools.permutations(range(1, k))], dtype=np.int64)
    pos = np.empty_like(perms)
    pos[np.arange(len(perms))[:, None], perms] = np.arange(k)[None, :]
    score = np.zeros(len(perms), dtype=np.int64)
    for w, peer in zip(weights, peers):
        partner = np.array([index[peer[u]] for u in orbit], dtype=np.int64)
        score += w * ((pos[:, partner] - pos) % k).max(axis=1)
    best = perms[int(np.argmin(score))]
    return [orbit[i] for i in best]

"""Realise the model's routing on real circuits: ports, explicit paths and EV buckets.

The cost model gives each step a throughput theta_L over routes of at most L hops. To run the
step on packets, every commodity (source, destination) needs explicit paths and the share of
its traffic each path carries:

1. :func:`assign_ports` turns a topology (x_uv circuits) into circuits between GPU ports:
   GPU u's transmit port i into GPU v's receive port j (each port transmits into one circuit and
   receives from one, so a degree-d topology fits d ports).
2. :func:`step_routes` solves the maximum concurrent flow over simple paths of at most L hops
   as a path LP (HiGHS), then, at that throughput, the routing with the fewest hop-circuits, and
   averages it over the rotations u -> u + r that map the topology and the demand onto
   themselves (an average of optimal solutions is optimal, and symmetric routes load every
   link of a circulant alike, so fair sharing on the wire gives every commodity its theta).
3. Each commodity's traffic is split over ``buckets`` equal EV buckets (EV mod buckets, the
   same at every hop), path shares rounded by largest remainder. Pairs outside the step's
   demand (acknowledgements flow back, probes) take one shortest path.

The theta of the path LP is checked against the model's theta_L: a mismatch raises, so the
paths a run uses are the routing the model scored.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from .model import CircuitTopology, HarvestError, Pattern

THETA_RTOL = 1e-6


@dataclass(frozen=True, slots=True)
class PortCircuit:
    """GPU ``src`` transmits on its port ``src_port`` into GPU ``dst``'s port ``dst_port``."""

    src: int
    src_port: int
    dst: int
    dst_port: int


Path = tuple[int, ...]  # indices into the interval's circuit list, in hop order


@dataclass(frozen=True)
class PairRoute:
    """Paths of one commodity and the path of each EV bucket."""

    paths: tuple[Path, ...]
    buckets: tuple[int, ...]  # buckets[b] = index into paths


@dataclass(frozen=True)
class StepRoutes:
    theta: float  # throughput of the demand pairs with these routes (units of a circuit)
    hops: int  # longest path used by a demand pair
    pairs: dict[tuple[int, int], PairRoute]


def assign_ports(topo: CircuitTopology, degree: int,
                 keep: Sequence[PortCircuit] = ()) -> tuple[PortCircuit, ...]:
    """One circuit per unit of x_uv. Circuits of ``keep`` (the previous interval's) whose
    edge the topology still has stay on their ports, so a reconfiguration darkens only the
    ports whose circuit really changes; the other ports are handed out in sorted edge order."""
    want = {(u, v): count for u, v, count in topo.edges}
    used_out: list[set[int]] = [set() for _ in range(topo.n)]
    used_in: list[set[int]] = [set() for _ in range(topo.n)]
    out: list[PortCircuit] = []
    for c in keep:
        if want.get((c.src, c.dst), 0) > 0 and c.src_port < degree and c.dst_port < degree \
                and c.src_port not in used_out[c.src] and c.dst_port not in used_in[c.dst]:
            want[(c.src, c.dst)] -= 1
            used_out[c.src].add(c.src_port)
            used_in[c.dst].add(c.dst_port)
            out.append(c)
    for u, v, _count in topo.edges:
        for _ in range(want[(u, v)]):
            free_out = [p for p in range(degree) if p not in used_out[u]]
            free_in = [p for p in range(degree) if p not in used_in[v]]
            if not free_out or not free_in:
                raise HarvestError(f"the topology needs more than {degree} ports at GPU "
                                   f"{u if not free_out else v}")
            out.append(PortCircuit(u, free_out[0], v, free_in[0]))
            used_out[u].add(free_out[0])
            used_in[v].add(free_in[0])
    return tuple(sorted(out, key=lambda c: (c.src, c.dst, c.src_port, c.dst_port)))


def _adjacency(n: int, circuits: Sequence[PortCircuit]) -> list[list[tuple[int, int]]]:
    adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k, c in enumerate(circuits):
        adj[c.src].append((c.dst, k))
    return adj


def simple_paths(
    n: int, circuits: Sequence[PortCircuit], src: int, dst: int, max_hops: int
) -> list[Path]:
    """Every simple path (no node twice) from src to dst of at most ``max_hops`` circuits."""
    adj = _adjacency(n, circuits)
    found: list[Path] = []
    stack: list[int] = []
    seen = {src}

    def walk(node: int) -> None:
        for nxt, k in adj[node]:
            if nxt == dst:
                found.append((*stack, k))
            elif nxt not in seen and len(stack) + 1 < max_hops:
                seen.add(nxt)
                stack.append(k)
                walk(nxt)
                stack.pop()
                seen.discard(nxt)

    if src != dst and max_hops >= 1:
        walk(src)
    return found


def shortest_path(n: int, circuits: Sequence[PortCircuit], src: int, dst: int) -> Path | None:
    """Fewest circuits from src to dst (BFS; ties: lowest circuit index first)."""
    adj = _adjacency(n, circuits)
    prev: dict[int, tuple[int, int]] = {src: (-1, -1)}
    todo = deque([src])
    while todo:
        node = todo.popleft()
        if node == dst:
            break
        for nxt, k in adj[node]:
            if nxt not in prev:
                prev[nxt] = (node, k)
                todo.append(nxt)
    if dst not in prev or src == dst:
        return None
    path: list[int] = []
    node = dst
    while node != src:
        node, k = prev[node]
        path.append(k)
    return tuple(reversed(path))


def _lp(
    paths: list[list[Path]], n_circuits: int, objective: str, theta_min: float = 0.0
) -> np.ndarray:
    """Path-flow LP. objective 'theta': variables f_p and theta, maximise theta.
    'hops': minimise sum len(p) f_p with every commodity at least theta_min."""
    index = [(k, p) for k, ps in enumerate(paths) for p in ps]
    n_f = len(index)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs: list[float] = []
    r = 0
    theta_col = n_f
    # capacity: sum of paths through a circuit <= 1
    for c in range(n_circuits):
        touched = [j for j, (_, p) in enumerate(index) if c in p]
        if not touched:
            continue
        for j in touched:
            rows.append(r)
            cols.append(j)
            vals.append(1.0)
        rhs.append(1.0)
        r += 1
    # demand: theta - sum_p f_p <= 0   or   -sum_p f_p <= -theta_min
    start = 0
    for ps in paths:
        for j in range(start, start + len(ps)):
            rows.append(r)
            cols.append(j)
            vals.append(-1.0)
        if objective == "theta":
            rows.append(r)
            cols.append(theta_col)
            vals.append(1.0)
            rhs.append(0.0)
        else:
            rhs.append(-theta_min)
        r += 1
        start += len(ps)
    n_vars = n_f + (1 if objective == "theta" else 0)
    if objective == "theta":
        cost = np.zeros(n_vars)
        cost[theta_col] = -1.0
    else:
        cost = np.array([float(len(p)) for _, p in index])
    a = coo_matrix((vals, (rows, cols)), shape=(r, n_vars)).tocsr()
    res = linprog(cost, A_ub=a, b_ub=np.array(rhs), bounds=(0, None), method="highs")
    if res.status != 0:
        raise HarvestError(f"path-flow LP failed: {res.message}")
    return np.asarray(res.x, dtype=float)


def _symmetries(n: int, circuits: Sequence[PortCircuit], pattern: Pattern) -> list[int]:
    """Rotations r (u -> u + r) mapping the circuits and the demand onto themselves."""
    edges = sorted((c.src, c.dst) for c in circuits)
    pairs = set(pattern.pairs)
    out = []
    for r in range(n):
        rot_edges = sorted(((u + r) % n, (v + r) % n) for u, v in edges)
        if rot_edges != edges:
            continue
        if {((u + r) % n, (v + r) % n) for u, v in pairs} != pairs:
            continue
        out.append(r)
    return out


def _rotate_path(path: Path, r: int, n: int, circuits: Sequence[PortCircuit],
                 by_ends: dict[tuple[int, int], list[int]]) -> Path:
    """The rotated image of a path: circuit k (u->v, the i-th parallel one) -> the i-th
    parallel circuit (u+r)->(v+r)."""
    out = []
    for k in path:
        c = circuits[k]
        same = by_ends[(c.src, c.dst)]
        image = by_ends[((c.src + r) % n, (c.dst + r) % n)]
        out.append(image[same.index(k)])
    return tuple(out)


def _bucketize(weights: Sequence[float], buckets: int) -> tuple[int, ...]:
    """Largest-remainder split of ``buckets`` over paths; bucket b -> path index."""
    total = sum(weights)
    quota = [w / total * buckets for w in weights]
    counts = [math.floor(q) for q in quota]
    order = sorted(range(len(weights)), key=lambda i: (-(quota[i] - counts[i]), i))
    for i in order[: buckets - sum(counts)]:
        counts[i] += 1
    out: list[int] = []
    for i, c in enumerate(counts):
        out.extend([i] * c)
    # interleave so that consecutive EVs alternate between paths (spraying order)
    return tuple(out[(b * _coprime_stride(buckets)) % buckets] for b in range(buckets))


def _coprime_stride(m: int) -> int:
    stride = max(1, int(m * 0.618))
    while math.gcd(stride, m) != 1:
        stride += 1
    return stride


def step_routes(
    topo: CircuitTopology, circuits: Sequence[PortCircuit], pattern: Pattern, max_hops: int,
    buckets: int, expect_theta: float | None = None,
) -> StepRoutes:
    """Routes of every ordered GPU pair for one step (see the module docstring)."""
    n = topo.n
    demand = list(pattern.pairs)
    paths = [simple_paths(n, circuits, s, t, max_hops) for s, t in demand]
    for (s, t), ps in zip(demand, paths):
        if not ps:
            raise HarvestError(f"no route of at most {max_hops} hops from GPU {s} to GPU {t}")
    x = _lp(paths, len(circuits), "theta")
    theta = float(x[-1])
    if expect_theta is not None and abs(theta - expect_theta) > THETA_RTOL * max(1.0, theta):
        raise HarvestError(f"path LP throughput {theta:.6g} differs from the model's "
                           f"{expect_theta:.6g} ({max_hops} hops)")
    flows = _lp(paths, len(circuits), "hops", theta * (1 - 1e-9))
    by_ends: dict[tuple[int, int], list[int]] = {}
    for k, c in enumerate(circuits):
        by_ends.setdefault((c.src, c.dst), []).append(k)
    rotations = _symmetries(n, circuits, pattern)
    avg: dict[tuple[int, int], dict[Path, float]] = {pair: {} for pair in demand}
    j = 0
    for (s, t), ps in zip(demand, paths):
        for p in ps:
            f = float(flows[j])
            j += 1
            if f <= 1e-12:
                continue
            for r in rotations:
                image = _rotate_path(p, r, n, circuits, by_ends)
                key = ((s + r) % n, (t + r) % n)
                avg[key][image] = avg[key].get(image, 0.0) + f / len(rotations)
    pairs: dict[tuple[int, int], PairRoute] = {}
    longest = 0
    for pair, weights in avg.items():
        # canonical order: shortest first, then circuit indices (same for rotated pairs)
        used = sorted((p for p, w in weights.items() if w > 1e-9), key=lambda p: (len(p), p))
        share = _bucketize([weights[p] for p in used], buckets)
        keep = sorted(set(share))
        remap = {old: new for new, old in enumerate(keep)}
        pairs[pair] = PairRoute(tuple(used[i] for i in keep), tuple(remap[i] for i in share))
        longest = max(longest, *(len(used[i]) for i in keep))
    for s in range(n):
        for t in range(n):
            if s == t or (s, t) in pairs:
                continue
            short = shortest_path(n, circuits, s, t)
            if short is not None:
                pairs[(s, t)] = PairRoute((short,), (0,) * buckets)
    return StepRoutes(theta, longest, pairs)


def bucket_theta(routes: StepRoutes, pattern: Pattern, n_circuits: int, buckets: int) -> float:
    """Throughput of the demand when each commodity's traffic is split evenly over its EV
    buckets (the share rounding of :func:`step_routes` included): 1 / max circuit load."""
    load = np.zeros(n_circuits)
    for pair in pattern.pairs:
        route = routes.pairs[pair]
        for b in route.buckets:
            for k in route.paths[b]:
                load[k] += 1.0 / buckets
    peak = float(load.max()) if len(load) else 0.0
    return 1.0 / peak if peak > 0 else math.inf


__all__ = ["PairRoute", "Path", "PortCircuit", "StepRoutes", "assign_ports", "bucket_theta",
           "shortest_path", "simple_paths", "step_routes"]

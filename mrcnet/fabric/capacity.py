"""The configured capacity of a workload: what a perfect emulation of the fabric could carry.

A workload is a set of equal-size flows that start together, so it finishes first when every
flow gets the same rate. ``workload_capacity`` solves the maximum concurrent flow problem
over the topology's links (each link two directed arcs of its rate; hosts are endpoints, never
transit nodes, as in a packet fabric): the largest rate lambda that every flow can get at
once, and returns ``len(flows) x lambda`` in bit/s, counting link bits (frame bytes). A
goodput measured in payload bytes is therefore a little below it even on a perfect run (MRC
headers: 4096 payload bytes travel in a 4194-byte frame).
"""

from __future__ import annotations

from collections.abc import Sequence

from topologies.model import NodeKind, Topology

UNLIMITED_BPS = 1e12  # a link without a rate (0) in the file


class CapacityError(ValueError):
    """The flows cannot be routed (unknown host, no path) or the solver failed."""


def workload_capacity(topo: Topology, flows: Sequence[tuple[str, str]]) -> float:
    """Aggregate rate (bit/s) of ``flows`` at their maximum concurrent flow."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    if not flows:
        return 0.0
    hosts = {n.name for n in topo.nodes_of(NodeKind.HOST)}
    for src, dst in flows:
        if src not in hosts or dst not in hosts or src == dst:
            raise CapacityError(f"flow {src} -> {dst}: both ends must be different hosts")
    arcs: list[tuple[str, str, float]] = []
    for link in topo.links:
        rate = link.params.rate_bps or UNLIMITED_BPS
        arcs.append((link.a.node, link.b.node, rate))
        arcs.append((link.b.node, link.a.node, rate))
    nodes = sorted({a for a, _, _ in arcs} | {b for _, b, _ in arcs})
    index = {n: i for i, n in enumerate(nodes)}
    # Variables: lambda, then f[k, a] for every arc a usable by flow k (a host is only the
    # source of arcs leaving it and only the destination of arcs entering it).
    var: dict[tuple[int, int], int] = {}
    for k, (src, dst) in enumerate(flows):
        for a, (u, v, _rate) in enumerate(arcs):
            if (u in hosts and u != src) or (v in hosts and v != dst):
                continue
            var[(k, a)] = len(var) + 1
    nvar = len(var) + 1
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs_eq: list[float] = []
    row = 0
    for k, (src, dst) in enumerate(flows):
        # conservation: out - in - lambda * [v == src] + lambda * [v == dst] = 0
        base = row
        for (kk, a), j in var.items():
            if kk != k:
                continue
            u, v, _rate = arcs[a]
            rows += [base + index[u], base + index[v]]
            cols += [j, j]
            vals += [1.0, -1.0]
        rows += [base + index[src], base + index[dst]]
        cols += [0, 0]
        vals += [-1.0, 1.0]
        row += len(nodes)
        rhs_eq += [0.0] * len(nodes)
    a_eq = coo_matrix((vals, (rows, cols)), shape=(row, nvar)).tocsr()
    urows: list[int] = []
    ucols: list[int] = []
    for (_k, a), j in var.items():
        urows.append(a)
        ucols.append(j)
    scale = max(rate for _, _, rate in arcs)  # solve in units of the fastest link
    a_ub = coo_matrix(([1.0] * len(urows), (urows, ucols)), shape=(len(arcs), nvar)).tocsr()
    b_ub = np.array([rate / scale for _, _, rate in arcs])
    cost = np.zeros(nvar)
    cost[0] = -1.0
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=np.array(rhs_eq),
                  bounds=[(0, None)] * nvar, method="highs")
    if res.status != 0:
        raise CapacityError(f"capacity LP failed: {res.message}")
    lam = float(res.x[0]) * scale
    if lam <= 0:
        raise CapacityError("no path carries these flows")
    return len(flows) * lam

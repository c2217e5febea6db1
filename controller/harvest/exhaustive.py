"""Exact degree-1 subproblem for small n by enumerating every derangement (all of them).

With one port per GPU a useful topology is a permutation without fixed points (a rank without an
out-link cannot send; extra links never hurt, docs/harvest.md), routes are unique, so theta =
1/(max link load) and hops = longest route. All derangements are evaluated at once with numpy;
intervals then take the minimum, which is optimal by exhaustion.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from .model import CircuitTopology, Evaluation, Params, Pattern, StepDemand

MAX_N = 8  # 14833 derangements; n = 9 would be 133496


class DerangementTable:
    def __init__(self, n: int) -> None:
        if n > MAX_N:
            raise ValueError(f"exhaustive search is limited to n <= {MAX_N}")
        self.n = n
        perms = [p for p in itertools.permutations(range(n)) if all(p[u] != u for u in range(n))]
        self.perms = np.array(perms, dtype=np.int64)
        k = len(perms)
        # dist[s, u, v]: hops from u to v along sigma_s (0 on the diagonal, n+1 if unreachable)
        big = n + 1
        dist = np.full((k, n, n), big, dtype=np.int64)
        idx = np.arange(k)
        for u in range(n):
            cur = np.full(k, u)
            dist[idx, u, u] = 0
            for step in range(1, n + 1):
                cur = self.perms[idx, cur]
                seen = dist[idx, u, cur]
                dist[idx, u, cur] = np.where(seen == big, step, seen)
                # the return to u itself keeps distance 0 (diagonal)
                dist[idx, u, u] = 0
        self.dist = dist
        self._evals: dict[Pattern, tuple[np.ndarray, np.ndarray]] = {}

    def evaluate(self, pat: Pattern) -> tuple[np.ndarray, np.ndarray]:
        """theta and hops of ``pat`` on every derangement (theta 0 when not routable)."""
        hit = self._evals.get(pat)
        if hit is not None:
            return hit
        n = self.n
        k = len(self.perms)
        load = np.zeros((k, n), dtype=np.int64)
        hops = np.zeros(k, dtype=np.int64)
        routable = np.ones(k, dtype=bool)
        for s, t in pat.pairs:
            length = self.dist[:, s, t]
            routable &= length <= n
            hops = np.maximum(hops, np.where(length <= n, length, 0))
            load += self.dist[:, s, :] < length[:, None]
        theta = np.where(routable, 1.0 / np.maximum(load.max(axis=1), 1), 0.0)
        self._evals[pat] = (theta, hops)
        return theta, hops

    def best(self, steps: Sequence[StepDemand], p: Params
             ) -> tuple[CircuitTopology, tuple[Evaluation, ...], float]:
        total = np.zeros(len(self.perms))
        for st in steps:
            theta, hops = self.evaluate(st.pattern)
            with np.errstate(divide="ignore"):
                transfer = np.where(theta > 0, 8.0 * st.volume_bytes / (p.bandwidth_bps * theta),
                                    np.inf) if st.volume_bytes > 0 else np.where(
                                        theta > 0, 0.0, np.inf)
            total += p.alpha + p.delta * hops + transfer
        i = int(np.argmin(total))
        sigma = self.perms[i]
        topo = CircuitTopology.from_counts(self.n, {(u, int(sigma[u])): 1 for u in range(self.n)})
        evals = tuple(
            Evaluation(float(self.evaluate(st.pattern)[0][i]), int(self.evaluate(st.pattern)[1][i]))
            for st in steps)
        return topo, evals, float(total[i])

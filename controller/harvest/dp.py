"""Dynamic program over step intervals (the Harvest recursion), for costs and lower bounds.

best[t][a] = minimal time of steps a..s-1 using exactly t reconfigurations, reconfiguration
delays excluded: best[0][a] = cost(a, s-1), best[t][a] = min_b cost(a, b) + best[t-1][b+1].
The schedule is min_k best[k][0] + k * alpha_r. Steps are 0-based here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    total: float  # including k * alpha_r
    cuts: int
    intervals: tuple[tuple[int, int], ...]  # inclusive, 0-based


def exact_k_table(
    s: int, cost: Callable[[int, int], float]
) -> tuple[list[list[float]], list[list[int]]]:
    """best[t][a] and the end of the first interval nxt[t][a] for t = 0..s-1."""
    best = [[math.inf] * (s + 1) for _ in range(s)]
    nxt = [[-1] * (s + 1) for _ in range(s)]
    for a in range(s):
        best[0][a] = cost(a, s - 1)
        nxt[0][a] = s - 1
    for t in range(1, s):
        for a in range(s - t - 1, -1, -1):
            for b in range(a, s - t):
                v = cost(a, b) + best[t - 1][b + 1]
                if v < best[t][a]:
                    best[t][a] = v
                    nxt[t][a] = b
    return best, nxt


def plan(s: int, cost: Callable[[int, int], float], alpha_r: float) -> Plan:
    """Optimal cut set for the given interval costs (ties: fewer reconfigurations)."""
    best, nxt = exact_k_table(s, cost)
    k_best, total = 0, math.inf
    for k in range(s):
        v = best[k][0] + k * alpha_r
        if v < total:
            k_best, total = k, v
    if not math.isfinite(total):
        return Plan(math.inf, 0, ())
    intervals = []
    a, t = 0, k_best
    while a < s:
        b = nxt[t][a]
        intervals.append((a, b))
        a, t = b + 1, t - 1
    return Plan(total, k_best, tuple(intervals))

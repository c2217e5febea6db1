"""Lower bound on an interval's cost when its steps have several distinct matrices.

Setting: every rank sends to exactly one peer in each step, and distinct patterns p never share
a (source, destination) pair. Let a_p be the average number of circuits from a rank straight to
its pattern-p peer; these circuits are disjoint across patterns, so sum_p a_p <= d.

- Routing with 1-hop routes only: theta <= min_s x(s, peer_p(s)) <= a_p.
- Routing with longer routes: each source sends theta, at most x(s, peer) of it in one hop and
  the rest over >= 2 hops, so it consumes >= theta + (theta - x(s, peer))^+ of the n d circuits:
  n theta + n (theta - a_p)^+ <= n d (convexity), i.e. theta <= (d + a_p)/2, and L >= 2.

So pattern p (W_p bytes over N_p steps) costs at least g_p(a_p) = N_p alpha + min(N_p delta +
8 W_p / (c a_p), 2 N_p delta + 16 W_p / (c (d + a_p))), and the interval at least
min { sum_p g_p(a_p) : a >= 0, sum_p a_p <= d }. Any Lagrange multiplier lam >= 0 gives a valid
bound sum_p min_{0<=a<=d} (g_p(a) + lam a) - lam d; each inner minimum is over two convex pieces
with closed-form minimisers, and lam is scanned on a grid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .model import Params, Pattern, StepDemand


def applies(patterns: Sequence[Pattern]) -> bool:
    if len(patterns) < 2:
        return False
    seen: set[tuple[int, int]] = set()
    for p in patterns:
        if len(p.pairs) != p.n or not p.out_degree_ok():
            return False
        if seen.intersection(p.pairs):
            return False
        seen.update(p.pairs)
    return True


def _piece_min(w: float, lam: np.ndarray, d: float, shift: float, scale: float) -> np.ndarray:
    """min over a in [0, d] of scale*w/(shift + a) + lam*a, for every lam of the grid."""
    if w <= 0:
        return np.zeros_like(lam)  # infimum as a -> 0
    with np.errstate(divide="ignore", invalid="ignore"):
        best = scale * w / (shift + d) + lam * d
        a = np.sqrt(scale * w / lam) - shift
        inside = (lam > 0) & (a > 0) & (a < d)
        at_a = np.where(inside, scale * w / (shift + np.where(inside, a, 1.0))
                        + lam * np.where(inside, a, 0.0), np.inf)
        best = np.minimum(best, at_a)
        if shift > 0:
            best = np.minimum(best, np.full_like(lam, scale * w / shift))
    return best


def interval_bound(steps: Sequence[StepDemand], p: Params) -> float:
    groups: dict[Pattern, tuple[float, int]] = {}
    for st in steps:
        w, k = groups.get(st.pattern, (0.0, 0))
        groups[st.pattern] = (w + st.volume_bytes, k + 1)
    d = float(p.degree)
    unit = 8.0 / p.bandwidth_bps
    terms = [(w * unit, k) for w, k in groups.values()]
    scale = max((w for w, _ in terms), default=0.0) / (d * d) + p.delta
    lam = np.concatenate([[0.0], scale * 10 ** (np.arange(-40, 41) / 8)])
    total = -lam * d
    for w, k in terms:
        one_hop = k * p.delta + _piece_min(w, lam, d, 0.0, 1.0)
        multi_hop = 2 * k * p.delta + _piece_min(w, lam, d, d, 2.0)
        total = total + k * p.alpha + np.minimum(one_hop, multi_hop)
    return float(np.max(total))

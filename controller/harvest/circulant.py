"""Closed-form (theta, hops) on structured candidates with at most two distinct generators.

Both evaluators rest on the same symmetry argument (docs/harvest.md, "Symmetry reduction"): the
topology and the demand are invariant under a group acting freely and transitively on the
commodities and freely on the links of each generator class, so an optimal flow can be averaged
into a symmetric one. The load of each link of generator class j is then the number of times one
representative commodity's routes use class j. A route is described by its usage counts ("route
type"); with two generator classes the LP has two constraints, so some optimal solution uses at
most two route types, and the best value and the shortest longest-route follow by enumerating
pairs of Pareto-minimal types.

- "shift" demands (u -> u+o for all u) on circulants C(g1, g2): group Z_n; a route type is
  (c1, c2) with c1 g1 + c2 g2 = o (mod n).
- "swing" demands (even u -> u+rho, odd u -> u-rho) on local circulants (even u -> u+h, odd
  u -> u-h) with odd generators: group = even rotations and reflections u -> t-u (t odd); a route
  type is (z1, z2) with z1 + z2 = 1, z1 h1 + z2 h2 = rho (mod n), using class j |z_j| times.
"""

from __future__ import annotations

import math
from collections import Counter
from math import gcd

import numpy as np

from .model import Evaluation

TOL = 1e-9


def _solve_congruence(a: int, b: int, n: int) -> tuple[int, int] | None:
    """Smallest x >= 0 with a x = b (mod n) and the period of the solutions, or None."""
    a %= n
    b %= n
    g = gcd(a, n)
    if b % g:
        return None
    m = n // g
    if m == 1:
        return 0, 1
    x = (b // g) * pow(a // g, -1, m) % m
    return x, m


def best_two_types(types: np.ndarray, x1: float, x2: float) -> Evaluation:
    """theta_L for every hop limit L given route types (rows: use1, use2, hops)."""
    if len(types) == 0:
        return Evaluation(0.0, 0)
    a = types[:, 0].astype(float)
    b = types[:, 1].astype(float)
    h = types[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        single = np.minimum(np.where(a > 0, x1 / a, np.inf), np.where(b > 0, x2 / b, np.inf))
        det = a[:, None] * b[None, :] - a[None, :] * b[:, None]
        li = (x1 * b[None, :] - a[None, :] * x2) / det
        lj = (a[:, None] * x2 - x1 * b[:, None]) / det
        ok = (det != 0) & (li > TOL) & (lj > TOL)
        pair = np.where(ok, li + lj, -np.inf)
    best = max(float(single.max()), float(pair.max()))
    if not math.isfinite(best):
        raise ValueError("unbounded route type (zero usage)")
    # theta_L = best value among singles / pairs whose longest route has at most L hops
    hh = np.maximum(h[:, None], h[None, :])
    values = np.concatenate([single, pair[np.isfinite(pair)]])
    hops = np.concatenate([h, hh[np.isfinite(pair)]])
    order = np.lexsort((-values, hops))
    frontier: list[tuple[int, float]] = []
    for k in order:
        v, L = float(values[k]), int(hops[k])
        if v > (frontier[-1][1] if frontier else 0.0) * (1 + 1e-9) and v > 0:
            frontier.append((L, v))
    last_hops = next(L for L, v in frontier if v >= best * (1 - 1e-9))
    frontier = [(L, v) for L, v in frontier if last_hops >= L]
    frontier[-1] = (last_hops, best)
    return Evaluation(best, last_hops, tuple(frontier))


def _pareto(types: list[tuple[int, int, int]]) -> np.ndarray:
    """Keep route types not dominated in both usages."""
    types.sort(key=lambda t: (t[0], t[1]))
    keep: list[tuple[int, int, int]] = []
    best_b = math.inf
    for t in types:
        if t[1] < best_b:
            keep.append(t)
            best_b = t[1]
    return np.array(keep, dtype=np.int64).reshape(-1, 3)


def shift_on_circulant(n: int, gens: tuple[int, ...], offset: int) -> Evaluation:
    """u -> u+offset for all u on the circulant with generator multiset ``gens`` (<= 2 values)."""
    cnt = Counter(g % n for g in gens)
    if 0 in cnt:
        raise ValueError("generator 0 (self-loop) is not a link")
    o = offset % n
    if len(cnt) == 1:
        ((g, x),) = cnt.items()
        sol = _solve_congruence(g, o, n)
        if sol is None:
            return Evaluation(0.0, 0)
        c, period = sol
        if c == 0:
            c = period
        return Evaluation(x / c, c)
    if len(cnt) != 2:
        raise ValueError("closed form needs at most two distinct generators")
    (g1, x1), (g2, x2) = sorted(cnt.items())
    ord1 = n // gcd(g1, n)
    types: list[tuple[int, int, int]] = []
    for c1 in range(ord1):
        sol = _solve_congruence(g2, o - c1 * g1, n)
        if sol is None:
            continue
        c2, period = sol
        if c1 == 0 and c2 == 0:
            c2 = period
        types.append((c1, c2, c1 + c2))
    return best_two_types(_pareto(types), float(x1), float(x2))


def swing_on_local(n: int, gens: tuple[int, ...], rho: int) -> Evaluation:
    """Swing step with distance rho on the local circulant with odd generators ``gens``."""
    cnt = Counter(g % n for g in gens)
    if any(g % 2 == 0 for g in cnt) or rho % 2 == 0 or n % 2:
        raise ValueError("swing closed form needs odd generators, odd rho and even n")
    r = rho % n
    if len(cnt) == 1:
        ((h, x),) = cnt.items()
        return Evaluation(float(x), 1) if h == r else Evaluation(0.0, 0)
    if len(cnt) != 2:
        raise ValueError("closed form needs at most two distinct generators")
    (h1, x1), (h2, x2) = sorted(cnt.items())
    sol = _solve_congruence(h1 - h2, r - h2, n)
    if sol is None:
        return Evaluation(0.0, 0)
    z0, period = sol
    up = z0 if z0 >= 1 else z0 + period * math.ceil((1 - z0) / period)
    down = up - period * math.ceil(up / period)  # largest <= 0 in the class
    types = [(abs(z), abs(1 - z), abs(z) + abs(1 - z)) for z in (up, down)]
    return best_two_types(_pareto(types), float(x1), float(x2))

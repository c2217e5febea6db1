"""Shared data types of the Harvest engine: parameters, step patterns, topologies, errors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from common.collectives import Collective


class HarvestError(ValueError):
    """Bad input to the scheduler (reported to the user, never a crash)."""


@dataclass(frozen=True)
class Params:
    """Cost-model parameters. Times in seconds, sizes in bytes, bandwidth in bits per second."""

    degree: int
    bandwidth_bps: float
    alpha: float = 0.0
    delta: float = 0.0
    alpha_r: float = 0.0

    def validate(self) -> None:
        if not isinstance(self.degree, int) or self.degree < 1:
            raise HarvestError(f"degree must be an integer >= 1, got {self.degree!r}")
        if not (math.isfinite(self.bandwidth_bps) and self.bandwidth_bps > 0):
            raise HarvestError(
                f"bandwidth must be a positive number of bit/s, got {self.bandwidth_bps!r}"
            )
        for name in ("alpha", "delta", "alpha_r"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise HarvestError(
                    f"{name.replace('_', '-')} must be a finite delay >= 0 s, got {value!r}"
                )


@dataclass(frozen=True)
class Pattern:
    """A step's communication matrix as sorted (src, dst) pairs, plus its recognised shape.

    ``shape`` is ("shift", o) when every rank u sends to u+o, ("swing", rho) when even ranks send
    to u+rho and odd ranks to u-rho, ("pairs", 0) otherwise. Shapes select the fast evaluators.
    """

    n: int
    pairs: tuple[tuple[int, int], ...]
    shape: tuple[str, int]
    digest: int = field(default=0, compare=False, repr=False)

    def __hash__(self) -> int:
        # Patterns of 1024 ranks are dictionary keys in hot loops: hash once, not per lookup.
        return self.digest

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Pattern):
            return NotImplemented
        return self.digest == other.digest and self.n == other.n and self.pairs == other.pairs

    @staticmethod
    def of(n: int, pairs: Iterable[tuple[int, int]]) -> Pattern:
        ps = tuple(sorted(set(pairs)))
        for u, v in ps:
            if not (0 <= u < n and 0 <= v < n) or u == v:
                raise HarvestError(f"bad demand pair ({u}, {v}) for {n} ranks")
        return Pattern(n, ps, _shape(n, ps), hash((n, ps)))

    def out_degree_ok(self) -> bool:
        """True when every rank sends to at most one peer and receives from at most one."""
        srcs = [u for u, _ in self.pairs]
        dsts = [v for _, v in self.pairs]
        return len(set(srcs)) == len(srcs) and len(set(dsts)) == len(dsts)


def _shape(n: int, pairs: tuple[tuple[int, int], ...]) -> tuple[str, int]:
    if len(pairs) != n:
        return ("pairs", 0)
    dst = dict(pairs)
    if len(dst) != n:
        return ("pairs", 0)
    o = dst[0] % n
    if all(dst[u] == (u + o) % n for u in range(n)):
        return ("shift", o)
    if n % 2 == 0:
        rho = dst[0] % n
        if all(dst[u] == ((u + rho) % n if u % 2 == 0 else (u - rho) % n) for u in range(n)):
            return ("swing", rho)
    return ("pairs", 0)


@dataclass(frozen=True)
class StepDemand:
    """Step i of a collective for the scheduler: its pattern and per-pair volume in bytes."""

    pattern: Pattern
    volume_bytes: float


def demands_of(coll: Collective, message_bytes: float) -> list[StepDemand]:
    if not (math.isfinite(message_bytes) and message_bytes >= 0):
        raise HarvestError(f"message size must be >= 0 bytes, got {message_bytes!r}")
    interned: dict[tuple[tuple[int, int], ...], Pattern] = {}
    out = []
    for s in coll.steps:
        pat = interned.get(s.pairs)
        if pat is None:
            pat = interned[s.pairs] = Pattern.of(coll.n, s.pairs)
        out.append(StepDemand(pat, s.fraction * message_bytes))
    return out


@dataclass(frozen=True)
class CircuitTopology:
    """Directed multigraph on n ranks: edges[(u, v)] = number of circuits u -> v.

    ``kind``/``gens`` describe structured candidates so fast evaluators can be used: "circulant"
    (u -> u+g for every g in gens), "local" (Swing frame: even u -> u+h, odd u -> u-h for every h
    in gens) or "matrix" (no structure assumed).
    """

    n: int
    edges: tuple[tuple[int, int, int], ...]
    kind: str = "matrix"
    gens: tuple[int, ...] = field(default=())

    @staticmethod
    def from_counts(
        n: int, counts: dict[tuple[int, int], int], kind: str = "matrix", gens: Sequence[int] = ()
    ) -> CircuitTopology:
        edges = tuple(sorted((u, v, c) for (u, v), c in counts.items() if c > 0))
        return CircuitTopology(n, edges, kind, tuple(gens))

    @staticmethod
    def circulant(n: int, gens: Sequence[int]) -> CircuitTopology:
        counts: dict[tuple[int, int], int] = {}
        for g in gens:
            for u in range(n):
                key = (u, (u + g) % n)
                counts[key] = counts.get(key, 0) + 1
        return CircuitTopology.from_counts(n, counts, "circulant", tuple(sorted(g % n for g in gens)))

    @staticmethod
    def local(n: int, gens: Sequence[int]) -> CircuitTopology:
        counts: dict[tuple[int, int], int] = {}
        for h in gens:
            for u in range(n):
                key = (u, (u + h) % n if u % 2 == 0 else (u - h) % n)
                counts[key] = counts.get(key, 0) + 1
        return CircuitTopology.from_counts(n, counts, "local", tuple(sorted(h % n for h in gens)))

    def counts(self) -> dict[tuple[int, int], int]:
        return {(u, v): c for u, v, c in self.edges}

    def max_degrees(self) -> tuple[int, int]:
        out = [0] * self.n
        inn = [0] * self.n
        for u, v, c in self.edges:
            out[u] += c
            inn[v] += c
        return max(out, default=0), max(inn, default=0)

    def as_json(self) -> list[list[int]]:
        return [[u, v, c] for u, v, c in self.edges]


@dataclass(frozen=True)
class Evaluation:
    """Throughput of one step's demand on one topology.

    ``theta`` is the maximum concurrent flow (units of one circuit) and ``hops`` the smallest
    hop limit that still reaches it. ``frontier`` lists every (L, theta_L) at which the maximum
    concurrent flow over routes of at most L hops increases; the last point is (hops, theta).
    A single point means shorter routes cannot carry the demand at all.
    """

    theta: float
    hops: int
    frontier: tuple[tuple[int, float], ...] = ()

    def points(self) -> tuple[tuple[int, float], ...]:
        return self.frontier or ((self.hops, self.theta),)


def best_point(ev: Evaluation, volume_bytes: float, p: Params) -> tuple[int, float, float]:
    """The hop limit L minimising alpha + delta L + 8 m / (c theta_L): (L, theta_L, time)."""
    best = (0, 0.0, math.inf)
    for hops, theta in ev.points():
        if theta <= 0:
            continue
        transfer = 8.0 * volume_bytes / (p.bandwidth_bps * theta) if volume_bytes > 0 else 0.0
        t = p.alpha + p.delta * hops + transfer
        if t < best[2]:
            best = (hops, theta, t)
    return best


def step_time(ev: Evaluation, volume_bytes: float, p: Params) -> float:
    """Step time on a topology; infinite when the demand is not routable."""
    return best_point(ev, volume_bytes, p)[2]

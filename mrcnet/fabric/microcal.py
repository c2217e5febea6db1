"""The cost model's parameters from micro-benchmarks, not from the collective's own shapes.

``mrcnet/fabric/collectives.py`` ``calibrate`` measures steps of exactly the shapes the
collectives run, so a prediction made from it agrees with the run nearly by construction.
This calibration measures something else: one point-to-point transfer at a time over the
ring C(1) (rank 0 writes k blocks to rank h, h hops away, every other GPU idle) for several
sizes and hop counts, then every GPU writing to its neighbour at once (every port busy), then
the same transfers over two rings of n/2 GPUs each, then single-block steps that alternate
C(1) and C(-1) so each reconfigures. Circuits are one-way, so the acknowledgements of a
transfer h hops forward come back the rest of the way round its ring: a hops, n - h on the
ring, n/2 - h on the half rings; the two rings are what tells alpha from the return. The model

    T(k, h, a) = alpha + delta h + delta_ack a + 8 k B / c

is fitted to the point-to-point steps by least squares, with standard errors from the
residuals (with fewer than 8 GPUs there are no half rings and the return is part of alpha);
the reconfiguration overhead beyond the dark time is the median gap of the reconfiguring
steps minus the median gap of the others minus the dark time. A run's prediction adds, per
step, ``ack_hop_s`` times its longest acknowledgement route (controller/harvest/runplan.py):
delta_ack plus half an MTU frame's wire time, the wait of an acknowledgement forwarded by a
GPU whose NIC is sending a data frame (the calibration's forwarding GPUs are idle, a
collective's are not). The Harvest scheduler's own cost has no such term. The result is a
file (``save``; read by controller/harvest/calfile.py) that ``mrcnet harvest --calibration
FILE`` and ``mrcnet up --calibration FILE`` read, so a prediction exists before the
collective starts.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from common.collectives import Collective, Step
from controller.harvest.calfile import FORMAT, VERSION
from controller.harvest.model import HarvestError

HOPS = (1, 2, 3)
BLOCK_COUNTS = (1, 2, 4, 8)
REPEATS = 2
FLIPS = 4


class MicroCalibrationError(HarvestError):
    """The samples cannot give the model's parameters, or a file is not a calibration."""


@dataclass(frozen=True)
class Sample:
    blocks: int
    hops: int
    seconds: float  # the step's gap plus its transfer (G_i + S_i), the run's clock
    ack_hops: int = 0  # hops of the acknowledgements' way back


@dataclass(frozen=True)
class Fit:
    """The fitted parameters and their standard errors (the run's clock, bits per second)."""

    bandwidth_bps: float
    alpha_s: float
    delta_s: float
    bandwidth_se: float
    alpha_se: float
    delta_se: float
    residual_s: float  # root mean square of the residuals
    notes: tuple[str, ...] = ()
    ack_delta_s: float = 0.0  # per hop of the acknowledgements' return (0: not separable)
    ack_delta_se: float = 0.0


def fit(samples: Sequence[Sample], block_bytes: float) -> Fit:
    """Least squares of T = alpha + delta h + delta_ack a + (8 B / c) k over the
    point-to-point samples; without delta_ack when a is the same affine function of h in
    every sample (one ring: the return cannot be told from alpha and delta). The delays are
    fitted non-negative: one that comes out below zero is fixed at 0 and the rest fitted
    again (a one-hop transfer forwards through no GPU, so alpha + delta h overstates it by
    about one store-and-forward, and the unconstrained alpha is about minus that; clamping it
    afterwards would keep a delta and c fitted for the negative alpha)."""
    if len({s.hops for s in samples}) < 2 or len({s.blocks for s in samples}) < 2:
        raise MicroCalibrationError("the fit needs at least two hop counts and two sizes")
    rows = [[1.0, s.hops, s.blocks * block_bytes, s.ack_hops] for s in samples]
    x_all = np.array(rows)
    separable = np.linalg.matrix_rank(x_all) == 4
    names = ["alpha", "delta", "per_byte"] + (["delta_ack"] if separable else [])
    y = np.array([s.seconds for s in samples])
    notes = []
    if not separable:
        notes.append("one ring only: the acknowledgements' return is part of alpha and delta")
    free = list(range(len(names)))
    while True:
        x = x_all[:, free]
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        values = dict(zip((names[i] for i in free), (float(v) for v in coef), strict=True))
        negative = [n for n in ("alpha", "delta", "delta_ack") if values.get(n, 0.0) < 0]
        if not negative:
            break
        worst = min(negative, key=values.__getitem__)
        notes.append(f"{worst} fitted {values[worst]:.3g} s < 0: fixed at 0, the rest refitted")
        free.remove(names.index(worst))
    per_byte = values["per_byte"]
    if per_byte <= 0:
        raise MicroCalibrationError(f"larger transfers did not take longer (slope "
                                    f"{per_byte:.3g} s/byte); use a larger --size")
    residuals = y - x @ coef
    dof = max(1, len(samples) - x.shape[1])
    sigma2 = float(residuals @ residuals) / dof
    cov = sigma2 * np.linalg.inv(x.T @ x)
    se = {names[i]: math.sqrt(max(0.0, float(v))) for i, v in zip(free, np.diag(cov),
                                                                     strict=True)}
    bandwidth = 8.0 / per_byte
    return Fit(bandwidth, values.get("alpha", 0.0), values.get("delta", 0.0),
               bandwidth * se["per_byte"] / per_byte, se.get("alpha", 0.0),
               se.get("delta", 0.0), math.sqrt(float(residuals @ residuals) / len(samples)),
               tuple(notes), values.get("delta_ack", 0.0), se.get("delta_ack", 0.0))


def _only(n: int, src: int, dst: int, blocks: int) -> Step:
    sends = tuple(dst if u == src else None for u in range(n))
    return Step("all-gather", sends,
                tuple(tuple(range(blocks)) if u == src else () for u in range(n)), n)


def _everyone(n: int, offset: int) -> Step:
    return Step("all-gather", tuple((u + offset) % n for u in range(n)),
                tuple(((u + offset) % n,) for u in range(n)), n)


def half_rings(n: int) -> dict[tuple[int, int], int]:
    """The circuits of two rings of n/2 GPUs each (u -> u+1 within each half)."""
    h = n // 2
    return {(u, (u + 1) % h + (u // h) * h): 1 for u in range(n)}


@dataclass(frozen=True)
class Design:
    """The calibration's steps: what each one measures, in order."""

    collective: Collective
    # (kind, blocks, hops, ack hops), one per step; kind "p2p", "busy", "settle" (the first
    # step on the half rings: its gap is a reconfiguration) or "flip"
    kinds: tuple[tuple[str, int, int, int], ...]
    intervals: tuple[tuple[int, int, str], ...]  # (first, last, "ring" | "halves" | "back")

    @property
    def steps(self) -> int:
        return len(self.kinds)


def design(n: int, hops: Sequence[int] = HOPS, block_counts: Sequence[int] = BLOCK_COUNTS,
           repeats: int = REPEATS, flips: int = FLIPS) -> Design:
    """Point-to-point steps (every size at every hop count, ``repeats`` times) and one step
    with every GPU busy per repeat on the ring; the point-to-point steps again on two half
    rings when n/2 > the longest hop count; then ``flips`` reconfiguring single-block steps."""
    if n < max(hops) + 1 or max(block_counts) > n:
        raise MicroCalibrationError(f"{n} GPUs cannot hold {max(hops)} hops and "
                                    f"{max(block_counts)} blocks")
    steps: list[Step] = []
    kinds: list[tuple[str, int, int, int]] = []
    for _ in range(repeats):
        for h in hops:
            for k in block_counts:
                steps.append(_only(n, 0, h, k))
                kinds.append(("p2p", k, h, n - h))
        steps.append(_everyone(n, 1))
        kinds.append(("busy", 1, 1, n - 1))
    intervals: list[tuple[int, int, str]] = [(1, len(steps), "ring")]
    if n // 2 > max(hops):
        first = len(steps) + 1
        steps.append(_only(n, 0, 1, 1))
        kinds.append(("settle", 1, 1, n // 2 - 1))
        for _ in range(repeats):
            for h in hops:
                for k in block_counts:
                    steps.append(_only(n, 0, h, k))
                    kinds.append(("p2p", k, h, n // 2 - h))
        intervals.append((first, len(steps), "halves"))
    plain = len(steps)
    for j in range(flips):
        back = j % 2 == 0
        steps.append(_everyone(n, -1 if back else 1))
        kinds.append(("flip", 1, 1, n - 1))  # C(1) or C(-1): the ACKs go round either way
        intervals.append((plain + j + 1, plain + j + 1, "back" if back else "ring"))
    coll = Collective("custom", "custom", n, tuple(steps))
    return Design(coll, tuple(kinds), tuple(intervals))


@dataclass
class MicroCalibration:
    fit: Fit
    alpha_r_overhead_s: float
    dark_s: float
    block_bytes: int
    samples: list[Sample]
    busy_over_single: float | None  # one block with every GPU sending / one block alone
    frame_bytes: int = 0  # the fabric's MTU frame (the acknowledgements' wait per hop)
    fabric: dict[str, Any] = field(default_factory=dict)
    created_unix: float = field(default_factory=time.time)
    notes: list[str] = field(default_factory=list)

    @property
    def ack_hop_s(self) -> float:
        """Per hop of a collective's acknowledgement return: delta_ack plus half an MTU
        frame's wire time at the fitted rate (0 when delta_ack could not be fitted)."""
        f = self.fit
        if f.ack_delta_s <= 0:
            return 0.0
        return f.ack_delta_s + 4.0 * self.frame_bytes / f.bandwidth_bps

    def to_json(self) -> dict[str, Any]:
        f = self.fit
        return {
            "format": FORMAT, "version": VERSION, "method": "micro-benchmarks",
            "created_unix": self.created_unix, "fabric": self.fabric,
            "bandwidth_bps": f.bandwidth_bps, "alpha_s": f.alpha_s, "delta_s": f.delta_s,
            "ack_delta_s": f.ack_delta_s, "ack_hop_s": self.ack_hop_s,
            "alpha_r_overhead_s": self.alpha_r_overhead_s, "dark_s": self.dark_s,
            "standard_error": {"bandwidth_bps": f.bandwidth_se, "alpha_s": f.alpha_se,
                               "delta_s": f.delta_se, "ack_delta_s": f.ack_delta_se},
            "residual_rms_s": f.residual_s, "block_bytes": self.block_bytes,
            "frame_bytes": self.frame_bytes, "busy_over_single": self.busy_over_single,
            "samples": [vars(s) for s in self.samples],
            "notes": [*f.notes, *self.notes],
        }


def measure(kinds: Sequence[tuple[str, int, int, int]], seconds: Sequence[float],
            gaps: Sequence[float], block_bytes: int, dark_s: float,
            frame_bytes: int = 0) -> MicroCalibration:
    """The calibration from one run of ``design``'s steps: each step's G_i + S_i
    (``seconds``) and G_i (``gaps``); ``frame_bytes`` is the fabric's MTU frame."""
    samples = [Sample(k, h, t, a) for (kind, k, h, a), t in zip(kinds, seconds)
               if kind == "p2p"]
    result = fit(samples, block_bytes)
    plain_gaps = [g for (kind, *_), g in zip(kinds, gaps) if kind not in ("flip", "settle")][1:]
    flip_gaps = [g for (kind, *_), g in zip(kinds, gaps) if kind == "flip"]
    notes = []
    overhead = 0.0
    if flip_gaps and plain_gaps:
        overhead = statistics.median(flip_gaps) - statistics.median(plain_gaps) - dark_s
        if overhead < 0:
            notes.append(f"reconfiguration overhead measured {overhead:.3g} s (noise), "
                         "clamped to 0")
            overhead = 0.0
    busy = [(t, a) for (kind, _, _, a), t in zip(kinds, seconds) if kind == "busy"]
    single = [t for (kind, k, h, a), t in zip(kinds, seconds)
              if kind == "p2p" and k == 1 and h == 1 and busy and a == busy[0][1]]
    ratio = (statistics.median(t for t, _ in busy) / statistics.median(single)
             if single and busy else None)
    return MicroCalibration(result, overhead, dark_s, block_bytes, samples, ratio,
                            frame_bytes=frame_bytes, notes=notes)


def save(cal: MicroCalibration, path: Path) -> Path:
    return save_json(cal.to_json(), path)


def save_json(data: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


__all__ = ["Design", "Fit", "MicroCalibration", "MicroCalibrationError", "Sample", "design",
           "fit", "half_rings", "measure", "save", "save_json"]

"""The parts of a collective run plan (common/collective_plan/plan.py): circuits, intervals,
routes, steps, the model, each with its JSON form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from common.collectives import Step

PLAN_VERSION = 1
CUSTOM = "custom"  # a collective whose plan spells out its steps
ITEM_BYTES = {"int32": 4, "float32": 4}
DTYPES = tuple(ITEM_BYTES)
BARRIERS = ("all", "early")
STEP_KINDS = ("reduce-scatter", "all-gather", "all-to-all")

Hop = tuple[int, int]  # (gpu, out port)
Pair = tuple[int, int]  # (source rank, destination rank)


class PlanError(ValueError):
    """A collective plan that is malformed or inconsistent; the message names the field."""


@dataclass(frozen=True)
class Circuit:
    """GPU ``src`` transmits on its port ``src_port`` into GPU ``dst``'s port ``dst_port``."""

    src: int
    src_port: int
    dst: int
    dst_port: int

    def to_json(self) -> list[int]:
        return [self.src, self.src_port, self.dst, self.dst_port]


@dataclass(frozen=True)
class Interval:
    """Steps ``first``..``last`` (1-based, inclusive) run on one topology."""

    first: int
    last: int
    edges: tuple[tuple[int, int, int], ...]  # (u, v, circuits u -> v)
    circuits: tuple[Circuit, ...]

    def to_json(self) -> dict[str, Any]:
        return {"steps": [self.first, self.last], "edges": [list(e) for e in self.edges],
                "circuits": [c.to_json() for c in self.circuits]}


@dataclass(frozen=True)
class Route:
    """The paths of one (source, destination) pair and the path each EV bucket takes."""

    paths: tuple[tuple[Hop, ...], ...]
    buckets: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"paths": [[list(hop) for hop in path] for path in self.paths],
                "buckets": list(self.buckets)}


@dataclass(frozen=True)
class PlanStep:
    step: int  # 1-based
    interval: int  # index into RunPlan.intervals
    kind: str
    sends: tuple[int | None, ...]  # sends[u]: the rank u writes to, or None
    blocks: tuple[tuple[int, ...], ...]  # blocks[u]: the blocks u writes
    theta: float
    hops: int
    model_s: float
    volume_bytes: float
    routes: Mapping[Pair, Route]
    reconfigure_after: tuple[int, ...] | None = None  # barrier "early", new interval only
    hidden_reconfiguration_s: float | None = None
    ack_s: float = 0.0  # the acknowledgements' return, part of model_s (0: not modelled)

    @property
    def pattern(self) -> Step:
        """The step as ``common.collectives`` states it."""
        return Step(self.kind, self.sends, self.blocks, len(self.sends))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step, "interval": self.interval, "kind": self.kind,
            "sends": list(self.sends), "blocks": [list(b) for b in self.blocks],
            "theta": self.theta, "hops": self.hops, "model_s": self.model_s,
            "volume_bytes": self.volume_bytes,
            "routes": {f"{s}>{t}": r.to_json() for (s, t), r in self.routes.items()},
        }
        if self.reconfigure_after is not None:
            out["reconfigure_after"] = list(self.reconfigure_after)
        if self.hidden_reconfiguration_s is not None:
            out["hidden_reconfiguration_s"] = self.hidden_reconfiguration_s
        if self.ack_s:
            out["ack_s"] = self.ack_s
        return out


@dataclass(frozen=True)
class PlanModel:
    """The cost model's parameters and its prediction for the run."""

    bandwidth_bps: float
    alpha_s: float
    delta_s: float
    alpha_r_s: float
    model_s: float
    reconfigurations: int
    hidden_reconfiguration_s: float | None = None  # barrier "early"
    ack_hop_s: float = 0.0  # per hop of a step's longest acknowledgement route (0: none)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "bandwidth_bps": self.bandwidth_bps, "alpha_s": self.alpha_s,
            "delta_s": self.delta_s, "alpha_r_s": self.alpha_r_s, "model_s": self.model_s,
            "reconfigurations": self.reconfigurations,
        }
        if self.hidden_reconfiguration_s is not None:
            out["hidden_reconfiguration_s"] = self.hidden_reconfiguration_s
        if self.ack_hop_s:
            out["ack_hop_s"] = self.ack_hop_s
        return out

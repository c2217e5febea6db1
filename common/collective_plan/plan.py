"""The collective run plan (``RunPlan``): what a run hands to the controller and every GPU.

Built by controller/harvest/runplan.py, written as JSON (``save``, ``to_json``), read back by
the GPUs' collective jobs (``load``, ``from_json``). Building one checks that its parts agree
(common/collective_plan/rules.py), so the writer cannot produce a plan its readers refuse.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common.collective_plan.reading as reading
import common.collective_plan.rules as rules
from common.collective_plan.parts import (
    BARRIERS,
    DTYPES,
    ITEM_BYTES,
    PLAN_VERSION,
    Interval,
    PlanError,
    PlanModel,
    PlanStep,
)
from common.collectives import Collective

_FIELDS = ("version", "collective", "phase", "gpus", "degree", "size_bytes", "dtype",
           "buckets", "schedule", "ranks", "intervals", "steps", "model")
_OPTIONAL = ("barrier", "dark_s", "predicted_unix")


@dataclass(frozen=True)
class RunPlan:
    """One collective run; ``algorithm`` is the collective it runs (``common.collectives``)."""

    collective: str
    phase: str
    gpus: int
    degree: int
    size_bytes: int
    dtype: str
    buckets: int
    schedule: str
    ranks: tuple[str, ...]
    intervals: tuple[Interval, ...]
    steps: tuple[PlanStep, ...]
    model: PlanModel
    barrier: str = "all"
    dark_s: float = 0.0  # the dark time the controller applies at a reconfiguration
    predicted_unix: float | None = None  # when the model's prediction was made
    algorithm: Collective = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "algorithm", self._check())

    @property
    def n(self) -> int:
        return self.gpus

    @property
    def block_bytes(self) -> int:
        return self.size_bytes // self.gpus

    def interval_changes(self) -> list[int]:
        """1-based steps before which the topology changes (reconfigurations)."""
        return [st.step for prev, st in zip(self.steps, self.steps[1:])
                if st.interval != prev.interval]

    # -- JSON -----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": PLAN_VERSION, "collective": self.collective, "phase": self.phase,
            "gpus": self.gpus, "degree": self.degree, "size_bytes": self.size_bytes,
            "dtype": self.dtype, "buckets": self.buckets, "schedule": self.schedule,
            "ranks": list(self.ranks), "intervals": [iv.to_json() for iv in self.intervals],
            "steps": [st.to_json() for st in self.steps], "model": self.model.to_json(),
            "barrier": self.barrier, "dark_s": self.dark_s,
        }
        if self.predicted_unix is not None:
            out["predicted_unix"] = self.predicted_unix
        return out

    @staticmethod
    def from_json(data: Any) -> RunPlan:
        """The plan of a decoded JSON document; ``PlanError`` says what is wrong with it."""
        if isinstance(data, dict) and data.get("version") != PLAN_VERSION:
            raise PlanError(f"plan version {data.get('version')!r}; this reader reads version "
                            f"{PLAN_VERSION}")
        d = reading.fields(data, "a collective plan", _FIELDS, _OPTIONAL)
        ranks = tuple(reading.string(r, f"plan 'ranks'[{i}]")
                      for i, r in enumerate(reading.items(d["ranks"], "plan 'ranks'")))
        predicted = d.get("predicted_unix")
        return RunPlan(
            collective=reading.string(d["collective"], "plan 'collective'"),
            phase=reading.string(d["phase"], "plan 'phase'"),
            gpus=reading.integer(d["gpus"], "plan 'gpus'"),
            degree=reading.integer(d["degree"], "plan 'degree'"),
            size_bytes=reading.integer(d["size_bytes"], "plan 'size_bytes'"),
            dtype=reading.string(d["dtype"], "plan 'dtype'"),
            buckets=reading.integer(d["buckets"], "plan 'buckets'"),
            schedule=reading.string(d["schedule"], "plan 'schedule'"),
            ranks=ranks,
            intervals=tuple(reading.interval(iv, k) for k, iv in
                            enumerate(reading.items(d["intervals"], "plan 'intervals'"))),
            steps=tuple(reading.step(st, i) for i, st in
                        enumerate(reading.items(d["steps"], "plan 'steps'"), start=1)),
            model=reading.model(d["model"]),
            barrier=reading.string(d.get("barrier", "all"), "plan 'barrier'"),
            dark_s=reading.number(d.get("dark_s", 0.0), "plan 'dark_s'"),
            predicted_unix=None if predicted is None
            else reading.number(predicted, "plan 'predicted_unix'"))

    def save(self, path: str | Path) -> Path:
        """Write the plan as JSON, atomically (a reader never sees half a plan)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.to_json()))
        os.replace(tmp, path)
        return path

    @staticmethod
    def load(path: str | Path) -> RunPlan:
        """The plan in file ``path``; ``PlanError`` names the file and what is wrong."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PlanError(f"collective plan {path}: {exc}") from None
        try:
            return RunPlan.from_json(data)
        except PlanError as exc:
            raise PlanError(f"collective plan {path}: {exc}") from None

    # -- consistency ----------------------------------------------------------------------
    def _check(self) -> Collective:
        n = self.gpus
        if n < 2:
            raise PlanError(f"plan 'gpus' must be at least 2, got {n}")
        if self.degree < 1:
            raise PlanError(f"plan 'degree' must be at least 1, got {self.degree}")
        if self.buckets < 1 or self.buckets & (self.buckets - 1):
            raise PlanError(f"plan 'buckets' must be a power of two, got {self.buckets}")
        if self.dtype not in ITEM_BYTES:
            raise PlanError(f"plan 'dtype' must be one of {', '.join(DTYPES)}, got "
                            f"{self.dtype!r}")
        if self.size_bytes <= 0 or self.size_bytes % (n * ITEM_BYTES[self.dtype]):
            raise PlanError(f"plan 'size_bytes' {self.size_bytes} is not a positive multiple "
                            f"of {n} blocks of {self.dtype}")
        if len(self.ranks) != n or len(set(self.ranks)) != n or not all(self.ranks):
            raise PlanError(f"plan 'ranks' must name the {n} GPUs in rank order, each once")
        if self.barrier not in BARRIERS:
            raise PlanError(f"plan 'barrier' must be one of {', '.join(BARRIERS)}, got "
                            f"{self.barrier!r}")
        rules.nonnegative(self.dark_s, "plan 'dark_s'")
        m = self.model
        for name in ("bandwidth_bps", "alpha_s", "delta_s", "alpha_r_s", "model_s", "ack_hop_s"):
            rules.nonnegative(getattr(m, name), f"plan model {name!r}")
        if (m.hidden_reconfiguration_s is not None) != (self.barrier == "early"):
            raise PlanError("plan model 'hidden_reconfiguration_s' belongs to barrier "
                            "'early', and only to it")
        coll = rules.algorithm(self.collective, self.phase, n, self.steps)
        shape = rules.Shape(n, self.degree, self.buckets, self.barrier)
        rules.check_intervals(self.intervals, shape, len(self.steps))
        if m.reconfigurations != len(self.intervals) - 1:
            raise PlanError(f"plan model 'reconfigurations' is {m.reconfigurations}; the "
                            f"{len(self.intervals)} interval(s) of the plan make "
                            f"{len(self.intervals) - 1}")
        rules.check_steps(self.steps, coll, self.intervals, shape)
        return coll


__all__ = ["RunPlan"]

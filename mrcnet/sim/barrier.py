"""The controller's collective session on the simulated clock: the step barrier and the OCS
reconfigurations between steps.

The protocol is the controller's (controller/collective.py): the first
interval's circuits are applied when the session starts; every GPU arrives at the barrier of
each step; when the last one arrived, the OCS is reconfigured if the step starts a new
interval (the changing ports dark for the plan's dark time, mrcnet/sim/ocs.py), the
cross-connects are read back, and the step is released to every GPU. Barrier ``steps + 1``
marks the end. Under barrier "early" a step that lists ``reconfigure_after`` GPUs starts its
reconfiguration as soon as those arrived, while the others may still send (frames meeting a
dark port are dropped and counted by the OCS, MRC resends them); it is released, as always,
once every GPU arrived and the reconfiguration is done. The records are the controller's
``StepRecord`` fields, so the run's measurement (S_i, G_i) is computed as the emulation
computes it.

What differs: the controller's messages take no time (an arrival and a release are instant,
where the emulation pays a unix-socket RPC per GPU and step, part of its calibrated alpha).
Barrier "early" is not simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.collective_plan import RunPlan
from common.proto import mrc_ctl_pb2 as pb
from controller.fabric import FabricState
from controller.harvest.runplan import circuit_text
from mrcnet.sim.ocs import SimOcs, reconfigure

Release = Callable[[int, float], None]  # (step, release time)


@dataclass
class StepRecord:
    """What the controller records per barrier (pb.StepRecord's fields)."""

    step: int
    interval: int
    arrivals: dict[int, float] = field(default_factory=dict)
    released_s: float | None = None
    reconfigured: bool = False
    dark_start_s: float = 0.0
    dark_end_s: float = 0.0
    readback: dict[int, int] = field(default_factory=dict)
    early: frozenset[int] | None = None  # ranks whose arrival starts the reconfiguration
    reconfig: str = ""  # "", "running", "done"
    started_early: bool = False  # it started before the last GPU arrived

    @property
    def first_arrival_s(self) -> float:
        return min(self.arrivals.values(), default=0.0)

    @property
    def last_arrival_s(self) -> float:
        return max(self.arrivals.values(), default=0.0)

    def to_json(self) -> dict[str, Any]:
        """As the emulation's timeline rows (mrcnet/fabric/collectives.py)."""
        return {"step": self.step, "interval": self.interval, "reconfigured": self.reconfigured,
                "first_arrival_s": self.first_arrival_s, "last_arrival_s": self.last_arrival_s,
                "released_s": self.released_s or 0.0, "dark_start_s": self.dark_start_s,
                "dark_end_s": self.dark_end_s, "early": self.started_early}


class BarrierError(RuntimeError):
    """A GPU arrived where the protocol does not allow it (the message says how)."""


class SimSession:
    """One collective session: ``arrive(rank, step)``; ``release(step, t)`` is called on
    every GPU (``releases[rank]``) when the step is released."""

    def __init__(self, plan: RunPlan, state: FabricState, ocs: SimOcs) -> None:
        self.plan = plan
        self.state = state
        self.ocs = ocs
        self.sched = ocs.fabric.sched
        self.circuits = [[pb.Circuit(src=t.split(" -> ")[0], dst=t.split(" -> ")[1])
                          for t in circuit_text(plan, k)] for k in range(len(plan.intervals))]
        steps = [st.interval for st in plan.steps]
        self.records = [StepRecord(i + 1, iv) for i, iv in enumerate(steps)]
        self.records.append(StepRecord(len(steps) + 1, steps[-1]))
        for rec, st in zip(self.records, plan.steps):
            if plan.barrier == "early" and st.reconfigure_after is not None:
                rec.early = frozenset(st.reconfigure_after)
        self.releases: list[Release] = []
        self.current = 0
        self.reconfigurations = 0

    def start(self) -> None:
        """The first interval's circuits, at once (no dark time: nothing is running)."""
        state = self.state
        state.reconfigure(self.circuits[0])

    @property
    def done(self) -> bool:
        return self.records[-1].released_s is not None

    def arrive(self, rank: int, step: int) -> None:
        if not 1 <= step <= len(self.records):
            raise BarrierError(f"step {step} is not in 1..{len(self.records)}")
        rec = self.records[step - 1]
        if rank in rec.arrivals:
            raise BarrierError(f"rank {rank} already arrived at step {step}")
        if step > 1 and self.records[step - 2].released_s is None:
            raise BarrierError(f"rank {rank} arrived at step {step} before step {step - 1} "
                               "was released")
        rec.arrivals[rank] = self.sched.now
        last = len(rec.arrivals) == self.plan.n
        moves = step <= len(self.plan.steps) and rec.interval != self.current
        if moves and not rec.reconfig and (last or (rec.early is not None
                                                    and rec.early <= rec.arrivals.keys())):
            self._reconfigure(rec, started_early=not last)
        if last and (not moves or rec.reconfig == "done"):
            self._release(rec)  # else the reconfiguration's end releases it

    def _reconfigure(self, rec: StepRecord, started_early: bool) -> None:
        """The OCS into ``rec``'s interval; the step is released when it is done and every
        GPU arrived (under barrier "early" the last GPU may arrive after)."""
        rec.reconfig = "running"
        rec.reconfigured = True
        rec.started_early = started_early
        rec.dark_start_s = self.sched.now

        def reconfigured() -> None:
            rec.dark_end_s = self.sched.now
            rec.reconfig = "done"
            self.current = rec.interval
            self.reconfigurations += 1
            if len(rec.arrivals) == self.plan.n:
                self._release(rec)

        reconfigure(self.state, self.ocs, self.circuits[rec.interval], self.plan.dark_s,
                    reconfigured)

    def _release(self, rec: StepRecord) -> None:
        if rec.released_s is not None:  # a reconfiguration without dark time released it
            return
        if rec.step <= len(self.plan.steps):
            rec.readback = self.ocs.read_circuits()
        rec.released_s = now = self.sched.now
        for release in self.releases:
            release(rec.step, now)

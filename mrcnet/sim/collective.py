"""Collectives on a simulated circuit fabric: the emulation's driver with a simulated run.

``SimCollectiveDriver`` is the emulation's ``CollectiveDriver`` (mrcnet/fabric/collectives.py):
its calibrations (shapes, micro-benchmarks), schedules (``schedules_for``: static,
every-step, harvest, files) and plans (``plan_for``: controller/harvest/runplan.py) are
inherited unchanged; only ``run_plan``, which in the emulation hands the plan to the
controller and job files to the GPUs' agents, runs the plan here, on a fresh simulated fabric:

- the OCS (p4/ocs.p4) and the GPUs' links as the emulation plans them (mrcnet/sim/fabric.py);
- per GPU the agent's transport core, framer and circuit router, configured as the
  orchestrator configures a GPU's agent (``runparams.circuit_agent``), running its part of
  the plan (mrcnet/sim/gpurun.py);
- the controller's session: barrier, reconfiguration with the plan's dark time, read-back
  (mrcnet/sim/barrier.py through the controller's ``FabricState``).

The outcome is the emulation's ``Outcome`` (measured time from the barrier records,
per-step S_i and G_i, the model's prediction, verification, dark drops), so results compare
field by field. Every run starts its own clock at 0 and depends only on its plan and seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.collective_plan import CUSTOM, RunPlan
from common.vclock import RunClock
from controller.fabric import FabricState
from hosts.agent.config import parse_config
from mrcnet.fabric.collective_job import collective_attr
from mrcnet.fabric.collectives import (
    CollectiveDriver,
    CollectiveError,
    Outcome,
    step_measures,
)
from mrcnet.fabric.plan import FabricPlan, make_plan
from mrcnet.fabric.runparams import agent_transport, circuit_agent, core_tuning
from mrcnet.sim.barrier import SimSession, StepRecord
from mrcnet.sim.events import Scheduler
from mrcnet.sim.fabric import SimError, build_fabric
from mrcnet.sim.gpurun import SimGpuRunner
from mrcnet.sim.hostnode import SimHost
from mrcnet.sim.ocs import SimOcs
from topologies.model import FabricKind, Topology

DEFAULT_WINDOW = 128 * 1024  # mrcnet up's fixed window on circuit fabrics (cmd_up.DEFAULTS)


@dataclass
class SimCircuitFabric:
    """What the collective driver reads of a started fabric, for a simulated one."""

    topo: Topology
    run_dir: Path
    window: int = DEFAULT_WINDOW
    limit_s: float = 10.0  # simulated seconds a run may take before it is abandoned
    say: Callable[[str], None] = lambda text: None
    circuit: bool = True
    clock: RunClock = field(default_factory=lambda: RunClock(1.0))
    plan: FabricPlan = field(init=False)
    events: int = 0  # events run over every collective run so far
    simulated_s: float = 0.0  # simulated seconds over every run so far

    def __post_init__(self) -> None:
        if self.topo.fabric.kind != FabricKind.CIRCUIT:
            raise SimError(f"{self.topo.name} is a packet fabric: collectives run on circuit "
                           "fabrics")
        self.plan = make_plan(self.topo, self.topo.fabric.path_mode, prefix="s")


class SimCollectiveDriver(CollectiveDriver):
    """The emulation's collective driver, running each plan in the simulator."""

    fab: SimCircuitFabric

    def __init__(self, fab: SimCircuitFabric) -> None:
        super().__init__(fab, timeout=fab.limit_s, say=fab.say)

    def run_plan(self, plan: RunPlan, seed: int = 1, tag: str | None = None) -> Outcome:
        self.count += 1
        tag = tag or f"c{self.count}-{plan.collective}-{plan.schedule}".replace(":", "-")
        run = _Run(self.fab, plan, seed)
        run.go()
        return run.outcome(tag)


class _Run:
    """One plan on a fresh simulated fabric."""

    def __init__(self, fab: SimCircuitFabric, plan: RunPlan, seed: int) -> None:
        self.fab = fab
        self.plan = plan
        topo = fab.topo
        self.sched = Scheduler()
        self.fabric = build_fabric(topo, sched=self.sched, seed=seed)
        self.ocs = SimOcs(self.fabric)
        self.state = FabricState(topo, self.ocs)
        self.session = SimSession(plan, self.state, self.ocs)
        attr = collective_attr({"ev_profile": 0})  # the driver's job: EV profile 0
        self.runners: list[SimGpuRunner] = []
        for rank, gpu in enumerate(plan.ranks):
            core = core_tuning()
            extra = circuit_agent(self.fabric.plan, gpu, fab.window, core)
            config = parse_config({**agent_transport(self.fabric.plan, gpu,
                                                     self.fabric.mode, fab.window, core),
                                   **extra})
            host = SimHost(gpu, self.fabric, config)
            runner = SimGpuRunner(host, plan, rank, self.session.arrive, seed, attr)
            self.runners.append(runner)
            self.session.releases.append(runner.release)

    def go(self) -> None:
        """Set up every GPU, start the session, arrive at step 1 and run until the last
        barrier is released, a GPU fails, or the limit."""
        board: dict[int, dict[str, Any]] = {}
        for r in self.runners:
            r.publish(board)
        for r in self.runners:
            r.connect(board)
        self.session.start()
        for r in self.runners:
            self.session.arrive(r.rank, 1)
        sched, limit = self.sched, self.fab.limit_s
        while not self.session.done and sched.now < limit:
            sched.run(until=min(limit, sched.now + 1e-3))
            if any(r.error for r in self.runners) or sched.next_time() is None:
                break
        self.fab.events += sched.events_run
        self.fab.simulated_s += sched.now
        errors = [r.error for r in self.runners if r.error]
        if errors:
            raise CollectiveError(f"{self.plan.schedule}: {'; '.join(errors[:4])}")
        if not self.session.done:
            step = next(rec.step for rec in self.session.records if rec.released_s is None)
            missing = sorted(set(range(self.plan.n))
                             - set(self.session.records[step - 1].arrivals))
            raise CollectiveError(f"{self.plan.schedule}: step {step} not released after "
                                  f"{sched.now:g} simulated s (ranks {missing} did not arrive)")

    def outcome(self, tag: str) -> Outcome:
        plan, recs = self.plan, self.session.records
        s = len(plan.steps)
        port_of = {(rank, p): self.fabric.topo.peer(gpu, p).port
                   for rank, gpu in enumerate(plan.ranks) for p in self.fabric.topo.ports(gpu)}
        assert all(r.released_s is not None for r in recs[:s])

        def circuits_ok(r: StepRecord) -> bool:
            return r.readback == {port_of[(c.src, c.src_port)]: port_of[(c.dst, c.dst_port)]
                                  for c in plan.intervals[r.interval].circuits}

        steps = step_measures(plan, recs, circuits_ok)
        verified: bool | None = None
        if plan.collective != CUSTOM:
            verified = all([r.verify() for r in self.runners])  # every GPU checks
        gpus = [r.report() for r in self.runners]
        return Outcome(tag, plan, steps, recs[s].last_arrival_s - recs[0].last_arrival_s,
                       self.session.reconfigurations, verified, gpus,
                       dark_drops=self.ocs.dark_drops(), started=recs[0].last_arrival_s,
                       records=[r.to_json() for r in recs])


__all__ = ["SimCircuitFabric", "SimCollectiveDriver"]

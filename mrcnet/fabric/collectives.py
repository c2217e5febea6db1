"""Collectives on a running photonic scale-up domain: calibration, schedules, measurement.

A collective run (:func:`run_plan`) hands the plan to the controller (``StartCollective``:
circuits per interval, alpha_r) and a ``collective`` job to every GPU, waits for the GPUs'
results and reads the controller's timeline. Times come from the controller's barrier (run
clock): A_i = when the last GPU arrived at step i, R_i = when step i was released. Then

- step i took S_i = A_(i+1) - R_i (transfers, reductions, the arrival RPC);
- before it, G_i = R_i - A_i (the release, and the reconfiguration when there was one);
- the collective took A_(s+1) - A_1 = sum of G_i + S_i.

Calibration (:func:`calibrate`) measures the cost model's parameters on the same machinery:
a custom collective on the ring C(1) with steps "u -> u+1, one block" (T1), "u -> u+1, n/2
blocks" (T2) and "u -> u+2, one block" (2 hops at theta 1/2, T3), each repeated, then steps
that alternate C(1) and C(-1) so every barrier reconfigures. With B the block size:
c = (n/2 - 1) B / (T2 - T1), delta = T3 - T1 - B / c, alpha = T1 - delta - B / c, alpha_r =
median G of reconfiguring steps - median G of the others (the dark time plus the controller's
writes). Medians over the repetitions; a negative estimate (noise) is clamped to 0 and noted.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.collective_plan import RunPlan
from common.collectives import Collective, Step
from common.proto import mrc_ctl_pb2 as pb
from controller.harvest import runplan, schedules
from controller.harvest.engine import Synthesizer
from controller.harvest.model import CircuitTopology, HarvestError, Params
from hosts.bulk import write_json
from mrcnet.fabric import microcal
from mrcnet.fabric.fidelity import agent_windows, assess, warning

CALIBRATION_REPEATS = 3
RECONFIG_PROBES = 4


class CollectiveError(RuntimeError):
    """A collective run failed (a GPU reported an error, timed out, or a check failed)."""


@dataclass
class StepMeasure:
    step: int
    interval: int
    reconfigured: bool
    gap_s: float  # G_i
    step_s: float  # S_i
    model_step_s: float
    dark_s: float  # dark period the controller applied (0 when not reconfigured)
    circuits_ok: bool  # read-back cross-connects == the plan's

    def to_json(self) -> dict[str, Any]:
        return vars(self)


def step_measures(plan: RunPlan, recs: Sequence[Any],
                  circuits_ok: Callable[[Any], bool]) -> list[StepMeasure]:
    """S_i and G_i of every step from the barrier's records (the controller's
    pb.StepRecord, or the simulator's records with the same fields: ``released_s``,
    ``last_arrival_s``, ``dark_start_s``/``dark_end_s``, ``interval``, ``reconfigured``):
    G_i from the last arrival to the release, S_i from the release to the next barrier's last
    arrival; ``circuits_ok(record)``: whether the cross-connects read back were the plan's."""
    steps = []
    for i in range(len(plan.steps)):
        r = recs[i]
        steps.append(StepMeasure(
            step=i + 1, interval=r.interval, reconfigured=r.reconfigured,
            gap_s=r.released_s - r.last_arrival_s,
            step_s=recs[i + 1].last_arrival_s - r.released_s,
            model_step_s=plan.steps[i].model_s,
            dark_s=r.dark_end_s - r.dark_start_s if r.reconfigured else 0.0,
            circuits_ok=circuits_ok(r)))
    return steps


@dataclass
class Outcome:
    tag: str
    plan: RunPlan
    steps: list[StepMeasure]
    measured_s: float
    reconfigurations: int
    verified: bool | None
    gpus: list[dict[str, Any]]
    dark_drops: int | None = 0  # frames dropped on dark ports during this run; None: unreadable
    started: float = 0.0  # A_1 (run clock)
    records: list[dict[str, Any]] = field(default_factory=list)
    fidelity: dict[str, Any] | None = None  # mrcnet/fabric/fidelity.py: did every process keep up
    errors: list[str] = field(default_factory=list)  # figures the report could not read

    @property
    def faithful(self) -> bool | None:
        """The measured verdict: None when there was no monitor or not every process was
        measured (the fidelity report's ``reason`` says which)."""
        if self.fidelity is None:
            return None
        value = self.fidelity.get("faithful")
        return None if value is None else bool(value)

    @property
    def model_s(self) -> float:
        return self.plan.model.model_s

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "schedule": self.plan.schedule,
            "measured_s": self.measured_s,
            "model_s": self.model_s,
            "ratio": self.measured_s / self.model_s if self.model_s > 0 else None,
            "reconfigurations": self.reconfigurations,
            "verified": self.verified,
            "faithful": self.faithful,
            "fidelity": self.fidelity,
            "dark_drops": self.dark_drops,
            "errors": self.errors,
            "steps": [s.to_json() for s in self.steps],
            "timeline": self.records,
            "forwarded_packets": sum(g.get("router", {}).get("forwarded", 0) for g in self.gpus),
            "retransmitted_packets": sum(
                int(q.get("tx_rtx", 0)) for g in self.gpus
                for q in g.get("qp_stats", {}).values()),
            "reduce_cpu_s": sum(float(g.get("reduce_s", 0.0)) for g in self.gpus),
        }


@dataclass(frozen=True)
class Calibration:
    """The cost model's parameters as the schedules use them (alpha_r: the whole gap a
    reconfiguration adds, dark time included)."""

    bandwidth_bps: float
    alpha_s: float
    delta_s: float
    alpha_r_s: float
    samples: dict[str, list[float]]
    notes: tuple[str, ...] = ()
    # per hop of the acknowledgements' return, added to a run's prediction (runplan): only a
    # micro-benchmark calibration on 8 or more GPUs measures it; 0 folds it into alpha
    ack_hop_s: float = 0.0

    def params(self, degree: int) -> Params:
        return Params(degree, self.bandwidth_bps, self.alpha_s, self.delta_s, self.alpha_r_s)

    @staticmethod
    def from_file(data: dict[str, Any], dark_s: float) -> Calibration:
        """A saved micro-benchmark calibration (microcal.load) for runs with ``dark_s``."""
        return Calibration(float(data["bandwidth_bps"]), float(data["alpha_s"]),
                           float(data["delta_s"]),
                           dark_s + float(data["alpha_r_overhead_s"]),
                           {"samples": [float(s["seconds"]) for s in data.get("samples", [])]},
                           tuple(str(x) for x in data.get("notes", [])),
                           float(data.get("ack_hop_s", 0.0)))

    def to_json(self) -> dict[str, Any]:
        return {"bandwidth_bps": self.bandwidth_bps, "alpha_s": self.alpha_s,
                "delta_s": self.delta_s, "alpha_r_s": self.alpha_r_s,
                "ack_hop_s": self.ack_hop_s, "samples": self.samples, "notes": list(self.notes)}


class CollectiveDriver:
    """Runs collective plans on a started circuit fabric (``mrcnet.fabric.orchestrator``)."""

    def __init__(self, fab: Any, timeout: float = 300.0,
                 say: Callable[[str], None] | None = None) -> None:
        if not fab.circuit:
            raise CollectiveError(f"{fab.topo.name} is a packet fabric; collectives run on "
                                  "circuit fabrics (GPUs around an OCS)")
        self.fab = fab
        self.timeout = timeout
        self.say = say or fab.say
        self.ranks = [h.name for h in fab.plan.hosts]
        self.ports = min(len(h.ports) for h in fab.plan.hosts)
        self.count = 0
        self.calibration_run: Outcome | None = None

    @property
    def n(self) -> int:
        return len(self.ranks)

    # -- one run -------------------------------------------------------------------------
    def run_plan(self, plan: RunPlan, seed: int = 1, tag: str | None = None) -> Outcome:
        fab = self.fab
        self.count += 1
        tag = tag or f"c{self.count}-{plan.collective}-{plan.schedule}".replace(":", "-")
        folder = fab.run_dir / "collectives" / tag
        folder.mkdir(parents=True, exist_ok=True)
        plan_path = folder / "plan.json"
        if plan.predicted_unix is None:  # the model's prediction precedes the run
            plan = dataclasses.replace(plan, predicted_unix=time.time())
        plan.save(plan_path)
        circuits = [[pb.Circuit(src=t.split(" -> ")[0], dst=t.split(" -> ")[1])
                     for t in runplan.circuit_text(plan, k)]
                    for k in range(len(plan.intervals))]
        req = pb.StartCollectiveRequest(
            session=tag, ranks=self.ranks, alpha_r_s=plan.dark_s,
            barrier_timeout_s=self.timeout,
            intervals=[pb.CircuitSet(circuits=c) for c in circuits],
            step_interval=[st.interval for st in plan.steps],
            early=[pb.EarlyReconfiguration(step=st.step, ranks=list(st.reconfigure_after))
                   for st in plan.steps if st.reconfigure_after is not None])
        mark = fab.fidelity.mark() if fab.fidelity is not None else None
        drops_before = self._dark_drops()
        fab.ctl.fabric.StartCollective(req, timeout=30)
        controller = f"unix:{fab.sock_dir / 'ctl.sock'}"
        for rank, gpu in enumerate(self.ranks):
            jobs = fab.run_dir / "jobs" / gpu
            jobs.mkdir(parents=True, exist_ok=True)
            write_json(jobs / f"{tag}.job.json", {
                "id": tag, "role": "collective", "plan": str(plan_path), "rank": rank,
                "session": tag, "controller": controller, "exchange": str(folder / "oob"),
                "seed": seed, "timeout": self.timeout, "ev_profile": 0})
        results = self._wait(tag)
        state = fab.ctl.fabric.GetCollective(pb.GetCollectiveRequest(session=tag), timeout=30)
        errors = [e for r in results for e in r.get("errors", [])]
        if errors or state.error:
            raise CollectiveError(f"collective {tag}: {state.error or '; '.join(errors[:4])} "
                                  f"(GPU results in {fab.run_dir / 'jobs'})")
        out = self._outcome(tag, plan, state, results)
        drops_after = self._dark_drops()
        if isinstance(drops_before, int) and isinstance(drops_after, int):
            out.dark_drops = drops_after - drops_before
        else:
            out.dark_drops = None
            out.errors.append(next(d for d in (drops_before, drops_after)
                                   if isinstance(d, str)))
        if mark is not None:
            out.fidelity = assess(fab.clock.tdf, mark, fab.fidelity.mark(),
                                  agent_windows(list(zip(self.ranks, results))))
            note = warning(out.fidelity)
            if note:
                self.say(f"{tag}: {note}")
        return out

    def _wait(self, tag: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.fab.clock.to_wall(self.timeout) + 30
        paths = [self.fab.run_dir / "jobs" / gpu / f"{tag}.result.json" for gpu in self.ranks]
        while True:
            if all(p.exists() for p in paths):
                return [json.loads(p.read_text()) for p in paths]
            if time.monotonic() > deadline:
                missing = [g for g, p in zip(self.ranks, paths) if not p.exists()]
                raise CollectiveError(f"collective {tag}: no result from {', '.join(missing)} "
                                      f"within {self.timeout:.0f} s")
            self.fab.check_alive()
            time.sleep(0.02)

    def _outcome(self, tag: str, plan: RunPlan, state: pb.CollectiveState,
                 results: list[dict[str, Any]]) -> Outcome:
        recs = list(state.records)
        s = len(plan.steps)

        def circuits_ok(r: pb.StepRecord) -> bool:
            return self._readback_matches(r, {(c.src, c.src_port): (c.dst, c.dst_port)
                                              for c in plan.intervals[r.interval].circuits})

        steps = step_measures(plan, recs, circuits_ok)
        verified: bool | None = None
        checks = [r.get("verified") for r in results]
        if all(c is not None for c in checks):
            verified = all(bool(c) for c in checks)
        timeline = [{"step": r.step, "interval": r.interval, "reconfigured": r.reconfigured,
                     "first_arrival_s": r.first_arrival_s, "last_arrival_s": r.last_arrival_s,
                     "released_s": r.released_s, "dark_start_s": r.dark_start_s,
                     "dark_end_s": r.dark_end_s, "early": r.early} for r in recs]
        return Outcome(tag, plan, steps, recs[s].last_arrival_s - recs[0].last_arrival_s,
                       state.reconfigurations, verified, results,
                       started=recs[0].last_arrival_s,
                       records=timeline)

    def _readback_matches(self, rec: pb.StepRecord,
                          want: dict[tuple[int, int], tuple[int, int]]) -> bool:
        """The cross-connects read back over P4Runtime equal the plan's circuits."""
        topo = self.fab.topo
        port_of = {}
        for rank, gpu in enumerate(self.ranks):
            for p in topo.ports(gpu):
                port_of[(rank, p)] = topo.peer(gpu, p).port
        expect = {port_of[src]: port_of[dst] for src, dst in want.items()}
        got = {x.in_port: x.out_port for x in rec.readback}
        return got == expect

    def _dark_drops(self) -> int | str:
        """Frames the OCS dropped on dark (or unconnected) ports over the fabric's life (its
        P4 counters, read by the controller), or why they could not be read: a run reports
        the difference, never a zero it did not read."""
        import grpc

        ocs = next(iter(self.fab.mn.switches))
        try:
            cells = self.fab.ctl.read_counter(ocs, "OcsIngress.dark_drops")
        except grpc.RpcError as exc:
            return f"dark_drops of {ocs} unreadable: {exc.code().name} {exc.details()}"
        return sum(pkts for pkts, _b in cells.values())

    # -- plans ---------------------------------------------------------------------------
    def plan_for(self, coll: Collective, schedule: schedules.Schedule, size: int, degree: int,
                 params: Params, dark_s: float, dtype: str = "int32",
                 barrier: str = "all", ack_hop_s: float = 0.0) -> RunPlan:
        if degree > self.ports:
            raise HarvestError(f"degree {degree} needs {degree} optical ports per GPU; "
                               f"{self.fab.topo.name} has {self.ports}")
        if coll.n != self.n:
            raise HarvestError(f"the collective is for {coll.n} GPUs, "
                               f"{self.fab.topo.name} has {self.n}")
        plan = runplan.build_plan(coll, schedule, size, degree, self.ranks, dtype,
                                  bandwidth_bps=params.bandwidth_bps, alpha_s=params.alpha,
                                  delta_s=params.delta, dark_s=dark_s, ack_hop_s=ack_hop_s)
        return runplan.with_barrier(plan, barrier)

    # -- calibration ---------------------------------------------------------------------
    def calibrate(self, message_bytes: int, dark_s: float,
                  repeats: int = CALIBRATION_REPEATS) -> Calibration:
        n = self.n
        if n < 4 or n % 2:
            raise HarvestError("calibration needs an even number of at least 4 GPUs")
        half = tuple(range(n // 2))

        def step(offset: int, blocks: tuple[int, ...]) -> Step:
            return Step("all-gather", tuple((u + offset) % n for u in range(n)),
                        tuple(tuple((b + u) % n for b in blocks) for u in range(n)), n)

        kinds = ["near1", "nearN", "far1"] * repeats
        seq = {"near1": step(1, (0,)), "nearN": step(1, half), "far1": step(2, (0,))}
        steps = [seq[k] for k in kinds]
        flips = [step(1, (0,)) if j % 2 else step(-1, (0,)) for j in range(RECONFIG_PROBES)]
        coll = Collective("custom", "custom", n, tuple(steps + flips))
        ring, back = CircuitTopology.circulant(n, [1]), CircuitTopology.circulant(n, [n - 1])
        ivs: list[tuple[int, int, CircuitTopology]] = [(1, len(steps), ring)]
        for j in range(RECONFIG_PROBES):
            k = len(steps) + j + 1
            ivs.append((k, k, ring if j % 2 else back))
        rough = Params(1, 1e9, 0.0, 0.0, 0.0)
        sched = schedules.evaluate("calibration", coll, message_bytes, rough, ivs)
        plan = runplan.build_plan(coll, sched, message_bytes, 1, self.ranks, dark_s=dark_s)
        self.say(f"calibrating on {n} GPUs: {len(coll.steps)} steps")
        out = self.run_plan(plan, tag=f"c{self.count + 1}-calibration")
        self.calibration_run = out
        cost = {k: [] for k in seq}  # type: dict[str, list[float]]
        for kind, m in zip(kinds, out.steps):
            cost[kind].append(m.gap_s + m.step_s)
        plain_gaps = [m.gap_s for m in out.steps[:len(kinds)][1:]]
        reconf_gaps = [m.gap_s for m in out.steps[len(kinds):]]
        t1, tn, t3 = (statistics.median(cost[k]) for k in ("near1", "nearN", "far1"))
        block = message_bytes / n
        notes = []
        if tn <= t1:
            raise CollectiveError(f"calibration: {len(half)} blocks took no longer than one "
                                  f"({tn:.4g} s vs {t1:.4g} s); use a larger --size")
        per_byte = (tn - t1) / ((len(half) - 1) * block)
        delta = t3 - t1 - block * per_byte
        if delta < 0:
            notes.append(f"delta measured {delta:.3g} s (noise), clamped to 0")
            delta = 0.0
        alpha = t1 - delta - block * per_byte
        if alpha < 0:
            notes.append(f"alpha measured {alpha:.3g} s (noise), clamped to 0")
            alpha = 0.0
        alpha_r = statistics.median(reconf_gaps) - statistics.median(plain_gaps)
        if alpha_r < 0:
            notes.append(f"alpha_r measured {alpha_r:.3g} s (noise), clamped to 0")
            alpha_r = 0.0
        return Calibration(8.0 / per_byte, alpha, delta, alpha_r,
                           {"near_1_block_s": cost["near1"], "near_n2_blocks_s": cost["nearN"],
                            "far_1_block_s": cost["far1"], "plain_gap_s": plain_gaps,
                            "reconfig_gap_s": reconf_gaps}, tuple(notes))

    def calibrate_micro(self, message_bytes: int, dark_s: float) -> microcal.MicroCalibration:
        """The model's parameters from point-to-point micro-benchmarks
        (mrcnet/fabric/microcal.py), never from the shapes the collectives run."""
        n = self.n
        plan_design = microcal.design(n)
        topo = {"ring": CircuitTopology.circulant(n, [1]),
                "halves": CircuitTopology.from_counts(n, microcal.half_rings(n)),
                "back": CircuitTopology.circulant(n, [n - 1])}
        ivs = [(a, b, topo[name]) for a, b, name in plan_design.intervals]
        rough = Params(1, 1e9, 0.0, 0.0, 0.0)
        sched = schedules.evaluate("micro-calibration", plan_design.collective, message_bytes,
                                   rough, ivs)
        plan = runplan.build_plan(plan_design.collective, sched, message_bytes, 1, self.ranks,
                                  dark_s=dark_s)
        self.say(f"calibrating on {n} GPUs from micro-benchmarks: {plan_design.steps} steps")
        out = self.run_plan(plan, tag=f"c{self.count + 1}-micro-calibration")
        self.calibration_run = out
        cal = microcal.measure(plan_design.kinds, [m.gap_s + m.step_s for m in out.steps],
                               [m.gap_s for m in out.steps], message_bytes // n, dark_s,
                               frame_bytes=self.fab.topo.fabric.mtu)
        topology = self.fab.topo
        cal.fabric = {"topology": topology.name, "gpus": n,
                      "link_rate_bps": topology.links[0].params.rate_bps,
                      "tdf": self.fab.clock.tdf, "run": out.tag,
                      "faithful": out.faithful}
        return cal

    # -- schedules -------------------------------------------------------------------------
    def schedules_for(self, coll: Collective, size: int, degree: int, params: Params,
                      names: Sequence[str]) -> list[schedules.Schedule]:
        synth = Synthesizer(coll, size, params)
        out = []
        for name in names:
            if name in schedules.SCHEDULE_KINDS:
                out.append(schedules.builtin(name, synth))
            else:
                out.append(schedules.from_file(Path(name), coll, size, params))
        return out


__all__ = ["Calibration", "CollectiveDriver", "CollectiveError", "Outcome", "StepMeasure"]

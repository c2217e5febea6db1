"""One simulated run: a topology, a workload and its options in; a results dict out that
depends on nothing but those inputs (no wall clock, no host names, no process ids), so the
same inputs give the same JSON byte for byte. What the run cost the machine (wall seconds,
events per second, peak memory) is reported apart, in ``SimRun.perf``.

The run is set up as ``mrcnet up`` sets up an emulated one: the agents' configuration and
core tuning (mrcnet/fabric/runparams.py), the controller's EV profile 1 and, with ``--cc
nscc``, CC profile 1 scaled for the topology's base RTT (mrcnet/sim/control.py), the
workload's first round (its pairs, flow ids and seeds: mrcnet/fabric/workloads.py), the jobs'
QP attributes with the ACK timeout the orchestrator computes from the base RTT, failures
through the controller with route convergence after ``cp_delay``. The results carry the
emulation's results.json fields that a comparison reads (``workloads``, ``mechanisms``,
``host_counters``, ``samples``, ``link_events``, ``convergence``, ``cc_calibration``), plus
what only a simulation knows (``switches``, ``sim``).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import CtlError
from controller.fabric import BackendError
from controller.profile_store import LB_POLICIES
from mrcnet.fabric import queuedelay
from mrcnet.fabric.capacity import CapacityError, workload_capacity
from mrcnet.fabric.ctlclient import CC_PROFILE, EV_PROFILE
from mrcnet.fabric.failures import LinkEvent, parse_schedule
from mrcnet.fabric.liveview import EvTracker, Sample
from mrcnet.fabric.runparams import CC_CHOICES, ack_timeout_exponent, core_tuning
from mrcnet.fabric.workloads import (
    Workload,
    counter_totals,
    flows_for,
    round_seed,
    workload_flows,
)
from mrcnet.sim.control import SimController
from mrcnet.sim.fabric import SimError, SimFabric, build_fabric
from mrcnet.sim.hostnode import SimHost, agent_config
from mrcnet.sim.record import Recorder
from mrcnet.sim.workload import FlowJobs, start_flows
from topologies.model import FabricKind, PathMode, Topology
from topologies.paths import base_rtt

# (sim time, events, flows done, flows, share of the workload's bytes acknowledged)
Progress = Callable[[float, int, int, int, float], None]
# The capacity LP has up to (flows x directed links) variables: 1,024 flows on the 1,024-host
# Clos would be 12.6 million, more than the run itself costs. Larger workloads get none.
MAX_LP_VARIABLES = 2_000_000
SINK_MEMORY_SHARE = 0.8  # every sink buffer is real: refuse workloads that cannot fit them


def _memory_bytes() -> int:
    """Physical memory of this machine (0: unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


@dataclass(frozen=True)
class SimOptions:
    run: str = "permutation"
    qp: str = "MRC"
    mode: str | None = None  # path mode (default: the topology's)
    size: int = 1 << 20
    window: int = 64 * 1024
    cc: str = "fixed"  # "fixed" (the window above) or "nscc" (CC profile 1)
    lb: str = "rotation"  # the EV profile's spraying policy
    cp_delay: float = 1.0  # seconds after a port change before routes are recomputed
    seed: int = 1  # as ``mrcnet up``'s scenario: round 1 uses seed + 1
    limit_s: float = 10.0  # simulated seconds before the run gives up
    fail: tuple[str, ...] = ()
    restore: tuple[str, ...] = ()
    rate: str | None = None  # as given (recorded; the topology passed in has it applied)
    delay: str | None = None


@dataclass
class SimRun:
    results: dict[str, Any]
    perf: dict[str, float] = field(default_factory=dict)
    writers: list[tuple[str, int]] = field(default_factory=list)  # (host, qpn) of each flow


def check_options(opts: SimOptions) -> None:
    """ValueError naming the first option that cannot be simulated."""
    if opts.qp.upper() not in ("MRC", "RC"):
        raise SimError(f"--qp {opts.qp!r}: MRC or RC")
    if opts.cc not in CC_CHOICES:
        raise SimError(f"--cc {opts.cc!r}: one of {', '.join(CC_CHOICES)}")
    if opts.lb not in LB_POLICIES:
        raise SimError(f"--lb {opts.lb!r}: one of {', '.join(LB_POLICIES)}")
    if opts.size <= 0 or opts.window <= 0:
        raise SimError("--size and --window must be positive")
    if not opts.cp_delay >= 0 or not opts.limit_s > 0:
        raise SimError("--cp-delay must be >= 0 and --limit > 0 seconds")


class _Failures:
    """The failure schedule, applied through the controller at its simulated times."""

    def __init__(self, ctl: SimController, events: list[LinkEvent]) -> None:
        self.ctl = ctl
        self.log: list[dict[str, Any]] = []  # as the emulation's link_events
        self.errors: list[str] = []
        for ev in events:
            ctl.fabric.sched.at(ev.at, lambda ev=ev: self.apply(ev))  # type: ignore[misc]

    def apply(self, ev: LinkEvent) -> None:
        try:
            self.ctl.set_links(ev.links, ev.up)
        except (CtlError, BackendError) as exc:
            self.errors.append(f"{ev.label} {'up' if ev.up else 'down'}: {exc}")
            return
        self.log.append({"t": self.ctl.fabric.sched.now, "link": ev.label, "up": ev.up})


def simulate(topo: Topology, opts: SimOptions, progress: Progress | None = None,
             qlog_dir: Path | None = None) -> SimRun:
    """Run ``opts.run`` on ``topo`` to completion (or ``opts.limit_s``); raises ValueError
    (SimError, WorkloadError, FailureSpecError) for inputs it cannot run. ``qlog_dir``: write
    each QP's qlog there (mrcnet/sim/record.py)."""
    wall0 = time.monotonic()
    cpu0 = time.process_time()
    check_options(opts)
    if topo.fabric.kind != FabricKind.PACKET:
        raise SimError(f"{topo.name} is a circuit fabric: packet workloads run on packet "
                       "fabrics; collectives with --run PHASE:ALGORITHM (mrcnet sim)")
    mode = PathMode(opts.mode) if opts.mode else topo.fabric.path_mode
    fab = build_fabric(topo, mode, seed=opts.seed)  # SimError first: what is not simulated
    seed = round_seed(opts.seed, 1)
    hosts_names = [h.name for h in topo.hosts]
    flows = workload_flows(flows_for(opts.run, hosts_names, seed), opts.size, seed, 1)
    need, have = len(flows) * opts.size, _memory_bytes()
    if have and need > SINK_MEMORY_SHARE * have:
        raise SimError(f"{len(flows)} flows of {opts.size} bytes need {need / 2**30:.1f} GiB of "
                       f"sink buffers; this machine has {have / 2**30:.1f} GiB")
    events = parse_schedule(topo, list(opts.fail), list(opts.restore))
    base = base_rtt(topo)
    nscc = opts.cc == "nscc"
    ctl = SimController(fab, opts.cp_delay, opts.lb, base if nscc else None)
    hosts = {}
    for name in hosts_names:
        hosts[name] = host = SimHost(name, fab, agent_config(fab.plan, name, mode, opts.window,
                                                             core_tuning()))
        ctl.install(host)
    failures = _Failures(ctl, events)
    recorder = Recorder(topo, fab, hosts, qlog_dir)
    ack_timeout = ack_timeout_exponent(base)
    job = {"size": opts.size, "qp_type": opts.qp.upper(), "ev_profile": EV_PROFILE,
           "cc_profile": CC_PROFILE if nscc else 0, "ack_timeout": ack_timeout}
    wall_built = time.monotonic()
    cpu_built = time.process_time()
    jobs = start_flows(hosts, flows, job, seed)
    sched = fab.sched
    last_report = time.monotonic()
    while sched.now < opts.limit_s:
        sched.run(until=min(opts.limit_s, sched.now + 1e-3))
        recorder.tick(sched.now)
        done = sum(1 for j in jobs if j.flow.writer and j.flow.sink)
        if progress is not None and time.monotonic() - last_report > 2.0:
            last_report = time.monotonic()
            acked = sum(j.out.acked_bytes for j in jobs)
            progress(sched.now, sched.events_run, done, len(jobs),
                     acked / (len(jobs) * opts.size) if jobs else 1.0)
        if done == len(jobs) or sched.next_time() is None:
            break
    for j in jobs:
        j.finish(sched.now)
    samples = recorder.finish()
    wall_run = time.monotonic() - wall_built
    cpu_run = time.process_time() - cpu_built
    results = _results(topo, mode, opts, fab, hosts, jobs, ctl, failures, base, ack_timeout,
                       samples, recorder.tracker)
    wall = time.monotonic() - wall0
    frames = results["sim"]["frames_delivered_to_hosts"]
    hops = results["sim"]["switch_frames"]
    # Rates are per second of the run phase (after building), wall and CPU: on a shared
    # machine the wall clock also counts other processes' time.
    perf = {"wall_s": wall, "cpu_s": time.process_time() - cpu0, "build_s": wall_built - wall0,
            "run_s": wall_run, "run_cpu_s": cpu_run,
            "events": float(sched.events_run),
            "events_per_s": sched.events_run / wall_run if wall_run > 0 else 0.0,
            "events_per_cpu_s": sched.events_run / cpu_run if cpu_run > 0 else 0.0,
            "host_frames_per_s": frames / wall_run if wall_run > 0 else 0.0,
            "switch_frames_per_s": hops / wall_run if wall_run > 0 else 0.0,
            "switch_frames_per_cpu_s": hops / cpu_run if cpu_run > 0 else 0.0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return SimRun(results, perf, [(j.src.name, j.wqp) for j in jobs])


def _switch_figures(fab: SimFabric) -> dict[str, Any]:
    """Both directions of every port, as the controller's driver sums them for GetSwitchStats
    (common/switchfigures.py ``embedded_figures``)."""
    drops = {"tail": 0, "down": 0, "loss": 0}
    trims = ecn = 0
    counters: dict[str, int] = {}
    for sw in fab.switches.values():
        for shapers in (sw.tm.egress, sw.tm.ingress):
            for sh in shapers.values():
                st = sh.stats
                drops["tail"] += st.tail_drops
                drops["down"] += st.down_drops
                drops["loss"] += st.loss_drops
                trims += sum(q.trims for q in st.queues)
                ecn += sum(q.ecn_marks for q in st.queues)
        for key, value in vars(sw.counters).items():
            counters[key] = counters.get(key, 0) + value
    return {"trims": trims, "ecn_marks": ecn, "drops": drops, **counters}


def _results(topo: Topology, mode: PathMode, opts: SimOptions, fab: SimFabric,
             hosts: dict[str, SimHost], jobs: list[FlowJobs], ctl: SimController,
             failures: _Failures, base: float, ack_timeout: int, samples: list[Sample],
             tracker: EvTracker) -> dict[str, Any]:
    flows = [j.flow for j in jobs]
    capacity: float | None = None
    size = len(flows) * 2 * len(topo.links)
    if size > MAX_LP_VARIABLES:
        capacity_note = f"not computed: an LP of up to {size} variables"
    else:
        try:
            capacity = workload_capacity(topo, [(f.src, f.dst) for f in flows])
            capacity_note = "maximum concurrent flow (mrcnet/fabric/capacity.py)"
        except CapacityError as exc:
            capacity_note = str(exc)
    ends = [j.t0 + float(r["seconds"]) for j in jobs for r in (j.flow.writer, j.flow.sink)]
    wl = Workload(opts.run, opts.qp.upper(), flows, 0.0, max(ends, default=0.0),
                  clock=fab.sched.clock, capacity_bps=capacity,
                  cc_profile=CC_PROFILE if opts.cc == "nscc" else 0)
    summary = wl.summary()
    # the switches' histograms since the start: the round started with the simulation
    summary["queue_delay"] = queuedelay.summary(
        queuedelay.from_traffic_managers(sw.tm for sw in fab.switches.values()))
    host_counters = {name: dict(sorted(h.core.host_stats().items()))
                     for name, h in hosts.items()}
    sw = _switch_figures(fab)
    rtx = int(summary["retransmitted_packets"])
    return {
        "simulated": True,
        "topology": topo.name,
        "mode": mode.value,
        "switch": "sim",
        "rate": opts.rate,
        "delay": opts.delay,
        "cp_delay": opts.cp_delay,
        "cc": opts.cc,
        "lb": opts.lb,
        "qp": opts.qp.upper(),
        "workload": opts.run,
        "size": opts.size,
        "window": opts.window,
        "seed": opts.seed,
        "limit_s": opts.limit_s,
        "fail": list(opts.fail),
        "restore": list(opts.restore),
        "capacity": capacity_note,
        "completed": summary["completed"],
        "verified_bytes": summary["verified_bytes"],
        "qp_errors": summary["qp_errors"],
        "retransmitted_packets": rtx,
        "retransmitted_bytes": rtx * topo.fabric.mtu,
        "workloads": [summary],
        "host_counters": host_counters,
        "mechanisms": counter_totals(host_counters),
        "link_events": failures.log,
        "failure_errors": failures.errors,
        "convergence": ctl.log,
        "cc_calibration": {
            "base_rtt": base, "topology_base_rtt": base, "ack_timeout": ack_timeout,
            "nscc": ({f.name: v for f, v in ctl.nscc.ListFields()} if ctl.nscc else None)},
        # the switch samples every SAMPLE_INTERVAL_S (mrcnet/sim/record.py), as the
        # emulation's: counts since the start, rates over the interval
        "samples": [asdict(s) for s in samples],
        "ev_counts": tracker.counts(),
        "ev_events": tracker.events[-5000:],
        "switches": sw,
        "sim": {
            "simulated_s": fab.sched.now,
            "events": fab.sched.events_run,
            "frames_sent_by_hosts": sum(h.tx_frames for h in hosts.values()),
            "frames_delivered_to_hosts": sum(h.rx_frames for h in hosts.values()),
            "switch_frames": sum(s.counters.rx_frames for s in fab.switches.values()),
        },
    }

"""One simulated run: a topology, a workload and its options in; a results dict out that
depends on nothing but those inputs (no wall clock, no host names, no process ids), so the
same inputs give the same JSON byte for byte. What the run cost the machine (wall seconds,
events per second) is reported apart, in ``SimRun.perf``."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hosts.transport.counters import add_counts
from hosts.transport.sim import QpOptions
from hosts.transport.types import QpType
from mrcnet.fabric.capacity import workload_capacity
from mrcnet.fabric.failures import LinkEvent, parse_schedule
from mrcnet.fabric.workloads import flows_for
from mrcnet.sim.fabric import SimFabric, build_fabric
from mrcnet.sim.hostnode import SimHost, agent_config
from mrcnet.sim.workload import Flow, collect, start_flows
from topologies.model import PathMode, Topology

Progress = Callable[[float, int, int, int], None]  # (sim time, events, flows done, flows)


@dataclass(frozen=True)
class SimOptions:
    run: str = "permutation"
    qp: str = "MRC"
    mode: str | None = None  # path mode (default: the topology's)
    size: int = 1 << 20
    window: int = 64 * 1024
    seed: int = 1
    limit_s: float = 10.0  # simulated seconds before the run gives up
    fail: tuple[str, ...] = ()
    restore: tuple[str, ...] = ()


@dataclass
class SimRun:
    results: dict[str, Any]
    perf: dict[str, float] = field(default_factory=dict)


def _percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (no interpolation: a value some flow really had)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _apply(fab: SimFabric, ev: LinkEvent) -> None:
    for link in ev.links:
        for end in (link.a, link.b):
            sw = fab.switches.get(end.node)
            if sw is not None:
                sw.set_port(end.port, ev.up)


def simulate(topo: Topology, opts: SimOptions, progress: Progress | None = None) -> SimRun:
    """Run ``opts.run`` on ``topo`` to completion (or ``opts.limit_s``); raises ValueError
    (SimError, WorkloadError, FailureSpecError) for inputs it cannot run."""
    wall0 = time.monotonic()
    mode = PathMode(opts.mode) if opts.mode else topo.fabric.path_mode
    qp_type = {"MRC": QpType.MRC, "RC": QpType.RC}[opts.qp.upper()]
    fab = build_fabric(topo, mode, seed=opts.seed)  # SimError first: what is not simulated
    pairs = flows_for(opts.run, [h.name for h in topo.hosts], opts.seed)
    events = parse_schedule(topo, list(opts.fail), list(opts.restore))
    hosts = {h.name: SimHost(h.name, fab, agent_config(fab.plan, h.name, mode, opts.window))
             for h in topo.hosts}
    for ev in events:
        fab.sched.at(ev.at, lambda ev=ev: _apply(fab, ev))  # type: ignore[misc]
    flows = start_flows(hosts, pairs, opts.size, qp_type, QpOptions(profile_id=0), opts.seed)
    sched = fab.sched
    last_report = time.monotonic()
    while sched.now < opts.limit_s:
        sched.run(until=min(opts.limit_s, sched.now + 1e-3))
        collect(hosts, flows)
        done = sum(f.finished_at is not None for f in flows)
        if progress is not None and time.monotonic() - last_report > 1.0:
            last_report = time.monotonic()
            progress(sched.now, sched.events_run, done, len(flows))
        if done == len(flows) or sched.next_time() is None:
            break
    wall = time.monotonic() - wall0
    results = _results(topo, mode, opts, fab, hosts, flows)
    frames = results["sim"]["frames_delivered_to_hosts"]
    perf = {"wall_s": wall, "events": float(sched.events_run),
            "events_per_s": sched.events_run / wall if wall > 0 else 0.0,
            "host_frames_per_s": frames / wall if wall > 0 else 0.0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return SimRun(results, perf)


def _results(topo: Topology, mode: PathMode, opts: SimOptions, fab: SimFabric,
             hosts: dict[str, SimHost], flows: list[Flow]) -> dict[str, Any]:
    fcts = [f.finished_at for f in flows if f.finished_at is not None]
    ok = [f for f in flows if f.status == "ok" and f.verified]
    counts: dict[str, int] = {}
    for f in flows:
        add_counts(counts, f.stats)
    span = max(fcts) if fcts else 0.0
    verified_bytes = sum(f.size for f in ok)
    goodput = verified_bytes * 8 / span if span > 0 else 0.0
    capacity = workload_capacity(topo, [(f.src, f.dst) for f in flows])
    drops: dict[str, int] = {"tail": 0, "down": 0, "loss": 0}
    trims = ecn = 0
    for sw in fab.switches.values():
        for sh in sw.tm.egress.values():
            st = sh.stats
            drops["tail"] += st.tail_drops
            drops["down"] += st.down_drops
            drops["loss"] += st.loss_drops
            trims += sum(q.trims for q in st.queues)
            ecn += sum(q.ecn_marks for q in st.queues)
    return {
        "topology": topo.name,
        "mode": mode.value,
        "qp": opts.qp.upper(),
        "workload": opts.run,
        "size": opts.size,
        "window": opts.window,
        "seed": opts.seed,
        "fail": list(opts.fail),
        "restore": list(opts.restore),
        "flows": [{"src": f.src, "dst": f.dst, "size": f.size, "status": f.status,
                   "verified": f.verified, "fct_s": f.finished_at,
                   "tx_data": f.stats.get("tx_data", 0), "tx_rtx": f.stats.get("tx_rtx", 0)}
                  for f in flows],
        "summary": {
            "flows": len(flows),
            "completed": len(fcts),
            "verified_flows": len(ok),
            "verified_bytes": verified_bytes,
            "seconds": span,
            "goodput_bps": goodput,
            "capacity_bps": capacity,
            "goodput_fraction": goodput / capacity if capacity > 0 else None,
            "fct_p50_s": _percentile(fcts, 50),
            "fct_p99_s": _percentile(fcts, 99),
            "fct_p100_s": _percentile(fcts, 100),
            "tx_data": counts.get("tx_data", 0),
            "tx_rtx": counts.get("tx_rtx", 0),
            "switch_trims": trims,
            "switch_ecn_marks": ecn,
            "switch_drops": drops,
        },
        "sim": {
            "simulated_s": fab.sched.now,
            "events": fab.sched.events_run,
            "frames_sent_by_hosts": sum(h.tx_frames for h in hosts.values()),
            "frames_delivered_to_hosts": sum(h.rx_frames for h in hosts.values()),
        },
    }

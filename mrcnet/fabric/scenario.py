"""A scenario on a running fabric: workload rounds, a failure schedule, the results.

``run_scenario`` submits the workload, starts the link-event schedule at the same moment,
resubmits the workload round after round until ``duration`` seconds (of the run's clock) have
passed (at least one round; every round is verified), then writes ``results.json`` and the
plots and returns the results dictionary (``completed``, ``verified_bytes``, ``qp_errors``,
``results_dir``, ``tdf``, ``faithful``, ``fidelity``, ...). A run whose workloads were not
all faithful prints a warning naming the slowest process and a TDF that should fix it. Each
round's summary carries ``queue_delay``: how long its data packets waited in the switches'
egress queues (mrcnet/fabric/queuedelay.py; None when the switches could not be read).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from mrcnet.fabric import fidelity, queuedelay, results
from mrcnet.fabric.failures import FabricEvent, HostPortEvent, Scheduler
from mrcnet.fabric.orchestrator import Fabric, FabricError
from mrcnet.fabric.workloads import counter_totals, round_seed


def apply_event(fab: Fabric, ev: FabricEvent) -> None:
    if isinstance(ev, HostPortEvent):
        fab.set_host_port(ev.host, ev.port, ev.up)
    else:
        fab.set_links(ev.links, ev.label, ev.up)


def _queue_hist(fab: Fabric) -> queuedelay.Hist | None:
    """The switches' data-queue wait histogram now (None: the switches could not be read)."""
    try:
        return queuedelay.from_details(fab.switch_detail())
    except FabricError as exc:
        fab.say(f"queueing delay not measured: {exc}")
        return None


def run_scenario(
    fab: Fabric,
    workload: str | None,
    size: int,
    qp_type: str = "MRC",
    events: Sequence[FabricEvent] | None = None,
    duration: float | None = None,
    timeout: float = 120.0,
    seed: int = 1,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    assert fab.runner is not None
    if workload is None and duration is None and events:
        duration = max(e.at for e in events) + 1.0  # let the schedule play out
    clock = fab.clock
    sched = Scheduler(list(events or []), lambda ev: apply_event(fab, ev), clock=clock)
    summaries: list[dict[str, Any]] = []
    start = clock.now()
    unit = "virtual s" if clock.dilated else "s"
    sched.start()
    try:
        rounds = 0
        while workload is not None:
            rounds += 1
            before = _queue_hist(fab)
            wl = fab.runner.submit(workload, size, qp_type, seed=round_seed(seed, rounds),
                                   timeout=timeout, extra=extra)
            fab.runner.wait(wl, timeout + 30, fab.check_alive)
            summaries.append(wl.summary())
            after = _queue_hist(fab)
            summaries[-1]["queue_delay"] = (queuedelay.summary(queuedelay.difference(
                after, before)) if after is not None and before is not None else None)
            fab.say(f"{workload} round {rounds}: {summaries[-1]['verified_flows']}/"
                    f"{len(wl.flows)} flows verified in {summaries[-1]['seconds']:.2f} {unit}")
            if duration is None or clock.now() - start >= duration:
                break
        if duration is not None:  # let the failure schedule (and the view) play out
            end = start + max(duration, max((e.at for e in sched.events), default=0.0))
            while clock.now() < end:
                fab.check_alive()
                time.sleep(0.1)
    finally:
        sched.stop()
    return collect(fab, summaries, sched)


def collect(fab: Fabric, summaries: list[dict[str, Any]], sched: Scheduler | None) -> dict[str, Any]:
    """Assemble, save and plot the results of what ran so far."""
    if fab.sampler is not None:
        fab.sampler.sample()
    link_events = list(fab.link_log)
    samples = list(fab.sampler.samples) if fab.sampler else []
    mtu = fab.topo.fabric.mtu if fab.topo else 4096
    hosts = fab.host_counters() if fab.agents else {}
    rtx = sum(int(w["retransmitted_packets"]) for w in summaries)
    reports = [w["fidelity"] for w in summaries if w.get("fidelity")]
    worst = max(reports, key=lambda r: r["max_lag_fraction"], default=None)
    faithful = all(r["faithful"] for r in reports) if reports else None
    text = fidelity.warning(worst) if worst is not None else None
    warnings = [text] if text else []
    if text:
        fab.say(f"WARNING: {text}")
    out: dict[str, Any] = {
        "run_id": fab.run_id,
        "tdf": fab.clock.tdf,
        "time": "virtual" if fab.clock.dilated else "wall",
        "faithful": faithful,
        "fidelity": worst,
        "warnings": warnings,
        "results_dir": str(fab.run_dir),
        "topology": fab.topo.name if fab.topo else None,
        "mode": fab.mode.value if fab.mode else None,
        "switch": fab.opts.switch,
        "rate": fab.opts.rate,
        "cp_delay": fab.opts.cp_delay,
        "completed": bool(summaries) and all(w["completed"] for w in summaries),
        "verified_bytes": sum(int(w["verified_bytes"]) for w in summaries),
        "qp_errors": sum(int(w["qp_errors"]) for w in summaries),
        "retransmitted_packets": rtx,
        "retransmitted_bytes": rtx * mtu,
        "workloads": summaries,
        "host_counters": hosts,
        "mechanisms": counter_totals(hosts),
        "link_events": link_events,
        "failure_errors": sched.errors if sched else [],
        "ev_counts": fab.tracker.counts(),
        "ev_events": fab.tracker.events[-5000:],
        "samples": [asdict(s) for s in samples],
        "convergence": results.convergence_lines(fab.run_dir),
        "timings": fab.timings,
        "cc": fab.opts.cc,
        "lb": fab.opts.lb,
        "cc_calibration": fab.calibration,
    }
    wall_t0 = time.time() - (time.monotonic() - fab.tracker.t0)
    t0 = fab.tracker.t0
    spans = [(w["started"] - t0, w["started"] - t0 + w["seconds"]) for w in summaries
             if "started" in w]
    plots = results.plot(fab.run_dir, samples, link_events, list(fab.tracker.events),
                         fab.topo.fabric.planes if fab.topo else 1, fab.clock.tdf, wall_t0,
                         workloads=spans, cc_qp=fab.opts.cc_qp)
    out["plots"] = [str(p) for p in plots]
    results.write_json(fab.run_dir, out)
    return out

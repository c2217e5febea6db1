"""``mrcnet bench incast``: 8 senders into one receiver, NSCC beside the fixed window.

One fabric (default topology incast-8 at its own rates: 100 Mb/s links, 2.5 ms each; on a
clock ``--tdf`` times slower than the wall clock, default 4, where the receiving agent keeps
up on 2 cores) runs ``incast:h8`` twice, first with the QPs bound to the run's NSCC profile, then with the fixed
window (``--window``); each sender writes ``--size`` bytes. Per run:

- ``p100_fct_s``, ``p50_fct_s``: the senders' flow completion times (first post to last
  completion, as each writer measured it);
- ``jain_fairness``: Jain's index over the senders' goodputs (bytes / own completion time);
- ``trims``, ``drops``: switch counters over the run (every queue and port; drops are tail,
  down and random-loss drops);
- ``timeouts``: the writers' ACK timeouts;
- ``p99_queue_delay_s``: 99th percentile of the queueing delay of the data packets that left
  the bottleneck (the switch port towards the receiver), from the switch's per-queue
  histogram (arrival to start of transmission, 50 us buckets; the bucket's upper edge);
- ``goodput_fraction``: all bytes x 8 / (last completion - first start, over the writers'
  own clocks) / the bottleneck link's rate.

NSCC's targets (printed as ``targets``): no timeouts, Jain >= 0.95, p99 queueing delay within
2 x NSCC's target delay (the run's CC profile), goodput >= 0.9 of the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from common.classes import DEFAULT_CLASSES, TrafficClass
from controller.profile_store import LB_POLICIES
from mrcnet.fabric.fidelity import verdict
from mrcnet.fabric.queuedelay import DATA_CLASSES, percentile
from testbed.bench import tdfarg, verdicts

KEYS = ("p100_fct_s", "p50_fct_s", "jain_fairness", "trims", "drops", "timeouts",
        "p99_queue_delay_s", "goodput_fraction")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--topology", default="incast-8")
    parser.add_argument("--receiver", default=None, help="default: the last host")
    parser.add_argument("--rate", default="file",
                        help="rate of every link ('file': the topology's own)")
    parser.add_argument("--size", default="16MiB", help="bytes per sender")
    parser.add_argument("--window", default="64KiB", help="the fixed window (bytes per QP)")
    parser.add_argument("--lb", default="reps", choices=LB_POLICIES)
    parser.add_argument("--cc", default="nscc,fixed",
                        help="comma-separated congestion controls to run, in order")
    tdfarg.add_tdf(parser, "4")  # at TDF 1 the receiving agent falls behind on 2 cores
    parser.add_argument("--json", action="store_true")


def jain(values: list[float]) -> float:
    """Jain's fairness index: (sum x)^2 / (n sum x^2); 1.0 when all are equal."""
    if not values or not any(values):
        return 0.0
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


def _switch_totals(stats: dict[str, Any]) -> tuple[int, int]:
    """(trims, drops) over every port, direction and queue of the fetched switches."""
    trims = drops = 0
    for resp in stats.values():
        for p in resp.ports:
            for d in (p.egress, p.ingress):
                drops += d.tail_drops + d.down_drops + d.loss_drops
                trims += sum(q.trims for q in d.queues)
    return trims, drops


def _data_hist(port: Any, classes: tuple[TrafficClass, ...] = DATA_CLASSES
               ) -> tuple[dict[int, int], float]:
    prios = {DEFAULT_CLASSES.priority[c] for c in classes}
    hist: dict[int, int] = {}
    bucket = 0.0
    for q in port.egress.queues:
        if q.priority in prios:
            bucket = q.wait_bucket_s or bucket
            for b, n in q.wait_hist.items():
                hist[b] = hist.get(b, 0) + n
    return hist, bucket


def _hist_diff(before: Any, after: Any, classes: tuple[TrafficClass, ...]
               ) -> tuple[dict[int, int], float]:
    h0, _ = _data_hist(before, classes)
    h1, bucket = _data_hist(after, classes)
    return {b: n - h0.get(b, 0) for b, n in h1.items() if n - h0.get(b, 0) > 0}, bucket


def measure(fab: Any, receiver: str, size: int, cc_profile: int, timeout: float) -> dict[str, Any]:
    """One incast round on a running fabric with the QPs bound to ``cc_profile``."""
    from topologies.paths import attached_switch

    topo = fab.topo
    assert topo is not None and fab.runner is not None and fab.mn is not None
    bn_switch, bn_port = attached_switch(topo, receiver, 0)
    link = topo.link_at(receiver, 0)
    assert link is not None
    rate = link.params.rate_bps
    before = fab.switch_detail()
    wl = fab.runner.submit(f"incast:{receiver}", size, "MRC", timeout=timeout,
                           cc_profile=cc_profile)
    fab.runner.wait(wl, timeout + 30, fab.check_alive)
    after = fab.switch_detail()
    summary = wl.summary()
    trims0, drops0 = _switch_totals(before)
    trims1, drops1 = _switch_totals(after)
    port_before = next(p for p in before[bn_switch].ports if p.port == bn_port)
    port_after = next(p for p in after[bn_switch].ports if p.port == bn_port)
    hist, bucket = _hist_diff(port_before, port_after, DATA_CLASSES)
    first, _ = _hist_diff(port_before, port_after, (TrafficClass.TRIMMABLE,))
    retx, _ = _hist_diff(port_before, port_after, (TrafficClass.TRIMMABLE_RETX,))
    fcts = [float(f.writer.get("seconds") or 0.0) for f in wl.flows]
    goodputs = [f.size * 8 / t if t > 0 else 0.0 for f, t in zip(wl.flows, fcts)]
    progress = [f.writer.get("progress") or [] for f in wl.flows]
    starts = [p[0][0] for p in progress if p]
    ends = [p[-1][0] for p in progress if p]
    makespan = (max(ends) - min(starts)) if starts and ends else 0.0
    total = sum(f.size for f in wl.flows)
    out: dict[str, Any] = {
        "p100_fct_s": round(max(fcts), 4),
        "p50_fct_s": round(statistics.median(fcts), 4),
        "jain_fairness": round(jain(goodputs), 4),
        "trims": trims1 - trims0,
        "drops": drops1 - drops0,
        "timeouts": sum(int(f.writer.get("qp_stats", {}).get("timeouts", 0))
                        for f in wl.flows),
        "p99_queue_delay_s": round(percentile(hist, 0.99, bucket), 5),
        "goodput_fraction": round(total * 8 / makespan / rate, 4) if makespan > 0 else 0.0,
        "completed": bool(summary["completed"]),
        **verdict(summary),
        "senders": len(wl.flows),
        "bottleneck_bps": rate,
        "retransmitted_packets": int(summary["retransmitted_packets"]),
        "sender_goodput_bps": [round(g) for g in goodputs],
        "final_cwnd": [(f.writer.get("cc") or {}).get("cwnd") for f in wl.flows],
        "queue_delay_s": {
            name: {f"p{int(q * 100)}": round(percentile(h, q, bucket), 5)
                   for q in (0.5, 0.9, 0.99)} | {"packets": sum(h.values())}
            for name, h in (("data", hist), ("first_transmissions", first),
                            ("retransmissions", retx))},
        "summary": summary,
    }
    return out


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.orchestrator import Fabric, RunOptions
    from mrcnet.fabric.scenario import collect
    from topologies.loader import load

    size = int(parse_size(args.size))
    topo = load(args.topology)
    receiver = args.receiver or topo.hosts[-1].name
    ccs = [c.strip() for c in args.cc.split(",") if c.strip()]
    opts = RunOptions(topology=args.topology, rate=None if args.rate == "file" else args.rate,
                      window=int(parse_size(args.window)), cc="nscc", lb=args.lb, show=False)
    out: dict[str, Any] = {}
    opts.tdf = tdfarg.resolve(args, opts, f"incast:{receiver}", size, "incast", out)
    fab = Fabric(opts)
    summaries: list[dict[str, Any]] = []
    try:
        fab.start()
        for cc in ccs:
            print(f"[bench incast] {cc} ...", file=sys.stderr, flush=True)
            out[cc] = measure(fab, receiver, size, fab.cc_profile if cc == "nscc" else 0, 300.0)
            summaries.append(out[cc].pop("summary"))
        target = fab.calibration.get("nscc", {}).get("target_delay_ns", 0) * 1e-9
        out["nscc_target_delay_s"] = target
        out["base_rtt_s"] = fab.calibration.get("base_rtt")
        out["tdf"] = opts.tdf
        if "nscc" in out:
            n = out["nscc"]
            out["targets"] = {
                "no_timeouts": n["timeouts"] == 0,
                "jain_ge_0.95": n["jain_fairness"] >= 0.95,
                "p99_queue_delay_le_2x_target": n["p99_queue_delay_s"] <= 2 * target,
                "goodput_ge_0.9": n["goodput_fraction"] >= 0.9,
            }
        out["results_dir"] = collect(fab, summaries, None)["results_dir"]
    finally:
        fab.stop()
    verdict_runs = {cc: out[cc]["faithful"] for cc in ccs}
    status = verdicts.conclude("incast", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        for cc in ccs:
            r = out[cc]
            print(f"{cc:6s} " + "  ".join(f"{k} {r[k]}" for k in KEYS))
        print(f"targets (nscc): {out.get('targets')}; NSCC target delay "
              f"{out['nscc_target_delay_s'] * 1e3:.2f} ms; results {out['results_dir']}")
    return status

"""``mrcnet bench failover``: goodput around a spine link failure, MRC vs RC, same fabric.

For each transport a fresh fabric (default clos-1p, ECMP, every link ``--rate``, slow enough
for the emulation to be faithful on 2 cores) runs ``shift:2`` (every flow crosses the spine
layer, no incast) with ``--size`` bytes per flow; ``--fail-at`` seconds after the start, the
link leaf0 -- spine0 goes down through the controller (and stays down). The controller
withdraws routes after ``--cp-delay`` seconds.

- goodput: acknowledged bytes per second: the writers record (time, bytes) at every Write
  completion (64 KiB Writes), summed over flows in 0.25 s bins, two-bin moving average
  (retransmissions do not count);
- remaining capacity: the pre-failure goodput (mean over the second before the failure)
  scaled by ``capacity_after / capacity_before``, where a capacity is the largest aggregate
  rate the workload's leaf-to-leaf traffic can get over the links that are up (max-flow, each
  direction separately, host links included);
- ``recovery_s``: time from the failure until the goodput of bins that start after it (two-
  bin moving average) first reaches 90% of the remaining capacity (the run's length when it
  never does);
- ``completed`` / ``qp_errors`` / ``retransmitted_bytes`` (retransmitted packets x MTU) of
  the workload, and the run's ``tdf`` and ``faithful`` verdict (mrcnet/fabric/fidelity.py).

Times are the run's clock: with ``--tdf N`` (time dilation) every figure and ``--fail-at``
/ ``--cp-delay`` are virtual seconds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from typing import Any

MiB = 1 << 20
CHUNK = 64 << 10  # bytes per Write: goodput is measured at Write completions
BIN_S = 0.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default="clos-1p")
    parser.add_argument("--mode", default=None, help="path mode (default: the topology's)")
    parser.add_argument("--rate", default="20Mbps")
    parser.add_argument("--size", default="6MiB", help="bytes per flow")
    parser.add_argument("--fail-at", type=float, default=1.5)
    parser.add_argument("--cp-delay", type=float, default=1.0)
    parser.add_argument("--ack-timeout", type=int, default=17,
                        help="QP local ACK timeout exponent (1.024 us x 2^N; 17 = 134 ms)")
    parser.add_argument("--tune", action="append", default=[], metavar="KEY=VALUE",
                        help="transport-core knob for the agents (hosts/agent/config.py "
                             "CORE_KNOBS), e.g. per_packet_timeout=0.03")
    parser.add_argument("--tdf", type=float, default=1.0,
                        help="time-dilation factor of the runs' clock (times are virtual)")
    parser.add_argument("--json", action="store_true")


def capacity(topo: Any, flows: list[tuple[str, str]], down: set[int]) -> float:
    """Largest aggregate rate (b/s) of ``flows`` over the links not in ``down`` (max-flow per
    direction between the source and destination host sets, links as directed arcs)."""
    import networkx as nx

    g = nx.DiGraph()
    for link in topo.links:
        if link.index in down:
            continue
        rate = link.params.rate_bps or 1e12
        for a, b in ((link.a.node, link.b.node), (link.b.node, link.a.node)):
            cap = g.get_edge_data(a, b, {}).get("capacity", 0.0)
            g.add_edge(a, b, capacity=cap + rate)
    total = 0.0
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    from topologies.paths import attached_switch

    for src, dst in flows:
        key = (attached_switch(topo, src, 0)[0], attached_switch(topo, dst, 0)[0])
        groups.setdefault(key, []).append((src, dst))
    for (_sl, _dl), pairs in groups.items():
        h = g.copy()
        for src, dst in pairs:
            h.add_edge("SRC", src, capacity=1e15)
            h.add_edge(dst, "DST", capacity=1e15)
        total += float(nx.maximum_flow_value(h, "SRC", "DST"))
    return total


def goodput_series(progress: list[list[list[float]]], bin_s: float) -> list[tuple[float, float]]:
    """Aggregate acknowledged goodput (b/s) per bin from writers' (time, bytes acked) lists;
    each point is (bin end time, rate)."""
    steps = []
    for prog in progress:
        for (_t0, b0), (t1, b1) in itertools.pairwise(prog):
            steps.append((t1, b1 - b0))
    if not steps:
        return []
    start = min(p[0][0] for p in progress if p)
    end = max(t for t, _ in steps)
    nbins = int((end - start) / bin_s) + 1
    bins = [0.0] * nbins
    for t, nbytes in steps:
        bins[min(nbins - 1, int((t - start) / bin_s))] += nbytes * 8 / bin_s
    return [(start + (i + 1) * bin_s, v) for i, v in enumerate(bins)]


def recovery(series: list[tuple[float, float]], t_fail: float, target: float,
             bin_s: float = BIN_S) -> tuple[float, bool]:
    """Seconds from ``t_fail`` to the end of the first bin that starts after the failure and
    whose average with the previous post-failure bin (alone for the first one) reaches
    ``target``; the series' end when it never does."""
    post = [(t, v) for t, v in series if t - bin_s >= t_fail - 1e-9]
    for i, (t, v) in enumerate(post):
        avg = v if i == 0 else (v + post[i - 1][1]) / 2
        if avg >= target:
            return max(0.0, t - t_fail), True
    return (series[-1][0] - t_fail if series else 0.0), False


def goodput_around_failure(args: argparse.Namespace, qp_type: str) -> dict[str, Any]:
    from common.units import parse_size
    from mrcnet.fabric.failures import find_link
    from mrcnet.fabric.orchestrator import Fabric, RunOptions
    from mrcnet.fabric.scenario import collect
    from mrcnet.fabric.workloads import flows_for
    from topologies.model import NodeKind

    size = parse_size(args.size)
    opts = RunOptions(topology=args.topology, mode=args.mode, rate=args.rate,
                      cp_delay=args.cp_delay, sample_interval=0.2, tdf=args.tdf)
    from hosts.agent.config import ConfigError, parse_core

    for item in args.tune:
        key, _, value = item.partition("=")
        try:
            opts.core_tuning.update(parse_core({key: value}, "--tune"))
        except ConfigError as exc:
            raise SystemExit(f"bench failover: {exc}") from None
    fab = Fabric(opts)
    try:
        fab.start()
        assert fab.topo is not None and fab.runner is not None and fab.ctl is not None
        topo = fab.topo
        leaf0 = next(n.name for n in topo.nodes_of(NodeKind.SWITCH) if n.tier == 0)
        spine0 = next(n.name for n in topo.nodes_of(NodeKind.SWITCH) if n.tier == 1
                      and n.plane == topo.node(leaf0).plane)
        link = find_link(topo, f"{leaf0}-{spine0}")
        hosts = [n.name for n in topo.nodes_of(NodeKind.HOST)]
        flows = flows_for("shift:2", hosts)
        cap_before = capacity(topo, flows, set())
        cap_after = capacity(topo, flows, {link.index})
        wl = fab.runner.submit("shift:2", size, qp_type, timeout=300,
                               extra={"chunk": CHUNK, "ack_timeout": args.ack_timeout})
        clock = fab.clock  # the writers' progress stamps are its Unix times
        t_start = clock.now()
        while clock.now() < t_start + args.fail_at:
            fab.check_alive()
            time.sleep(0.02)
        fab.set_link(str(link.a), f"{leaf0}-{spine0}", False)  # recorded: marked in plots
        t_fail = clock.unix()
        fab.runner.wait(wl, 330, fab.check_alive)
        res = collect(fab, [wl.summary()], None)
    finally:
        fab.stop()
    series = goodput_series([f.writer.get("progress", []) for f in wl.flows], BIN_S)
    before = [v for t, v in series if t_fail - 1.0 <= t - BIN_S and t <= t_fail]
    pre = sum(before) / len(before) if before else 0.0
    target = 0.9 * pre * cap_after / cap_before
    rec, reached = recovery(series, t_fail, target)
    return {"recovery_s": round(rec, 3), "recovered": reached,
            "completed": bool(res["completed"]), "qp_errors": int(res["qp_errors"]),
            "retransmitted_bytes": int(res["retransmitted_bytes"]),
            "pre_failure_bps": round(pre), "target_bps": round(target),
            "capacity_ratio": round(cap_after / cap_before, 3),
            "tdf": args.tdf, "faithful": res["faithful"],
            "results_dir": res["results_dir"]}


def run(args: argparse.Namespace) -> int:
    out = {}
    for key, qp in (("mrc", "MRC"), ("rc", "RC")):
        print(f"[bench failover] {qp} ...", file=sys.stderr, flush=True)
        out[key] = goodput_around_failure(args, qp)
    if args.json:
        print(json.dumps(out))
    else:
        for key, r in out.items():
            print(f"{key:4s} recovery {r['recovery_s']:.2f} s (reached: {r['recovered']})  "
                  f"completed {r['completed']}  QP errors {r['qp_errors']}  "
                  f"retransmitted {r['retransmitted_bytes'] / MiB:.1f} MiB  "
                  f"({r['results_dir']})")
    return 0

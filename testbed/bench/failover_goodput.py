"""``mrcnet bench failover``: the stalled flow around a spine link failure, MRC vs RC, judged at
the 100th percentile, for several control-plane delays in one run.

For each control-plane delay of ``--cp-delay`` (a list, default 0.5,1,2 s) and each transport
a fresh fabric (default clos-1p, ECMP, every link ``--rate``, slow enough for the emulation to
be faithful on 2 cores) runs ``shift:2`` (every flow crosses the spine layer, no incast) with
``--size`` bytes per flow; ``--fail-at`` seconds after the start, the link leaf0 -- spine0 goes
down through the controller (and stays down). The controller withdraws routes that cross it
after the control-plane delay.

- per flow: the longest stall (the longest time the writer's cumulative acknowledgement
  stood still with packets outstanding, measured by the transport: ``longest_stall_s``) and
  the completion time (first post to last completion);
- ``p100_stall_s`` / ``p100_fct_s``: the largest of those over all flows of the run (a
  synchronous training step waits for its slowest transfer);
- goodput: acknowledged bytes per second: the writers record (time, bytes) at every Write
  completion (16 KiB Writes), summed over flows in 0.25 s bins, two-bin moving average
  (retransmissions do not count);
- remaining capacity: the pre-failure goodput (mean over the second before the failure)
  scaled by ``capacity_after / capacity_before``, where a capacity is the largest aggregate
  rate the workload's leaf-to-leaf traffic can get over the links that are up (max-flow, each
  direction separately, host links included);
- ``recovery_s``: time from the failure until the goodput of bins that start after it (two-
  bin moving average) first reaches 90% of the remaining capacity (the run's length when it
  never does);
- ``completed`` / ``qp_errors`` / ``retransmitted_bytes`` (retransmitted packets x MTU) of
  the workload, its retransmissions by trigger (``mechanisms``), and the run's ``tdf`` and
  ``faithful`` verdict (mrcnet/fabric/fidelity.py).

Times are the run's clock: with ``--tdf N`` (time dilation) every figure and ``--fail-at``
/ ``--cp-delay`` are virtual seconds.

The figures go to ``results/bench/failover-<time>.json`` with a plot of p100 stall against the
control-plane delay for both transports (``failover-<time>.png``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

from testbed.bench import verdicts

MiB = 1 << 20
CHUNK = 16 << 10  # bytes per Write: goodput over time is seen at Write completions
BIN_S = 0.25
REPO = Path(__file__).resolve().parents[2]
TRANSPORTS = (("mrc", "MRC"), ("rc", "RC"))


def _delays(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds, e.g. 0.5,1,2") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: expected seconds >= 0, e.g. 0.5,1,2")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--topology", default="clos-1p")
    parser.add_argument("--mode", default=None, help="path mode (default: the topology's)")
    parser.add_argument("--rate", default="20Mbps")
    parser.add_argument("--size", default="6MiB", help="bytes per flow")
    parser.add_argument("--window", default="32KiB",
                        help="bytes in flight per QP (fixed window; default about the path's "
                             "bandwidth-delay product at 20 Mb/s)")
    parser.add_argument("--fail-at", type=float, default=1.5)
    parser.add_argument("--cp-delay", type=_delays, default=[0.5, 1.0, 2.0], metavar="S,S,...",
                        help="control-plane delays to sweep (default 0.5,1,2)")
    parser.add_argument("--results", default=str(REPO / "results" / "bench"),
                        help="folder for the JSON and the plot")
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


def goodput_around_failure(args: argparse.Namespace, qp_type: str,
                           cp_delay: float) -> dict[str, Any]:
    from common.units import parse_size
    from mrcnet.fabric.failures import find_link
    from mrcnet.fabric.orchestrator import Fabric, RunOptions
    from mrcnet.fabric.scenario import collect
    from mrcnet.fabric.workloads import flows_for
    from topologies.model import NodeKind

    size = parse_size(args.size)
    opts = RunOptions(topology=args.topology, mode=args.mode, rate=args.rate,
                      cp_delay=cp_delay, window=parse_size(args.window), sample_interval=0.2,
                      tdf=args.tdf)
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
    summary = res["workloads"][0]
    rows = [{"id": f["id"], "src": f["src"], "dst": f["dst"], "verified": f["verified"],
             "longest_stall_s": f["longest_stall_s"], "fct_s": f["fct_s"], "rtx": f["rtx"]}
            for f in summary["per_flow"]]
    stalls = [f["longest_stall_s"] for f in rows if f["longest_stall_s"] is not None]
    fcts = [f["fct_s"] for f in rows if f["fct_s"] is not None]
    return {"cp_delay_s": cp_delay,
            "p100_stall_s": round(max(stalls), 3) if stalls else None,
            "p100_fct_s": round(max(fcts), 3) if fcts else None,
            "flows": rows,
            "recovery_s": round(rec, 3), "recovered": reached,
            "completed": bool(res["completed"]), "qp_errors": int(res["qp_errors"]),
            "retransmitted_bytes": int(res["retransmitted_bytes"]),
            "mechanisms": {k: v for k, v in summary["mechanisms"].items()
                           if k.startswith(("rtx_", "loss_", "timeouts", "ev_state_", "probe"))},
            "pre_failure_bps": round(pre), "target_bps": round(target),
            "capacity_ratio": round(cap_after / cap_before, 3),
            "tdf": args.tdf, "faithful": res["faithful"],
            "results_dir": res["results_dir"]}


def sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Every (control-plane delay, transport) run, and the p100 figures per transport."""
    out: dict[str, Any] = {"cp_delay_s": list(args.cp_delay)}
    for key, _qp in TRANSPORTS:
        out[key] = {"p100_stall_s": [], "p100_fct_s": [], "runs": []}
    for delay in args.cp_delay:
        for key, qp in TRANSPORTS:
            print(f"[bench failover] {qp}, control-plane delay {delay:g} s ...",
                  file=sys.stderr, flush=True)
            r = goodput_around_failure(args, qp, delay)
            out[key]["runs"].append(r)
            out[key]["p100_stall_s"].append(r["p100_stall_s"])
            out[key]["p100_fct_s"].append(r["p100_fct_s"])
    out["rc_over_mrc_p100_stall"] = [
        round(rc / mrc, 2) if rc is not None and mrc else None
        for mrc, rc in zip(out["mrc"]["p100_stall_s"], out["rc"]["p100_stall_s"])]
    return out


def plot(out: dict[str, Any], path: Path) -> Path:
    """p100 stall against the control-plane delay, MRC and RC, with y = delay for scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    delays = out["cp_delay_s"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, marker in (("mrc", "MRC", "o"), ("rc", "RC (go-back-N, one path)", "s")):
        ys = [y if y is not None else float("nan") for y in out[key]["p100_stall_s"]]
        ax.plot(delays, ys, marker=marker, label=label)
    ax.plot(delays, delays, linestyle=":", color="grey", label="control-plane delay")
    ax.set_xlabel("control-plane delay (s)")
    ax.set_ylabel("p100 stall: longest time without progress (s)")
    ax.set_title("Spine link failure: the slowest flow")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def run(args: argparse.Namespace) -> int:
    out = sweep(args)
    folder = Path(args.results)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out["plot"] = str(plot(out, folder / f"failover-{stamp}.png"))
    out["results"] = str(folder / f"failover-{stamp}.json")
    verdict_runs = {f"{key} cp-delay {d:g}s": out[key]["runs"][i]["faithful"]
                    for key, _qp in TRANSPORTS for i, d in enumerate(out["cp_delay_s"])}
    status = verdicts.conclude("failover", out, verdict_runs, args.strict)
    Path(out["results"]).write_text(json.dumps(out, indent=1) + "\n")
    if args.json:
        print(json.dumps(out))
        return status
    print("cp-delay  transport  p100 stall  p100 FCT  completed  QP errors  retransmitted")
    for i, delay in enumerate(out["cp_delay_s"]):
        for key, _qp in TRANSPORTS:
            r = out[key]["runs"][i]
            print(f"{delay:7.2f}s  {key:9s}  {r['p100_stall_s']:9.3f}s  {r['p100_fct_s']:7.3f}s  "
                  f"{r['completed']!s:9s}  {r['qp_errors']:9d}  "
                  f"{r['retransmitted_bytes'] / MiB:8.1f} MiB")
    print(f"RC / MRC p100 stall: {out['rc_over_mrc_p100_stall']}")
    print(f"plot: {out['plot']}\nresults: {out['results']}")
    return status

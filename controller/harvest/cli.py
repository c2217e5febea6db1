"""`mrcnet harvest`: synthesise a reconfiguration schedule; `mrcnet harvest sweep`: plots."""

from __future__ import annotations

import argparse
import json
import sys

from common.collectives import COLLECTIVES, PHASES, CollectiveError, build

from . import calfile
from .engine import Result, Synthesizer
from .model import CircuitTopology, HarvestError, Params
from .units import fmt_bytes, fmt_time, parse_amount, parse_time


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--collective", choices=COLLECTIVES, default="rd",
                        help="rd (recursive doubling, cyclic), swing or ring; shift or bruck "
                             "(all-to-all)")
    parser.add_argument("--phase", choices=PHASES, default=None,
                        help="whole AllReduce or one of its halves (default allreduce); "
                             "all-to-all for shift and bruck (their default)")
    parser.add_argument("--gpus", type=int, default=8, help="number of GPUs n")
    parser.add_argument("--degree", type=int, default=1, help="optical ports per GPU d")
    parser.add_argument("--bandwidth", default="800G",
                        help="link capacity c in bit/s per circuit (e.g. 800G, 1e11)")
    parser.add_argument("--alpha", default="0", help="per-step overhead (e.g. 500ns)")
    parser.add_argument("--delta", default="0", help="per-hop propagation delay (e.g. 500ns)")
    parser.add_argument("--calibration", default=None, metavar="FILE",
                        help="take bandwidth, alpha and delta from a micro-benchmark "
                             "calibration (calibration.json of `mrcnet up ... --calibration "
                             "micro`); they replace --bandwidth, --alpha and --delta")
    parser.add_argument("--method", choices=("auto", "exact", "restricted"), default="auto",
                        help="auto: proofs where known, conic program up to --exact-max-n, "
                             "restricted circulant search beyond; exact: conic program always")
    parser.add_argument("--exact-max-n", type=int, default=4,
                        help="largest n for the conic program in auto mode (default 4; at n = 8 "
                             "SCIP may need minutes per subproblem)")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="seconds per conic subproblem (default 60)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("sweep",),
                        help="'sweep': speedup plots over alpha_r and message size")
    add_common(parser)
    parser.add_argument("--size", default="1GiB", help="message size in bytes (e.g. 1GiB, 4e9)")
    parser.add_argument("--alpha-r", default="10us", help="reconfiguration delay (e.g. 10us)")
    parser.add_argument("--alpha-r-range", default="10ns:10ms:13",
                        help="sweep: START:STOP:COUNT, log-spaced (default 10ns:10ms:13)")
    parser.add_argument("--sizes", default="1KiB:4GiB:12",
                        help="sweep: START:STOP:COUNT, log-spaced (default 1KiB:4GiB:12)")
    parser.add_argument("--out", default=None,
                        help="sweep: results folder (default results/harvest/<timestamp>)")


def params_from(args: argparse.Namespace, alpha_r: float = 0.0) -> Params:
    if getattr(args, "calibration", None):
        data = calfile.load(args.calibration)
        p = Params(degree=args.degree, bandwidth_bps=float(data["bandwidth_bps"]),
                   alpha=float(data["alpha_s"]), delta=float(data["delta_s"]),
                   alpha_r=alpha_r)
        p.validate()
        return p
    p = Params(
        degree=args.degree,
        bandwidth_bps=parse_amount(args.bandwidth, "bps", "bandwidth"),
        alpha=parse_time(args.alpha, "alpha"),
        delta=parse_time(args.delta, "delta"),
        alpha_r=alpha_r,
    )
    p.validate()
    return p


def describe(topo: CircuitTopology) -> str:
    if topo.kind == "circulant":
        return "circulant u->u+g, g in {" + ",".join(map(str, topo.gens)) + "}"
    if topo.kind == "local":
        return "swing-local even u->u+h / odd u->u-h, h in {" + ",".join(map(str, topo.gens)) + "}"
    if len(topo.edges) <= 24:
        return " ".join(f"{u}->{v}" + (f"x{c}" if c > 1 else "") for u, v, c in topo.edges)
    return f"{len(topo.edges)} links"


def print_result(r: Result) -> None:
    p = r.params
    print(f"Harvest schedule: {r.collective} {r.phase}, n={r.n}, d={p.degree}, "
          f"m={fmt_bytes(r.message_bytes)}, c={p.bandwidth_bps:.4g} bit/s, "
          f"alpha={fmt_time(p.alpha)}, delta={fmt_time(p.delta)}, alpha_r={fmt_time(p.alpha_r)}")
    print(f"{'steps':>9}  {'method':<20} {'opt':<4} {'alpha':>10} {'propag.':>10} "
          f"{'transfer':>10} {'total':>10}  topology")
    for iv in r.schedule:
        a = sum(s.alpha_s for s in iv.steps)
        pr = sum(s.propagation_s for s in iv.steps)
        tr = sum(s.transfer_s for s in iv.steps)
        print(f"{iv.first:>4}-{iv.last:<4}  {iv.method:<20} {'yes' if iv.proven else 'no':<4} "
              f"{fmt_time(a):>10} {fmt_time(pr):>10} {fmt_time(tr):>10} "
              f"{fmt_time(iv.cost_s):>10}  {describe(iv.topology)}")
        for s in iv.steps:
            print(f"{'':>6}step {s.step:<3} theta={s.theta:.4g} hops={s.hops} "
                  f"bytes={fmt_bytes(s.volume_bytes)} time={fmt_time(s.total_s)}")
    print(f"reconfigurations: {r.reconfigurations} x {fmt_time(p.alpha_r)} = "
          f"{fmt_time(r.reconfigurations * p.alpha_r)}")
    print(f"completion time : {fmt_time(r.completion_time_s)}  (lower bound "
          f"{fmt_time(r.lower_bound_s)}, {'proven optimal' if r.optimal else 'NOT proven optimal'})")
    print(f"static          : {fmt_time(r.static_s)}  speedup {r.speedup_static():.3f}x")
    print(f"every step      : {fmt_time(r.every_step_s)}  speedup {r.speedup_every_step():.3f}x")
    print(f"method          : {r.method}; synthesis {r.seconds:.3f} s")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "sweep":
            from .sweep import run_sweep

            return run_sweep(args, params_from(args))
        coll = build(args.collective, args.gpus, args.phase)
        alpha_r = parse_time(args.alpha_r, "alpha-r")
        params = params_from(args, alpha_r)
        size = parse_amount(args.size, "B", "size")
        progress = None if args.json else (lambda msg: print(f"  .. {msg}", file=sys.stderr))
        synth = Synthesizer(coll, size, params, args.method, args.exact_max_n,
                            args.time_limit, progress)
        result = synth.result()
    except (HarvestError, CollectiveError) as exc:
        print(f"mrcnet harvest: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print_result(result)
    return 0

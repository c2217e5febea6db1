"""`mrcnet sim`: a fabric on a simulated clock (mrcnet/sim): the same topology files,
switch programs and transport core as `mrcnet up`, no root, no processes, no wall-clock
fidelity limit. Writes results.json (deterministic: the same inputs give the same bytes)
and perf.json (what the run cost the machine) into a run folder."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from common.units import parse_size
from topologies.model import PathMode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topology", nargs="?", default="clos-2p",
                        help="topology name or YAML file (packet fabrics; default clos-2p)")
    parser.add_argument("--run", default="permutation", metavar="WORKLOAD",
                        help="all-to-all, permutation (default), shift:K, pair:SRC:DST, "
                             "incast:DST")
    parser.add_argument("--qp", choices=["MRC", "RC"], default="MRC",
                        help="transport of the workload (RC = baseline)")
    parser.add_argument("--mode", choices=[m.value for m in PathMode], default=None,
                        help="path mode (default: the topology's)")
    parser.add_argument("--size", default="1MiB", help="bytes per flow (default 1MiB)")
    parser.add_argument("--window", default="64KiB",
                        help="bytes in flight per QP, the fixed window (default 64KiB)")
    parser.add_argument("--rate", default=None, help="rate of every link (default: the file's)")
    parser.add_argument("--delay", default=None,
                        help="one-way delay of every link (default: the file's)")
    parser.add_argument("--fail", action="append", default=[], metavar="A-B@S",
                        help="take link A-B (or plane:P) down at S simulated seconds")
    parser.add_argument("--restore", action="append", default=[], metavar="A-B@S",
                        help="bring link A-B (or plane:P) back up at S simulated seconds")
    parser.add_argument("--seed", type=int, default=1, help="workload and loss seed")
    parser.add_argument("--limit", type=float, default=10.0, metavar="S",
                        help="simulated seconds before the run gives up (default 10)")
    parser.add_argument("--out", default="results", metavar="DIR",
                        help="the run folder goes under DIR (default results/)")
    parser.add_argument("--json", action="store_true", help="print results.json at the end")


def run(args: argparse.Namespace) -> int:
    from mrcnet.fabric.plan import derive_topology
    from mrcnet.sim.run import SimOptions, simulate
    from topologies.loader import TopologyError, load, resolve

    try:
        opts = SimOptions(run=args.run, qp=args.qp, mode=args.mode,
                          size=int(parse_size(args.size)), window=int(parse_size(args.window)),
                          seed=args.seed, limit_s=args.limit, fail=tuple(args.fail),
                          restore=tuple(args.restore))
        source = resolve(args.topology)
        if args.rate or args.delay:
            with tempfile.TemporaryDirectory() as tmp:
                derived = derive_topology(source, Path(tmp) / "topology.yaml", args.rate,
                                          args.delay)
                topo = load(derived)
                topo_text = derived.read_text()
        else:
            topo = load(source)
            topo_text = source.read_text()

        def progress(now: float, events: int, done: int, total: int) -> None:
            print(f"  sim {now * 1e3:9.3f} ms  events {events:>10}  flows done {done}/{total}",
                  file=sys.stderr, flush=True)

        print(f"simulating {topo.name}: {len(topo.switches)} switches, {len(topo.hosts)} hosts, "
              f"{opts.run} of {args.size} per flow, {opts.qp}", file=sys.stderr)
        sim = simulate(topo, opts, progress)
    except (TopologyError, ValueError, KeyError) as exc:
        print(f"mrcnet sim: {exc}", file=sys.stderr)
        return 2
    run_dir = Path(args.out) / time.strftime("sim-%Y%m%d-%H%M%S")
    n = 1
    while run_dir.exists():  # two runs in one second: keep both
        n += 1
        run_dir = run_dir.with_name(f"{run_dir.name.split('.')[0]}.{n}")
    run_dir.mkdir(parents=True)
    (run_dir / "topology.yaml").write_text(topo_text)
    text = json.dumps(sim.results, indent=1, sort_keys=True)
    (run_dir / "results.json").write_text(text + "\n")
    (run_dir / "perf.json").write_text(json.dumps(sim.perf, indent=1, sort_keys=True) + "\n")
    s = sim.results["summary"]
    frac = s["goodput_fraction"]
    print(f"{s['verified_flows']}/{s['flows']} flows verified in {s['seconds'] * 1e3:.3f} "
          f"simulated ms; goodput {s['goodput_bps'] / 1e6:.1f} Mb/s"
          + (f" ({frac:.3f} of capacity)" if frac is not None else "")
          + "; FCT p50/p99/p100 "
          + "/".join("-" if s[k] is None else f"{s[k] * 1e3:.3f}"
                     for k in ("fct_p50_s", "fct_p99_s", "fct_p100_s"))
          + f" ms; retransmitted {s['tx_rtx']} of {s['tx_data']} data packets",
          file=sys.stderr)
    p = sim.perf
    print(f"wall {p['wall_s']:.2f} s, {p['events_per_s']:.0f} events/s, "
          f"{p['host_frames_per_s']:.0f} host frames/s, peak RSS {p['peak_rss_mib']:.0f} MiB; "
          f"run folder {run_dir}", file=sys.stderr)
    if args.json:
        print(text)
    return 0 if s["verified_flows"] == s["flows"] else 1

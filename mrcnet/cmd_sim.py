"""`mrcnet sim`: a fabric on a simulated clock (mrcnet/sim): the same topology files,
switch programs, controller logic and transport core as `mrcnet up`, no root, no processes,
no wall-clock fidelity limit. Writes results.json (deterministic: the same inputs give the
same bytes) and perf.json (what the run cost the machine) into a run folder.

`mrcnet sim compare EMU.json SIM.json` sets an emulated run's results beside a simulated
one's (mrcnet/sim/compare.py). `mrcnet sim sweep TOPOLOGY --size 1MiB,4MiB ...` runs every
combination of comma-listed option values over a process pool (mrcnet/sim/sweep.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from mrcnet.cmd_up import DEFAULT_SIZE
from mrcnet.cmd_up import DEFAULTS as UP_DEFAULTS
from topologies.model import FabricKind, PathMode, Topology

# simulated seconds each collective run (calibration, every schedule) may take: an 8 MiB
# collective at 20 Mb/s runs for tens of them; a run that completes stops at once
CIRCUIT_LIMIT_S = 600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # The grid options are read as text (mrcnet/sim/grid.py): `mrcnet sim sweep` takes comma
    # lists of them, a single run one value each; choices are checked there, with the flag.
    parser.add_argument("topology", nargs="?", default="clos-2p",
                        help="topology name or YAML file (default clos-2p; a circuit fabric "
                             "runs --run PHASE:ALGORITHM once per --schedule); "
                             "or 'compare EMU.json SIM.json'; or 'sweep [TOPOLOGY]' with "
                             "comma lists of option values")
    parser.add_argument("files", nargs="*", metavar="RESULTS", help=argparse.SUPPRESS)
    parser.add_argument("--run", default=None, metavar="WORKLOAD",
                        help="all-to-all, permutation (default), shift:K, pair:SRC:DST, "
                             "incast:DST; on circuit fabrics PHASE:ALGORITHM (allreduce:rd "
                             "(default), allreduce:swing, reduce-scatter:ring, ...)")
    parser.add_argument("--qp", default="MRC", help="MRC (default) or RC (baseline)")
    parser.add_argument("--mode", default=None,
                        help=f"path mode: {', '.join(m.value for m in PathMode)} "
                             "(default: the topology's)")
    parser.add_argument("--size", default=DEFAULT_SIZE,
                        help=f"bytes per flow (default {DEFAULT_SIZE}, as mrcnet up)")
    parser.add_argument("--cc", default="fixed",
                        help="congestion control of the workloads' QPs: fixed, the window "
                             "of --window (default), or nscc, the run's CC profile 1")
    parser.add_argument("--lb", default="rotation",
                        help="load balancing over the EVs (the run's EV profile): "
                             "rotation (default), reps or bitmap")
    parser.add_argument("--window", default=None,
                        help="bytes in flight per QP with --cc fixed (default 64KiB; circuit "
                             "fabrics 128KiB, as mrcnet up)")
    parser.add_argument("--rate", default=None, help="rate of every link (default: the file's)")
    parser.add_argument("--delay", default=None,
                        help="one-way delay of every link (default: the file's)")
    parser.add_argument("--cp-delay", default="1", metavar="S",
                        help="control-plane delay before routes are withdrawn (seconds or "
                             "with a unit, e.g. 5ms; default 1 s)")
    parser.add_argument("--fail", action="append", default=[], metavar="A-B@S",
                        help="take link A-B (or plane:P) down at S simulated seconds")
    parser.add_argument("--restore", action="append", default=[], metavar="A-B@S",
                        help="bring link A-B (or plane:P) back up at S simulated seconds")
    parser.add_argument("--seed", default="1",
                        help="workload and loss seed (as mrcnet up's: round 1 uses seed + 1); "
                             "circuit fabrics: the GPUs' inputs")
    parser.add_argument("--limit", default=None, metavar="S",
                        help="simulated seconds before the run gives up (default 10; circuit "
                             f"fabrics: each collective run, default {CIRCUIT_LIMIT_S:g}: a "
                             "run stops when it completes)")
    parser.add_argument("--round", type=int, default=1, metavar="N",
                        help="compare: the emulated run's workload round (default 1)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="sweep: runs at a time (default: the machine's cores)")
    parser.add_argument("--max-runs", type=int, default=None, metavar="N",
                        help="sweep: run a grid of more than 100 runs (up to N)")
    parser.add_argument("--out", default="results", metavar="DIR",
                        help="the run (or sweep) folder goes under DIR (default results/)")
    parser.add_argument("--json", action="store_true",
                        help="print results.json (a sweep: sweep.json) at the end")
    from mrcnet import cmd_collective

    cmd_collective.add_arguments(parser)  # circuit fabrics: --schedule, --alpha-r, --degree...


def run(args: argparse.Namespace) -> int:
    if args.topology == "compare":
        return _compare(args)
    if args.topology == "sweep":
        from mrcnet.sim.sweep import run_sweep

        return run_sweep(args)
    if args.files:
        print(f"mrcnet sim: one topology, got also {' '.join(args.files)}", file=sys.stderr)
        return 2
    if args.jobs is not None or args.max_runs is not None:
        print("mrcnet sim: --jobs and --max-runs are for mrcnet sim sweep", file=sys.stderr)
        return 2
    import shutil

    from mrcnet.sim.grid import single
    from mrcnet.sim.run import simulate
    from mrcnet.sim.runfolder import new_run_dir, plots, prepare, write
    from topologies.loader import TopologyError, load, resolve

    run_dir: Path | None = None
    try:
        if load(resolve(args.topology)).fabric.kind == FabricKind.CIRCUIT:
            topo, topo_text = prepare(args.topology, args.rate, args.delay)
            return _collectives(args, topo, topo_text)
        opts = single(args)
        topo, topo_text = prepare(args.topology, opts.rate, opts.delay)

        started = time.monotonic()

        def progress(now: float, events: int, done: int, total: int, share: float) -> None:
            wall = max(1e-9, time.monotonic() - started)
            eta = f"{wall * (1 - share) / share:7.0f} s" if share > 0 else "      ?"
            print(f"  sim {now * 1e3:9.3f} ms  {_bar(share)} {share:4.0%} acknowledged  flows "
                  f"done {done}/{total}  {events / wall:8.0f} events/s  ETA {eta}",
                  file=sys.stderr, flush=True)

        print(f"simulating {topo.name}: {len(topo.switches)} switches, {len(topo.hosts)} hosts, "
              f"{opts.run} of {args.size} per flow, {opts.qp}, cc {opts.cc}",
              file=sys.stderr)
        run_dir = new_run_dir(Path(args.out))
        sim = simulate(topo, opts, progress, run_dir / "qlog")
    except (TopologyError, ValueError, KeyError) as exc:
        if run_dir is not None:
            shutil.rmtree(run_dir, ignore_errors=True)  # refused: no folder left behind
        print(f"mrcnet sim: {exc}", file=sys.stderr)
        return 2
    text = write(run_dir, topo_text, sim)
    plots(run_dir, topo.fabric.planes, sim)
    _summary(sim.results, sim.perf, run_dir)
    if args.json:
        print(text)
    return 0 if sim.results["completed"] else 1


def _bar(share: float, width: int = 20) -> str:
    """A text progress bar for ``share`` (0..1) of the work."""
    full = round(max(0.0, min(1.0, share)) * width)
    return "[" + "#" * full + "." * (width - full) + "]"


CIRCUIT_DEFAULTS = UP_DEFAULTS["circuit"]  # (link rate, window): the window is mrcnet up's


def _collectives(args: argparse.Namespace, topo: Topology, topo_text: str) -> int:
    """A circuit fabric: the collective of ``--run`` once per ``--schedule``
    (mrcnet/sim/collrun.py)."""
    from common.units import parse_duration, parse_size
    from controller.harvest.model import HarvestError
    from mrcnet import cmd_collective
    from mrcnet.fabric.collectives import CollectiveError
    from mrcnet.sim.collrun import simulate_collectives, table
    from mrcnet.sim.runfolder import new_run_dir, write

    packet_only = [flag for flag, value, default in (
        ("--qp", args.qp, "MRC"), ("--mode", args.mode, None), ("--cc", args.cc, "fixed"),
        ("--lb", args.lb, "rotation"), ("--cp-delay", args.cp_delay, "1"),
        ("--fail", args.fail, []), ("--restore", args.restore, [])) if value != default]
    try:
        if packet_only:
            raise ValueError(f"{', '.join(packet_only)}: packet fabrics only ({topo.name} is "
                             "a circuit fabric)")
        if args.run is not None and ":" not in args.run:
            raise ValueError(f"--run {args.run}: {topo.name} is a circuit fabric: give "
                             "PHASE:ALGORITHM (allreduce:rd, allreduce:swing, ...)")
        spec = cmd_collective.prepare(args, topo)
        seed = int(args.seed)
        limit = parse_duration(args.limit) if args.limit is not None else CIRCUIT_LIMIT_S
        window = int(parse_size(args.window or CIRCUIT_DEFAULTS[1]))
        if window <= 0:
            raise ValueError(f"--window {args.window}: must be positive")
        if not limit > 0:
            raise ValueError("--limit must be > 0 seconds")
    except (ValueError, HarvestError) as exc:
        print(f"mrcnet sim: {exc}", file=sys.stderr)
        return 2
    print(f"simulating {topo.name}: {spec['gpus']} GPUs, {spec['phase']}:{spec['collective']} "
          f"of {args.size}, degree {spec['degree']}, window {window} B, schedules {', '.join(spec['schedules'])}",
          file=sys.stderr)
    run_dir = new_run_dir(Path(args.out))

    def say(text: str) -> None:
        print(f"  {text}", file=sys.stderr, flush=True)

    try:
        sim = simulate_collectives(topo, spec, run_dir, seed, limit, say, window)
    except (CollectiveError, HarvestError, ValueError) as exc:
        print(f"mrcnet sim: {exc} (run folder {run_dir})", file=sys.stderr)
        return 1
    text = write(run_dir, topo_text, sim)
    print(table(sim.results), file=sys.stderr)
    perf = sim.perf
    print(f"wall {perf['wall_s']:.2f} s, CPU {perf['cpu_s']:.2f} s; {int(perf['events'])} "
          f"events, {perf['events_per_s']:.0f} events/s; peak RSS {perf['peak_rss_mib']:.0f} "
          f"MiB; run folder {run_dir}", file=sys.stderr)
    if args.json:
        print(text)
    return 0 if sim.results["verified"] else 1


def _summary(res: dict[str, Any], perf: dict[str, float], run_dir: Path) -> None:
    from mrcnet.sim.compare import figures, percentile

    f = figures(res)
    w = res["workloads"][0]
    frac = w["goodput_fraction"]
    fct = "/".join("-" if v is None else f"{v * 1e3:.3f}"
                   for v in (percentile(f.fcts, q) for q in (50, 99, 100)))
    print(f"{w['verified_flows']}/{w['flows']} flows verified in {w['seconds'] * 1e3:.3f} "
          f"simulated ms, {w['qp_errors']} QP errors; goodput {w['goodput_bps'] / 1e6:.1f} Mb/s"
          + (f" ({frac:.3f} of capacity)" if frac is not None else "")
          + f"; FCT p50/p99/p100 {fct} ms; retransmitted {w['retransmitted_packets']} "
          f"packets; {f.trims} trims", file=sys.stderr)
    print(f"wall {perf['wall_s']:.2f} s ({perf['build_s']:.2f} s building), CPU "
          f"{perf['cpu_s']:.2f} s ({perf['run_cpu_s']:.2f} s running); "
          f"{perf['events_per_s']:.0f} events/s, {perf['host_frames_per_s']:.0f} host frames/s, "
          f"{perf['switch_frames_per_s']:.0f} switch frames/s (wall); peak RSS "
          f"{perf['peak_rss_mib']:.0f} MiB; run folder {run_dir}", file=sys.stderr)


def _compare(args: argparse.Namespace) -> int:
    from mrcnet.sim.compare import CompareError, compare_files, judge, table

    if len(args.files) != 2:
        print("mrcnet sim compare: give the emulated run's results.json and the simulated "
              "run's", file=sys.stderr)
        return 2
    try:
        rows, differ = compare_files(args.files[0], args.files[1], args.round)
    except CompareError as exc:
        print(f"mrcnet sim compare: {exc}", file=sys.stderr)
        return 2
    for what in differ:
        print(f"WARNING: not the same experiment: {what}", file=sys.stderr)
    if args.json:
        print(json.dumps({"mismatches": differ, "rows": [
            {"metric": r.metric, "emu": r.emu, "sim": r.sim, "rel": r.rel,
             "within_bound": judge(r)} for r in rows]},
            indent=1))
    else:
        print(table(rows))
    return 0

"""``mrcnet up [TOPOLOGY]``: bring up a fabric, run a workload with failures, CLI or summary.

Non-interactive (``--no-cli``, or stdin not a terminal): the fabric comes up, the workload
runs (with the ``--fail``/``--restore`` schedule), results are saved under
``results/runs/<run-id>/``, everything is torn down and a summary (or with ``--json`` one
JSON object with ``completed``, ``verified_bytes``, ``qp_errors``, ``results_dir``, ...) is
printed. Interactive: the same, then the CLI (``help`` lists the commands) until ``exit``.
``--tdf N`` runs everything on a virtual clock N times slower than the wall clock (times and
rates of the results are virtual); ``--tdf auto`` first calibrates the smallest factor that
keeps every process on time (mrcnet/fabric/calibrate.py).
``--demo`` (what ``make topology`` runs): all-to-all MRC Writes sprayed over every plane, a
leaf-spine link of plane 0 failing at 2 s and coming back at 5 s, 8 s in all; without
``--tdf`` it first calibrates the factor this machine needs (mrcnet/fabric/demo.py) and ends
with its verdict line (every byte verified, the flap survived, faithful or not).
``--web`` serves the live web view (mrcnet/web) on 127.0.0.1 while the fabric runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from controller.profile_store import LB_POLICIES
from mrcnet.fabric import demo
from mrcnet.fabric.livedisplay import LiveDisplay
from topologies.model import PathMode

MiB = 1 << 20
DEFAULT_SIZE = "2MiB"
# The demonstration's flows: rounds of 12 x 8 MiB take about a second on clos-2p at 100 Mb/s;
# fewer, longer rounds than 2 MiB ones, and every round's QPs stay in the agents' loops
# (docs/fabric.md, "The first ten minutes").
DEMO_SIZE = "8MiB"


def _size(text: str) -> int:
    from common.units import parse_size

    return int(parse_size(text))


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``up`` and ``run``."""
    parser.add_argument("topology", nargs="?", default="clos-2p",
                        help="topology name or YAML file (default clos-2p)")
    from switch.targets import DEFAULT_KIND, kinds

    parser.add_argument("--switch", choices=kinds(), default=DEFAULT_KIND,
                        help=f"kind of switch (default {DEFAULT_KIND}; bmv2 needs "
                             "simple_switch_grpc)")
    parser.add_argument("--mode", choices=[m.value for m in PathMode], default=None,
                        help="path mode (default: the topology's)")
    parser.add_argument("--qp", choices=["MRC", "RC"], default="MRC",
                        help="transport of the workload (RC = baseline)")
    parser.add_argument("--size", default=None,
                        help=f"bytes per flow (default {DEFAULT_SIZE}; --demo {DEMO_SIZE})")
    parser.add_argument("--rate", default=None,
                        help="rate of every link (default 100Mbps, circuit fabrics 20Mbps: "
                             "what the 2-core emulation sustains; 'file' keeps the file's)")
    parser.add_argument("--delay", default=None,
                        help="one-way delay of every link (default: the file's)")
    parser.add_argument("--cp-delay", type=float, default=1.0, metavar="S",
                        help="control-plane delay before routes are withdrawn (default 1 s)")
    parser.add_argument("--cc", choices=["nscc", "fixed"], default="fixed",
                        help="congestion control of the workloads' QPs: the fixed window "
                             "(--window, default) or NSCC (the run's CC profile 1)")
    parser.add_argument("--cc-qp", default=None, metavar="HOST:QPN",
                        help="the QP whose NSCC window, RTT and ECN marks cc.png plots "
                             "(default: the NSCC writer QP with the most samples)")
    parser.add_argument("--lb", choices=LB_POLICIES, default="rotation",
                        help="load balancing over the EVs (the run's EV profile): the fixed "
                             "rotation (default), REPS (recycle EVs that came back unmarked) "
                             "or the bitmap penalty")
    parser.add_argument("--window", default=None,
                        help="bytes in flight per QP with --cc fixed (default 64KiB, circuit "
                             "fabrics 128KiB)")
    parser.add_argument("--wimm", type=int, default=None, metavar="N",
                        help="every Write is a WriteImm (receives pre-posted, completions "
                             "checked in send order), at most N in flight per QP (max_wimm)")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="S",
                        help="seconds a workload round may take (default 120)")
    parser.add_argument("--fail", action="append", default=[], metavar="A-B@S",
                        help="take link A-B (or every link of a plane: plane:P) down S seconds "
                             "after the workload starts")
    parser.add_argument("--restore", action="append", default=[], metavar="A-B@S",
                        help="bring link A-B (or plane:P) back up at S seconds")
    parser.add_argument("--duration", type=float, default=None, metavar="S",
                        help="repeat the workload until S seconds have passed")
    parser.add_argument("--tdf", default=None, metavar="N|auto",
                        help="time-dilation factor: the run's clock goes N times slower than "
                             "the wall clock (default 1; with --demo: calibrated); 'auto' "
                             "calibrates the smallest factor that keeps every process on time")
    parser.add_argument("--rx-ring", type=int, default=None, metavar="SLOTS",
                        help="receive ring slots per embedded switch port (16 KiB of kernel "
                             "memory each; default: sized per port from its link rate and the "
                             "TDF, 128-1024); 0: recvmmsg")
    parser.add_argument("--coalesce", type=float, default=0.0, metavar="S",
                        help="wake-up coalescing slack of switches and agents in virtual "
                             "seconds (default 0: a wake-up per event; measured, coalescing "
                             "saved wake-ups but no CPU, docs/switch.md)")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    parser.add_argument("--quiet", action="store_true", help="no live view lines")
    parser.add_argument("--pcap", action="store_true",
                        help="write one pcap per switch port into the run folder's pcap/")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mrcnet import cmd_collective

    add_common(parser)
    parser.add_argument("--run", default=None, metavar="WORKLOAD",
                        help="all-to-all | permutation | pair:SRC:DST; on circuit fabrics "
                             "PHASE:ALGORITHM (allreduce:rd, reduce-scatter:ring, ..., "
                             "all-to-all:shift, all-to-all:bruck)")
    cmd_collective.add_arguments(parser)
    cli = parser.add_mutually_exclusive_group()
    cli.add_argument("--no-cli", action="store_true", help="do not open the CLI")
    cli.add_argument("--cli", action="store_true",
                     help="open the CLI even when stdin is not a terminal (commands from a "
                          "pipe or file, as with Mininet's CLI)")
    parser.add_argument("--demo", action="store_true",
                        help="spraying + a spine link failure and recovery (make topology); "
                             "calibrates the time-dilation factor unless --tdf is given")
    parser.add_argument("--web", action="store_true",
                        help="serve the live web view on 127.0.0.1 (the URL, with its access "
                             "token, is printed)")
    parser.add_argument("--web-port", type=int, default=0, metavar="PORT",
                        help="TCP port of --web (default: any free port)")


# Defaults per fabric kind: (link rate, window). Circuit fabrics forward every multi-hop
# packet through GPU agents and send acknowledgements back over multi-hop routes: 8 GPUs and
# the OCS at 20 Mb/s use about half of the two cores, and a 128 KiB window covers the longest
# acknowledgement path there (docs/harvest.md).
DEFAULTS = {"packet": ("100Mbps", "64KiB"), "circuit": ("20Mbps", "128KiB")}


def parse_tdf(text: str, switch: str) -> float | None:
    """``--tdf``: a factor, or None for 'auto'; ValueError with the reason otherwise."""
    from common.vclock import ClockError, check_tdf
    from switch.targets import DEFAULT_KIND, target_class

    auto = text.strip().lower() == "auto"
    kind = target_class(switch)
    if not kind.supports_dilation and (auto or text.strip() not in ("1", "1.0")):
        raise ValueError(f"--tdf {text}: {kind.label} runs on the wall clock and cannot be "
                         f"dilated; use --tdf 1 or the {DEFAULT_KIND} switch")
    if auto:
        return None
    try:
        return check_tdf(float(text))
    except (ValueError, ClockError):
        raise ValueError(f"--tdf {text!r}: expected a number >= 1 or 'auto'") from None


def options(args: argparse.Namespace, kind: str = "packet") -> Any:
    from common.pktring import check_frames
    from mrcnet.fabric.orchestrator import RunOptions

    tdf = parse_tdf(args.tdf or "1", args.switch)
    rate = args.rate or DEFAULTS[kind][0]
    ring = getattr(args, "rx_ring", None)
    if ring is not None:
        check_frames(ring)  # ValueError: refused before anything starts
    coalesce = getattr(args, "coalesce", None)
    if coalesce is not None and not 0 <= coalesce < 1:
        raise ValueError(f"--coalesce {coalesce:g}: seconds in [0, 1)")
    return RunOptions(topology=args.topology, switch=args.switch, mode=args.mode,
                      rate=None if rate == "file" else rate, delay=args.delay,
                      cp_delay=args.cp_delay, window=_size(args.window or DEFAULTS[kind][1]),
                      cc=args.cc, lb=args.lb, cc_qp=_cc_qp(getattr(args, "cc_qp", None)),
                      show=not args.quiet, tdf=1.0 if tdf is None else tdf,
                      pcap=getattr(args, "pcap", False), rx_ring=ring, coalesce=coalesce)


def _cc_qp(text: str | None) -> str | None:
    """``--cc-qp`` checked before anything starts (ValueError)."""
    if text is None:
        return None
    from mrcnet.fabric.ccplot import parse_qp

    parse_qp(text)
    return text


def workload_extra(args: argparse.Namespace) -> dict[str, Any]:
    """Job fields for the workload's writers and sinks (``--wimm``)."""
    if args.wimm is None:
        return {}
    if not 1 <= args.wimm <= 0x7FFF:
        raise ValueError("--wimm must be 1..32767 (max_wimm)")
    return {"wimm": True, "max_wimm": args.wimm}


def demo_defaults(args: argparse.Namespace, topo: Any) -> None:
    """Fill --run/--fail/--restore/--duration for the demonstration."""
    from topologies.model import NodeKind

    args.run = args.run or "all-to-all"
    if not args.fail and not args.restore:
        link = next(ln for ln in topo.links
                    if topo.node(ln.a.node).kind == NodeKind.SWITCH
                    and topo.node(ln.b.node).kind == NodeKind.SWITCH)
        name = f"{link.a.node}-{link.b.node}"
        args.fail, args.restore = [f"{name}@2"], [f"{name}@5"]
    if args.duration is None:
        args.duration = 8.0


def _add_calibration(fab: Any, res: dict[str, Any], calibration: dict[str, Any] | None) -> None:
    """Keep the --tdf auto search in the results (and in results.json)."""
    if calibration is None:
        return
    from mrcnet.fabric.results import write_json

    res["calibration"] = calibration
    write_json(fab.run_dir, res)


def _say(text: str) -> None:
    print(f"[mrcnet] {text}", file=sys.stderr, flush=True)


def print_summary(res: dict[str, Any], as_json: bool) -> None:
    from mrcnet.fabric.results import summary_table

    if as_json:
        keep = {k: v for k, v in res.items() if k not in ("samples", "ev_events")}
        print(json.dumps(keep, default=str))
        return
    virtual = res.get("time") == "virtual"
    print(summary_table(res["workloads"], virtual) if res["workloads"] else "no workload ran")
    unit = "virtual s" if virtual else "s"
    for e in res["link_events"]:
        print(f"  {e['t']:6.2f} {unit}  link {e['link']} {'up' if e['up'] else 'down'}")
    print(f"EV reports: {res['ev_counts']}; route changes: {len(res['convergence'])} "
          "controller log lines")
    print(f"completed: {res['completed']}  verified bytes: {res['verified_bytes']}  "
          f"QP errors: {res['qp_errors']}")
    fid = res.get("fidelity")
    if fid:
        print(f"clock: TDF {res['tdf']:g}  faithful: {'yes' if res['faithful'] else 'NO'}  "
              f"(slowest {fid['slowest']}: behind schedule {fid['max_lag_fraction']:.1%} of "
              f"the time, limit {fid['limit']:.0%})")
    for text in res.get("warnings", []):
        print(f"WARNING: {text}")
    print(f"results: {res['results_dir']}")


def run(args: argparse.Namespace) -> int:
    from mrcnet.fabric.failures import FailureSpecError, parse_schedule
    from mrcnet.fabric.orchestrator import Fabric
    from mrcnet.fabric.plan import PlanError
    from mrcnet.fabric.scenario import collect, run_scenario
    from mrcnet.fabric.workloads import WorkloadError, flows_for
    from mrcnet.web.launch import start_web
    from topologies.loader import TopologyError, load

    demo_tdf = args.demo and args.tdf is None  # the demo calibrates unless told a factor
    args.tdf = args.tdf or ("auto" if demo_tdf else "1")
    args.size = args.size or (DEMO_SIZE if args.demo else DEFAULT_SIZE)
    try:
        topo = load(args.topology)
        if topo.fabric.kind.value == "circuit":
            from mrcnet import cmd_collective

            return cmd_collective.run(args, topo, options)
        if args.demo:
            demo_defaults(args, topo)
        events = parse_schedule(topo, args.fail, args.restore)
        if args.run:
            flows_for(args.run, [n.name for n in topo.nodes if n.kind.value == "host"])
        size = _size(args.size)
        opts = options(args)
        extra = workload_extra(args)
        from switch.targets import target_class

        if opts.pcap and not target_class(opts.switch).takes_captures:
            raise ValueError(f"--pcap: {target_class(opts.switch).label} takes no captures at "
                             "run time (see docs/switch.md for its own)")
    except (TopologyError, FailureSpecError, WorkloadError, ValueError) as exc:
        print(f"mrcnet up: {exc}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("mrcnet up: needs root (network namespaces, veth links, raw sockets); "
              "run it with sudo", file=sys.stderr)
        return 2
    interactive = args.cli or (not args.no_cli and sys.stdin.isatty())
    calibration = None
    if args.tdf.strip().lower() == "auto":
        from mrcnet.fabric.calibrate import calibrate

        try:
            calibration = calibrate(opts, args.run or "all-to-all", size, args.qp,
                                    timeout=args.timeout, say=_say, extra=extra)
        except (RuntimeError, PlanError, OSError) as exc:
            print(f"mrcnet up: calibration failed: {exc}", file=sys.stderr)
            return 1
        opts.tdf = calibration["tdf"]
        verdict = ("faithful" if calibration["verified"]
                   else "not verified: no probe was faithful, the last suggestion")
        _say(f"calibration: TDF {opts.tdf:g} ({verdict}; {len(calibration['probes'])} "
             f"probes, {calibration['seconds']:.0f} s)")
        if demo_tdf:
            opts.tdf = demo.with_margin(calibration)
            _say(f"demo: TDF {opts.tdf:g} ({demo.margin_note(calibration)})")
    if args.web:
        opts.sample_interval = web_sample_interval(opts.tdf)
    fab = Fabric(opts)
    web = None
    display = LiveDisplay()
    try:
        fab.start()
        if fab.sampler is not None:
            fab.sampler.display = display
        web = start_web(fab, args)  # --web: the page of this fabric
        res = run_scenario(fab, args.run, size, args.qp, events, args.duration, args.timeout,
                           extra=extra)
        _add_calibration(fab, res, calibration)
        if interactive:
            from mrcnet.fabric.cli_shell import FabricCLI

            print_summary(res, False)
            if args.demo:
                print(demo.verdict_line(res, calibration, demo_tdf), flush=True)
            display.open_prompt()
            try:
                FabricCLI(fab, size=size, qp_type=args.qp)
            finally:
                display.close_prompt()
            res = collect(fab, res["workloads"] + fab.cli_workloads, None)
            _add_calibration(fab, res, calibration)
    except (RuntimeError, PlanError, OSError) as exc:  # FabricError, switch start errors, ...
        print(f"mrcnet up: {exc}", file=sys.stderr)
        fab.stop()
        return 1
    finally:
        if web is not None:
            web.stop()
        fab.stop()
    print_summary(res, args.json)
    if args.demo and not args.json:
        print(demo.verdict_line(res, calibration, demo_tdf))
    return 0 if res["completed"] or not args.run else 1


def web_sample_interval(tdf: float) -> float:
    """With --web the live view samples every 0.5 wall seconds (the page updates at least
    once a second whatever the dilation): 0.5 / TDF seconds of the run's clock."""
    return 0.5 / max(1.0, tdf)

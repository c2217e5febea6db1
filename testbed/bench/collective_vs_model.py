"""``mrcnet bench collective``: Harvest schedules executed on the photonic domain vs the model.

One fabric (default scaleup-ocs: 8 GPU agents with 2 optical ports around one OCS, every link
``--rate``). The cost model's c, alpha, delta and alpha_r are calibrated on it (see
mrcnet/fabric/collectives.py), then the collective (default recursive-doubling AllReduce,
d = 1) runs under the static, every-step and Harvest schedules, the last synthesised by the
engine for the calibrated parameters. Printed (one JSON object with ``--json``):

{"collective", "phase", "gpus", "degree", "size_bytes", "bandwidth_bps", "alpha_s",
 "delta_s", "alpha_r_s", "schedules": {"static": S, "every-step": S, "harvest": S},
 "fastest": {"model": [tied], "measured", "agree"}, "reduce_scatter_shape": {...}},
S = {"measured_s",
"model_s", "ratio", "reconfigurations", "verified"}.

``reduce_scatter_shape`` is the seed's hardware experiment in miniature: 8-GPU recursive
doubling reduce-scatter on the static ring C(1) against a direct topology per step, measured
and model speedups (the paper: 1.85x measured, 1.71x model).

``--validate`` predicts runs from a micro-benchmark calibration instead and reports the
model's error over collectives, sizes and reconfiguration delays
(testbed/bench/collective_validation.py).

``--sweep-alpha-r T1,T2,...`` also runs the three schedules for each OCS dark time and writes
``collective_sweep.png`` (measured and model completion time over alpha_r) in the results
folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from common.collectives import COLLECTIVES
from testbed.bench import collective_validation, verdicts

DEFAULT_SWEEP = "0,20ms,60ms,120ms,250ms,500ms"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--topology", default="scaleup-ocs")
    parser.add_argument("--collective", default="rd", choices=list(COLLECTIVES))
    parser.add_argument("--phase", default=None,
                        help="default allreduce (all-to-all for shift and bruck)")
    parser.add_argument("--degree", type=int, default=None)
    parser.add_argument("--size", default="2MiB", help="message size per GPU")
    parser.add_argument("--rate", default="20Mbps", help="every link's rate")
    parser.add_argument("--window", default="128KiB", help="bytes in flight per QP")
    parser.add_argument("--alpha-r", default="250ms",
                        help="OCS dark time per reconfiguration (default 250ms: with 2 MiB at "
                             "20 Mb/s, Harvest's schedule differs from both baselines there)")
    parser.add_argument("--barrier", choices=["all", "early"], default="all",
                        help="a reconfiguration waits for every GPU (all) or for the GPUs "
                             "that need the changing circuits (early)")
    parser.add_argument("--sweep-alpha-r", nargs="?", const=DEFAULT_SWEEP, default=None,
                        metavar="T1,T2,...", help="also sweep the dark time (default "
                        f"{DEFAULT_SWEEP}) and plot completion time over it")
    parser.add_argument("--tdf", type=float, default=1.0,
                        help="time-dilation factor of the run's clock (rates and times above "
                             "are virtual; common/vclock.py)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="per collective run, seconds of the run's clock")
    parser.add_argument("--json", action="store_true")
    collective_validation.add_arguments(parser)


def _say(text: str) -> None:
    print(f"[bench collective] {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.validate:
        return collective_validation.run_validation(args)
    from common.collectives import build
    from common.units import parse_duration, parse_size
    from controller.harvest.model import Params
    from mrcnet.cmd_collective import DEFAULT_DEGREE
    from mrcnet.fabric import collective_report as report
    from mrcnet.fabric.collectives import CollectiveDriver
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    size = int(parse_size(args.size))
    dark = parse_duration(args.alpha_r)
    degree = args.degree or DEFAULT_DEGREE[args.collective]
    sweep = ([parse_duration(t) for t in args.sweep_alpha_r.split(",")]
             if args.sweep_alpha_r else [])
    fab = Fabric(RunOptions(topology=args.topology, rate=args.rate,
                            window=int(parse_size(args.window)), show=False, tdf=args.tdf))
    out: dict[str, Any] = {}
    try:
        fab.start()
        driver = CollectiveDriver(fab, timeout=args.timeout, say=_say)
        cal = driver.calibrate(size, dark)
        overhead = max(0.0, cal.alpha_r_s - dark)  # controller writes beyond the dark time
        _say(f"calibrated c={cal.bandwidth_bps / 1e6:.2f} Mb/s alpha={cal.alpha_s * 1e3:.2f} ms"
             f" delta={cal.delta_s * 1e6:.0f} us alpha_r={cal.alpha_r_s * 1e3:.2f} ms")
        coll = build(args.collective, driver.n, args.phase)

        def run_schedules(c: Any, d: int, dark_s: float, names: list[str]) -> list[Any]:
            p = Params(d, cal.bandwidth_bps, cal.alpha_s, cal.delta_s, dark_s + overhead)
            runs = []
            for sched in driver.schedules_for(c, size, d, p, names):
                plan = driver.plan_for(c, sched, size, d, p, dark_s,
                                       barrier=args.barrier)
                _say(f"{c.phase} {c.name}, {sched.name}, dark {dark_s * 1e3:g} ms: model "
                     f"{sched.model_s:.3f} s")
                runs.append(driver.run_plan(plan))
            return runs

        main = run_schedules(coll, degree, dark, ["static", "every-step", "harvest"])
        out = report.summary(main, cal, {
            "collective": coll.name, "phase": coll.phase, "gpus": coll.n, "degree": degree,
            "size_bytes": size, "barrier": args.barrier})
        assert fab.topo is not None
        out["link_rate_bps"] = fab.topo.links[0].params.rate_bps
        out["tdf"] = args.tdf
        out["dark_s"] = dark
        rs = build("rd", driver.n, "reduce-scatter")
        # the seed's experiment reconfigured in far less than a step: no dark time here
        static, direct = run_schedules(rs, 1, 0.0, ["static", "every-step"])
        out["reduce_scatter_shape"] = {
            "measured_speedup": static.measured_s / direct.measured_s,
            "model_speedup": static.model_s / direct.model_s,
            "static_ring_s": static.measured_s, "direct_per_step_s": direct.measured_s,
            "verified": bool(static.verified and direct.verified),
            "paper": {"measured_speedup": 1.85, "model_speedup": 1.71}}
        if sweep:
            points = []
            for dark_s in sweep:
                runs = run_schedules(coll, degree, dark_s, ["static", "every-step", "harvest"])
                points.append({"dark_s": dark_s, "alpha_r_s": dark_s + overhead,
                               "schedules": {r.plan.schedule: {
                                   "measured_s": r.measured_s, "model_s": r.model_s,
                                   "reconfigurations": r.reconfigurations,
                                   "verified": r.verified} for r in runs}})
            out["sweep"] = points
            out["sweep_plot"] = str(report.plot_sweep(points, fab.run_dir /
                                                      "collective_sweep.png"))
        out["results_dir"] = str(fab.run_dir)
        (fab.run_dir / "bench_collective.json").write_text(json.dumps(out, indent=1))
    finally:
        fab.stop()
    verdict_runs = {name: s["faithful"] for name, s in out["schedules"].items()}
    status = verdicts.conclude("collective", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        unit = "s" if args.tdf == 1 else "virtual s"
        for name, s in out["schedules"].items():
            print(f"{name:<11} measured {s['measured_s']:.4f} {unit}  model {s['model_s']:.4f} "
                  f"{unit}  ratio {s['ratio']:.3f}  reconfigurations {s['reconfigurations']}  "
                  f"verified {s['verified']}  faithful {s['faithful']}")
        shape = out["reduce_scatter_shape"]
        print(f"reduce-scatter static ring / direct per step: measured "
              f"{shape['measured_speedup']:.2f}x, model {shape['model_speedup']:.2f}x")
        print(f"results: {out['results_dir']}")
    ok = all(s["verified"] for s in out["schedules"].values())
    return status if ok else 1

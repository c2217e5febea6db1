"""``mrcnet bench fidelity``: is the emulation the configured network, without and with dilation?

An all-to-all (default clos-2p, every link ``--rate`` 100 Mb/s, ``--size`` bytes per flow,
verified byte for byte) runs on a fresh fabric at TDF 1; then ``--tdf auto`` calibrates the
smallest factor that keeps every process on time (mrcnet/fabric/calibrate.py) and the same
all-to-all runs at that factor. For each run:

- ``goodput_fraction_of_configured``: verified bytes over the time from the first Write to
  the last completion, divided by the workload's configured capacity (its maximum
  concurrent flow over the links, mrcnet/fabric/capacity.py; link bits, so a perfect run
  of 4096-byte payloads in 4194-byte frames is below 0.98);
- ``faithful`` and ``max_lag_fraction``: the run's verdict and the largest fraction of
  virtual time any switch or agent spent behind its schedule (mrcnet/fabric/fidelity.py).

Targets: at the auto factor faithful and goodput_fraction_of_configured >= 0.9; at TDF 1
honest: unfaithful whenever its goodput is below 0.9 of the configured capacity.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from testbed.bench import verdicts

TARGET_FRACTION = 0.9
WORKLOAD = "all-to-all"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--topology", default="clos-2p")
    parser.add_argument("--rate", default="100Mbps")
    parser.add_argument("--size", default="4MiB", help="bytes per flow")
    parser.add_argument("--window", default="64KiB", help="bytes in flight per QP")
    parser.add_argument("--probes", type=int, default=5, help="calibration probes at most")
    parser.add_argument("--json", action="store_true")


def _one(opts: Any, tdf: float, size: int) -> dict[str, Any]:
    from dataclasses import replace

    from mrcnet.fabric.orchestrator import Fabric
    from mrcnet.fabric.scenario import collect

    fab = Fabric(replace(opts, tdf=tdf))
    try:
        fab.start()
        assert fab.runner is not None
        wl = fab.runner.submit(WORKLOAD, size, "MRC", timeout=120)
        fab.runner.wait(wl, 150, fab.check_alive)
        summary = wl.summary()
        res = collect(fab, [summary], None)
    finally:
        fab.stop()
    fid = summary.get("fidelity") or {}
    return {"tdf": tdf, "goodput_fraction_of_configured": summary.get("goodput_fraction") or 0.0,
            "faithful": bool(summary["completed"] and fid.get("faithful")),
            "max_lag_fraction": fid.get("max_lag_fraction"), "slowest": fid.get("slowest"),
            "suggested_tdf": fid.get("suggested_tdf"), "completed": bool(summary["completed"]),
            "goodput_bps": summary.get("goodput_bps"), "capacity_bps": summary.get("capacity_bps"),
            "cpu_cores_used": fid.get("cpu_cores_used"), "results_dir": res["results_dir"]}


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.calibrate import calibrate
    from mrcnet.fabric.orchestrator import RunOptions

    size = int(parse_size(args.size))
    opts = RunOptions(topology=args.topology, rate=args.rate, window=int(parse_size(args.window)))

    def say(text: str) -> None:
        print(f"[bench fidelity] {text}", file=sys.stderr, flush=True)

    say("TDF 1 ...")
    plain = _one(opts, 1.0, size)
    say("calibrating --tdf auto ...")
    cal = calibrate(opts, WORKLOAD, size, max_probes=args.probes, say=say)
    say(f"TDF {cal['tdf']:g} (auto) ...")
    auto = _one(opts, float(cal["tdf"]), size)
    keys = ("tdf", "goodput_fraction_of_configured", "faithful", "max_lag_fraction")
    # Honest at TDF 1: it never claims faithful while reaching less than the target.
    honest = not (plain["faithful"] and plain["goodput_fraction_of_configured"] < TARGET_FRACTION)
    out = {
        "tdf_1": {k: plain[k] for k in keys},
        "auto": {k: auto[k] for k in keys},
        "auto_tdf": cal["tdf"],
        "calibration": {"verified": cal["verified"], "seconds": cal["seconds"],
                        "probes": [{k: p[k] for k in ("tdf", "faithful", "max_lag_fraction",
                                                      "goodput_fraction")}
                                   for p in cal["probes"]]},
        "details": {"tdf_1": plain, "auto": auto},
        "workload": {"name": WORKLOAD, "topology": args.topology, "rate": args.rate,
                     "size_bytes": size, "window_bytes": opts.window},
        "targets_met": bool(auto["faithful"]
                            and auto["goodput_fraction_of_configured"] >= TARGET_FRACTION
                            and honest),
    }
    verdict_runs = {"auto": out["auto"]["faithful"]}
    status = verdicts.conclude("fidelity", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        for name in ("tdf_1", "auto"):
            r = out[name]
            print(f"{name:6s} TDF {r['tdf']:<4g} goodput {r['goodput_fraction_of_configured']:.1%} "
                  f"of configured, {'faithful' if r['faithful'] else 'NOT faithful'} "
                  f"(max lag fraction {r['max_lag_fraction']:.2%})")
        print(f"calibration: {len(cal['probes'])} probes in {cal['seconds']:.0f} s; "
              f"targets met: {out['targets_met']}")
    return status

"""``mrcnet bench collective --validate``: Harvest's model predicting runs it was not fitted to.

The cost model is calibrated from point-to-point micro-benchmarks only
(mrcnet/fabric/microcal.py; ``calibration.json`` in the run folder), never from the
collectives' shapes. Then, for each collective (``--validate-collectives``, default RD d=1,
Swing d=2, ring d=1), phase and size (``--validate-sizes``, spanning 8x), the static
schedule runs once (it never reconfigures, so alpha_r changes neither its run nor its
model) and the every-step and Harvest schedules run at five reconfiguration delays around
the crossover alpha_r* at which the model's static and every-step times are equal
(alpha_r* x 1/4, 1/2, 1, 2, 4). Each run's plan, with its prediction and the time it was
made, is written before the run starts.

Reported: every run (model, measured, error |measured/model - 1|, verified, faithful), the
error distribution (median, p90, max), and the ranking check: within each (collective,
phase, size, alpha_r), for every pair of schedules whose model times differ by more than 5%,
whether the measured order is the model's. ``validation.png`` plots measured against model.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

from testbed.bench import verdicts

ALPHA_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
RANK_GAP = 0.05  # the model's schedules must differ by more than this to be ranked
MAX_DARK_S = 1.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--validate", action="store_true",
                        help="predict runs from a micro-benchmark calibration and report the "
                             "model's error over collectives, sizes and alpha_r")
    parser.add_argument("--validate-collectives", default="rd:1,swing:2,ring:1",
                        metavar="NAME:DEGREE,...", help="--validate: collectives and degrees")
    parser.add_argument("--validate-phases", default="allreduce", metavar="PHASE,...",
                        help="--validate: phases (allreduce, reduce-scatter, all-gather)")
    parser.add_argument("--validate-sizes", default="256KiB,512KiB,2MiB", metavar="S,...",
                        help="--validate: message sizes (default spans 8x)")


def _say(text: str) -> None:
    print(f"[bench collective --validate] {text}", file=sys.stderr, flush=True)


def crossover(static_s: float, every_step_free_s: float, reconfigurations: int) -> float:
    """alpha_r at which every-step (its time without reconfigurations, plus one alpha_r per
    reconfiguration) costs what static does; 0 when every-step is never cheaper."""
    if reconfigurations <= 0 or static_s <= every_step_free_s:
        return 0.0
    return (static_s - every_step_free_s) / reconfigurations


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Error distribution and ranking agreement of the validation rows."""
    errors = sorted(r["error"] for r in rows)
    p90 = errors[min(len(errors) - 1, int(0.9 * len(errors)))] if errors else None
    groups: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        for alpha in r["alpha_r_values"]:
            key = (r["collective"], r["phase"], r["size_bytes"], alpha)
            groups.setdefault(key, {})[r["schedule"]] = r
    ranked = agree = 0
    disagreements = []
    for key, by_name in groups.items():
        for a, b in combinations(sorted(by_name), 2):
            ma, mb = by_name[a]["model_s"], by_name[b]["model_s"]
            if abs(ma - mb) <= RANK_GAP * min(ma, mb):
                continue
            ranked += 1
            same = (ma < mb) == (by_name[a]["measured_s"] < by_name[b]["measured_s"])
            agree += same
            if not same:
                disagreements.append({"case": list(key), "pair": [a, b]})
    return {"runs": len(rows), "median_error": statistics.median(errors) if errors else None,
            "p90_error": p90, "max_error": errors[-1] if errors else None,
            "ranked_pairs": ranked, "ranking_agrees": agree,
            "ranking_disagreements": disagreements}


def _plot(rows: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5))
    for i, name in enumerate(("static", "every-step", "harvest")):
        xs = [r["model_s"] for r in rows if r["schedule"] == name]
        ys = [r["measured_s"] for r in rows if r["schedule"] == name]
        if xs:
            ax.scatter(xs, ys, s=14, color=f"C{i}", label=name)
    lo = min(min(r["model_s"], r["measured_s"]) for r in rows)
    hi = max(max(r["model_s"], r["measured_s"]) for r in rows)
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    ax.plot([lo, hi], [lo * 1.1, hi * 1.1], color="grey", linewidth=0.5, linestyle=":")
    ax.plot([lo, hi], [lo * 0.9, hi * 0.9], color="grey", linewidth=0.5, linestyle=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("model (s), predicted before the run")
    ax.set_ylabel("measured (s)")
    ax.set_title("Harvest model out of sample (dotted: +-10%)")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _row(outcome: Any, coll: Any, size: int, degree: int, alphas: list[float]) -> dict[str, Any]:
    return {"collective": coll.name, "phase": coll.phase, "degree": degree, "size_bytes": size,
            "schedule": outcome.plan.schedule, "alpha_r_values": alphas,
            "reconfigurations": outcome.reconfigurations, "model_s": outcome.model_s,
            "measured_s": outcome.measured_s,
            "error": abs(outcome.measured_s / outcome.model_s - 1) if outcome.model_s > 0
            else float("inf"),
            "verified": outcome.verified, "faithful": outcome.faithful, "tag": outcome.tag}


def run_validation(args: argparse.Namespace) -> int:
    from common.collectives import build
    from common.units import parse_size
    from mrcnet.fabric.collectives import Calibration, CollectiveDriver
    from mrcnet.fabric.microcal import save
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    cases = []
    for item in args.validate_collectives.split(","):
        name, _, degree = item.strip().partition(":")
        cases.append((name, int(degree or 1)))
    phases = [p.strip() for p in args.validate_phases.split(",") if p.strip()]
    sizes = [int(parse_size(s)) for s in args.validate_sizes.split(",") if s.strip()]
    fab = Fabric(RunOptions(topology=args.topology, rate=args.rate,
                            window=int(parse_size(args.window)), show=False, tdf=args.tdf))
    rows: list[dict[str, Any]] = []
    out: dict[str, Any] = {"tdf": args.tdf, "rate": args.rate}
    try:
        fab.start()
        driver = CollectiveDriver(fab, timeout=args.timeout, say=_say)
        micro = driver.calibrate_micro(max(sizes), 0.0)
        cal_path = save(micro, fab.run_dir / "calibration.json")
        data = micro.to_json()
        overhead = micro.alpha_r_overhead_s
        _say(f"calibrated from micro-benchmarks: c = {micro.fit.bandwidth_bps / 1e6:.2f} +- "
             f"{micro.fit.bandwidth_se / 1e6:.2f} Mb/s, alpha = {micro.fit.alpha_s * 1e3:.3f} "
             f"ms, delta = {micro.fit.delta_s * 1e6:.0f} us, acknowledgement return "
             f"{micro.ack_hop_s * 1e6:.0f} us per hop, overhead = {overhead * 1e3:.2f} ms")
        for name, degree in cases:
            for phase in phases:
                coll = build(name, driver.n, phase)
                for size in sizes:
                    free = Calibration.from_file(data, 0.0).params(degree)
                    base = {s.name: s for s in driver.schedules_for(
                        coll, size, degree, free, ["static", "every-step"])}
                    star = crossover(base["static"].model_s,
                                     base["every-step"].model_s
                                     - base["every-step"].reconfigurations * overhead,
                                     base["every-step"].reconfigurations)
                    star = star or 0.05
                    alphas = [max(overhead, min(MAX_DARK_S, star * f)) for f in ALPHA_FACTORS]
                    static = driver.schedules_for(coll, size, degree, free, ["static"])[0]
                    outcome = driver.run_plan(driver.plan_for(coll, static, size, degree, free,
                                                              0.0, ack_hop_s=micro.ack_hop_s))
                    rows.append(_row(outcome, coll, size, degree, alphas))
                    for alpha in alphas:
                        dark = max(0.0, alpha - overhead)
                        params = Calibration.from_file(data, dark).params(degree)
                        for sched in driver.schedules_for(coll, size, degree, params,
                                                          ["every-step", "harvest"]):
                            outcome = driver.run_plan(driver.plan_for(
                                coll, sched, size, degree, params, dark,
                                ack_hop_s=micro.ack_hop_s))
                            rows.append(_row(outcome, coll, size, degree, [alpha]))
                    _say(f"{phase} {name} d={degree} {size >> 10} KiB: crossover alpha_r "
                         f"{star * 1e3:.1f} ms; {len(rows)} runs so far")
        out["calibration"] = str(cal_path)
        out["summary"] = summarize(rows)
        out["rows"] = rows
        out["plot"] = str(_plot(rows, fab.run_dir / "validation.png"))
        out["results_dir"] = str(fab.run_dir)
        (fab.run_dir / "validation.json").write_text(json.dumps(out, indent=1))
    finally:
        fab.stop()
    status = verdicts.conclude("collective --validate", out,
                               {r["tag"]: r["faithful"] for r in rows}, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{'collective':<10} {'phase':<14} {'size':>8} {'schedule':<10} "
              f"{'alpha_r':>9} {'model s':>9} {'measured s':>10} {'error':>7}")
        for r in rows:
            alpha_text = "any" if len(r["alpha_r_values"]) > 1 else \
                f"{r['alpha_r_values'][0] * 1e3:.1f}ms"
            print(f"{r['collective']:<10} {r['phase']:<14} {r['size_bytes'] >> 10:>6}Ki "
                  f"{r['schedule']:<10} {alpha_text:>9} {r['model_s']:>9.4f} "
                  f"{r['measured_s']:>10.4f} {r['error']:>7.1%}")
        summary = out["summary"]
        print(f"{summary['runs']} runs: error median {summary['median_error']:.1%}, p90 "
              f"{summary['p90_error']:.1%}, max {summary['max_error']:.1%}; ranking agrees "
              f"on {summary['ranking_agrees']} of {summary['ranked_pairs']} pairs the model "
              f"separates by "
              f"more than {RANK_GAP:.0%}")
        print(f"plot: {out['plot']}\nresults: {out['results_dir']}")
    return status if all(r["verified"] for r in rows) else 1

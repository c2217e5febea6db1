"""`mrcnet sim CIRCUIT-TOPOLOGY --run PHASE:ALGORITHM`: the emulation's collective run
(mrcnet/cmd_collective.py ``run_on``) with the simulated driver (mrcnet/sim/collective.py).

The options are checked by the emulation's ``cmd_collective.prepare`` (the same errors), the
model is calibrated as the emulation calibrates it (``calibration_for``: the shapes of the
collectives, micro-benchmarks, or a file), the collective runs once per schedule on a fresh
simulated fabric, and the results are the emulation's ``collectives.json`` fields
(``collective_report.summary``: per schedule measured, model and ratio, verified; the
calibration; ``runs`` with per-step figures and the barrier timeline), plus what only a
simulation knows (``sim``). They depend only on the inputs: the same inputs give the same
JSON, byte for byte.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mrcnet.cmd_collective import calibrate_for_runs, schedule_plans
from mrcnet.fabric import collective_report as report
from mrcnet.sim.collective import DEFAULT_WINDOW, SimCircuitFabric, SimCollectiveDriver
from mrcnet.sim.run import SimRun
from topologies.model import Topology

SPEC_FIELDS = ("collective", "phase", "gpus", "degree", "size_bytes", "dtype", "barrier")


def simulate_collectives(topo: Topology, spec: dict[str, Any], run_dir: Path, seed: int = 1,
                         limit_s: float = 10.0, say: Callable[[str], None] | None = None,
                         window: int = DEFAULT_WINDOW) -> SimRun:
    """Calibrate, then run every schedule of ``spec`` (``cmd_collective.prepare``'s) on
    ``topo``; a GPU error or a run past ``limit_s`` raises CollectiveError."""
    wall0, cpu0 = time.monotonic(), time.process_time()
    fab = SimCircuitFabric(topo, run_dir, window=window, limit_s=limit_s,
                           say=say or (lambda text: None))
    driver = SimCollectiveDriver(fab)
    cal = calibrate_for_runs(driver, fab, spec, window)
    fab.say(f"calibrated: c = {cal.bandwidth_bps / 1e6:.2f} Mb/s, alpha = "
            f"{cal.alpha_s * 1e6:.1f} us, delta = {cal.delta_s * 1e6:.1f} us, alpha_r = "
            f"{cal.alpha_r_s * 1e6:.1f} us")
    coll = spec["coll"]
    outcomes = []
    calibration_events = fab.events
    per_run: list[dict[str, Any]] = []
    for sched, plan in schedule_plans(driver, spec, cal):
        fab.say(f"{coll.phase} {coll.name} on {coll.n} GPUs, schedule {sched.name}: "
                f"{sched.reconfigurations} reconfigurations, model {plan.model.model_s * 1e3:.4f} ms")
        events, wall = fab.events, time.monotonic()
        out = driver.run_plan(plan, seed=seed)
        outcomes.append(out)
        per_run.append({"schedule": sched.name, "events": fab.events - events,
                        "wall_s": time.monotonic() - wall})
        fab.say(f"  measured {out.measured_s * 1e3:.4f} ms (ratio "
                f"{out.measured_s / out.model_s if out.model_s > 0 else float('nan'):.3f}), "
                f"verified {out.verified}, dark drops {out.dark_drops}")
    results = report.summary(outcomes, cal, {k: spec[k] for k in SPEC_FIELDS})
    results.update({
        "simulated": True, "topology": topo.name, "switch": "sim", "seed": seed,
        "limit_s": limit_s, "dark_s": spec["dark_s"], "window": window,
        "calibration_method": spec["calibration"] if isinstance(spec["calibration"], str)
        else "file",
        "runs": [o.to_json() for o in outcomes],
        "sim": {"events": fab.events, "calibration_events": calibration_events,
                "simulated_s": fab.simulated_s,
                "runs": [{"schedule": r["schedule"], "events": r["events"]} for r in per_run]},
    })
    wall = time.monotonic() - wall0
    perf = {"wall_s": wall, "cpu_s": time.process_time() - cpu0, "events": float(fab.events),
            "events_per_s": fab.events / wall if wall > 0 else 0.0,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for r in per_run:
        perf[f"wall_s_{r['schedule']}"] = r["wall_s"]
    return SimRun(results, perf)


def table(results: dict[str, Any]) -> str:
    """One line per schedule: measured and model time (simulated ms), ratio, verified."""
    lines = [f"{'schedule':<14} {'measured ms':>12} {'model ms':>10} {'ratio':>6} "
             f"{'reconf':>6} {'dark drops':>10} {'verified':>8}"]
    for run in results["runs"]:
        ratio = run["ratio"] if run["ratio"] is not None else float("nan")
        lines.append(f"{run['schedule']:<14} {run['measured_s'] * 1e3:>12.4f} "
                     f"{run['model_s'] * 1e3:>10.4f} {ratio:>6.3f} {run['reconfigurations']:>6} "
                     f"{run['dark_drops']!s:>10} {run['verified']!s:>8}")
    return "\n".join(lines)

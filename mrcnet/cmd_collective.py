"""``mrcnet up CIRCUIT-TOPOLOGY --run PHASE:ALGORITHM``: collectives on a photonic domain.

The fabric comes up (GPU agents with their built-in routers, one OCS, the controller), the
cost model is calibrated on it, and the collective runs once per schedule (``--schedule``:
static, every-step, harvest, a schedule file, or a comma list; default the three built-ins).
Each run is verified (every GPU's buffer against the recomputed sum of every input) and timed
by the controller's barrier; the results folder gets ``collectives.json``, a Gantt timeline
and measured-vs-model bars.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.collectives import COLLECTIVES, PHASES, CollectiveError, build

if TYPE_CHECKING:
    from mrcnet.fabric.calibrate import Probe, ProbeResult

DEFAULT_DEGREE = {"rd": 1, "swing": 2, "ring": 1, "shift": 1, "bruck": 1}
DEFAULT_SCHEDULES = ("static", "every-step", "harvest")


def parse_run(text: str) -> tuple[str, str]:
    """'allreduce:rd' -> (phase, algorithm)."""
    phase, _, algorithm = text.partition(":")
    if phase not in PHASES or algorithm not in COLLECTIVES:
        raise ValueError(f"--run {text!r}: expected PHASE:ALGORITHM with PHASE one of "
                         f"{', '.join(PHASES)} and ALGORITHM one of {', '.join(COLLECTIVES)}")
    return phase, algorithm


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of circuit fabrics (accepted by ``mrcnet up``)."""
    parser.add_argument("--schedule", default=",".join(DEFAULT_SCHEDULES),
                        help="circuit fabrics: static | every-step | harvest | FILE "
                             "(mrcnet harvest --json), comma separated (default: the three)")
    parser.add_argument("--alpha-r", default=None, metavar="T",
                        help="circuit fabrics: OCS dark time per reconfiguration "
                             "(default: the topology's reconfig_delay)")
    parser.add_argument("--degree", type=int, default=None,
                        help="circuit fabrics: optical ports per GPU the schedule uses "
                             "(default: rd 1, swing 2, ring 1)")
    parser.add_argument("--dtype", choices=["int32", "float32"], default="int32",
                        help="circuit fabrics: element type of the GPUs' buffers")
    parser.add_argument("--calibration", default="shapes", metavar="shapes|micro|FILE",
                        help="circuit fabrics: the cost model's parameters from steps of the "
                             "collectives' shapes (shapes, the default), from point-to-point "
                             "micro-benchmarks (micro), or from a file micro wrote "
                             "(calibration.json of a run folder)")
    parser.add_argument("--barrier", choices=["all", "early"], default="all",
                        help="circuit fabrics: a reconfiguration waits for every GPU (all), "
                             "or starts once the GPUs that need the changing circuits "
                             "finished the step (early), while the others still send")


def prepare(args: argparse.Namespace, topo: Any) -> dict[str, Any]:
    """Check everything before the fabric starts; raises ValueError (or HarvestError)."""
    from common.units import parse_duration, parse_size
    from controller.harvest import schedules
    from controller.harvest.model import Params

    for name, default in (("schedule", ",".join(DEFAULT_SCHEDULES)), ("alpha_r", None),
                          ("degree", None), ("dtype", "int32"), ("barrier", "all"),
                          ("calibration", "shapes")):
        if not hasattr(args, name):  # `mrcnet run` has only the common options
            setattr(args, name, default)
    phase, algorithm = parse_run(args.run or "allreduce:rd")
    gpus = [n.name for n in topo.nodes if n.kind.value == "gpu"]
    try:
        coll = build(algorithm, len(gpus), phase)
    except CollectiveError as exc:
        raise ValueError(str(exc)) from None
    ports = topo.fabric.ocs.ports_per_gpu if topo.fabric.ocs else 1
    degree = args.degree or DEFAULT_DEGREE[algorithm]
    if not 1 <= degree <= ports:
        raise ValueError(f"--degree {degree}: {topo.name} has {ports} optical ports per GPU")
    size = int(parse_size(args.size))
    if size <= 0 or size % (len(gpus) * 4):
        raise ValueError(f"--size {args.size}: a collective message must be a positive "
                         f"multiple of {len(gpus) * 4} bytes ({len(gpus)} blocks of 4-byte "
                         "elements)")
    dark = (parse_duration(args.alpha_r) if args.alpha_r is not None
            else (topo.fabric.ocs.reconfig_delay_s if topo.fabric.ocs else 0.0))
    names = [s.strip() for s in args.schedule.split(",") if s.strip()]
    probe = Params(degree, 1e9, 0.0, 0.0, dark)
    for name in names:  # a schedule file that does not fit is refused now, not mid-run
        if name not in schedules.SCHEDULE_KINDS:
            if not Path(name).exists():
                raise ValueError(f"--schedule {name!r}: not one of "
                                 f"{', '.join(schedules.SCHEDULE_KINDS)} and no such file")
            schedules.from_file(Path(name), coll, size, probe)
    calibration: str | dict[str, Any] = args.calibration
    if calibration not in ("shapes", "micro"):
        from controller.harvest.calfile import load
        from controller.harvest.model import HarvestError

        try:
            calibration = load(args.calibration)
        except HarvestError as exc:
            raise ValueError(f"--calibration: {exc}") from None
        if calibration.get("fabric", {}).get("gpus", len(gpus)) != len(gpus):
            raise ValueError(f"--calibration {args.calibration}: calibrated on "
                             f"{calibration['fabric']['gpus']} GPUs, {topo.name} has "
                             f"{len(gpus)}")
    return {"collective": algorithm, "phase": phase, "gpus": len(gpus), "degree": degree,
            "size_bytes": size, "dtype": args.dtype, "dark_s": dark, "schedules": names,
            "barrier": args.barrier, "calibration": calibration, "coll": coll}


def run_on(fab: Any, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Calibrate, then run every schedule of ``spec`` on the started fabric ``fab``."""
    from mrcnet.fabric import collective_report as report
    from mrcnet.fabric.collectives import CollectiveDriver

    driver = CollectiveDriver(fab, timeout=timeout)
    cal = calibrate_for_runs(driver, fab, spec, fab.opts.window)
    fab.say(f"calibrated: c = {cal.bandwidth_bps / 1e6:.2f} Mb/s, alpha = "
            f"{cal.alpha_s * 1e3:.3f} ms, delta = {cal.delta_s * 1e6:.1f} us, alpha_r = "
            f"{cal.alpha_r_s * 1e3:.3f} ms")
    coll = spec["coll"]
    outcomes = []
    for sched, plan in schedule_plans(driver, spec, cal):
        fab.say(f"{coll.phase} {coll.name} on {coll.n} GPUs, schedule {sched.name}: "
                f"{sched.reconfigurations} reconfigurations, model {plan.model.model_s:.4f} s")
        outcomes.append(driver.run_plan(plan))
    public = {k: v for k, v in spec.items() if k not in ("coll", "calibration")}
    public["calibration"] = spec["calibration"] if isinstance(spec["calibration"], str) \
        else "file"
    out = report.summary(outcomes, cal, {k: public[k] for k in (
        "collective", "phase", "gpus", "degree", "size_bytes", "dtype", "barrier")})
    out["dark_s"] = spec["dark_s"]
    out["runs"] = [o.to_json() for o in outcomes]
    unit = fab_time_unit(fab)
    out["plots"] = [str(report.plot_timeline(outcomes, fab.run_dir / "collective_timeline.png",
                                             unit)),
                    str(report.plot_bars(outcomes, fab.run_dir / "collective_model.png", unit))]
    out["table"] = report.table(outcomes)
    (fab.run_dir / "collectives.json").write_text(json.dumps(out, indent=1, default=str))
    out["results_dir"] = str(fab.run_dir)
    return out


def calibrate_for_runs(driver: Any, fab: Any, spec: dict[str, Any], window: int) -> Any:
    """What both the emulation (``run_on``) and the simulator (mrcnet/sim/collrun.py) do
    before their runs: warn when ``window`` cannot cover a ring's acknowledgement path, then
    the run's calibration (``calibration_for``)."""
    from mrcnet.fabric.runparams import circuit_window_warning

    warning = circuit_window_warning(fab.plan, window) if fab.plan is not None else None
    if warning:
        fab.say(f"warning: {warning}")
    return calibration_for(driver, fab, spec)


def schedule_plans(driver: Any, spec: dict[str, Any], cal: Any) -> list[tuple[Any, Any]]:
    """(schedule, run plan) of every schedule of ``spec`` for the calibration ``cal``: the
    plan carries the model's prediction, the acknowledgements' return included."""
    params = cal.params(spec["degree"])
    coll = spec["coll"]
    return [(sched, driver.plan_for(coll, sched, spec["size_bytes"], spec["degree"], params,
                                    spec["dark_s"], spec["dtype"], spec.get("barrier", "all"),
                                    ack_hop_s=cal.ack_hop_s))
            for sched in driver.schedules_for(coll, spec["size_bytes"], spec["degree"], params,
                                              spec["schedules"])]


def calibration_for(driver: Any, fab: Any, spec: dict[str, Any]) -> Any:
    """The run's model parameters: measured now (shapes or micro-benchmarks) or read from a
    file; a micro-benchmark calibration is saved as ``calibration.json`` in the run folder
    before any collective runs (each run's plan, with its prediction, is saved before it)."""
    import time

    from mrcnet.fabric import microcal
    from mrcnet.fabric.collectives import Calibration

    how = spec.get("calibration", "shapes")
    if how == "shapes":
        return driver.calibrate(spec["size_bytes"], spec["dark_s"])
    if how == "micro":
        data = driver.calibrate_micro(spec["size_bytes"], spec["dark_s"]).to_json()
    else:
        data = {**how, "loaded_unix": time.time()}
    microcal.save_json(data, fab.run_dir / "calibration.json")
    se = data["standard_error"]
    fab.say(f"calibration ({data['method']}): c = {data['bandwidth_bps'] / 1e6:.2f} "
            f"+- {se['bandwidth_bps'] / 1e6:.2f} Mb/s, alpha = {data['alpha_s'] * 1e3:.3f} "
            f"+- {se['alpha_s'] * 1e3:.3f} ms, delta = {data['delta_s'] * 1e6:.1f} "
            f"+- {se['delta_s'] * 1e6:.1f} us"
            + (f", acknowledgement return {data['ack_delta_s'] * 1e6:.1f} "
               f"+- {se.get('ack_delta_s', 0.0) * 1e6:.1f} us per hop (predicted "
               f"{data['ack_hop_s'] * 1e6:.1f} us under load)" if data.get("ack_hop_s") else ""))
    return Calibration.from_file(data, spec["dark_s"])


def fab_say(text: str) -> None:
    print(f"[mrcnet] {text}", file=sys.stderr, flush=True)


def fab_time_unit(fab: Any) -> str:
    tdf = getattr(getattr(fab, "opts", None), "tdf", 1)
    return "s" if tdf in (1, None) else f"virtual s, TDF {tdf}"


def tdf_probe(spec: dict[str, Any]) -> Probe:
    """``--tdf auto`` on a circuit fabric: a probe (mrcnet/fabric/calibrate.py) is one fabric
    at the factor running the model calibration (the same steps the schedules run), judged by
    its fidelity verdict."""
    from dataclasses import replace

    from mrcnet.fabric.calibrate import probe_result
    from mrcnet.fabric.collectives import CollectiveDriver
    from mrcnet.fabric.orchestrator import Fabric

    def probe(opts: Any, tdf: float, workload: str, size: int, qp_type: str,
              timeout: float, extra: dict[str, Any] | None = None) -> ProbeResult:
        fab = Fabric(replace(opts, tdf=tdf, show=False,
                             results_root=opts.results_root / "calibration"))
        fab.say = lambda text: None  # type: ignore[method-assign]  # one line per probe
        try:
            fab.start()
            driver = CollectiveDriver(fab, timeout=timeout)
            driver.calibrate(spec["size_bytes"], spec["dark_s"])
            run = driver.calibration_run
        finally:
            fab.stop()
        return probe_result(tdf, run is not None, run.fidelity if run is not None else None,
                            None, str(fab.run_dir))

    return probe


def run(args: argparse.Namespace, topo: Any, options: Any) -> int:
    """``mrcnet up`` on a circuit fabric (called by mrcnet/cmd_up.py with its option
    builder)."""
    import os

    from controller.harvest.model import HarvestError
    from mrcnet.fabric.collectives import CollectiveError as RunError
    from mrcnet.fabric.orchestrator import Fabric

    try:
        spec = prepare(args, topo)
        opts = options(args, "circuit")
    except (ValueError, HarvestError) as exc:
        print(f"mrcnet up: {exc}", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("mrcnet up: needs root (network namespaces, veth links, raw sockets); "
              "run it with sudo", file=sys.stderr)
        return 2
    found: dict[str, Any] | None = None
    if args.tdf.strip().lower() == "auto":
        from mrcnet.fabric.calibrate import calibrate

        try:
            found = calibrate(opts, "collective", spec["size_bytes"], timeout=args.timeout,
                              say=fab_say, run_probe=tdf_probe(spec))
        except (RuntimeError, HarvestError, RunError, OSError) as exc:
            print(f"mrcnet up: calibration failed: {exc}", file=sys.stderr)
            return 1
        opts.tdf = found["tdf"]
        fab_say(f"calibration: TDF {opts.tdf:g} ("
                f"{'faithful' if found['verified'] else 'not verified'}; "
                f"{len(found['probes'])} probes, {found['seconds']:.0f} s)")
    from mrcnet.web.launch import start_web

    fab = Fabric(opts)
    web = None
    try:
        fab.start()
        web = start_web(fab, args)  # --web: circuits and steps as they happen
        res = run_on(fab, spec, args.timeout)
        if found is not None:
            res["tdf_calibration"] = found  # the probes behind the factor the runs used
    except (RuntimeError, HarvestError, RunError, OSError) as exc:
        print(f"mrcnet up: {exc}", file=sys.stderr)
        return 1
    finally:
        if web is not None:
            web.stop()
        fab.stop()
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k not in ("runs", "table")},
                         default=str))
    else:
        print(res["table"])
        if res.get("faithful") is False:
            print("not faithful: some process fell behind its schedule (see the warnings "
                  "above and 'fidelity' in collectives.json); try a larger --tdf")
        print(f"results: {res['results_dir']}")
    ok = all(s["verified"] for s in res["schedules"].values())
    return 0 if ok else 1

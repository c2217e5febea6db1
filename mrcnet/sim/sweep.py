"""`mrcnet sim sweep TOPOLOGY --size 1MiB,4MiB --cp-delay 0,1ms,5ms --seed 1,2 ...`: every
combination of the comma-listed option values (mrcnet/sim/grid.py) is one `mrcnet sim` run,
written into its own run folder (mrcnet/sim/runfolder.py, the code a single run uses) under
one sweep folder, by a pool of worker processes (``--jobs``, default the machine's cores).

The sweep folder gets ``sweep.json`` (one row per run: its options and headline results,
rows in grid order) and plots (mrcnet/sim/sweepplot.py); stdout gets the table. A run's rows
depend only on its inputs, as its results.json does, except ``wall_s``. The grid is checked
whole before the first run starts (values, workloads, failure specs against the topology,
the run count against ``--max-runs``): a bad grid is refused (exit 2) without running.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mrcnet.fabric.failures import parse_schedule
from mrcnet.fabric.workloads import flows_for, round_seed
from mrcnet.sim.compare import figures, percentile
from mrcnet.sim.grid import BY_FIELD, GridError, Point, count, points
from mrcnet.sim.run import check_options
from mrcnet.sim.runfolder import new_run_dir, prepare, run_into
from topologies.model import FabricKind, Topology

DEFAULT_TOPOLOGY = "clos-2p"
DEFAULT_MAX_RUNS = 100  # a larger grid needs --max-runs: a typo should not start 1,000 runs


@dataclass(frozen=True)
class Task:
    """One point of the grid and where its run folder goes (pickled to a worker)."""

    point: Point
    topology: str
    run_dir: Path


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The figures of one run that a sweep's table and plots show (from its results.json)."""
    w = results["workloads"][0]
    fcts = figures(results).fcts
    stalls = [float(r["longest_stall_s"]) for r in w["per_flow"]
              if r.get("longest_stall_s") is not None]
    failed = bool(results["fail"])
    return {
        "completed": bool(results["completed"]),
        "flows": w["flows"],
        "verified_flows": w["verified_flows"],
        "verified_bytes": results["verified_bytes"],
        "qp_errors": results["qp_errors"],
        "goodput_bps": w["goodput_bps"],
        "goodput_fraction": w["goodput_fraction"],
        "fct_p50_s": percentile(fcts, 50),
        "fct_p99_s": percentile(fcts, 99),
        "fct_p100_s": percentile(fcts, 100),
        "retransmitted_packets": results["retransmitted_packets"],
        "trims": results["switches"]["trims"],
        # the longest time any flow went without an acknowledged byte, where links failed
        "worst_stall_s": max(stalls) if failed and stalls else None,
        "simulated_s": results["sim"]["simulated_s"],
    }


def params(point: Point) -> dict[str, Any]:
    """The run's options as JSON values (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(point.opts).items()}


def run_task(task: Task) -> dict[str, Any]:
    """One run, in a worker: its row. A run that raises is its row's error, not the sweep's."""
    t0 = time.monotonic()
    try:
        sim = run_into(task.run_dir, task.topology, task.point.opts)
        figs: dict[str, Any] = {"error": None, **headline(sim.results)}
    except Exception as exc:  # reported in the row; the other runs go on
        figs = {"error": f"{type(exc).__name__}: {exc}", "completed": False}
    return {"index": task.point.index, "run": task.point.name, "swept": task.point.swept,
            "params": params(task.point), **figs, "wall_s": time.monotonic() - t0}


def _worker_init() -> None:
    """Ctrl-C is the parent's to handle (it terminates the pool); SIGTERM ends a worker."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def execute(tasks: list[Task], jobs: int, done: Any) -> None:
    """Run ``tasks`` on ``jobs`` processes (in this one when 1), calling ``done(row)`` as each
    finishes. KeyboardInterrupt (Ctrl-C, SIGTERM) terminates the workers and propagates."""
    if jobs == 1 or len(tasks) == 1:
        for task in tasks:
            done(run_task(task))
        return
    # spawn, not fork: a fork of a process with threads (gRPC's, a test runner's) can leave
    # the child waiting forever on a lock another thread held at the fork (seen: a worker
    # stuck in futex_wait under pytest with a CPU hog, the sweep never finishing)
    pool = multiprocessing.get_context("spawn").Pool(min(jobs, len(tasks)),
                                                      initializer=_worker_init)
    try:
        for row in pool.imap_unordered(run_task, tasks):
            done(row)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def validate(topo: Topology, grid: list[Point]) -> None:
    """GridError for the first point that `mrcnet sim` would refuse before simulating."""
    if topo.fabric.kind != FabricKind.PACKET:
        raise GridError(f"{topo.name} is a circuit fabric: sweeps run packet fabrics (a circuit "
                        "fabric runs collectives: mrcnet sim TOPOLOGY --run PHASE:ALGORITHM)")
    hosts = [h.name for h in topo.hosts]
    for p in grid:
        o = p.opts
        try:
            check_options(o)
            flows_for(o.run, hosts, round_seed(o.seed, 1))
            parse_schedule(topo, list(o.fail), list(o.restore))
        except ValueError as exc:
            where = " ".join(f"{BY_FIELD[f].flag} {t}" for f, t in p.swept.items())
            raise GridError(f"{exc}" + (f" (run {p.name}: {where})" if where else "")) from None


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:.3f}"


def table(rows: list[dict[str, Any]], swept: list[str]) -> str:
    """One line per run: its swept values and headline figures."""
    stall = any(r["params"]["fail"] for r in rows)
    head = ["run", *(BY_FIELD[f].flag.lstrip("-") for f in swept), "verified", "Mb/s",
            "FCT p50 ms", "p99 ms", "p100 ms", "rtx", "trims",
            *(["stall ms"] if stall else []), "wall s"]
    lines = [head]
    for r in rows:
        cells = [f"{r['index'] + 1:03d}", *(r["swept"][f] for f in swept)]
        if r["error"]:
            cells += [f"error: {r['error']}"]
        else:
            cells += [f"{r['verified_flows']}/{r['flows']}", f"{r['goodput_bps'] / 1e6:.1f}",
                      _ms(r["fct_p50_s"]), _ms(r["fct_p99_s"]), _ms(r["fct_p100_s"]),
                      str(r["retransmitted_packets"]), str(r["trims"]),
                      *([_ms(r["worst_stall_s"])] if stall else []), f"{r['wall_s']:.2f}"]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines if i < len(line)) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=False)).rstrip()
           for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _progress(k: int, n: int, row: dict[str, Any], elapsed: float) -> str:
    what = (f"error: {row['error']}" if row["error"] else
            f"{row['verified_flows']}/{row['flows']} verified, FCT p99 {_ms(row['fct_p99_s'])} ms")
    eta = elapsed / k * (n - k)
    return f"[{k}/{n}] {row['run']}: {what}; wall {row['wall_s']:.2f} s; ETA {eta:.0f} s"


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def plan(args: argparse.Namespace) -> tuple[str, list[Point], int]:
    """(topology, the grid's points, jobs) of the command line; GridError when refused."""
    if len(args.files) > 1:
        raise GridError(f"one topology, got {' '.join(args.files)}")
    topology = args.files[0] if args.files else DEFAULT_TOPOLOGY
    jobs = _cores() if args.jobs is None else args.jobs
    if jobs < 1:
        raise GridError(f"--jobs {jobs}: at least 1")
    limit = DEFAULT_MAX_RUNS if args.max_runs is None else args.max_runs
    n = count(args)
    if n > limit:
        raise GridError(f"the grid has {n} runs, more than {limit}: give --max-runs {n} to "
                        "run them all, or shorten the lists")
    grid = points(args)
    topo, _text = prepare(topology, None, None)
    validate(topo, grid)
    return topology, grid, jobs


def run_sweep(args: argparse.Namespace) -> int:
    from topologies.loader import TopologyError

    try:
        topology, grid, jobs = plan(args)
    except (TopologyError, ValueError) as exc:
        print(f"mrcnet sim sweep: {exc}", file=sys.stderr)
        return 2
    swept = list(grid[0].swept)
    values = {f: list(dict.fromkeys(p.swept[f] for p in grid)) for f in swept}
    out = new_run_dir(Path(args.out), "sweep")
    tasks = [Task(p, topology, out / p.name) for p in grid]
    n = len(tasks)
    what = "; ".join(f"{BY_FIELD[f].flag} {','.join(v)}" for f, v in values.items())
    print(f"sweep of {n} run(s) on {topology} ({what or 'no swept option'}), "
          f"{min(jobs, n)} at a time; folder {out}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()

    def done(row: dict[str, Any]) -> None:
        rows.append(row)
        print(_progress(len(rows), n, row, time.monotonic() - t0), file=sys.stderr, flush=True)

    interrupted = False
    try:
        execute(tasks, jobs, done)
    except KeyboardInterrupt:
        interrupted = True
    rows.sort(key=lambda r: int(r["index"]))
    plots: list[str] = []
    if rows and not interrupted:
        from mrcnet.sim.sweepplot import plot

        plots = [p.name for p in plot(out, rows, swept, topology)]
    doc = {"topology": topology, "runs": n, "jobs": min(jobs, n), "swept": values,
           "interrupted": interrupted, "wall_s": time.monotonic() - t0, "plots": plots,
           "rows": rows}
    text = json.dumps(doc, indent=1, sort_keys=True)
    (out / "sweep.json").write_text(text + "\n")
    if interrupted:
        print(f"sweep interrupted: {len(rows)} of {n} runs finished, in {out}/sweep.json",
              file=sys.stderr)
        raise KeyboardInterrupt
    print(table(rows, swept), file=sys.stderr if args.json else sys.stdout)
    print(f"sweep folder {out}: sweep.json" + "".join(f", {p}" for p in plots),
          file=sys.stderr)
    if args.json:
        print(text)
    ok = all(r["error"] is None and r["completed"] for r in rows)
    return 0 if ok else 1

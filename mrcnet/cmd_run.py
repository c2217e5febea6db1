"""``mrcnet run WORKLOAD [TOPOLOGY]``: a verified workload on a fresh or a running fabric.

Fresh (default): like ``mrcnet up TOPOLOGY --run WORKLOAD --no-cli`` (same options): the
fabric comes up, the workload runs with the failure schedule, everything is torn down, the
summary (or ``--json``) is printed.

Running: ``--attach RUN_DIR`` (or ``--attach latest``) submits the workload to the agents of
a fabric that ``mrcnet up`` keeps running (its CLI is open): the job files go into the run's
``jobs/<host>/`` folders, which the agents watch, and the results are verified here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from mrcnet.cmd_up import add_common

    parser.add_argument("workload", help="all-to-all | permutation | shift:K | pair:SRC:DST")
    add_common(parser)
    parser.add_argument("--attach", metavar="RUN_DIR",
                        help="a running fabric's results folder, or 'latest'")


def _running(run_dir: Path) -> dict[str, object] | None:
    path = run_dir / "fabric.json"
    if not path.exists():
        return None
    info: dict[str, object] = json.loads(path.read_text())
    pid = int(str(info.get("pid", 0)))
    if info.get("state") != "running" or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return info


def attach(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from common.vclock import RunClock
    from mrcnet.fabric.orchestrator import RunOptions
    from mrcnet.fabric.results import summary_table
    from mrcnet.fabric.workloads import WorkloadError, WorkloadRunner

    run_dir = Path(args.attach)
    if args.attach == "latest":
        runs = sorted(p for p in RunOptions().results_root.glob("*") if _running(p))
        if not runs:
            print("mrcnet run: no running fabric found (start one with mrcnet up)",
                  file=sys.stderr)
            return 2
        run_dir = runs[-1]
    info = _running(run_dir)
    if info is None:
        print(f"mrcnet run: {run_dir} is not a running fabric", file=sys.stderr)
        return 2
    hosts = [str(h) for h in info["hosts"]]  # type: ignore[attr-defined]
    # The running fabric's clock: job timeouts and the results are in its seconds.
    clock = RunClock(float(str(info.get("tdf", 1.0))),
                     float(str(info["clock_epoch"])) if "clock_epoch" in info else None)
    runner = WorkloadRunner(run_dir, hosts, int(str(info["ev_profile"])), clock,
                            cc_profile=int(str(info.get("cc_profile", 0))))
    runner.count = len(list((run_dir / "jobs").glob("*/*-writer.job.json"))) + 1000
    from mrcnet.cmd_up import DEFAULT_SIZE, workload_extra

    try:
        wl = runner.submit(args.workload, parse_size(args.size or DEFAULT_SIZE), args.qp,
                           timeout=args.timeout, extra=workload_extra(args))
    except (WorkloadError, ValueError) as exc:
        print(f"mrcnet run: {exc}", file=sys.stderr)
        return 2
    runner.wait(wl, args.timeout + 30)
    summary = wl.summary()
    print(json.dumps(summary) if args.json else summary_table([summary], clock.dilated))
    return 0 if summary["completed"] else 1


def run(args: argparse.Namespace) -> int:
    if args.attach:
        return attach(args)
    from mrcnet import cmd_up

    args.run, args.no_cli, args.cli, args.demo = args.workload, True, False, False
    return cmd_up.run(args)

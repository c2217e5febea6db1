"""`mrcnet bench harvest`: schedule synthesis time by collective, n and degree.

Fast rows use the default method (proofs, derangement search, restricted circulant search);
exact rows force the conic program with a 60 s budget per configuration and stop growing n
once a configuration is no longer proven within that budget.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue as queue_mod
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common.collectives import build
from controller.harvest.engine import Synthesizer
from controller.harvest.model import Params

PAPER = Params(degree=1, bandwidth_bps=800e9, alpha=500e-9, delta=500e-9, alpha_r=10e-6)
SIZE = float(2**30)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--sizes", default="8,16,64,256,1024",
                        help="GPU counts for the fast rows (default 8,16,64,256,1024)")
    parser.add_argument("--exact-budget", type=float, default=60.0,
                        help="seconds per exact (conic) configuration; 0 skips them")
    parser.add_argument("--exact-sizes", default="4,8,16",
                        help="GPU counts tried with the conic program (default 4,8,16)")


def _row(name: str, n: int, d: int, synth: Synthesizer, seconds: float,
         cpu: float | None = None) -> dict[str, Any]:
    r = synth.result()
    return {
        "collective": name, "n": n, "d": d, "method": r.method, "optimal": r.optimal,
        "seconds": round(seconds, 4),
        "cpu_seconds": None if cpu is None else round(cpu, 4), "completion_time_s": r.completion_time_s,
        "lower_bound_s": r.lower_bound_s, "reconfigurations": r.reconfigurations,
        "speedup_vs_static": r.speedup_static(), "speedup_vs_every_step": r.speedup_every_step(),
    }


def _exact_child(name: str, n: int, d: int, budget: float, queue: Any) -> None:
    p = Params(d, PAPER.bandwidth_bps, PAPER.alpha, PAPER.delta, PAPER.alpha_r)
    s = len(build(name, n).steps)
    t0, c0 = time.perf_counter(), time.process_time()
    synth = Synthesizer(build(name, n), SIZE, p, "exact", time_limit=budget / (s * (s + 1) // 2))
    synth.prepare()
    queue.put(_row(name, n, d, synth, time.perf_counter() - t0, time.process_time() - c0))


def _exact_row(name: str, n: int, d: int, budget: float) -> dict[str, Any]:
    """The conic program in a child process, killed if model building overruns the budget."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    t0 = time.perf_counter()
    child = ctx.Process(target=_exact_child, args=(name, n, d, budget, queue), daemon=True)
    child.start()
    try:
        row: dict[str, Any] = queue.get(timeout=budget * 1.5 + 10)
    except queue_mod.Empty:
        row = {"collective": name, "n": n, "d": d, "method": "misocp", "optimal": False,
               "seconds": round(time.perf_counter() - t0, 4), "status": "killed at budget"}
    finally:
        if child.is_alive():
            child.kill()
        child.join(timeout=10)
    row["method"] = "exact:" + row["method"]
    return row


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []

    def say(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    sizes = [int(x) for x in args.sizes.split(",") if x]
    for name in ("rd", "swing"):
        for d in (1, 2):
            for n in sizes:
                p = Params(d, PAPER.bandwidth_bps, PAPER.alpha, PAPER.delta, PAPER.alpha_r)
                t0, c0 = time.perf_counter(), time.process_time()
                synth = Synthesizer(build(name, n), SIZE, p, "auto", exact_max_n=4)
                synth.prepare()
                rows.append(_row(name, n, d, synth, time.perf_counter() - t0,
                                 time.process_time() - c0))
                say(f"{name:6} n={n:<5} d={d} {rows[-1]['seconds']:8.3f} s "
                    f"{rows[-1]['method']} optimal={rows[-1]['optimal']}")
    if args.exact_budget > 0:
        for name in ("rd", "swing"):
            for d in (1, 2):
                for n in [int(x) for x in args.exact_sizes.split(",") if x]:
                    row = _exact_row(name, n, d, args.exact_budget)
                    rows.append(row)
                    say(f"{name:6} n={n:<5} d={d} {row['seconds']:8.3f} s {row['method']} "
                        f"optimal={row['optimal']}")
                    if not row["optimal"]:
                        break
    out = {"benchmark": "harvest", "size_bytes": SIZE, "bandwidth_bps": PAPER.bandwidth_bps,
           "alpha_s": PAPER.alpha, "delta_s": PAPER.delta, "alpha_r_s": PAPER.alpha_r,
           "rows": rows}
    folder = Path("results") / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"harvest-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=1))
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{'collective':<10} {'n':>5} {'d':>2} {'seconds':>9} {'cpu s':>9} {'optimal':>8}"
              "  method")
        for r in rows:
            cpu = r.get("cpu_seconds")
            cpu_text = f"{cpu:>9.3f}" if cpu is not None else f"{'-':>9}"
            print(f"{r['collective']:<10} {r['n']:>5} {r['d']:>2} {r['seconds']:>9.3f} "
                  f"{cpu_text} {r['optimal']!s:>8}  {r['method']}")
        print(f"saved {path}")
    return 0

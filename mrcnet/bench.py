"""`mrcnet bench NAME`: dispatch to the benchmarks of testbed/bench, one module each.

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and prints
its figures (one JSON object with ``--json``). `mrcnet bench all` runs every available
benchmark in its own process, one after the other (they must not share the 2 cores), and saves
the collected figures under results/bench/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mrcnet.modules import load_optional

BENCHMARKS: dict[str, tuple[str, str]] = {
    "codec": ("testbed.bench.codec_rate", "encode+decode of 4096-byte Write packets"),
    "switch": ("testbed.bench.switch_throughput",
               "embedded switch throughput and link-rate accuracy"),
    "transport": ("testbed.bench.qp_goodput", "single-QP goodput through one embedded switch"),
    "transport-core": ("testbed.bench.transport_core_cost",
                       "sans-I/O core: CPU cost, MRC vs RC under loss"),
    "harvest": ("testbed.bench.harvest_synthesis_time", "schedule synthesis time"),
    "failover": ("testbed.bench.failover_goodput",
                 "p100 stall and completion time around a spine link failure, MRC vs RC, "
                 "over control-plane delays"),
    "spray": ("testbed.bench.spray_goodput", "permutation goodput, MRC spraying vs ECMP"),
    "incast": ("testbed.bench.incast_fct", "8 senders into one receiver, NSCC vs fixed window"),
    "congested-path": ("testbed.bench.congested_path",
                       "one spine link at a quarter rate: REPS vs plain spraying"),
    "backpressure": ("testbed.bench.host_backpressure",
                     "which signal of a throttled receiver tracks its congestion"),
    "clos-qp": ("testbed.bench.clos_qp",
                "one QP across clos-2p at 10 Gb/s links, NSCC vs fixed window, CPU per packet"),
    "path-cost": ("testbed.bench.path_cost",
                  "CPU, wake-ups and system calls per delivered packet of every process on "
                  "one QP's path across clos-2p, at TDF 1, 20 and 200"),
    "chaos": ("testbed.bench.chaos_soak",
              "all-to-all under random link/port flaps and a plane outage, for minutes"),
    "collective": ("testbed.bench.collective_vs_model",
                   "Harvest schedules run on the photonic domain, measured vs the model"),
    "crosscheck": ("testbed.bench.crosscheck",
                   "mrcnet sim against the emulation: permutation, all-to-all, incast, "
                   "failover; judged against the bounds"),
    "fidelity": ("testbed.bench.fidelity_tdf",
                 "all-to-all against configured capacity, TDF 1 vs auto"),
    "web": ("testbed.bench.web_view",
            "the web view on the 96-switch fabric in headless Chromium: page load, updates"),
}


def _available(module_name: str) -> bool:
    return load_optional(module_name) is not None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK")
    for name, (module_name, help_text) in BENCHMARKS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_bench_module=module_name)
        if _available(module_name):
            importlib.import_module(module_name).add_arguments(sp)
    sp = sub.add_parser("all", help="run every available benchmark and save the figures")
    sp.add_argument("--json", action="store_true", help="print one JSON object at the end")
    sp.add_argument("--results", default="results/bench", help="folder for the saved JSON")
    sp.set_defaults(_bench_module=None)


def _run_all(args: argparse.Namespace) -> int:
    figures: dict[str, Any] = {}
    failed: list[str] = []
    for name, (module_name, _help) in BENCHMARKS.items():
        if not _available(module_name):
            print(f"[bench] {name}: not available in this build, skipped", file=sys.stderr)
            continue
        print(f"[bench] {name}: running ...", file=sys.stderr, flush=True)
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "mrcnet.cli", "bench", name, "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - start
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            failed.append(name)
            print(f"[bench] {name}: FAILED ({proc.returncode}) {proc.stderr[-400:]}", file=sys.stderr)
            continue
        figures[name] = json.loads(lines[-1])
        print(f"[bench] {name}: done in {took:.1f} s", file=sys.stderr)
    out_dir = Path(args.results)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(figures, indent=2) + "\n")
    if args.json:
        print(json.dumps({"figures": figures, "failed": failed, "results": str(path)}))
    else:
        for name, value in figures.items():
            print(f"{name:10s} {json.dumps(value)}")
        print(f"results: {path}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "bench", None) == "all":
        return _run_all(args)
    module_name = getattr(args, "_bench_module", None)
    if module_name is None:
        print("usage: mrcnet bench {" + ",".join([*BENCHMARKS, "all"]) + "} [--json]")
        return 2
    if not _available(module_name):
        print(f"benchmark {args.bench!r} is not available in this build")
        return 2
    return int(importlib.import_module(module_name).run(args) or 0)

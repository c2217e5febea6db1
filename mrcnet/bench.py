"""`mrcnet bench NAME`: dispatch to the benchmark that lives next to the code it measures.

Each benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> int`` and prints
its figures (one JSON object with ``--json``). Results are also saved under results/bench/.
"""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS: dict[str, tuple[str, str]] = {
    "codec": ("hosts.wire.bench", "encode+decode of 4096-byte Write packets"),
    "switch": ("switch.bench", "embedded switch throughput and link-rate accuracy"),
    "transport": ("hosts.bench", "single-QP goodput through one embedded switch"),
    "harvest": ("controller.harvest.bench", "schedule synthesis time"),
    "failover": ("mrcnet.bench_failover", "goodput around a spine link failure, MRC vs RC"),
    "spray": ("mrcnet.bench_spray", "permutation goodput, MRC spraying vs ECMP"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bench", metavar="BENCHMARK")
    for name, (module_name, help_text) in BENCHMARKS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_bench_module=module_name)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            continue
        module.add_arguments(sp)


def run(args: argparse.Namespace) -> int:
    module_name = getattr(args, "_bench_module", None)
    if module_name is None:
        print("usage: mrcnet bench {" + ",".join(BENCHMARKS) + "} [--json]")
        return 2
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        print(f"benchmark {args.bench!r} is not available in this build")
        return 2
    return int(module.run(args) or 0)

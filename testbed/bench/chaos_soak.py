"""``mrcnet bench chaos``: the chaos run of tests/emulation/test_chaos.py for longer (a soak).

A fresh fabric (default clos-2p, 100 Mb/s links) runs all-to-all MRC rounds (``--size`` per
flow, every round verified against an independent hash) for ``--duration`` seconds while
``mrcnet.fabric.chaos.chaos_schedule`` flaps switch links and host ports one at a time and
takes one whole plane down once. Reports rounds, verified bytes, unverified flows, QP errors,
faults drawn and applied, retransmissions by trigger, what was left behind, and ``passed``;
the JSON goes to ``results/bench/chaos-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default="clos-2p")
    parser.add_argument("--rate", default="100Mbps")
    parser.add_argument("--size", default="1MiB", help="bytes per flow and round")
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of chaos")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cp-delay", type=float, default=2.0)
    parser.add_argument("--results", default=str(REPO / "results" / "bench"))
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.chaos import ChaosSpec, run_packet_chaos
    from mrcnet.fabric.orchestrator import RunOptions

    print(f"[bench chaos] {args.topology}, {args.duration:g} s of faults (seed {args.seed}) ...",
          file=sys.stderr, flush=True)
    out = run_packet_chaos(RunOptions(topology=args.topology, rate=args.rate,
                                      cp_delay=args.cp_delay),
                           ChaosSpec(duration=args.duration, seed=args.seed),
                           int(parse_size(args.size)))
    folder = Path(args.results)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"chaos-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out["results"] = str(path)
    path.write_text(json.dumps(out, indent=1) + "\n")
    if args.json:
        print(json.dumps(out))
    else:
        print(f"passed {out['passed']}: {out['rounds']} rounds, {out['verified_bytes']} bytes "
              f"verified, {out['unverified_flows']} flows unverified, {out['qp_errors']} QP "
              f"errors, {out['faults_applied']}/{out['faults']} faults ({', '.join(out['kinds'])}),"
              f" left behind: {out['leftovers'] or 'nothing'}\nresults: {path}")
    return 0 if out["passed"] else 1

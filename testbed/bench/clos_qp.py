"""``mrcnet bench clos-qp``: one QP across clos-2p (h0 -> h3, three switch hops per plane).

One fabric (clos-2p, every link ``--rate``, default 10 Gb/s) runs ``pair:h0:h3`` of ``--size``
bytes once per congestion control (``--cc``, default NSCC then the fixed ``--window``), on the
same fabric, on a clock ``--tdf`` times slower than the wall clock (default 200: at TDF 1 the
2 cores, not the links, are the limit and the run is not faithful). Per run: ``goodput_bps``
(bytes x 8 / the writer's time from first post to last completion), ``retransmitted_fraction``
(retransmitted / data packets sent), timeouts, and ``cpu_us_per_packet`` of every process on
the path (the writer's and the sink's agents and every switch: CPU time over the transfer per
data packet the writer sent, wall-clock CPU), from /proc; ``faithful`` and
``max_lag_fraction``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from controller.profile_store import LB_POLICIES
from mrcnet.fabric.fidelity import verdict
from testbed.bench import verdicts
from testbed.bench.proccost import path_processes

TICK = os.sysconf("SC_CLK_TCK")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--rate", default="10Gbps")
    parser.add_argument("--size", default="128MiB")
    parser.add_argument("--cc", default="nscc,fixed", help="comma-separated, in order")
    parser.add_argument("--lb", default="reps", choices=LB_POLICIES)
    parser.add_argument("--window", default="128KiB", help="the fixed window")
    parser.add_argument("--src", default="h0")
    parser.add_argument("--dst", default="h3")
    parser.add_argument("--tdf", type=float, default=200.0,
                        help="time-dilation factor of the run's clock (rates and times virtual; "
                             "default 200: 10 Gb/s links are faithful only far below the wall clock on 2 cores)")
    parser.add_argument("--json", action="store_true")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its reaped children) in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime


def measure(fab: Any, src: str, dst: str, size: int, cc_profile: int) -> dict[str, Any]:
    procs = path_processes(fab, src, dst)
    before = {k: cpu_seconds(pid) for k, pid in procs.items()}
    wl = fab.runner.submit(f"pair:{src}:{dst}", size, "MRC", timeout=600,
                           cc_profile=cc_profile)
    fab.runner.wait(wl, 630, fab.check_alive)
    after = {k: cpu_seconds(pid) for k, pid in procs.items()}
    summary = wl.summary()
    flow = wl.flows[0]
    stats = flow.writer.get("qp_stats", {})
    seconds = float(flow.writer.get("seconds") or 0.0)
    packets = int(stats.get("tx_data", 0))
    rtx = int(stats.get("tx_rtx", 0))
    cpu = {k: round((after[k] - before[k]) * 1e6 / packets, 1) if packets else None
           for k in procs}
    return {
        "completed": bool(summary["completed"]),
        **verdict(summary),
        "goodput_bps": round(size * 8 / seconds) if seconds > 0 else 0,
        "retransmitted_fraction": round(rtx / packets, 5) if packets else None,
        "retransmitted_packets": rtx,
        "data_packets": packets,
        "timeouts": int(stats.get("timeouts", 0)),
        "seconds": round(seconds, 3),
        "cpu_us_per_packet": cpu,
        "cpu_us_per_packet_path": round(sum(v for v in cpu.values() if v), 1),
        "final_cc": flow.writer.get("cc"),
        "rtt": flow.writer.get("rtt"),
    }


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    size = int(parse_size(args.size))
    ccs = [c.strip() for c in args.cc.split(",") if c.strip()]
    fab = Fabric(RunOptions(topology="clos-2p", rate=args.rate, cc="nscc", lb=args.lb,
                            window=int(parse_size(args.window)), show=False, tdf=args.tdf))
    out: dict[str, Any] = {}
    try:
        fab.start()
        for cc in ccs:
            print(f"[bench clos-qp] {cc} ...", file=sys.stderr, flush=True)
            out[cc] = measure(fab, args.src, args.dst, size,
                              fab.cc_profile if cc == "nscc" else 0)
        out["base_rtt_s"] = fab.calibration.get("base_rtt")
        out["tdf"] = args.tdf
        out["results_dir"] = str(fab.run_dir)
    finally:
        fab.stop()
    verdict_runs = {cc: out[cc]["faithful"] for cc in ccs}
    status = verdicts.conclude("clos-qp", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        for cc in ccs:
            r = out[cc]
            print(f"{cc:6s} {r['goodput_bps'] / 1e6:.0f} Mb/s, retransmitted "
                  f"{r['retransmitted_fraction']:.3%}, timeouts {r['timeouts']}, "
                  f"{'faithful' if r['faithful'] else 'NOT faithful'}, CPU us per "
                  f"packet {r['cpu_us_per_packet']}")
    return status

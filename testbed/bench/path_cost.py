"""``mrcnet bench path-cost``: what one delivered data packet costs every process on its path.

One QP ``--src`` -> ``--dst`` across clos-2p (three switch hops per plane, both planes
sprayed), ``--size`` bytes, on a fresh fabric per time-dilation factor (``--tdf``, default
1, 20 and 200: the cost should not grow as the load per wall second falls). Per process
(the two agents and every switch) and summed over the path, per *delivered* data packet
(data packets sent minus retransmissions, i.e. the transfer's own packets):
- ``cpu_us``: CPU time (user + system, every thread), from /proc; ``system_us`` its kernel
  part;
- ``wakeups``: voluntary context switches (a sleep in select/epoll that a frame or timer
  ended), from /proc;
- ``syscalls``: system calls (``perf stat -e raw_syscalls:sys_enter``), when perf can count
  them here.
``switch_hop_cpu_us`` is the switches' CPU per delivered packet divided by the 3 hops a packet
crosses. ``loop_cpu_us`` is the CPU time of each process's event-loop thread alone (from its
lag meter, common/lag.py: the agents' snapshots at the start and end of the transfer, the
switches' through the controller), the per-packet path without the workload's own threads
(the writer drawing its data, the sink hashing what landed) and without gRPC's threads;
``path_loop_cpu_us`` sums it over the path. Each run also carries the writer's goodput, retransmissions and the fidelity verdict
of the run (a figure from a run that could not keep up is no result: ``--strict``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mrcnet.fabric.fidelity import controller_timings, verdict
from testbed.bench import verdicts
from testbed.bench.proccost import ProcessCost, path_processes

SWITCH_HOPS = 3  # leaf, spine, leaf on clos-2p between hosts of different leaves


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--tdf", default="1,20,200",
                        help="comma-separated time-dilation factors, one fabric each")
    parser.add_argument("--rate", default="10Gbps", help="every link's rate (virtual)")
    parser.add_argument("--size", default="128MiB")
    parser.add_argument("--cc", default="nscc", choices=("nscc", "fixed"))
    parser.add_argument("--window", default="128KiB", help="the fixed window")
    parser.add_argument("--src", default="h0")
    parser.add_argument("--dst", default="h3")
    parser.add_argument("--coalesce", type=float, default=None, metavar="S",
                        help="wake-up coalescing slack of switches and agents (virtual "
                             "seconds; default: the fabric's, off)")
    parser.add_argument("--no-syscalls", action="store_true",
                        help="do not attach perf to count system calls")
    parser.add_argument("--json", action="store_true")


def _per_packet(value: float | int | None, packets: int, scale: float = 1.0) -> float | None:
    if value is None or packets <= 0:
        return None
    return round(value * scale / packets, 2)


def summarise(costs: dict[str, dict[str, float | int | None]], delivered: int
              ) -> dict[str, Any]:
    """Per-process and path figures per delivered packet from ``ProcessCost.finish()``."""
    per: dict[str, dict[str, float | None]] = {}
    for name, c in costs.items():
        per[name] = {"cpu_us": _per_packet(c["cpu_s"], delivered, 1e6),
                     "system_us": _per_packet(c["system_s"], delivered, 1e6),
                     "wakeups": _per_packet(c["wakeups"], delivered),
                     "syscalls": _per_packet(c["syscalls"], delivered)}

    def total(key: str, which: str) -> float | None:
        vals = [v[key] for n, v in per.items() if n.startswith(which)]
        if not vals or any(x is None for x in vals):
            return None
        return round(sum(x for x in vals if x is not None), 2)

    switches_cpu = total("cpu_us", "switch ")
    return {
        "per_process": per,
        "path_cpu_us": total("cpu_us", ""),
        "path_wakeups": total("wakeups", ""),
        "path_syscalls": total("syscalls", ""),
        "switch_hop_cpu_us": (round(switches_cpu / SWITCH_HOPS, 2)
                              if switches_cpu is not None else None),
        "agent_cpu_us": {n.split(" ", 1)[1]: v["cpu_us"] for n, v in per.items()
                         if n.startswith("agent ")},
    }


def _switch_loop_cpu(fab: Any) -> dict[str, float]:
    """Every switch's data-plane loop thread CPU seconds now (None-free: unreadable ones are
    left out)."""
    timings = controller_timings(fab.ctl.switch_stats)()
    return {f"switch {name}": float(t.get("loop_cpu_s", 0.0)) for name, t in timings.items()
            if isinstance(t, dict)}


def _loop_cpu(fab: Any, flow: Any, src: str, dst: str, before: dict[str, float]
              ) -> dict[str, float | None]:
    """Loop-thread CPU seconds over the transfer per process."""
    out: dict[str, float | None] = {}
    for name, result in ((f"agent {src}", flow.writer), (f"agent {dst}", flow.sink)):
        t = result.get("timing") or {}
        try:
            out[name] = float(t["end"]["loop_cpu_s"]) - float(t["start"]["loop_cpu_s"])
        except (KeyError, TypeError):
            out[name] = None
    after = _switch_loop_cpu(fab)
    for name, value in after.items():
        out[name] = value - before[name] if name in before else None
    return out


def measure(fab: Any, args: argparse.Namespace, size: int) -> dict[str, Any]:
    cost = ProcessCost(path_processes(fab, args.src, args.dst),
                       count_syscalls=not args.no_syscalls)
    switch_loops = _switch_loop_cpu(fab)
    cost.start()
    try:
        wl = fab.runner.submit(f"pair:{args.src}:{args.dst}", size, "MRC", timeout=900,
                               cc_profile=fab.cc_profile if args.cc == "nscc" else 0)
        fab.runner.wait(wl, 930, fab.check_alive)
    finally:
        costs = cost.finish()
        cost.close()
    summary = wl.summary()
    flow = wl.flows[0]
    stats = flow.writer.get("qp_stats", {})
    seconds = float(flow.writer.get("seconds") or 0.0)
    sent = int(stats.get("tx_data", 0))
    rtx = int(stats.get("tx_rtx", 0))
    delivered = sent - rtx
    loops = _loop_cpu(fab, flow, args.src, args.dst, switch_loops)
    loop_us = {n: _per_packet(v, delivered, 1e6) for n, v in loops.items()}
    return {
        "completed": bool(summary["completed"]),
        **verdict(summary),
        "goodput_bps": round(size * 8 / seconds) if seconds > 0 else 0,
        "data_packets_delivered": delivered,
        "retransmitted_packets": rtx,
        "retransmitted_fraction": round(rtx / sent, 5) if sent else None,
        "timeouts": int(stats.get("timeouts", 0)),
        **summarise(costs, delivered),
        "loop_cpu_us": loop_us,
        "path_loop_cpu_us": (round(sum(v for v in loop_us.values() if v is not None), 2)
                             if loop_us and all(v is not None for v in loop_us.values())
                             else None),
        "syscalls_why": cost.syscalls_why or None,
    }


def _table(out: dict[str, Any], tdfs: list[float]) -> str:
    """Per process and TDF: CPU us (its loop thread's), wake-ups, system calls per packet."""
    runs = [out[str(t)] for t in tdfs]
    names = list(runs[0]["per_process"]) if runs else []
    width = 30

    def cell(cpu: Any, loop: Any, wakeups: Any, syscalls: Any) -> str:
        def fmt(v: Any) -> str:
            return "-" if v is None else f"{v:g}"
        return f"{fmt(cpu)} ({fmt(loop)}) / {fmt(wakeups)} / {fmt(syscalls)}".rjust(width)

    lines = [f"{'per delivered packet: us CPU (loop) / wake-ups / syscalls':58s}"
             + "".join(f"TDF {t:g}".rjust(width) for t in tdfs)]
    for name in names:
        lines.append(f"{name:58s}" + "".join(
            cell(r["per_process"][name]["cpu_us"], r["loop_cpu_us"].get(name),
                 r["per_process"][name]["wakeups"], r["per_process"][name]["syscalls"])
            for r in runs))
    lines.append(f"{'path':58s}" + "".join(
        cell(r["path_cpu_us"], r["path_loop_cpu_us"], r["path_wakeups"], r["path_syscalls"])
        for r in runs))
    lines.append(f"{'per switch hop (CPU)':58s}" + "".join(
        str(r["switch_hop_cpu_us"]).rjust(width) for r in runs))
    verdicts_text = {True: "yes", False: "NO", None: "?"}
    lines.append(f"{'goodput Mb/s (virtual), faithful':58s}" + "".join(
        f"{r['goodput_bps'] / 1e6:.0f}, {verdicts_text[r['faithful']]}".rjust(width)
        for r in runs))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    try:
        tdfs = [float(t) for t in args.tdf.split(",") if t.strip()]
    except ValueError:
        print(f"bench path-cost: bad --tdf {args.tdf!r} (comma-separated numbers)",
              file=sys.stderr)
        return 2
    if not tdfs or any(t < 1 for t in tdfs):
        print("bench path-cost: every --tdf must be >= 1", file=sys.stderr)
        return 2
    size = int(parse_size(args.size))
    out: dict[str, Any] = {"rate": args.rate, "size": size, "cc": args.cc,
                           "coalesce": args.coalesce}
    for tdf in tdfs:
        print(f"[bench path-cost] TDF {tdf:g} ...", file=sys.stderr, flush=True)
        fab = Fabric(RunOptions(topology="clos-2p", rate=args.rate, cc=args.cc, lb="reps",
                                window=int(parse_size(args.window)), show=False, tdf=tdf,
                                coalesce=args.coalesce))
        try:
            fab.start()
            out[str(tdf)] = measure(fab, args, size)
            out[str(tdf)]["results_dir"] = str(fab.run_dir)
        finally:
            fab.stop()
    status = verdicts.conclude("path-cost", out, {f"TDF {t:g}": out[str(t)]["faithful"]
                                                  for t in tdfs}, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        print(_table(out, tdfs))
    return status

"""``mrcnet bench transport``: single-QP goodput host to host through one embedded switch.

Two host agents (processes in their own namespaces) and one embedded switch process (root
namespace, programmed over P4Runtime) as in the emulation tests (testbed/host_lab.py). The
writer moves ``--size`` MiB (default 256) in 1 MiB Writes (the last a WriteImm) and reports
goodput = bytes / (first post -> last completion); the sink checks the data (sha256). A
transfer of 64 MiB lasts about half a second, and its goodput then swings by 20% from run to
run with the scheduling of three processes on two cores; 256 MiB averages that out. Two cases:

- ``unlimited``: no rate limit on the switch ports;
- ``link_1g``: the switch's egress towards both hosts is an emulated 1 Gb/s link.

``link_1g_ratio`` = link_1g_bps / 1e9 (a 4096-byte payload travels in a 4194-byte frame, so the
emulated link's ceiling is 0.977). Each case runs ``--runs`` times; the median is reported
(the machine is shared, single runs are noisy). Needs root. Prints one JSON object with
``--json`` and saves it under results/bench/.

Window and queue. Without NSCC (a separate issue) the sender's window is fixed. The window
must cover bandwidth x RTT, and the RTT of this emulation is set by three Python processes
sharing two cores: it is milliseconds, not microseconds (measured: srtt 2-6 ms with 64 packets
in flight). A 256 KiB window therefore capped goodput at about 0.45 Gb/s whatever the link,
and a larger window also lets every process work in larger batches (fewer wake-ups per
packet). The default is no CC window: the MPR window (``--mpr`` 8 = 1024 PSNs = 4 MiB) is
the limit, as for an MRC QP without congestion control; the 1 Gb/s link's queues hold that
window (``--qpkts`` 1024), so the figure measures how well the transport fills the link, not
how a fixed window fares against a shallow queue. ``--cc-window`` and ``--qpkts`` reproduce
other settings (the previous defaults were 256 KiB and 128).

``cpu_us_per_packet`` (per run) is the CPU time of the writer, the sink and the switch per
data packet: unlike goodput it barely depends on the load of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LINK_RATE = 1e9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--size", type=int, default=256,
                        help="MiB per transfer (default 256: about 2 s at 1 Gb/s, long enough "
                             "that start-up and scheduling noise do not dominate)")
    parser.add_argument("--runs", type=int, default=3, help="runs per case (median reported)")
    parser.add_argument("--qp-type", choices=("MRC", "RC"), default="MRC")
    parser.add_argument("--mpr", type=int, default=8, help="MPR in units of 128 PSNs")
    parser.add_argument("--cc-window", type=int, default=0,
                        help="bytes in flight per QP of the fixed-window CC (default 0: none, "
                             "the MPR window alone limits; see the module docstring)")
    parser.add_argument("--trim-at", type=int, default=0,
                        help="switch trims trimmable packets at this queue depth (default 0: "
                             "never; without NSCC pacing, window-sized bursts would be trimmed)")
    parser.add_argument("--qpkts", type=int, default=1024,
                        help="packets per queue of the 1 Gb/s link (default 1024: holds a "
                             "whole MPR window, so a sender without NSCC sees no tail drops)")
    parser.add_argument("--mtu", type=int, default=4096,
                        help="path MTU (payload bytes per packet; veths carry up to 8192)")
    parser.add_argument("--results", default="results/bench", help="folder for the saved JSON")


def _one_transfer_goodput(size: int, qp_type: str, link: str | None, args: argparse.Namespace,
             seed: int) -> dict[str, Any]:
    from common.netns import NetKit
    from hosts.bulk import pattern_digest
    from testbed.host_lab import run_transfer, switch_star

    prefix = f"b{os.getpid() % 100000:05d}"[:6]
    with tempfile.TemporaryDirectory(prefix="mrcnet-bench-") as tmp, NetKit(prefix) as kit:
        work = Path(tmp)
        links = {1: link, 2: link} if link else None
        (h1, h2), sw = switch_star(kit, work, hosts=2, planes=1, links=links,
                                   trim_at=args.trim_at)
        cpu_before = _process_cpu(sw.process.pid)
        res = run_transfer(kit, h1, h2, work, size, qp_type=qp_type, seed=seed, timeout=300,
                           app_args={"mpr": args.mpr, "mtu": args.mtu},
                           agent_extra={**({"cc_window": args.cc_window} if args.cc_window
                                           else {}),
                                        "mtu": args.mtu, "metrics_interval": 10.0})
        switch_cpu = _process_cpu(sw.process.pid) - cpu_before
        stats = sw.port_stats()
    if res.writer.get("errors") or not res.writer.get("bytes"):
        raise RuntimeError(f"transfer failed: {res.writer}")
    if res.sink.get("sha256") != pattern_digest(size, seed):
        raise RuntimeError("sink data does not match what was written")
    data_packets = -(-size // args.mtu)
    return {
        "goodput_bps": float(res.writer["goodput_bps"]),
        "seconds": float(res.writer["seconds"]),
        "packets_to_h2": stats[2]["tx_packets"],
        "extra_packets": max(0, stats[1]["rx_packets"] - data_packets),
        "switch_tail_drops": stats[2]["tail_drops"],
        # CPU microseconds per data packet of each process (independent of machine load;
        # the switch figure also covers the SACKs it forwards and its idle loop)
        "cpu_us_per_packet": {
            "writer": round(float(res.writer.get("cpu_seconds", 0.0)) / data_packets * 1e6, 2),
            "sink": round(float(res.sink.get("cpu_seconds", 0.0)) / data_packets * 1e6, 2),
            "switch": round(switch_cpu / data_packets * 1e6, 2),
        },
    }


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far (0.0 if unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("bench transport: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    size = args.size << 20
    link_spec = f"rate={LINK_RATE:g},qpkts={args.qpkts}"
    cases: dict[str, list[dict[str, Any]]] = {"unlimited": [], "link_1g": []}
    for i in range(args.runs):
        for case, link in (("unlimited", None), ("link_1g", link_spec)):
            print(f"[bench transport] {case} run {i + 1}/{args.runs} ...", file=sys.stderr,
                  flush=True)
            cases[case].append(_one_transfer_goodput(size, args.qp_type, link, args, seed=100 + i))
    unlimited = statistics.median(r["goodput_bps"] for r in cases["unlimited"])
    link_1g = statistics.median(r["goodput_bps"] for r in cases["link_1g"])
    out: dict[str, Any] = {
        "unlimited_bps": round(unlimited),
        "link_1g_bps": round(link_1g),
        "link_1g_ratio": round(link_1g / LINK_RATE, 4),
        "qp_type": args.qp_type,
        "size_bytes": size,
        "runs": cases,
        "settings": {"mpr": args.mpr, "cc_window": args.cc_window or None, "trim_at": args.trim_at,
                     "link": link_spec, "mtu": args.mtu},
    }
    out_dir = Path(args.results)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"transport-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    if args.json:
        print(json.dumps(out))
    else:
        print(f"unlimited  {unlimited / 1e6:8.1f} Mb/s")
        print(f"link 1G    {link_1g / 1e6:8.1f} Mb/s  ({link_1g / LINK_RATE:.1%} of the link)")
        print(f"results: {path}")
    return 0

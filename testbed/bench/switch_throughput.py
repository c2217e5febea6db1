"""`mrcnet bench switch`: throughput of one switch process and link-rate accuracy.

Set-up (root needed): one switch process with port 1 <- generator and port 2 -> sink, both
peers in a run-prefixed namespace, programmed over P4Runtime with the default MRC classes and
one IPv6 route (the full pipeline: parser, length checks, DSCP class, LPM, next hop, egress
port config and counters). Frames are Write Only MRC packets with a 4096-byte payload
(4194-byte Ethernet frames, ICRC included).

- ``packets_per_s``: a generator floods port 1 as fast as it can (batches of 64 frames,
  one sendmmsg each through ``common.pktio``, so that it outruns the switch;
  ``generator_packets_per_s`` and ``generator_batched`` report it); the switch's transmit
  counter on port 2 is sampled over ``--rounds`` windows of ``--seconds``; the best window
  is reported (the machine is shared; every window is listed too). ``packets_per_cpu_s``
  divides by the CPU time the switch process got in that window instead of wall time.
- ``rate_accuracy``: measures the emulated link itself, not the CPU feeding it (that is
  ``packets_per_s``). Port 2's link is set to 1 kb/s with an unlimited queue and preloaded
  with about ``--rate-seconds`` worth of frames of ``--rate-payload`` bytes (8192 by
  default); then the rate under test (100 Mb/s, 1 Gb/s) is set and the queue drains while a
  sink records kernel receive timestamps (SO_TIMESTAMPNS). Measured rate = least-squares
  slope of cumulative bits against receive time (the end-to-end figure, bits after the first
  frame / (last - first), is in ``rate_details``); the figure is measured / configured
  (1.0 = exact; target within 2 %). The rate counts Ethernet frame bytes (no IFG/preamble).

Targets: packets_per_s >= 50,000 and |rate_accuracy - 1| <= 0.02 (the embedded switch).

``--target bmv2`` measures simple_switch_grpc (8 priority queues, log level warn, the same
pipeline pushed as p4c's JSON) with the same generator, frames and table entries; its
transmit counter is the kernel's ``tx_packets`` of port 2's interface, and the CPU time is
that of all its threads. BMv2's link rate is in packets per second, so ``rate_accuracy`` is
the embedded target's only. ``--target both`` runs the embedded target, then BMv2, each on
its own veths, and reports ``packets_per_s_ratio`` / ``packets_per_cpu_s_ratio`` (embedded
over BMv2).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_PPS = 50_000
PAYLOAD = 4096
RATES = {"100Mbps": 100e6, "1Gbps": 1e9}
DST = "fd00:0:0:2::1"
ROOT = Path(__file__).resolve().parents[2]  # the generator imports common.pktio from here

_GENERATOR = r"""
import socket, sys, time
name, path, mode, a, b = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
sys.path.insert(0, sys.argv[6])
from common import pktio  # sendmmsg when its C accelerator is built
frame = bytes.fromhex(open(path).read())
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.bind((name, 0))
send = s.send
print("ready", "accelerated" if pktio.accelerated() else "pure-python", flush=True)
sent = 0
began = time.monotonic()
if mode == "flood":  # a = seconds; frames refused by a full queue count as offered
    batch = [frame] * 64
    deadline = time.monotonic() + a
    while time.monotonic() < deadline:
        pktio.send_batch(s, batch, drop_errnos=None)
        sent += 64
else:  # paced: a = packets per second, b = packets
    n, gap = int(b), 1.0 / a
    start = time.monotonic()
    while sent < n:
        due = min(n, int((time.monotonic() - start) / gap) + 1)
        while sent < due:
            try:
                send(frame)
            except OSError:
                pass
            sent += 1
        left = start + sent * gap - time.monotonic()
        if left > 0:
            time.sleep(left)
print("sent", sent, time.monotonic() - began, flush=True)
"""

_SINK = r"""
import json, socket, struct, sys
name, out, count, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
size = int(sys.argv[5])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
s.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)  # SO_RCVBUFFORCE
s.setsockopt(socket.SOL_SOCKET, 35, 1)  # SO_TIMESTAMPNS
s.bind((name, 0))
s.settimeout(timeout)
print("ready", flush=True)
stamps, sizes = [], []
try:
    while len(stamps) < count:
        data, anc, _flags, _addr = s.recvmsg(65535, 64)
        if len(data) != size:
            continue
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == 35:
                sec, nsec = struct.unpack("qq", raw[:16])
                stamps.append(sec + nsec * 1e-9)
                sizes.append(len(data))
        s.settimeout(2.0)
except socket.timeout:
    pass
json.dump({"stamps": stamps, "sizes": sizes}, open(out, "w"))
"""


def rate_estimates(stamps: list[float], sizes: list[int]) -> tuple[float, float]:
    """(end-to-end, least-squares) rate in bit/s of frames received at ``stamps``.

    End-to-end: bits after the first frame / (last - first). Least squares: slope of the
    cumulative bits against time, which a few late deliveries (the sink or the switch being
    descheduled on a shared machine) barely move."""
    n = len(stamps)
    if n < 2 or stamps[-1] <= stamps[0]:
        raise ValueError("need at least two frames with increasing timestamps")
    end_to_end = sum(sizes[1:]) * 8 / (stamps[-1] - stamps[0])
    cum, bits = [], 0
    for size in sizes:
        cum.append(bits)
        bits += size * 8
    t0 = stamps[0]
    xs = [t - t0 for t in stamps]
    mx, my = sum(xs) / n, sum(cum) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, cum))
    return end_to_end, sxy / sxx


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=1.5, help="throughput window length")
    parser.add_argument("--rounds", type=int, default=3, help="throughput windows")
    parser.add_argument("--rate-seconds", type=float, default=1.0, help="rate test duration")
    parser.add_argument(
        "--rate-payload", type=int, default=8192, help="payload bytes of the rate-test frames"
    )
    parser.add_argument(
        "--gen-nice", type=int, default=0, help="nice value of the flood generator process"
    )
    parser.add_argument(
        "--target", choices=["embedded", "bmv2", "both"], default="embedded",
        help="switch target; 'both': embedded and BMv2 side by side in one run, with the ratio",
    )


def mrc_frame(dst: bytes, payload: int = PAYLOAD) -> bytes:
    """A Write Only frame (BTH+METH+RETH+payload+ICRC placeholder) to ``dst``, DSCP NO_TRIM."""
    from common.classes import DEFAULT_CLASSES, TrafficClass

    body = struct.pack("!BBHII", 0xCA, 0, 0xFFFF, 0x123, 1 << 31 | 1)  # BTH
    body += struct.pack("!I", 0) + struct.pack("!QII", 0x1000, 0x42, payload)  # METH, RETH
    body += bytes(payload) + bytes(4)  # payload, ICRC
    udp = struct.pack("!HHHH", 49152, 4791, 8 + len(body), 0)
    tc = DEFAULT_CLASSES.dscp[TrafficClass.NO_TRIM] << 2
    ip = struct.pack("!IHBB", 6 << 28 | tc << 20, len(udp) + len(body), 17, 64)
    ip += bytes.fromhex("fd000000000000000000000000000001") + dst
    eth = bytes.fromhex("0200000000ff020000000001") + b"\x86\xdd"
    return eth + ip + udp + body


def _wait_idle(counter: Any, timeout: float = 60.0) -> None:
    """Wait until ``counter()`` stops moving: the switch has drained what the flood left in
    its socket buffers (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    last = counter()
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = counter()
        if now == last:
            return
        last = now


def _cpu_seconds(pid: int) -> float:
    return sum(_cpu_split(pid))


def _cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _spawn(kit: Any, ns: str, workdir: Path, label: str, code: str, *argv: str,
           nice: int = 0) -> Any:
    """A generator or sink process in the namespace, once it printed ``ready``."""
    from common.netns import wait_until

    log = workdir / f"{label}.log"
    cmd = [sys.executable, "-c", code, *argv]
    if nice:
        cmd = ["nice", "-n", str(nice), *cmd]
    proc = kit.spawn(label, cmd, netns=ns, log_path=log)
    wait_until(lambda: "ready" in log.read_text() or not proc.alive(), 10, f"{label} ({log})")
    return proc


def _program(client: Any) -> None:
    """The bench's table entries (the same on every target): the NO_TRIM class, one route."""
    import ipaddress

    from common.classes import DEFAULT_CLASSES, DscpClass, TrafficClass
    from common.p4schema.mrc_switch import dscp_class_write

    client.insert(*dscp_class_write(DscpClass.of(DEFAULT_CLASSES, TrafficClass.NO_TRIM)))
    client.insert(
        "MrcIngress.ipv6_route",
        {"hdr.ipv6.dst_addr": (int(ipaddress.IPv6Address(DST)) >> 64 << 64, 64)},
        "MrcIngress.set_nexthop",
        {"port": 2, "smac": 0x0200000000FF, "dmac": 0x020000000002},
    )


def _kernel_tx_packets(ifname: str) -> int:
    """Frames the switch wrote to its interface (the kernel's counter, any target)."""
    return int(Path(f"/sys/class/net/{ifname}/statistics/tx_packets").read_text())


def _throughput(kit: Any, lab: Any, sw: Any, ns: str, workdir: Path, frame_path: Path,
                gen_if: str, tx_packets: Any, seconds: float, rounds: int,
                gen_nice: int) -> dict[str, Any]:
    """Flood port 1 and sample ``tx_packets()`` over ``rounds`` windows (best one reported)."""
    flood = seconds * rounds + 1.0
    gen = _spawn(kit, ns, workdir, "flood", _GENERATOR, gen_if, str(frame_path), "flood",
                 str(flood), "0", str(ROOT), nice=gen_nice)
    time.sleep(0.5)  # warm-up: the switch's queue and caches fill
    windows = []
    for _ in range(rounds):
        (u0, s0), t0, p0 = _cpu_split(sw.process.pid), time.monotonic(), tx_packets()
        time.sleep(seconds)
        (u1, s1), t1, p1 = _cpu_split(sw.process.pid), time.monotonic(), tx_packets()
        c = u1 - u0 + s1 - s0
        windows.append(((p1 - p0) / (t1 - t0), (p1 - p0) / max(c, 1e-3), c / (t1 - t0),
                        (s1 - s0) / max(c, 1e-3), c / max(p1 - p0, 1) * 1e6))
    gen.popen.wait(flood + 30)
    _wait_idle(tx_packets)
    result: dict[str, Any] = {}
    flood_log = (workdir / "flood.log").read_text()
    result["generator_batched"] = "ready accelerated" in flood_log
    sent_line = flood_log.split()
    if "sent" in sent_line:
        i = sent_line.index("sent")
        result["generator_packets_per_s"] = round(int(sent_line[i + 1]) / float(sent_line[i + 2]))
    best = max(windows)
    result["packets_per_s"] = round(best[0])
    result["packets_per_cpu_s"] = round(best[1])
    result["packets_per_s_windows"] = [round(w[0]) for w in windows]
    result["switch_cpu_share"] = round(best[2], 3)  # CPU-seconds per second (all threads)
    result["switch_cpu_us_per_packet"] = round(best[4], 2)
    result["switch_kernel_share"] = round(best[3], 3)  # system time / CPU time (the I/O)
    return result


def _rate_accuracy(kit: Any, ns: str, workdir: Path, admin: Any, gen_if: str, sink_if: str,
                   rate_frame: bytes, rate_frame_path: Path, rate_seconds: float
                   ) -> tuple[dict[str, float], dict[str, Any]]:
    """The embedded target's emulated link at each rate of RATES (see the module doc)."""
    from common.classes import DEFAULT_CLASSES, TrafficClass
    from common.proto import switch_admin_pb2 as pb

    accuracy: dict[str, float] = {}
    details: dict[str, Any] = {}
    prio = DEFAULT_CLASSES.priority[TrafficClass.NO_TRIM]

    def queued() -> int:
        info = admin.GetPorts(pb.GetPortsRequest(ports=[2]), timeout=10).ports[0]
        return int(info.egress.queues[prio].depth_pkts)

    for label, rate in RATES.items():
        # Preload: a 1 kb/s link with an unlimited queue holds everything sent ...
        admin.SetLink(
            pb.SetLinkRequest(port=2, update=pb.LinkUpdate(rate_bps=1e3, qpkts=0, qbytes=0)),
            timeout=10,
        )
        n = max(200, int(rate / (8 * len(rate_frame)) * rate_seconds))
        out = workdir / f"sink-{label}.json"
        sink = _spawn(kit, ns, workdir, f"sink-{label}", _SINK, sink_if, str(out), str(n), "120",
                      str(len(rate_frame)))
        paced = _spawn(kit, ns, workdir, f"preload-{label}", _GENERATOR, gen_if,
                       str(rate_frame_path), "paced", "5000", str(n), str(ROOT))
        paced.popen.wait(n / 1000 + 60)
        _wait_idle(queued)
        # ... then the link runs at the rate under test and drains the queue.
        admin.SetLink(pb.SetLinkRequest(port=2, update=pb.LinkUpdate(rate_bps=rate)), timeout=10)
        sink.popen.wait(rate_seconds * 10 + 120)
        got = json.loads(out.read_text())
        stamps, sizes = got["stamps"], got["sizes"]
        if len(stamps) < 2:
            raise RuntimeError(f"sink for {label} got {len(stamps)} frames; see {workdir}")
        end_to_end, fitted = rate_estimates(stamps, sizes)
        accuracy[label] = round(fitted / rate, 5)
        details[label] = {
            "frames": len(stamps),
            "sent": n,
            "seconds": round(stamps[-1] - stamps[0], 3),
            "end_to_end_ratio": round(end_to_end / rate, 5),
        }
    return accuracy, details


def _measure_target(kind: str, seconds: float, rounds: int, rate_seconds: float,
                    rate_payload: int, gen_nice: int) -> dict[str, Any]:
    """One target, set up on its own veths: throughput, and for the embedded target the
    link-rate accuracy."""
    import ipaddress

    import grpc

    from common.netns import NetKit
    from common.p4runtime_client import P4RuntimeClient
    from common.proto import switch_admin_pb2 as pb
    from common.proto import switch_admin_pb2_grpc as pb_grpc
    from testbed.switch_lab import Lab

    workdir = Path(tempfile.mkdtemp(prefix=f"mrcnet-bench-switch-{kind}-"))
    frame = mrc_frame(ipaddress.IPv6Address(DST).packed)
    frame_path = workdir / "frame.hex"
    frame_path.write_text(frame.hex())
    rate_frame = mrc_frame(ipaddress.IPv6Address(DST).packed, rate_payload)
    rate_frame_path = workdir / "rate-frame.hex"
    rate_frame_path.write_text(rate_frame.hex())
    result: dict[str, Any] = {"target": kind, "frame_bytes": len(frame), "payload_bytes": PAYLOAD}
    try:
        with NetKit("b" + secrets.token_hex(2)) as kit:
            lab = Lab(kit, workdir)
            ns = lab.namespace("h")
            lab.wire("p1", "g1", None, ns)
            lab.wire("p2", "k1", None, ns)
            sw = lab.start_switch("bench", {1: lab.ifname("p1"), 2: lab.ifname("p2")}, kind=kind)
            gen_if, sink_if, out_if = lab.ifname("g1"), lab.ifname("k1"), lab.ifname("p2")
            with P4RuntimeClient(sw.address, sw.device_id) as client:
                client.push_pipeline(
                    device_config=client.bmv2_device_config() if kind == "bmv2" else b"")
                _program(client)
                if kind == "bmv2":
                    result.update(_throughput(kit, lab, sw, ns, workdir, frame_path, gen_if,
                                              lambda: _kernel_tx_packets(out_if), seconds,
                                              rounds, gen_nice))
                    return result
                with grpc.insecure_channel(sw.address) as channel:
                    admin = pb_grpc.SwitchAdminStub(channel)

                    def tx_packets() -> int:
                        req = pb.GetPortsRequest(ports=[2])
                        return int(admin.GetPorts(req, timeout=10).ports[0].tx_packets)

                    result.update(_throughput(kit, lab, sw, ns, workdir, frame_path, gen_if,
                                              tx_packets, seconds, rounds, gen_nice))
                    accuracy, details = _rate_accuracy(kit, ns, workdir, admin, gen_if,
                                                       sink_if, rate_frame, rate_frame_path,
                                                       rate_seconds)
                    result["rate_frame_bytes"] = len(rate_frame)
                    result["rate_accuracy"] = accuracy
                    result["rate_details"] = details
        return result
    finally:
        for path in workdir.iterdir():
            path.unlink()
        workdir.rmdir()


def measure_switch_throughput(
    seconds: float, rounds: int, rate_seconds: float, rate_payload: int = 8192, gen_nice: int = 0,
    target: str = "embedded",
) -> dict[str, Any]:
    """The figures of ``target`` (embedded, bmv2), or of both side by side with their ratio."""
    kinds = ["embedded", "bmv2"] if target == "both" else [target]
    per = {k: _measure_target(k, seconds, rounds, rate_seconds, rate_payload, gen_nice)
           for k in kinds}
    load = round(os.getloadavg()[0], 2)
    if target != "both":
        result = per[target]
        result["load_average_1min"] = load
        if target == "embedded":
            result["targets_met"] = result["packets_per_s"] >= TARGET_PPS and all(
                abs(r - 1) <= 0.02 for r in result["rate_accuracy"].values())
        return result
    e, b = per["embedded"], per["bmv2"]
    return {
        "embedded": e,
        "bmv2": b,
        "packets_per_s_ratio": round(e["packets_per_s"] / max(b["packets_per_s"], 1), 2),
        "packets_per_cpu_s_ratio": round(e["packets_per_cpu_s"] / max(b["packets_per_cpu_s"], 1),
                                         2),
        "load_average_1min": load,
    }


def _print_target(figures: dict[str, Any]) -> None:
    print(f"target                {figures['target']}")
    print(f"frame size            {figures['frame_bytes']} bytes (4096-byte payload)")
    print(
        f"packets/s             {figures['packets_per_s']:,} "
        f"(target {TARGET_PPS:,}; windows {figures['packets_per_s_windows']})"
    )
    print(
        f"packets/CPU-second    {figures['packets_per_cpu_s']:,} "
        f"(the switch got {figures['switch_cpu_share']:.0%} of a core)"
    )
    print(
        f"CPU per packet        {figures['switch_cpu_us_per_packet']:.2f} us "
        f"({figures['switch_kernel_share']:.0%} of it in the kernel: socket I/O)"
    )
    for label, ratio in figures.get("rate_accuracy", {}).items():
        print(
            f"rate accuracy {label:7s} {ratio:.4f} (measured / configured, "
            f"{figures['rate_frame_bytes']}-byte frames)"
        )


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("mrcnet bench switch: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    if args.target != "embedded":
        from common.bmv2_cli import SWITCH_TOOL, find_bmv2_tool

        if find_bmv2_tool(SWITCH_TOOL) is None:
            print(f"mrcnet bench switch --target {args.target}: {SWITCH_TOOL} is not on PATH "
                  "(nor in $P4_BIN_DIR)", file=sys.stderr)
            return 2
    figures = measure_switch_throughput(
        args.seconds, args.rounds, args.rate_seconds, args.rate_payload, args.gen_nice,
        args.target,
    )
    if args.json:
        print(json.dumps(figures))
        return 0
    if args.target == "both":
        for kind in ("embedded", "bmv2"):
            _print_target(figures[kind])
            print()
        print(f"embedded / BMv2       {figures['packets_per_s_ratio']:.2f}x packets/s, "
              f"{figures['packets_per_cpu_s_ratio']:.2f}x packets per CPU-second")
    else:
        _print_target(figures)
    print(f"load average (1 min)  {figures['load_average_1min']}")
    return 0

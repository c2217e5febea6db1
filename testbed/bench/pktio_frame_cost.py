"""Microbenchmark of batched raw-packet I/O (common.pktio): microseconds per frame, C vs Python.

Set-up (root needed): a veth pair inside a namespace of its own (prefix ``pio``); one AF_PACKET
socket on each end, as the switch opens its ports. Each round sends a batch of ``--batch``
4194-byte frames (the switch bench's frame) from end a with ``send_batch`` and drains end b
with ``RxBuffers.recv_bytes`` (what the switch does) and ``RxBuffers.recv`` (what NIC ports
do). Each phase is timed separately with ``time.perf_counter`` and ``time.process_time``; the
best of ``--repeat`` runs is reported per frame. The send figure includes the veth's own work
(the kernel delivers to the peer socket in the sender's context).

    sudo .venv/bin/python -m testbed.bench.pktio_frame_cost --json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from typing import Any

from common import pktio

FRAME_BYTES = 4194


def _open(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
    s.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE
    s.setsockopt(socket.SOL_SOCKET, 32, 32 << 20)  # SO_SNDBUFFORCE
    s.bind((ifname, 0x0003))
    s.setblocking(False)
    return s


def _frame(seq: int) -> bytes:
    head = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"
    return head + seq.to_bytes(4, "big") + bytes(FRAME_BYTES - 18)


def _drain(rx: pktio.RxBuffers, sock: socket.socket) -> None:
    while rx.recv(sock):
        pass


def run_inside(
    a: str, b: str, frames: int, batch: int, repeat: int, slot: int = 9216
) -> dict[str, Any]:
    """The measurement, run in the namespace that holds the veth pair a <-> b."""
    sa, sb = _open(a), _open(b)
    out: dict[str, Any] = {
        "frame_bytes": FRAME_BYTES, "batch": batch, "frames": frames, "slot_bytes": slot
    }
    batch_frames = [_frame(i) for i in range(batch)]
    try:
        for impl in ("c", "python"):
            if impl == "c" and not pktio.accelerated():
                out["c"] = f"unavailable: {pktio.why_pure()}"
                continue
            c_ext = impl == "c"
            rx = pktio.RxBuffers(batch, slot, c_ext=c_ext)
            best: dict[str, float] = {}
            for _ in range(repeat):
                _drain(rx, sb)
                wall = {"send": 0.0, "recv_bytes": 0.0, "recv_into": 0.0}
                cpu = dict.fromkeys(wall, 0.0)
                moved = {"send": 0, "recv_bytes": 0, "recv_into": 0}
                rounds = frames // batch
                for r in range(rounds):
                    w0, c0 = time.perf_counter(), time.process_time()
                    res = pktio.send_batch(sa, batch_frames, drop_errnos=None, c_ext=c_ext)
                    w1, c1 = time.perf_counter(), time.process_time()
                    wall["send"] += w1 - w0
                    cpu["send"] += c1 - c0
                    moved["send"] += res.sent
                    phase = "recv_bytes" if r % 2 == 0 else "recv_into"
                    w0, c0 = time.perf_counter(), time.process_time()
                    got = len(rx.recv_bytes(sb)) if phase == "recv_bytes" else rx.recv(sb)
                    w1, c1 = time.perf_counter(), time.process_time()
                    wall[phase] += w1 - w0
                    cpu[phase] += c1 - c0
                    moved[phase] += got
                for phase in wall:
                    n = max(moved[phase], 1)
                    for kind, table in (("wall", wall), ("cpu", cpu)):
                        key = f"{phase}_{kind}_us"
                        value = table[phase] / n * 1e6
                        best[key] = min(best.get(key, value), value)
                best["frames_received"] = moved["recv_bytes"] + moved["recv_into"]
                best["frames_sent"] = moved["send"]
            out[impl] = {k: round(v, 3) for k, v in best.items()}
    finally:
        sa.close()
        sb.close()
    return out


def measure_pktio_frame_cost(frames: int, batch: int, repeat: int, slot: int = 9216) -> dict[str, Any]:
    from common.netns import NetKit

    prefix = "pio" + secrets.token_hex(2)
    with NetKit(prefix) as kit:
        ns = kit.add_namespace("n")
        a, b = kit.name("a"), kit.name("b")
        kit.add_veth(a, b, ns, ns)
        cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "testbed.bench.pktio_frame_cost", "--inside",
               a, b, "--frames", str(frames), "--batch", str(batch), "--repeat", str(repeat),
               "--slot", str(slot)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              cwd=os.getcwd(), timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"iobench failed: {proc.stderr}")
        result: dict[str, Any] = json.loads(proc.stdout)
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.bench.pktio_frame_cost", description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--slot", type=int, default=9216, help="receive slot bytes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--inside", nargs=2, metavar=("A", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inside:
        a, b = args.inside
        print(json.dumps(run_inside(a, b, args.frames, args.batch, args.repeat, args.slot)))
        return 0
    if os.geteuid() != 0:
        print("testbed.bench.pktio_frame_cost: needs root (network namespace, raw sockets)", file=sys.stderr)
        return 2
    result = measure_pktio_frame_cost(args.frames, args.batch, args.repeat, args.slot)
    if args.json:
        print(json.dumps(result))
        return 0
    for impl in ("c", "python"):
        r = result.get(impl)
        if not isinstance(r, dict):
            print(f"{impl:7s} {r}")
            continue
        print(f"{impl:7s} send {r['send_cpu_us']:.2f} us/frame CPU ({r['send_wall_us']:.2f} wall)  "
              f"recv_bytes {r['recv_bytes_cpu_us']:.2f} ({r['recv_bytes_wall_us']:.2f})  "
              f"recv_into {r['recv_into_cpu_us']:.2f} ({r['recv_into_wall_us']:.2f})")
    print(f"batch {result['batch']}, {result['frame_bytes']}-byte frames, "
          f"load average {result['load_average_1min']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

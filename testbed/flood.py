"""Send a set of frames on one interface as fast as it goes, for a bounded time and count.

``python -m testbed.flood --ifname IF [--netns NS] --frames FILE --seconds S --max N`` cycles
through the frames of FILE (each a 2-byte big-endian length and the frame's bytes), 64 per
``sendmmsg`` (common/pktio.py), until S seconds passed or N frames went out, then prints
``{"sent": n, "seconds": s}``. The hostile-input tests use it to flood a switch port and an
agent port with malformed frames from a process of their own (a loop in the test process
would compete for the interpreter with the agents it is testing).
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from pathlib import Path

from hosts.agent.nic import NicPort

BATCH = 64


def write_frames(path: Path, frames: list[bytes]) -> None:
    path.write_bytes(b"".join(struct.pack("!H", len(f)) + f for f in frames))


def read_frames(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out, i = [], 0
    while i < len(data):
        (n,) = struct.unpack_from("!H", data, i)
        out.append(data[i + 2: i + 2 + n])
        i += 2 + n
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ifname", required=True)
    p.add_argument("--netns", default=None)
    p.add_argument("--frames", required=True, type=Path)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--max", type=int, default=1 << 30)
    args = p.parse_args(argv)
    frames = read_frames(args.frames)
    if not frames:
        p.error("no frames")
    ring = (frames * (BATCH // len(frames) + 1))[:max(BATCH, len(frames))]
    port = NicPort(args.ifname, netns=args.netns, batch=BATCH)
    sent = 0
    start = time.monotonic()
    try:
        i = 0
        while time.monotonic() - start < args.seconds and sent < args.max:
            batch = ring[i:i + BATCH] or ring[:BATCH]
            i = (i + BATCH) % len(ring)
            sent += port.send_batch(batch[: args.max - sent])
    finally:
        port.close()
    print(json.dumps({"sent": sent, "seconds": round(time.monotonic() - start, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

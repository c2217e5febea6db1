"""Per-packet CPU of the host data path without sockets: ``python -m testbed.bench.host_path_cpu``.

Drives a writer and a sink exactly as their agents do per packet, minus the system calls:
writer ``HostCore.packets_to_send`` -> ``Framer.encode`` (ICRC) -> sink ``Framer.decode`` (ICRC
verified) -> ``HostCore.receive`` (placement) -> SACKs encoded by the sink, decoded and
received by the writer. A fake clock gives a 20 us one-way delay, so loss detection sees a
plausible RTT; the run fails if the data differ or any packet was retransmitted.

Figures are CPU time (``time.process_time``) per data packet. On a shared machine the mean
moves with the load; ``*_p10`` is the 10th percentile over batches (16-64 packets for data,
every SACK batch for the writer's SACK cost), which approximates an undisturbed core.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from hosts.agent.config import AgentConfig, parse_config
from hosts.agent.corecfg import DEFAULT_EV_PROFILE, build_core
from hosts.agent.framing import Framer
from hosts.transport.memory import ALL_ACCESS
from hosts.transport.sim import QpOptions, connect
from hosts.transport.types import SendWR, WrOpcode

DELAY = 20e-6  # one-way, seconds of fake time


def _config(i: int, peer: int, mtu: int) -> AgentConfig:
    return parse_config({
        "name": f"h{i}",
        "ports": [{"ifname": f"p{i}", "mac": f"02:00:00:00:00:{i:02x}", "gid": f"fd00::{i}",
                   "neighbor_mac": f"02:00:00:00:00:{peer:02x}"}],
        "mtu": mtu,
    })


def _p10(values: list[float]) -> float:
    return sorted(values)[len(values) // 10] if values else 0.0


def measure_host_path_cpu(size: int = 16 << 20, mtu: int = 4096) -> dict[str, Any]:
    """One transfer of ``size`` bytes; CPU microseconds per data packet (see module doc)."""
    ca, cb = _config(1, 2, mtu), _config(2, 1, mtu)
    a, b = build_core(ca), build_core(cb)
    fa, fb = Framer(ca), Framer(cb)
    qa, _qb = connect(a, b, QpOptions(profile_id=DEFAULT_EV_PROFILE))
    src = bytearray(random.Random(1).randbytes(size))
    dst = bytearray(size)
    ma, mb = a.register_mr(src, ALL_ACCESS), b.register_mr(dst, ALL_ACCESS)
    chunk = 1 << 20
    for i, off in enumerate(range(0, size, chunk)):
        a.post_send(qa, SendWR(i, WrOpcode.WRITE, ma.addr + off, min(chunk, size - off),
                               ma.lkey, mb.addr + off, mb.rkey), 0.0)
    rx = memoryview(bytearray(9216))
    clock = time.process_time
    now = 0.0
    sent = sacks = 0
    w_cpu = s_cpu = 0.0
    w_tx: list[float] = []
    s_rx: list[float] = []
    w_sack: list[float] = []
    while True:
        now += 2 * DELAY
        t0 = clock()
        out = a.packets_to_send(now, 64)
        frames = []
        for tx in out:
            n = fa.encode(tx)
            frames.append(bytes(fa.tx_view[:n]))  # the wire's copy (not measured separately)
        t1 = clock()
        for frame in frames:
            n = len(frame)
            rx[:n] = frame  # as recv_into would
            got = fb.decode(rx[:n], 0)
            if got is None:
                raise RuntimeError("sink dropped a frame")
            b.receive(got[0], got[1], now + DELAY)
        back = b.packets_to_send(now + DELAY)
        acks = []
        for tx in back:
            n = fb.encode(tx)
            acks.append(bytes(fb.tx_view[:n]))
        while b.next_event() is not None:
            pass
        t2 = clock()
        for frame in acks:
            got = fa.decode(memoryview(frame), 0)
            if got is None:
                raise RuntimeError("writer dropped a SACK")
            a.receive(got[0], got[1], now + 2 * DELAY)
        while a.next_event() is not None:
            pass
        t3 = clock()
        sent += len(out)
        sacks += len(back)
        w_cpu += (t1 - t0) + (t3 - t2)
        s_cpu += t2 - t1
        if len(out) >= 16:
            w_tx.append((t1 - t0) / len(out))
            s_rx.append((t2 - t1) / len(out))
        if back:
            w_sack.append((t3 - t2) / len(back))
        if not out and not back:
            timer = b.get_timer()
            if timer is None:
                break
            now = timer
            b.handle_timer(now)
    if dst != src:
        raise RuntimeError("path benchmark transferred wrong bytes")
    packets = -(-size // mtu)
    if sent != packets:
        raise RuntimeError(f"sent {sent} packets for {packets} (retransmissions)")
    us = 1e6
    return {
        "packets": sent,
        "sacks": sacks,
        "writer_us_per_packet": round(w_cpu / sent * us, 2),
        "sink_us_per_packet": round(s_cpu / sent * us, 2),
        "writer_build_encode_us_p10": round(_p10(w_tx) * us, 2),
        "sink_decode_receive_us_p10": round(_p10(s_rx) * us, 2),
        "writer_per_sack_us_p10": round(_p10(w_sack) * us, 2),
        "mtu": mtu,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=16, help="MiB per run (default 16)")
    parser.add_argument("--runs", type=int, default=5, help="runs; the best p10 figures kept")
    parser.add_argument("--mtu", type=int, default=4096)
    args = parser.parse_args(argv)
    runs = [measure_host_path_cpu(args.size << 20, args.mtu) for _ in range(max(1, args.runs))]
    best = {k: min(r[k] for r in runs) if k.endswith(("_p10", "_packet")) else runs[0][k]
            for k in runs[0]}
    print(json.dumps(best))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`mrcnet bench transport-core`: cost and recovery behaviour of the sans-I/O core alone.

Figures (no I/O, fake clock, so they do not depend on the machine's load except the CPU ones):

- ``core_pps``: 4 KiB data packets per CPU-second moved through a requester and a responder
  core in one process (SACKs included), lossless, 20 us one-way delay on a fake clock (the
  run fails if any packet was retransmitted: only first transmissions are counted);
- ``sim_gbps_<mode>_<loss>``: goodput in simulated time of a 16 MiB Write over a 100 Gb/s,
  5 us link (paths differ by up to 2 us) with that random loss (half as much trimming on top for MRC), MRC vs RC;
- ``cpu_s_<mode>_<loss>``: CPU seconds the simulation took.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from hosts.transport.core import HostCore
from hosts.transport.memory import ALL_ACCESS
from hosts.transport.sim import LinkModel, Network, QpOptions, connect, default_profile
from hosts.transport.types import (
    Completion,
    HostConfig,
    PortConfig,
    QpType,
    RxMeta,
    SendWR,
    WrOpcode,
)


def _host(i: int) -> HostCore:
    h = HostCore(HostConfig(ports=[PortConfig(bytes([0xFD] + [0] * 13 + [i, 0]))]))
    h.set_ev_profile(default_profile())
    return h


def core_pps(total: int = 64 << 20) -> float:
    a, b = _host(1), _host(2)
    qa, _qb = connect(a, b)
    src = bytearray(random.Random(1).randbytes(total))
    dst = bytearray(total)
    ma, mb = a.register_mr(src, ALL_ACCESS), b.register_mr(dst, ALL_ACCESS)
    chunk = 1 << 20
    for i in range(total // chunk):
        wr = SendWR(
            i, WrOpcode.WRITE, ma.addr + i * chunk, chunk, ma.lkey, mb.addr + i * chunk, mb.rkey
        )
        a.post_send(qa, wr, 0.0)
    to_b = RxMeta(0, a.config.ports[0].gid, b.config.ports[0].gid, 0x8000)
    to_a = RxMeta(0, b.config.ports[0].gid, a.config.ports[0].gid, 0x8000)
    # A one-way delay of 20 us (SACKs come back 40 us after the data left): with a 1 us step
    # and SACKs returning at the instant of sending, the requester's time-based loss detection
    # (srtt ~ 0) declared most coalesced-but-unacknowledged packets lost and the figure counted
    # their retransmissions (about 1,800 per 2,048 packets).
    now = 0.0
    sent = 0
    start = time.process_time()
    while True:
        now += 40e-6
        out = a.packets_to_send(now, 64)
        for tx in out:
            b.receive(tx.pkt, to_b, now + 20e-6)
        sent += len(out)
        back = b.packets_to_send(now + 20e-6)
        for tx in back:
            a.receive(tx.pkt, to_a, now + 40e-6)
        while a.next_event() is not None:
            pass
        while b.next_event() is not None:
            pass
        if not out and not back:
            t = b.get_timer()
            if t is None:
                break
            now = t
            b.handle_timer(now)
    cpu = time.process_time() - start
    if dst != src:
        raise RuntimeError("core benchmark transferred wrong bytes")
    data_packets = -(-total // a.config.mtu)
    if sent != data_packets:
        raise RuntimeError(f"core benchmark sent {sent} packets for {data_packets} (retransmissions)")
    return sent / cpu


def simulated_goodput(qp_type: QpType, loss: float, size: int = 16 << 20) -> tuple[float, float]:
    a, b = _host(1), _host(2)
    qa, _qb = connect(a, b, QpOptions(qp_type=qp_type))
    src = bytearray(random.Random(2).randbytes(size))
    dst = bytearray(size)
    ma, mb = a.register_mr(src, ALL_ACCESS), b.register_mr(dst, ALL_ACCESS)
    trim = loss / 2 if qp_type == QpType.MRC else 0.0
    net = Network([a, b], LinkModel(delay=5e-6, path_skew=2e-6, loss=loss, trim=trim, rate=12.5e9))
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, size, ma.lkey, mb.addr, mb.rkey), 0.0)
    start = time.process_time()
    ok = net.run(lambda: any(isinstance(e, Completion) for e in net.events[0]), max_time=60.0)
    cpu = time.process_time() - start
    if not ok or dst != src:
        raise RuntimeError(f"{qp_type.value} at loss {loss} did not complete byte-exact")
    return size * 8 / net.now / 1e9, cpu


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    figures: dict[str, float] = {"core_pps": round(core_pps())}
    for qp_type, losses in ((QpType.MRC, (0.0, 0.01, 0.1)), (QpType.RC, (0.0, 0.001, 0.01))):
        for loss in losses:
            gbps, cpu = simulated_goodput(qp_type, loss)
            key = f"{qp_type.value.lower()}_{loss:g}"
            figures[f"sim_gbps_{key}"] = round(gbps, 2)
            figures[f"cpu_s_{key}"] = round(cpu, 2)
    if args.json:
        print(json.dumps(figures))
    else:
        for k, v in figures.items():
            print(f"{k:24s} {v}")
    return 0

"""Shared helpers of the transport core tests: hosts, connected pairs, buffers, waiting."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hosts.transport import (
    ALL_ACCESS,
    Completion,
    HostConfig,
    HostCore,
    MemoryRegion,
    PortConfig,
    SendWR,
    WrOpcode,
)
from hosts.transport.sim import LinkModel, Network, QpOptions, connect, default_profile


def gid(host: int, port: int) -> bytes:
    return bytes([0xFD] + [0] * 13 + [host, port])


def make_host(i: int, planes: int = 1, **cfg: object) -> HostCore:
    config = HostConfig(ports=[PortConfig(gid(i, p)) for p in range(planes)], **cfg)  # type: ignore[arg-type]
    return HostCore(config)


@dataclass
class Pair:
    a: HostCore
    b: HostCore
    qa: int
    qb: int
    net: Network
    src: bytearray
    dst: bytearray
    ma: MemoryRegion
    mb: MemoryRegion

    def completions(self, host: int) -> list[Completion]:
        return [e for e in self.net.events[host] if isinstance(e, Completion)]

    def write(
        self, wr_id: int, off: int, length: int, imm: int | None = None, dst_off: int | None = None
    ) -> None:
        d = off if dst_off is None else dst_off
        self.a.post_send(
            self.qa,
            SendWR(
                wr_id,
                WrOpcode.WRITE if imm is None else WrOpcode.WRITE_WITH_IMM,
                self.ma.addr + off,
                length,
                self.ma.lkey,
                self.mb.addr + d,
                self.mb.rkey,
                imm=imm or 0,
            ),
            self.net.now,
        )

    def run_until_completions(self, n_send: int, n_recv: int = 0, max_time: float = 5.0) -> bool:
        return self.net.run(
            lambda: len(self.completions(0)) >= n_send and len(self.completions(1)) >= n_recv,
            max_time=max_time,
        )


def make_pair(
    size: int,
    model: LinkModel | None = None,
    opts: QpOptions | None = None,
    planes: int = 1,
    per_plane: int = 16,
    seed: int = 1,
    **cfg: object,
) -> Pair:
    a = make_host(1, planes, **cfg)
    b = make_host(2, planes, **cfg)
    for h in (a, b):
        h.set_ev_profile(default_profile(1, planes, per_plane))
    qa, qb = connect(a, b, opts)
    rng = random.Random(seed)
    src = bytearray(rng.randbytes(size))
    dst = bytearray(size)
    ma = a.register_mr(src, ALL_ACCESS)
    mb = b.register_mr(dst, ALL_ACCESS)
    net = Network([a, b], model)
    return Pair(a, b, qa, qb, net, src, dst, ma, mb)

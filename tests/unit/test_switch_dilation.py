"""The data-plane loop on a dilated clock (no root: ports are datagram socketpairs).

A link's delay is virtual time: with TDF N the loop must hold a frame N times longer on the
wall clock, and its lag meter must see the departure as on time.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from common.lag import DEFAULT_TOLERANCE_WALL
from common.vclock import RunClock
from switch.dataplane import Dataplane
from switch.pipeline import EgressPacket, Pipeline, ProcessFn, QDepthFn
from switch.ports import Port
from switch.traffic import LinkConfig, TrafficManager


class Forward(Pipeline):
    """Port 1 -> port 2 at priority 0."""

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        return [EgressPacket(2, 0, frame)]

    def datapath_process(self) -> ProcessFn:
        return self.process


def _run(tdf: float, delay: float) -> tuple[float, Dataplane]:
    """Send one frame through a link of ``delay`` virtual seconds; return the wall time it
    took to come out, and the (stopped) data plane."""
    clock = RunClock(tdf)
    tm = TrafficManager()
    far: dict[int, socket.socket] = {}
    ports = {}
    for n in (1, 2):
        near, f = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        near.setblocking(False)
        f.settimeout(10)
        far[n] = f
        ports[n] = Port(n, f"nonexistent{n}", -n, near)
    tm.add_port(1)
    tm.add_port(2, egress=LinkConfig(delay_s=delay))
    dp = Dataplane(Forward(), tm, ports, watcher=None, run_clock=clock)
    dp.carrier = {1: True, 2: True}
    thread = threading.Thread(target=dp.run, daemon=True)
    thread.start()
    try:
        t0 = time.monotonic()
        far[1].send(b"x" * 100)
        assert far[2].recv(65535) == b"x" * 100
        took = time.monotonic() - t0
    finally:
        dp.stop()
        thread.join(5)
        dp.close()
        for f in far.values():
            f.close()
    return took, dp


@pytest.mark.parametrize("tdf", [1.0, 4.0])
def test_link_delay_is_virtual_time(tdf: float) -> None:
    took, dp = _run(tdf, 0.05)
    assert took >= 0.05 * tdf * 0.98  # never early on the wall clock
    assert took < 0.05 * tdf + 1.0
    assert dp.clock is dp.run_clock.now
    assert dp.lag.events >= 1  # the delivery was a scheduled departure the loop ran
    assert dp.lag.tolerance == pytest.approx(DEFAULT_TOLERANCE_WALL / tdf)

"""A simulated switch port against the traffic manager's shaper driven as the switch
process drives it with an infinitely fast loop (serviced at every deadline): the same frames
leave at the same times in the same order, with strict priorities, tail drops and the queue
depths the pipeline sees, although the simulator wakes a wire only when it delivers."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

import pytest

from mrcnet.sim.events import Scheduler
from mrcnet.sim.switchnode import SimSwitch
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn
from switch.traffic import LinkConfig, Shaper, TrafficManager

OUT = 2  # the egress port under test
RATE = 1e9
DELAY = 20e-6
QPKTS = 4


class ByteRouted:
    """A pipeline stand-in: frame[0] is the priority, everything goes to port OUT; it records
    the queue depth it saw for each frame (what trimming and ECN decisions read)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.seen: list[tuple[bytes, tuple[int, int]]] = []

    def datapath_process(self) -> Callable[[bytes, int, float, QDepthFn], list[EgressPacket]]:
        def process(frame: bytes, port: int, now: float, qdepth: QDepthFn
                    ) -> list[EgressPacket]:
            self.seen.append((frame, qdepth(OUT, frame[0])))
            return [EgressPacket(OUT, frame[0], frame)]

        return process

    def set_port_oper_status(self, port: int, up: bool) -> None:
        pass


class Sink:
    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.got: list[tuple[float, bytes]] = []

    def receive(self, port: int, frame: bytes) -> None:
        self.got.append((self.sched.now, frame))


def arrivals(seed: int) -> list[tuple[float, bytes]]:
    """Bursts of frames of mixed priority and size, faster than the wire (queues build, the
    tail drops, priorities overtake)."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(120):
        t += rng.choice([0.0, 0.0, 1e-6, 3e-6, 40e-6])
        prio = rng.choice([0, 0, 0, 3, 7])
        size = rng.choice([64, 1500, 4200])
        out.append((t, bytes([prio]) + i.to_bytes(2, "big") + bytes(size - 3)))
    return out


def reference(frames: list[tuple[float, bytes]]) -> tuple[list[tuple[float, bytes]],
                                                          list[tuple[int, int]]]:
    """The shaper serviced at every deadline and every arrival (an infinitely fast loop)."""
    sh = Shaper(OUT, LinkConfig(rate_bps=RATE, delay_s=DELAY, qpkts=QPKTS))
    got: list[tuple[float, bytes]] = []
    depths: list[tuple[int, int]] = []
    pending = list(frames)
    while pending or sh.next_deadline() is not None:
        t_dl = sh.next_deadline()
        if pending and (t_dl is None or pending[0][0] <= t_dl):
            now, frame = pending.pop(0)
        else:
            assert t_dl is not None
            now, frame = t_dl, b""
        out: list[bytes] = []
        sh.service(now, out)
        got += [(now, f) for f in out]
        if frame:
            depths.append(sh.depth(frame[0]))
            sh.enqueue(frame, frame[0], now)
    return got, depths


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_port_delivers_what_an_always_serviced_shaper_delivers(seed: int) -> None:
    frames = arrivals(seed)
    sched = Scheduler()
    tm = TrafficManager()
    tm.add_port(1)
    tm.add_port(OUT, LinkConfig(rate_bps=RATE, delay_s=DELAY, qpkts=QPKTS))
    pipeline = ByteRouted()
    sw = SimSwitch("s", sched, pipeline, tm)  # type: ignore[arg-type]
    sink = Sink(sched)
    sw.connect(OUT, sink, 0)
    for t, frame in frames:
        sched.call_at(t, lambda f: sw.receive(1, f), frame)
    sched.run()
    want, depths = reference(frames)
    assert tm.egress[OUT].stats.tail_drops > 0  # the test does reach the tail
    assert [f[:3] for _, f in sink.got] == [f[:3] for _, f in want]
    assert [t for t, _ in sink.got] == pytest.approx([t for t, _ in want], abs=1e-12)
    assert [d for _, d in pipeline.seen] == depths
    # fewer wake-ups than frames delivered plus frames started: one per delivery at most
    assert sched.events_run <= len(frames) + len(sink.got)

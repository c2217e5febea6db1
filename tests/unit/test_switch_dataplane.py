"""The data-plane loop without root: ports are datagram socketpairs, the pipeline a test double.

Checks the loop's own logic: forwarding through the pipeline's decisions, the idle-wire fast
path and the queued path, admin calls executed in the loop thread, a failing pipeline costing
one frame only, and a clean stop.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from common.netns import wait_until
from switch.dataplane import Dataplane
from switch.pipeline import EgressPacket, Pipeline, ProcessFn, QDepthFn
from switch.ports import Port
from switch.traffic import LinkConfig, TrafficManager


class TestPipeline(Pipeline):
    """Forwards port 1 -> 2 and 2 -> 1 at priority frame[0] & 7; raises on b'BUG'."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__()
        self.depths: list[tuple[int, int]] = []
        self.tm_drops: list[tuple[int, int, int]] = []

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        if frame.startswith(b"BUG"):
            raise RuntimeError("pipeline bug")
        out = 2 if ingress_port == 1 else 1
        prio = frame[0] & 7
        self.depths.append(qdepth(out, prio))
        return [EgressPacket(out, prio, frame, ecn_marked=frame[1:2] == b"E")]

    def datapath_process(self) -> ProcessFn:
        return self.process

    def count_tm_drop(self, port: int, priority: int, nbytes: int) -> None:
        self.tm_drops.append((port, priority, nbytes))


class Rig:
    def __init__(self, egress2: LinkConfig, clock: Callable[[], float] | None = None,
                 coalesce: float = 0.0) -> None:
        self.pipeline = TestPipeline()
        self.tm = TrafficManager(on_drop=self.pipeline.count_tm_drop)
        self.far: dict[int, socket.socket] = {}
        ports = {}
        for n in (1, 2):
            near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            near.setblocking(False)
            # room for a whole burst in flight to a reader that is slow to run: a datagram
            # socketpair refuses sends (tx_errors) once the sender's buffer is full
            for opt in (32, socket.SO_SNDBUF):  # SO_SNDBUFFORCE (root), else up to wmem_max
                try:
                    near.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
                    break
                except OSError:
                    continue
            far.settimeout(5)
            self.far[n] = far
            ports[n] = Port(n, f"nonexistent{n}", -n, near)
        self.tm.add_port(1)
        self.tm.add_port(2, egress=egress2)
        self.dp = Dataplane(self.pipeline, self.tm, ports, watcher=None, clock=clock,
                            coalesce=coalesce)
        self.dp.carrier = {1: True, 2: True}
        self.thread = threading.Thread(target=self.dp.run, daemon=True)
        self.thread.start()

    def send(self, port: int, *frames: bytes) -> None:
        for f in frames:
            self.far[port].send(f)

    def recv(self, port: int, n: int) -> list[bytes]:
        return [self.far[port].recv(65535) for _ in range(n)]

    def close(self) -> None:
        self.dp.stop()
        self.thread.join(5)
        assert not self.thread.is_alive()
        self.dp.close()
        self.dp.close()  # idempotent
        for s in self.far.values():
            s.close()


@pytest.fixture
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    r = Rig(getattr(request, "param", LinkConfig()))
    try:
        yield r
    finally:
        r.close()


def test_forwarding_fast_path_and_stats(rig: Rig) -> None:
    rig.send(1, b"\x03Eone", b"\x05-two")
    assert rig.recv(2, 2) == [b"\x03Eone", b"\x05-two"]
    rig.send(2, b"\x00back")
    assert rig.recv(1, 1) == [b"\x00back"]
    stats = rig.dp.call(lambda: rig.tm.egress[2].stats)
    assert stats.packets == 2 and stats.queues[3].ecn_marks == 1 and stats.queues[5].packets == 1
    assert rig.dp.call(lambda: rig.dp.counters[1].rx_packets) == 2
    assert rig.pipeline.depths == [(0, 0), (0, 0), (0, 0)]


def test_a_run_of_frames_to_one_queue_is_counted_exactly(rig: Rig) -> None:
    """Copies to the same idle (port, queue) in one batch are counted at the end of their
    run: every frame and byte is there, a change of queue or a failed frame splits runs."""
    frames = [b"\x02Ea", b"\x02-bb", b"\x02Eccc", b"\x04-d", b"BUG", b"\x02-ee"]
    rig.send(1, *frames)
    got = rig.recv(2, 5)
    assert got == [f for f in frames if f != b"BUG"]
    stats = rig.dp.call(lambda: rig.tm.egress[2].stats)
    q2, q4 = stats.queues[2], stats.queues[4]
    assert (q2.packets, q2.bytes, q2.ecn_marks) == (4, 3 + 4 + 5 + 4, 2)
    assert (q4.packets, q4.bytes) == (1, 3)
    assert (stats.packets, stats.bytes) == (5, 19)
    assert rig.dp.call(lambda: rig.dp.misc["pipeline_errors"]) == 1


def test_a_failing_pipeline_costs_one_frame(rig: Rig) -> None:
    rig.send(1, b"BUG!", b"\x01ok")
    assert rig.recv(2, 1) == [b"\x01ok"]
    assert rig.dp.call(lambda: rig.dp.misc["pipeline_errors"]) == 1


@pytest.mark.parametrize("rig", [LinkConfig(rate_bps=8e5, qpkts=3)], indirect=True)
def test_queued_path_tail_drop_and_admin_down(rig: Rig) -> None:
    # 10 000-byte frames take 100 ms each at 800 kb/s: a burst of 6 keeps 1 on the wire, 3
    # queued and tail-drops 2 (reported to the pipeline); order is kept.
    frames = [bytes([1, i]) + bytes(9998) for i in range(6)]
    rig.send(1, *frames)
    got = rig.recv(2, 4)
    assert [f[1] for f in got] == [0, 1, 2, 3]
    assert rig.pipeline.tm_drops == [(2, 1, 10000), (2, 1, 10000)]
    assert max(rig.pipeline.depths) == (3, 30000)
    rig.dp.call(lambda: rig.dp.set_admin(2, False))
    assert rig.pipeline.port_up[2] is False
    rig.send(1, b"\x01lost")
    rig.dp.call(lambda: rig.dp.set_admin(2, True))
    rig.send(1, b"\x01kept")
    assert rig.recv(2, 1) == [b"\x01kept"]
    assert rig.dp.call(lambda: rig.tm.egress[2].stats.down_drops) == 1


def test_poll_fallback_for_high_descriptors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond select's descriptor limit the loop waits with poll(); timeouts still work."""
    import switch.dataplane as dataplane

    monkeypatch.setattr(dataplane, "_FD_SETSIZE", 0)
    used: list[list[int]] = []
    real = dataplane._poll_wait

    def spy(fds: list[int]) -> object:
        used.append(list(fds))
        return real(fds)

    monkeypatch.setattr(dataplane, "_poll_wait", spy)
    r = Rig(LinkConfig(rate_bps=8e5, delay_s=0.01))
    try:
        r.send(1, b"\x01" + bytes(999), b"\x02" + bytes(999))  # 10 ms each + 10 ms delay
        assert [f[0] for f in r.recv(2, 2)] == [1, 2]
        r.send(1, b"BUG")
        r.send(2, b"\x00x")
        assert r.recv(1, 1) == [b"\x00x"]
        assert r.dp.call(lambda: r.dp.misc["pipeline_errors"]) == 1
        # the data wait: two ports and the wake-up pipe went to poll(); the wait of a
        # coalesced sleep (common/coalesce.py): the wake-up pipe alone
        assert sorted(map(len, used)) == [1, 3] and used[1][0] in used[0]
    finally:
        r.close()


def test_bursts_are_forwarded_in_order_across_batches(rig: Rig) -> None:
    """More frames than one receive batch (RX_BATCH): one recvmmsg per batch, one sendmmsg
    per port per round, and still every frame once, in order, counted."""
    frames = [bytes([1]) + i.to_bytes(2, "big") + bytes(i % 50) for i in range(300)]
    sender = threading.Thread(target=rig.send, args=(1, *frames))
    sender.start()
    got = rig.recv(2, 300)
    sender.join(5)
    assert got == frames
    assert rig.dp.call(lambda: rig.dp.counters[1].rx_packets) == 300
    assert rig.dp.call(lambda: rig.dp.counters[1].rx_bytes) == sum(map(len, frames))
    assert rig.dp.call(lambda: rig.tm.egress[2].stats.packets) == 300


def test_refused_sends_are_counted_tx_errors(rig: Rig) -> None:
    """A port whose socket refuses frames (here: the far end is gone) counts them as
    tx_errors (frames and bytes); the loop goes on."""
    rig.far[2].close()
    rig.send(1, b"\x01" + bytes(99), b"\x01" + bytes(49))
    wait_until(lambda: rig.dp.call(lambda: rig.dp.counters[2].tx_errors) == 2, 5, "2 tx errors")
    assert rig.dp.call(lambda: rig.dp.counters[2].tx_error_bytes) == 150
    assert rig.dp.call(lambda: rig.tm.egress[2].stats.packets) == 2  # the link delivered them
    rig.send(1, b"\x01" + bytes(9))
    wait_until(lambda: rig.dp.call(lambda: rig.dp.counters[2].tx_errors) == 3, 5, "3rd error")
    assert rig.dp.call(lambda: rig.dp.counters[2].tx_error_bytes) == 160


def test_dense_frames_are_taken_in_coalesced_rounds_in_order() -> None:
    """With a clock that stands still every round comes "at once" after the previous one, so
    once two rounds found frames the loop moderates: it sleeps the slack with its data
    sockets unwatched, then takes what arrived in one round. Every frame still goes out,
    in order, and the lag meter counts the wake-ups and the moderated rounds."""
    r = Rig(LinkConfig(), clock=lambda: 0.0, coalesce=0.02)
    try:
        sent = []
        for i in range(6):  # one at a time: each is a round of its own until moderated
            frame = bytes([0, 0, i]) * 20
            r.send(1, frame)
            sent.append(frame)
            assert r.recv(2, 1) == [frame]
        burst = [bytes([0, 0, 100 + i]) * 20 for i in range(10)]
        r.send(1, *burst)
        assert r.recv(2, 10) == burst
        snap = r.dp.lag.snapshot(0.0)
        assert snap["slack_s"] == 0.02
        assert snap["moderated"] >= 1
        assert snap["wakeups"] >= snap["moderated"]
        assert r.dp.counters[1].rx_packets == 16
    finally:
        r.close()


def test_without_slack_the_loop_never_moderates() -> None:
    r = Rig(LinkConfig(), clock=lambda: 0.0)
    try:
        for i in range(4):
            frame = bytes([0, 0, i]) * 20
            r.send(1, frame)
            assert r.recv(2, 1) == [frame]
        assert r.dp.lag.snapshot(0.0)["moderated"] == 0
    finally:
        r.close()

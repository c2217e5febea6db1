"""A switch of the simulated fabric: the embedded target's real pipeline (the compiled P4
program, C backend where built) and its real traffic manager's shapers (priority queues,
emulated wire rate, delay, loss, trimming and ECN decisions), fed by the scheduler instead of
sockets.

The switch process's loop (switch/dataplane.py) and this node make the same calls on the same
objects: a received frame goes into the ingress shaper of a host-facing port
(``TrafficManager.receive``) or straight into the pipeline, its copies into the egress
shapers (``Shaper.enqueue``), and ``Shaper.service`` hands over what a wire delivers. What
differs is when: the process polls every port of its traffic manager, while here each
direction of each port is woken by the scheduler at its own next deadline
(``Shaper.next_deadline``), so a frame costs the ports it crosses, not every port of every
switch it crosses. A delivered frame is handed to the peer node's ``receive`` at once (the
simulated time of delivery).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from google.rpc import code_pb2

from common.p4runtime_client import EntityWriter, P4RuntimeWriteError, UpdateError
from common.p4schema.model import Program
from common.proto.p4.v1 import p4runtime_pb2
from mrcnet.sim.events import Scheduler
from switch.p4runtime.readwrite import apply_write_batch
from switch.pipeline import Pipeline
from switch.traffic import Shaper, TrafficManager


class FrameReceiver(Protocol):
    """Anything a simulated wire can end at (a switch, a host NIC, a capture)."""

    def receive(self, port: int, frame: bytes) -> None: ...


class InProcessWriter(EntityWriter):
    """A P4Runtime writer that applies its updates to a pipeline in this process: the same
    messages the controller sends over gRPC, through the same write path the switch's
    P4Runtime server runs (switch.p4runtime.readwrite), minus the channel."""

    def __init__(self, pipeline: Pipeline, program: Program) -> None:
        self.pipeline = pipeline
        self.program = program

    def write(
        self,
        updates: Sequence[p4runtime_pb2.Update],
        atomicity: int = p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR,
    ) -> None:
        with self.pipeline.lock:
            results = apply_write_batch(self.pipeline, updates, atomicity)
        errors = [UpdateError(i, r.code, r.message) for i, r in enumerate(results)
                  if r.code != code_pb2.OK]
        if errors:
            raise P4RuntimeWriteError(errors)


@dataclass
class SwitchCounters:
    """Frames the node itself accounted for (the traffic manager counts queues and wires)."""

    rx_frames: int = 0
    rx_bytes: int = 0
    pipeline_errors: int = 0  # the pipeline raised on a frame: the frame is lost, counted
    no_such_port_drops: int = 0  # the pipeline chose a port the traffic manager lacks
    unwired_drops: int = 0  # a wire delivered onto a port with nothing cabled to it
    stale_wakes: int = 0  # wake-ups superseded by an earlier one (they return at once)


class Wire:
    """One direction of one port as the scheduler sees it: its shaper, the time of the one
    pending wake-up (None: none pending; while set, exactly one heap entry at that time will
    call back, entries at other times are stale) and frames found due now by a catch-up,
    which that wake-up delivers."""

    __slots__ = ("pending", "port", "shaper", "wake", "wake_at")

    def __init__(self, port: int, shaper: Shaper, wake: Callable[[Wire], None]) -> None:
        self.port = port
        self.shaper = shaper
        self.wake = wake
        self.wake_at: float | None = None
        self.pending: list[bytes] = []


class SimSwitch:
    """One switch on the scheduler's clock. Cable ports with ``connect``."""

    def __init__(self, name: str, sched: Scheduler, pipeline: Pipeline,
                 tm: TrafficManager) -> None:
        self.name = name
        self.sched = sched
        self.pipeline = pipeline
        self.tm = tm
        self.counters = SwitchCounters()
        self.peers: dict[int, tuple[FrameReceiver, int]] = {}
        self.egress = {p: Wire(p, sh, self._wake_egress) for p, sh in tm.egress.items()}
        self.ingress = {p: Wire(p, sh, self._wake_ingress) for p, sh in tm.ingress.items()}
        # The data path of the committed program, fetched once: nothing commits another
        # program during a run (a commit would replace it; P4Runtime writes do not).
        with pipeline.lock:
            self._process = pipeline.datapath_process()
        self.qdepth = self._make_qdepth()
        self._shaped = tm.ingress_shaped  # the traffic manager's own set, kept up to date

    def connect(self, port: int, peer: FrameReceiver, peer_port: int) -> None:
        """Frames this port's egress wire delivers go to ``peer.receive(peer_port, ...)``."""
        if port not in self.tm.egress:
            raise ValueError(f"{self.name}: no port {port}")
        self.peers[port] = (peer, peer_port)

    # -- data path -----------------------------------------------------------------------

    def receive(self, port: int, frame: bytes) -> None:
        """A frame arrives on ``port`` now (its sender's wire already delayed it)."""
        c = self.counters
        c.rx_frames += 1
        c.rx_bytes += len(frame)
        now = self.sched.now
        if port in self._shaped:
            w = self.ingress[port]
            sh = w.shaper
            if sh.backlog and sh.wire_free_at <= now:
                self._catch_up(w, now)
            self.tm.receive(port, frame, now)
            self._arm(w)
        else:
            self._forward(frame, port, now)

    def _forward(self, frame: bytes, port: int, now: float) -> None:
        try:
            copies = self._process(frame, port, now, self.qdepth)
        except Exception:  # a pipeline bug costs the frame, never the run
            self.counters.pipeline_errors += 1
            return
        egress = self.egress
        for eg in copies:
            w = egress.get(eg.port)
            if w is None:
                self.counters.no_such_port_drops += 1
                continue
            sh = w.shaper
            if sh.backlog and sh.wire_free_at <= now:
                self._catch_up(w, now)
            sh.enqueue(eg.data, eg.priority, now, eg.trimmed, eg.ecn_marked)
            self._arm(w)

    # A wire is woken when its next frame is delivered, not also when a queued frame starts:
    # ``Shaper.service`` starts every frame whose start time has passed at that time (it
    # picks the frame by priority among those that had arrived then), so a late start is the
    # same start. What must see the queues as they are now (the pipeline's queue depth for
    # trimming and ECN, a tail-drop check on enqueue) first catches the wire up.

    def _catch_up(self, w: Wire, now: float) -> None:
        """Start on ``w``'s wire what should have started by now; frames that turn out to be
        due now wait in ``w.pending`` for the wake-up at now (never delivered from here: a
        catch-up can run inside the pipeline)."""
        sh = w.shaper
        if sh.backlog and sh.wire_free_at <= now:
            sh.service(now, w.pending)
            if w.pending:
                self._arm(w)

    def _make_qdepth(self) -> Callable[[int, int], tuple[int, int]]:
        egress = self.egress
        sched = self.sched
        catch_up = self._catch_up
        empty = (0, 0)

        def qdepth(port: int, priority: int) -> tuple[int, int]:
            """(packets, bytes) queued now on (egress port, priority), for the pipeline."""
            w = egress.get(port)
            if w is None:
                return empty
            sh = w.shaper
            if sh.backlog and sh.wire_free_at <= sched.now:
                catch_up(w, sched.now)
            if not 0 <= priority < sh.nqueues:
                return empty
            return len(sh.queues[priority]), sh.qbytes[priority]

        return qdepth

    def _arm(self, w: Wire) -> None:
        """Make sure the scheduler wakes ``w`` when its next frame is delivered (or, with
        nothing on the wire, when its next queued frame starts)."""
        sh = w.shaper
        now = self.sched.now
        if w.pending:
            t = now
        elif sh.inflight:
            t = sh.inflight[0][0]
        elif sh.backlog:
            t = sh.wire_free_at
        else:
            return
        at = w.wake_at
        if at is not None and at <= t:
            return  # an earlier wake-up is pending; it re-arms
        if t < now:
            t = now
        w.wake_at = t
        self.sched.call_at(t, w.wake, w)

    def _due(self, w: Wire) -> list[bytes] | None:
        """What ``w``'s wire delivers now (None: a superseded wake-up)."""
        now = self.sched.now
        if w.wake_at != now:
            self.counters.stale_wakes += 1
            return None
        w.wake_at = None
        out = w.pending
        w.pending = []
        w.shaper.service(now, out)
        return out

    def _wake_egress(self, w: Wire) -> None:
        out = self._due(w)
        if out is None:
            return
        if out:
            peer = self.peers.get(w.port)
            if peer is None:
                self.counters.unwired_drops += len(out)
            else:
                node, peer_port = peer
                for data in out:
                    node.receive(peer_port, data)
        self._arm(w)

    def _wake_ingress(self, w: Wire) -> None:
        out = self._due(w)
        if out is None:
            return
        now = self.sched.now
        for data in out:
            self._forward(data, w.port, now)
        self._arm(w)

    # -- control -------------------------------------------------------------------------

    def set_port(self, port: int, up: bool) -> None:
        """A port's state changes now (a cut cable: both directions, what is queued or on
        the wire is lost, counted by the traffic manager); the pipeline sees it at once, as
        the switch process's port-status path does."""
        self.tm.set_admin(port, up, self.sched.now)
        with self.pipeline.lock:
            self.pipeline.set_port_oper_status(port, up)
        self._arm(self.egress[port])
        self._arm(self.ingress[port])

"""A switch of the simulated fabric: the embedded target's real pipeline (the compiled P4
program, C backend where built) and its real traffic manager (priority queues, emulated wire
rate, delay, loss, trimming and ECN decisions), fed by the scheduler instead of sockets.

The switch process's loop (switch/dataplane.py) and this node make the same calls in the same
order: a received frame goes through the ingress shaper of a host-facing port or straight into
the pipeline, its copies into the egress shapers, and ``service`` hands over what the wires
deliver; the next wake-up is the traffic manager's next deadline. What differs is only where
frames come from and go to: a peer node's ``receive`` at the simulated time of delivery.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from google.rpc import code_pb2

from common.p4runtime_client import EntityWriter, P4RuntimeWriteError, UpdateError
from common.p4schema.model import Program
from common.proto.p4.v1 import p4runtime_pb2
from mrcnet.sim.events import Event, Scheduler
from switch.p4runtime.readwrite import apply_write_batch
from switch.pipeline import Pipeline
from switch.traffic import TrafficManager


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
        self._wake: Event | None = None
        self._tx: dict[int, list[bytes]] = {}
        self._rx: list[tuple[int, bytes]] = []

    def connect(self, port: int, peer: FrameReceiver, peer_port: int) -> None:
        """Frames this port's egress wire delivers go to ``peer.receive(peer_port, ...)``."""
        if port not in self.tm.egress:
            raise ValueError(f"{self.name}: no port {port}")
        self.peers[port] = (peer, peer_port)

    # -- data path -----------------------------------------------------------------------

    def receive(self, port: int, frame: bytes) -> None:
        """A frame arrives on ``port`` now (its sender's wire already delayed it)."""
        now = self.sched.now
        c = self.counters
        c.rx_frames += 1
        c.rx_bytes += len(frame)
        if port in self.tm.ingress_shaped:
            self.tm.receive(port, frame, now)
        else:
            self._forward(frame, port, now)
        self._service()

    def _forward(self, frame: bytes, port: int, now: float) -> None:
        tm = self.tm
        try:
            copies = self.pipeline.process(frame, port, now, tm.qdepth)
        except Exception:  # a pipeline bug costs the frame, never the run
            self.counters.pipeline_errors += 1
            return
        egress = tm.egress
        for eg in copies:
            sh = egress.get(eg.port)
            if sh is None:
                self.counters.no_such_port_drops += 1
            else:
                sh.enqueue(eg.data, eg.priority, now, eg.trimmed, eg.ecn_marked)

    def _service(self) -> None:
        """Deliver what is due now, pass ingress-shaped frames through the pipeline, and
        wake again at the traffic manager's next deadline."""
        now = self.sched.now
        tm, tx, rx = self.tm, self._tx, self._rx
        tm.service_into(now, tx, rx)
        while rx:
            for port, data in rx:
                self._forward(data, port, now)
            rx.clear()
            tm.service_into(now, tx, rx)
        at = self.sched.at
        for port, frames in tx.items():
            if not frames:
                continue
            peer = self.peers.get(port)
            if peer is None:
                self.counters.unwired_drops += len(frames)
            else:
                node, peer_port = peer
                for data in frames:
                    at(now, partial(node.receive, peer_port, data))
            frames.clear()
        self._arm()

    def _arm(self) -> None:
        t = self.tm.next_deadline()
        if t is None:
            return
        wake = self._wake
        if wake is not None and wake.alive:
            if wake.when <= t:
                return
            wake.cancel()
        self._wake = self.sched.at(t, self._service)

    # -- control -------------------------------------------------------------------------

    def set_port(self, port: int, up: bool) -> None:
        """A port's state changes now (a cut cable: both directions, what is queued or on
        the wire is lost, counted by the traffic manager); the pipeline sees it at once, as
        the switch process's port-status path does."""
        self.tm.set_admin(port, up, self.sched.now)
        with self.pipeline.lock:
            self.pipeline.set_port_oper_status(port, up)
        self._service()

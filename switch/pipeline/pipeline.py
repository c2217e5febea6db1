"""Pipeline: the object a switch process feeds frames into.

It holds the committed program (none until a P4Runtime client pushed a
ForwardingPipelineConfig, or the process loaded one at start): its BMv2 JSON compiled by the
p4json engine, the P4Runtime view of its state, and the target's own conventions (hooks). It
runs under a lock shared with the P4Runtime writers, so one data-plane thread and any number
of control-plane threads can use it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from google.rpc import code_pb2

from common.p4schema.model import Program
from switch.p4json.engine import Engine
from switch.p4json.errors import ConfigError
from switch.pipeline.binding import Binding, Mismatch, bind
from switch.pipeline.datapath import JsonDataPath
from switch.pipeline.hooks import TargetHooks
from switch.pipeline.pipeline_types import (
    EgressPacket,
    EgressTuple,
    FailedFn,
    QDepthFn,
)
from switch.pipeline.state import ProgramState, WriteError
from switch.programs import BUILTIN, builtin_json

__all__ = ["BatchFn", "EgressPacket", "EgressTuple", "FailedFn", "Pipeline", "Prepared",
           "ProcessFn", "QDepthFn", "batch_of"]

ProcessFn = Callable[[bytes, int, float, QDepthFn], list[EgressPacket]]
BatchFn = Callable[[Sequence[bytes], int, float, QDepthFn, FailedFn], Iterator[EgressTuple]]


def batch_of(process: ProcessFn) -> BatchFn:
    """A BatchFn from a per-frame ProcessFn (pipelines that only define ``process``)."""

    def batch(frames: Sequence[bytes], ingress_port: int, now: float, qdepth: QDepthFn,
              failed: FailedFn) -> Iterator[EgressTuple]:
        for frame in frames:
            try:
                packets = process(frame, ingress_port, now, qdepth)
            except Exception:
                failed(ingress_port)
                continue
            for eg in packets:
                yield eg.port, eg.priority, eg.data, eg.trimmed, eg.ecn_marked

    return batch


@dataclass
class Prepared:
    """A program ready to commit: its compiled engine and how its P4Info maps onto it."""

    program: Program
    engine: Engine
    binding: Binding
    source: bytes


class Pipeline:
    """The switch's P4 pipeline; thread-safe for one data-plane thread plus P4Runtime writers.

    Program timestamps (ingress_global_timestamp, ...) are microseconds of the clock the
    ``now`` values given to process() come from (the switch's time.monotonic).
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.program: Program | None = None
        self.state: ProgramState | None = None
        self.engine: Engine | None = None
        self.source: bytes = b""
        self.datapath: JsonDataPath | None = None
        self.port_up: dict[int, bool] = {}
        self.unconfigured_drops = 0

    def prepare(self, program: Program, source: bytes | None = None) -> Prepared:
        """Compile ``source`` (BMv2 JSON; None or empty: the built-in program of that name) and
        check that ``program`` (the P4Info) describes it. WriteError INVALID_ARGUMENT when the
        JSON is refused (an unsupported feature is named) or does not match."""
        if not source:
            if program.name not in BUILTIN:
                raise WriteError(code_pb2.INVALID_ARGUMENT,
                                 "No device config (BMv2 JSON) given for this P4Info")
            source = builtin_json(program.name)
        try:
            engine = Engine(source, clock=time.monotonic, origin=0.0, name=program.name,
                            backend="auto")
            binding = bind(program, engine)
        except ConfigError as exc:
            raise WriteError(code_pb2.INVALID_ARGUMENT, f"Device config refused: {exc}") from None
        except Mismatch as exc:
            raise WriteError(code_pb2.INVALID_ARGUMENT,
                             f"P4Info does not match the device config: {exc}") from None
        return Prepared(program, engine, binding, bytes(source))

    def commit(
        self,
        program: Program,
        state: ProgramState | None = None,
        prepared: Prepared | None = None,
    ) -> ProgramState:
        """Make ``program`` the running program: with fresh state, or keeping ``state`` (and
        the engine it drives) when given; ``prepared`` from ``prepare`` (default: the built-in
        JSON of ``program``)."""
        with self.lock:
            if state is not None and self.state is state and self.engine is not None:
                engine = self.engine
                source = self.source
            else:
                ready = prepared or self.prepare(program)
                engine, source = ready.engine, ready.source
                state = ProgramState.build(program, ready.binding)
            state.port_up = self.port_up
            state.table_hooks.clear()  # hooks belong to the data path built below
            hooks = TargetHooks(engine)
            datapath = JsonDataPath(engine, hooks)
            for profile in state.profiles.values():
                profile.rebuild(self.port_up)
            for port, up in self.port_up.items():
                datapath.port_status_changed(port, up)
            self.program, self.state, self.engine, self.source = program, state, engine, source
            self.datapath = datapath
            return state

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        """Parser, ingress, then egress at enqueue time; returns the packets to enqueue.

        ``qdepth(port, priority)`` gives the (packets, bytes) queued on that port+priority at
        the moment a copy enters egress (v1model's enq_qdepth; the bytes for programs built
        for the embedded target, see docs/switch.md). Drops of every kind return [].
        """
        with self.lock:
            dp = self.datapath
            if dp is None:
                self.unconfigured_drops += 1
                return []
            return dp.process(frame, ingress_port, now, qdepth)

    def datapath_process(self) -> ProcessFn:
        """The per-frame function ``process`` runs, for a caller holding ``self.lock`` across
        a batch of frames (the data-plane loop: one lock round trip per batch instead of per
        frame). Valid only while the lock is held: a commit replaces the data path."""
        dp = self.datapath
        if dp is None:
            return self._unconfigured
        return dp.process

    def datapath_batch(self) -> BatchFn:
        """``datapath_process`` for a whole batch of frames from one port (tuples, each
        frame's copies before the next frame runs); the same validity rule: only while
        ``self.lock`` is held. A subclass that overrides ``datapath_process`` is batched
        frame by frame through it."""
        if type(self).datapath_process is not Pipeline.datapath_process:
            return batch_of(self.datapath_process())
        dp = self.datapath
        if dp is None:
            return batch_of(self._unconfigured)
        return dp.process_batch

    def _unconfigured(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        self.unconfigured_drops += 1
        return []

    def set_port_oper_status(self, port: int, up: bool) -> None:
        """Record the physical/admin state of ``port`` (the port_down register, selector
        members watching the port; see switch.pipeline.hooks)."""
        with self.lock:
            self.port_up[port] = up
            if self.datapath is not None:
                self.datapath.port_status_changed(port, up)

"""Pipeline: the object a switch process feeds frames into.

It holds the committed program (none until a P4Runtime client pushed a
ForwardingPipelineConfig) and runs it under a lock shared with the P4Runtime writers, so one
data-plane thread and any number of control-plane threads can use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from common.p4schema.model import Program
from switch.pipeline.mrc import MrcDataPath
from switch.pipeline.ocs import OcsDataPath
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn
from switch.pipeline.state import ProgramState

__all__ = ["DataPath", "EgressPacket", "Pipeline", "ProcessFn", "QDepthFn"]

ProcessFn = Callable[[bytes, int, float, QDepthFn], list[EgressPacket]]


class DataPath(Protocol):
    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]: ...

    def port_status_changed(self, port: int, up: bool) -> None: ...


class Pipeline:
    """The switch's P4 pipeline; thread-safe for one data-plane thread plus P4Runtime writers."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.program: Program | None = None
        self.state: ProgramState | None = None
        self.datapath: DataPath | None = None
        self.port_up: dict[int, bool] = {}
        self.unconfigured_drops = 0

    def commit(self, program: Program, state: ProgramState | None = None) -> ProgramState:
        """Make ``program`` the running program, with fresh state unless one is given."""
        with self.lock:
            if state is None:
                state = ProgramState.build(program)
            state.port_up = self.port_up
            state.table_hooks.clear()  # hooks belong to the data path built below
            datapath: DataPath
            if program.name == "mrc_switch":
                datapath = MrcDataPath(state)
            elif program.name == "ocs":
                datapath = OcsDataPath(state)
            else:
                raise ValueError(f"no data path for program {program.name}")
            for port, up in self.port_up.items():
                datapath.port_status_changed(port, up)
            self.program, self.state, self.datapath = program, state, datapath
            return state

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        """Parser, ingress, then egress at enqueue time; returns the packets to enqueue.

        ``qdepth(port, priority)`` gives the (packets, bytes) queued on that port+priority;
        egress decisions (ECN, trimming) compare the bytes with the port's byte thresholds;
        the packet count is v1model's enq_qdepth (the max_qdepth register).
        Drops of every kind are counted inside and return [].
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

    def _unconfigured(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        self.unconfigured_drops += 1
        return []

    def set_port_oper_status(self, port: int, up: bool) -> None:
        """Record the physical/admin state of ``port`` (mrc_switch: the port_down register and
        the watch ports of selector group members)."""
        with self.lock:
            self.port_up[port] = up
            if self.datapath is not None:
                self.datapath.port_status_changed(port, up)

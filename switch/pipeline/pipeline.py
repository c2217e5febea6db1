"""Pipeline: the object a switch process feeds frames into.

It holds the currently committed program (none until a P4Runtime client pushed a
ForwardingPipelineConfig) and forwards ``process`` calls to it under a lock shared with the
P4Runtime writers, so one data-plane thread and any number of control-plane threads can use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

QDepthFn = Callable[[int, int], tuple[int, int]]
"""qdepth(egress_port, priority) -> (packets, bytes) queued now, not counting this packet."""


@dataclass(slots=True)
class EgressPacket:
    """One packet the traffic manager should enqueue on ``port`` at ``priority`` (0..7)."""

    port: int
    priority: int
    data: bytes
    trimmed: bool = False
    ecn_marked: bool = False


class Pipeline:
    """The switch's P4 pipeline; thread-safe for one data-plane thread plus P4Runtime writers."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.unconfigured_drops = 0
        self._port_up: dict[int, bool] = {}

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        """Parser, ingress, then egress at enqueue time; returns the packets to enqueue."""
        with self.lock:
            self.unconfigured_drops += 1
            return []

    def count_tm_drop(self, port: int, priority: int, nbytes: int) -> None:
        """Count a traffic-manager tail drop on (port, priority) in the program's counters."""

    def set_port_oper_status(self, port: int, up: bool) -> None:
        """Record the physical/admin state of ``port`` (the program's port-status register)."""
        with self.lock:
            self._port_up[port] = up

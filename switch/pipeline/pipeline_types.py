"""Types shared by the Pipeline and the program data paths."""

from __future__ import annotations

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


FailedFn = Callable[[int], None]
"""failed(ingress_port): the pipeline could not handle one frame from that port (counted)."""

EgressTuple = tuple[int, int, bytes, bool, bool]
"""An EgressPacket's fields in order (port, priority, data, trimmed, ecn_marked): the batch
path's form, built without an object per packet."""

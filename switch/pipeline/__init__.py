"""The embedded target's pipeline: p4c's BMv2 JSON of a program, run by the p4json engine
(switch/p4json; in C where the program allows it).

Public API (used by the switch process, see docs/switch.md):
``Pipeline`` (one per switch process) and ``EgressPacket``.
"""

from switch.pipeline.pipeline import Pipeline, ProcessFn
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn

__all__ = ["EgressPacket", "Pipeline", "ProcessFn", "QDepthFn"]

"""The embedded target's pipeline: the P4 programs in p4/ executed in Python.

Public API (used by the switch process, see docs/switch.md):
``Pipeline`` (one per switch process) and ``EgressPacket``.
"""

from switch.pipeline.pipeline import Pipeline, ProcessFn
from switch.pipeline.pipeline_types import EgressPacket, QDepthFn

__all__ = ["EgressPacket", "Pipeline", "ProcessFn", "QDepthFn"]

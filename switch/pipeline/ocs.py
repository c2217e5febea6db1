"""Data path of p4/ocs.p4: a port cross-connect of opaque frames.

The optical switch forwards any frame (it never parses): ``connect(port)`` sends it out of
``port``, ``dark`` drops it and counts it in ``dark_drops[in_port]`` (the controller sets it
while the port's circuit is being reconfigured), ``drop`` (the default, a port without an
entry) drops it. No timing lives here: the controller waits out the reconfiguration delay
between its dark and connect writes (docs/switch.md).
"""

from __future__ import annotations

from switch.pipeline.pipeline_types import EgressPacket, QDepthFn
from switch.pipeline.state import ProgramState

DROP_PORT = 511  # v1model: egress_spec 511 drops at the end of ingress


class OcsDataPath:
    def __init__(self, state: ProgramState) -> None:
        p = state.program
        self.state = state
        self.xconnect = state.table("OcsIngress.cross_connect")
        self.rx = state.counter("OcsIngress.rx_port")
        self.dark_drops = state.counter("OcsIngress.dark_drops")
        self.tx = state.counter("OcsEgress.tx_port")
        self.a_connect = p.id("OcsIngress.connect")
        self.a_dark = p.id("OcsIngress.dark")

    def port_status_changed(self, port: int, up: bool) -> None:
        """Light either passes or not; the OCS model has no port-status state."""

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        n = len(frame)
        self.rx.count(ingress_port, n)
        entry = self.xconnect.entries.get((ingress_port,))
        act = entry.action if entry is not None and entry.action else self.xconnect.default
        aid = act.action_id
        if aid == self.a_connect:
            port = act.params[0]
            if port == DROP_PORT:
                return []
            self.tx.count(port, n)
            return [EgressPacket(port, 0, frame)]
        if aid == self.a_dark:
            self.dark_drops.count(ingress_port, n)
        return []

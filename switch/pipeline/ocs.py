"""Data path of p4/ocs.p4: a port cross-connect with dark periods during reconfiguration.

The optical switch forwards any frame (it never parses). A control-plane write to
OcsIngress.cross_connect makes every port it touches (the input port, the old and the new
output port) dark until now + reconfig_delay_us[0]: the embedded target's model of the
mirrors moving (docs/switch.md).
"""

from __future__ import annotations

from collections.abc import Callable

from switch.pipeline.pipeline_types import EgressPacket, QDepthFn
from switch.pipeline.state import Entry, ProgramState, TableState


class OcsDataPath:
    def __init__(self, state: ProgramState, clock: Callable[[], float]) -> None:
        p = state.program
        self.state = state
        self.clock = clock
        self.xconnect = state.table("OcsIngress.cross_connect")
        self.rx = state.counter("OcsIngress.rx_port")
        self.dark_drops = state.counter("OcsIngress.dark_drops")
        self.tx = state.counter("OcsEgress.tx_port")
        self.dark_until = state.register("OcsIngress.dark_until")
        self.delay_us = state.register("OcsIngress.reconfig_delay_us")
        self.a_connect = p.id("OcsIngress.connect")
        state.table_hooks.append(self._on_write)

    def _on_write(self, table: TableState, old: Entry | None, new: Entry | None) -> None:
        if table is not self.xconnect:
            return
        until = int(self.clock() * 1e6) + self.delay_us.read(0)
        ports: set[int] = set()
        for e in (old, new):
            if e is None:
                continue
            ports.add(int(e.key[0]))  # type: ignore[call-overload]
            if e.action is not None and e.action.action_id == self.a_connect:
                ports.add(e.action.params[0])
        for port in ports:
            if until > self.dark_until.read(port):
                self.dark_until.write(port, until)

    def port_status_changed(self, port: int, up: bool) -> None:
        """Light either passes or not; the OCS model has no port-status state."""

    def process(
        self, frame: bytes, ingress_port: int, now: float, qdepth: QDepthFn
    ) -> list[EgressPacket]:
        n = len(frame)
        self.rx.count(ingress_port, n)
        now_us = int(now * 1e6)
        if now_us < self.dark_until.read(ingress_port):
            self.dark_drops.count(ingress_port, n)
            return []
        entry = self.xconnect.entries.get((ingress_port,))
        act = entry.action if entry is not None and entry.action else self.xconnect.default
        if act.action_id != self.a_connect:
            return []
        port = act.params[0]
        if now_us < self.dark_until.read(port):
            self.dark_drops.count(ingress_port, n)
            return []
        self.tx.count(port, n)
        return [EgressPacket(port, 0, frame)]

"""A host of the simulated fabric: the agent's real transport core and framer, on the
scheduler's clock. Frames leave through the fabric's host port (shaped at the switch, as in
the emulation) and arrive as bytes, decoded by the same Framer the agent uses on its veths.

The agent process (hosts/agent/agent.py) adds sockets, the controller link, apps and logs
around the same two objects; here the workload drives the core directly (mrcnet.sim.workload).
"""

from __future__ import annotations

from typing import Any

from hosts.agent.config import AgentConfig, parse_config
from hosts.agent.corecfg import build_core
from hosts.agent.framing import Framer
from hosts.transport import HostCore
from hosts.transport.types import Event as CoreEvent
from mrcnet.fabric.plan import FabricPlan
from mrcnet.sim.events import Event, Scheduler
from mrcnet.sim.fabric import SimFabric
from topologies.model import PathMode


def agent_config(plan: FabricPlan, host: str, mode: PathMode, window: int,
                 core: dict[str, Any] | None = None) -> AgentConfig:
    """The configuration ``mrcnet up`` gives the agent of ``host`` (addresses, EV mode, MTU,
    fixed window), parsed by the agent's own parser; no sockets, apps or controller."""
    h = plan.host(host)
    return parse_config({
        "name": host,
        "ports": [{"ifname": p.ifname, "mac": p.mac, "gid": p.gid,
                   "neighbor_mac": p.neighbor_mac} for p in h.ports],
        "ev_mode": mode.value,
        "srv6_templates": h.srv6_templates,
        "mtu": plan.topo.fabric.mtu,
        "cc_window": window,
        "core": dict(core or {}),
    })


class SimHost:
    """One host: ``core`` is the real HostCore; ``events`` collects what it reports, with
    the simulated time it reported it."""

    def __init__(self, name: str, fabric: SimFabric, config: AgentConfig) -> None:
        self.name = name
        self.fabric = fabric
        self.sched: Scheduler = fabric.sched
        self.config = config
        self.core: HostCore = build_core(config)
        self.framer = Framer(config)
        self.events: list[tuple[float, CoreEvent]] = []  # (when, what the core reported)
        self.tx_frames = 0
        self.tx_unencodable = 0
        self.rx_frames = 0
        self._timer: Event | None = None
        self._pumping = False
        for port in range(len(config.ports)):
            fabric.attach(name, port, self)

    def receive(self, port: int, frame: bytes) -> None:
        """A frame reached NIC port ``port`` now."""
        self.rx_frames += 1
        now = self.sched.now
        got = self.framer.decode(memoryview(frame), port, now)
        if got is not None:
            self.core.receive(got[0], got[1], now)
        self.pump()

    def pump(self) -> None:
        """Send what the core has ready, collect its events, and wake at its next timer.
        Call after posting work to the core."""
        if self._pumping:  # an event handler posted more work: the running pump takes it
            return
        self._pumping = True
        try:
            now = self.sched.now
            core, framer, send, name = self.core, self.framer, self.fabric.send, self.name
            while True:
                packets = core.packets_to_send(now)
                for tx in packets:
                    n = framer.encode(tx)
                    if n == 0:
                        self.tx_unencodable += 1
                        continue
                    self.tx_frames += 1
                    send(name, tx.port, bytes(framer.tx_buf[:n]))
                ev = core.next_event()
                while ev is not None:
                    self.events.append((now, ev))
                    ev = core.next_event()
                if not packets:
                    break
        finally:
            self._pumping = False
        self._arm()

    def _arm(self) -> None:
        t = self.core.get_timer()
        timer = self._timer
        if timer is not None and timer.alive:
            if t is not None and timer.when <= t:
                return
            timer.cancel()
            self._timer = None
        if t is not None:
            self._timer = self.sched.at(t, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.core.handle_timer(self.sched.now)
        self.pump()

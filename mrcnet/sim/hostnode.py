"""A host of the simulated fabric: the agent's real transport core and framer, on the
scheduler's clock. Frames leave through the fabric's host port (shaped at the switch, as in
the emulation) and arrive as bytes, decoded by the same Framer the agent uses on its veths.

The agent process (hosts/agent/agent.py) adds sockets, the controller link, apps and logs
around the same two objects; here the controller's profiles are installed by
mrcnet/sim/control.py and the workload's jobs (mrcnet/sim/workload.py) drive the core
directly, handed the core's events as the agent's handlers are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hosts.agent.config import AgentConfig, parse_config
from hosts.agent.corecfg import build_core
from hosts.agent.framing import Framer
from hosts.agent.router import LOCAL, CircuitRouter
from hosts.transport import HostCore
from hosts.transport.types import Event as CoreEvent
from mrcnet.fabric.plan import FabricPlan
from mrcnet.fabric.runparams import agent_transport
from mrcnet.sim.events import Event, Scheduler
from mrcnet.sim.fabric import SimFabric
from mrcnet.sim.switchnode import SimSwitch
from topologies.model import PathMode

EventHandler = Callable[[CoreEvent], None]


def agent_config(plan: FabricPlan, host: str, mode: PathMode, window: int,
                 core: dict[str, Any] | None = None) -> AgentConfig:
    """The configuration ``mrcnet up`` gives the agent of ``host`` (addresses, EV mode, MTU,
    fixed window, core knobs), parsed by the agent's own parser; no sockets, apps or
    controller."""
    return parse_config(agent_transport(plan, host, mode, window, core or {}))


class SimHost:
    """One host: ``core`` is the real HostCore; ``handler`` (the workload's) gets every event
    the core reports, at the simulated time it reports it."""

    def __init__(self, name: str, fabric: SimFabric, config: AgentConfig) -> None:
        self.name = name
        self.fabric = fabric
        self.sched: Scheduler = fabric.sched
        self.config = config
        self.core: HostCore = build_core(config)
        self.framer = Framer(config)
        # A GPU of a circuit fabric forwards multi-hop traffic with the agent's router (as
        # the agent does, only with more than one port); None elsewhere.
        self.router: CircuitRouter | None = (
            CircuitRouter(config.router.rank, config.router.gids, len(config.ports),
                          config.router.buckets)
            if config.router is not None and len(config.ports) > 1 else None)
        self.handler: EventHandler | None = None
        self.observers: list[EventHandler] = []  # see every event after the handler (records)
        self.tx_frames = 0
        self.tx_unencodable = 0
        self.rx_frames = 0
        self.rx_undecodable = 0
        self._timer: Event | None = None
        self._pumping = False
        self._uplinks: list[tuple[SimSwitch, int]] = []
        for port in range(len(config.ports)):
            fabric.attach(name, port, self)
            self._uplinks.append(fabric.uplink(name, port))

    def receive(self, port: int, frame: bytes) -> None:
        """A frame reached NIC port ``port`` now."""
        self.rx_frames += 1
        now = self.sched.now
        view = memoryview(frame)
        router = self.router
        if router is not None:
            buf = bytearray(frame)  # the router decrements the hop limit in place
            out = router.forward_port(memoryview(buf), len(buf))
            if out != LOCAL:
                if out >= 0:  # transit: out again at once (the agent forwards per batch)
                    sw, sw_port = self._uplinks[out]
                    sw.receive(sw_port, bytes(buf))
                return  # a drop: the router counted it
        got = self.framer.decode(view, port, now)
        if got is None:
            self.rx_undecodable += 1
        else:
            self.core.receive(got[0], got[1], now)
        self.pump()

    def pump(self) -> None:
        """Send what the core has ready, hand its events to the handler (which may post more
        work), until neither is left; then wake at the core's next timer. Call after posting
        work to the core."""
        if self._pumping:  # a handler posted more work: the running pump takes it
            return
        self._pumping = True
        try:
            now = self.sched.now
            core, framer, uplinks = self.core, self.framer, self._uplinks
            encode, encode_into, view = framer.encode, framer.encode_into, framer.tx_view
            handler = self.handler
            observers = self.observers
            router = self.router
            while True:
                packets = core.packets_to_send(now)
                for tx in packets:
                    if router is None:
                        out = tx.port
                        n = encode(tx)
                    else:  # the GPU's route picks the port (first hop of the EV's path)
                        out = router.tx_port(tx.dst_gid, tx.ev, tx.port)
                        n = encode_into(tx, view, out)
                    if n == 0:
                        self.tx_unencodable += 1
                        continue
                    self.tx_frames += 1
                    sw, sw_port = uplinks[out]
                    sw.receive(sw_port, bytes(view[:n]))
                ev = core.next_event()
                if not packets and ev is None:
                    break
                while ev is not None:
                    if handler is not None:
                        handler(ev)
                    for observe in observers:
                        observe(ev)
                    ev = core.next_event()
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

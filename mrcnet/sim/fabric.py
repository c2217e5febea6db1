"""A packet fabric of simulated switches, built from the same run plan (mrcnet.fabric.plan),
switch tables (topologies.routes) and P4Runtime writes (controller.programming) as
``mrcnet up``: the link specs each switch process would be started with, the entries the
controller would write. Host ports end in whatever the caller attaches (``attach``).

The switch program's BMv2 JSON is parsed once and every switch's engine is built from the
parsed program (the switch process parses its own copy; here 200 switches would parse the
same text 200 times).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from common.p4schema import PROGRAMS
from common.p4schema.model import Program
from controller.programming import apply, program_for
from mrcnet.fabric.plan import FabricPlan, make_plan
from mrcnet.sim.events import Scheduler
from mrcnet.sim.switchnode import FrameReceiver, InProcessWriter, SimSwitch
from switch.p4json import program as pm
from switch.p4json.engine import Engine
from switch.pipeline import Pipeline
from switch.pipeline.binding import bind
from switch.pipeline.pipeline import Prepared
from switch.programs import builtin_json
from switch.traffic import TrafficManager, parse_link_spec
from topologies.model import FabricKind, NodeKind, PathMode, Topology
from topologies.routes import SwitchTables, switch_tables

SWITCH_PROGRAM = "mrc_switch"
OCS_PROGRAM = "ocs"  # p4/ocs.p4: the circuit cross-connect


class SimError(ValueError):
    """The topology or request cannot be simulated (said why)."""


@dataclass
class SimFabric:
    topo: Topology
    mode: PathMode
    plan: FabricPlan
    sched: Scheduler
    switches: dict[str, SimSwitch]
    program: Program  # the packet switches' P4Info (what the controller's writes are built from)
    tables: dict[str, SwitchTables]  # what the controller wrote into each switch
    # (host, host port) -> (its switch, that switch's port)
    uplinks: dict[tuple[str, int], tuple[SimSwitch, int]] = field(default_factory=dict)

    def attach(self, host: str, port: int, receiver: FrameReceiver, as_port: int | None = None
               ) -> None:
        """Frames the fabric delivers to ``host``'s NIC port ``port`` go to ``receiver``
        (``receive(as_port or port, frame)``)."""
        sw, sw_port = self.uplink(host, port)
        sw.connect(sw_port, receiver, port if as_port is None else as_port)

    def send(self, host: str, port: int, frame: bytes) -> None:
        """``host`` puts ``frame`` on its NIC port ``port`` now. The host side of the link is
        shaped at the switch (its ingress shaper), as in the emulation, so the frame reaches
        the switch's port at once and waits there for the wire."""
        sw, sw_port = self.uplink(host, port)
        sw.receive(sw_port, frame)

    def writer(self, switch: str) -> InProcessWriter:
        """A P4Runtime session on ``switch`` (the controller's, minus the channel)."""
        sw = self.switches[switch]
        return InProcessWriter(sw.pipeline, sw.pipeline.program or self.program)

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Cut (or restore) every link between nodes ``a`` and ``b``, at both switch ends
        (the data plane only; mrcnet/sim/control.py goes through the controller's logic)."""
        found = False
        for link in self.topo.links:
            if {link.a.node, link.b.node} != {a, b}:
                continue
            found = True
            for end in (link.a, link.b):
                sw = self.switches.get(end.node)
                if sw is not None:
                    sw.set_port(end.port, up)
        if not found:
            raise SimError(f"no link between {a} and {b} in {self.topo.name}")

    def uplink(self, host: str, port: int) -> tuple[SimSwitch, int]:
        """(switch, switch port) at the far end of ``host``'s NIC port ``port``."""
        try:
            return self.uplinks[(host, port)]
        except KeyError:
            raise SimError(f"{host} has no port {port} in {self.topo.name}") from None


def _pipeline(source: bytes, parsed: pm.Program, program: Program, sched: Scheduler
              ) -> Pipeline:
    """A pipeline running ``program`` with an engine of its own built from ``parsed`` (its
    tables, registers and counters are this switch's; the parse is shared)."""
    engine = Engine(parsed, clock=sched.clock, origin=0.0, name=program.name, backend="auto")
    pipeline = Pipeline()
    pipeline.commit(program, prepared=Prepared(program, engine, bind(program, engine), source))
    return pipeline


def build_fabric(topo: Topology, mode: PathMode | None = None, sched: Scheduler | None = None,
                 seed: int = 1) -> SimFabric:
    """Every switch programmed and cabled; raises SimError for what is not simulated.

    A packet fabric's switches run ``mrc_switch`` with the controller's tables; a circuit
    fabric's OCS runs ``ocs`` with no cross-connect yet (every port drops until the
    collective's first circuits are written, as in the emulation)."""
    mode = mode or topo.fabric.path_mode
    sched = sched or Scheduler()
    plan = make_plan(topo, mode, prefix="s")
    tables = switch_tables(topo, mode) if topo.fabric.kind == FabricKind.PACKET else {}
    parsed: dict[str, tuple[bytes, pm.Program]] = {}
    ocs_nodes = {n.name for n in topo.nodes_of(NodeKind.OCS)}
    switches: dict[str, SimSwitch] = {}
    for sp in plan.switches:
        name = OCS_PROGRAM if sp.name in ocs_nodes else SWITCH_PROGRAM
        if name not in parsed:
            source = builtin_json(name)
            parsed[name] = (source, pm.load_program(source))
        source, prog = parsed[name]
        program = PROGRAMS[name]
        pipeline = _pipeline(source, prog, program, sched)
        # Seeded per switch by name: loss draws do not depend on how many switches exist.
        tm = TrafficManager(rng=random.Random(f"{seed}:{sp.name}"))
        for port in sorted(sp.egress):
            ingress = parse_link_spec(sp.ingress[port]) if port in sp.ingress else None
            tm.add_port(port, parse_link_spec(sp.egress[port]), ingress)
            pipeline.set_port_oper_status(port, True)
        if sp.name in tables:
            apply(InProcessWriter(pipeline, program), program_for(tables[sp.name]))
        switches[sp.name] = SimSwitch(sp.name, sched, pipeline, tm)
    fabric = SimFabric(topo, mode, plan, sched, switches, PROGRAMS[SWITCH_PROGRAM], tables)
    endpoints = (NodeKind.HOST, NodeKind.GPU)
    for link in topo.links:
        a, b = link.a, link.b
        a_sw, b_sw = switches.get(a.node), switches.get(b.node)
        if a_sw is not None and b_sw is not None:
            a_sw.connect(a.port, b_sw, b.port)
            b_sw.connect(b.port, a_sw, a.port)
            continue
        sw_end, host_end = (a, b) if a_sw is not None else (b, a)
        sw = switches.get(sw_end.node)
        if sw is None or topo.node(host_end.node).kind not in endpoints:
            raise SimError(f"link {link}: expected a switch and a host")
        fabric.uplinks[(host_end.node, host_end.port)] = (sw, sw_end.port)
    return fabric

"""The optical circuit switch of a simulated circuit fabric, as the controller drives it.

The OCS node is a simulated switch running p4/ocs.p4 (mrcnet/sim/fabric.py): a frame entering
a port leaves on the port its cross_connect entry names, a port whose entry is the dark action
drops it and counts it in ``OcsIngress.dark_drops``, a port without an entry drops it.
``SimOcs`` is the controller's southbound for it (controller.fabric.FabricBackend): the same
P4Runtime updates the controller's ``SwitchFabric`` writes (controller/circuit_writes.py
``dark_updates``, ``circuit_updates``), applied in process, and the same read-back.

``reconfigure`` is ``FabricState.reconfigure`` on the simulated clock: the input ports whose
circuit changes go dark now, the new circuits are written ``dark_s`` simulated seconds later
(the controller waits the dark time out with a sleep; the simulator schedules the rest).
"""

from __future__ import annotations

from collections.abc import Callable

from common.proto import mrc_ctl_pb2 as pb
from common.proto.p4.v1 import p4runtime_pb2
from controller.circuit_writes import (
    CONNECT,
    CROSS_CONNECT,
    circuit_updates,
    connects_of,
    dark_updates,
)
from controller.fabric import FabricState
from mrcnet.sim.fabric import SimError, SimFabric
from switch.p4runtime.readwrite import read_entities
from topologies.model import Link, NodeKind

DARK_DROPS = "OcsIngress.dark_drops"


class SimOcs:
    """FabricBackend of a simulated circuit fabric: the one OCS's cross-connects."""

    def __init__(self, fabric: SimFabric) -> None:
        ocs = [n.name for n in fabric.topo.nodes_of(NodeKind.OCS)]
        if len(ocs) != 1:
            raise SimError(f"{fabric.topo.name}: a circuit fabric has one OCS, found {len(ocs)}")
        self.fabric = fabric
        self.name = ocs[0]
        self.switch = fabric.switches[self.name]
        self.writer = fabric.writer(self.name)
        self._xc: dict[int, int] = {}  # the entries written: input -> output, -1 dark
        self.counters = {"circuit_writes": 0, "dark_writes": 0, "link_changes": 0}

    def set_link_state(self, link: Link, up: bool) -> None:
        for end in (link.a, link.b):
            if end.node == self.name:
                self.switch.set_port(end.port, up)
        self.counters["link_changes"] += 1

    def darken(self, ports: list[int]) -> None:
        updates = dark_updates(self.writer, self._xc, ports)
        if updates:
            self.writer.write(updates)
        for port in ports:
            self._xc[port] = -1
        self.counters["dark_writes"] += 1

    def apply_circuits(self, cross_connects: dict[int, int]) -> None:
        updates = circuit_updates(self.writer, self._xc, cross_connects)
        if updates:
            self.writer.write(updates)
        self._xc = dict(cross_connects)
        self.counters["circuit_writes"] += 1

    def _read(self, entity: p4runtime_pb2.Entity) -> list[p4runtime_pb2.Entity]:
        return [e for r in read_entities(self.switch.pipeline, [entity]) for e in r.entities]

    def read_circuits(self) -> dict[int, int]:
        """The cross-connects read back from the OCS pipeline (as over P4Runtime)."""
        program = self.writer.program
        found = self._read(p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(
            table_id=program.id(CROSS_CONNECT))))
        return connects_of(program.id(CONNECT), [e.table_entry for e in found])

    def dark_drops(self) -> int:
        """Frames the OCS program dropped on dark ports so far (its P4 counter, every port)."""
        found = self._read(p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
            counter_id=self.writer.program.id(DARK_DROPS))))
        return sum(e.counter_entry.data.packet_count for e in found)

    def stats(self) -> dict[str, int]:
        return {f"switch_{k}": v for k, v in self.counters.items()}


def reconfigure(state: FabricState, backend: SimOcs, circuits: list[pb.Circuit], dark_s: float,
                done: Callable[[], None]) -> bool:
    """Apply ``circuits`` through the controller's ``state``: with ``dark_s`` > 0 the changing
    input ports go dark now and the circuits are written ``dark_s`` later; ``done()`` runs
    when they are. Returns whether any port went dark."""
    _parsed, xc = state.check_circuits(circuits)
    old = state.cross_connects
    changed = sorted(p for p in set(xc) | set(old) if xc.get(p) != old.get(p))
    if dark_s > 0 and changed:
        backend.darken(changed)

        def finish() -> None:
            state.reconfigure(circuits)  # the dark ports are rewritten with the new circuits
            done()

        backend.fabric.sched.after(dark_s, finish)
        return True
    state.reconfigure(circuits)
    done()
    return False

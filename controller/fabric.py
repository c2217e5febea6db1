"""Fabric operations: topology view, link state, optical circuits.

The controller talks to switches through a ``FabricBackend``: ``SwitchFabric``
(controller/southbound.py) programs and operates real switches of any kind through their
drivers; ``InMemoryFabric`` only records the requested state (a controller started without
``--switches``, and unit tests). Requests are validated against the topology before the
backend sees them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from common.proto import mrc_ctl_pb2 as pb
from controller.errors import CtlError, ErrorKind, invalid, not_found
from topologies.addressing import host_gid, locator, mac, usid_of
from topologies.circuits import Circuit, CircuitError, cross_connects, parse_circuit
from topologies.model import FabricKind, Link, NodeKind, Topology
from topologies.paths import base_rtt


class BackendError(RuntimeError):
    """The backend could not apply a change (switch unreachable or refusing); nothing recorded."""


class FabricBackend(Protocol):
    def set_link_state(self, link: Link, up: bool) -> None: ...
    def apply_circuits(self, cross_connects: dict[int, int]) -> None: ...
    def darken(self, ports: list[int]) -> None: ...
    def read_circuits(self) -> dict[int, int]: ...
    def stats(self) -> dict[str, int]: ...


class InMemoryFabric:
    """Records link and circuit state; the default backend (and the one unit tests use)."""

    def __init__(self) -> None:
        self.link_changes = 0
        self.circuit_changes = 0
        self.cross_connects: dict[int, int] = {}
        self.dark: set[int] = set()

    def set_link_state(self, link: Link, up: bool) -> None:
        self.link_changes += 1

    def apply_circuits(self, cross_connects: dict[int, int]) -> None:
        self.cross_connects = dict(cross_connects)
        self.dark = set()
        self.circuit_changes += 1

    def darken(self, ports: list[int]) -> None:
        self.dark |= set(ports)
        for port in ports:
            self.cross_connects.pop(port, None)

    def read_circuits(self) -> dict[int, int]:
        return dict(self.cross_connects)

    def stats(self) -> dict[str, int]:
        return {
            "backend_link_changes": self.link_changes,
            "backend_circuit_changes": self.circuit_changes,
        }


class FabricState:
    """Link up/down and the current circuit set, validated against the topology."""

    def __init__(self, topo: Topology, backend: FabricBackend,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.topo = topo
        self.backend = backend
        self.sleep = sleep  # run-clock seconds (the dark time of a reconfiguration)
        self.link_up = {link.index: True for link in topo.links}
        self.circuits: list[Circuit] = []
        self.cross_connects: dict[int, int] = {}
        self.circuit_generation = 0

    def find_link(self, ref: str) -> Link:
        ref = ref.strip()
        if ref.isdecimal():
            index = int(ref)
            if index < len(self.topo.links):
                return self.topo.links[index]
            raise not_found(f"no link {index} (links 0..{len(self.topo.links) - 1})")
        name, _, port = ref.partition(":")
        if not port.isdecimal():
            raise invalid(f"link {ref!r} must be a link id or 'node:port'")
        if not self.topo.has_node(name):
            raise not_found(f"no node {name!r} in topology {self.topo.name}")
        link = self.topo.link_at(name, int(port))
        if link is None:
            raise not_found(f"{name} has no link on port {port}")
        return link

    def set_link(self, ref: str, up: bool) -> pb.LinkView:
        link = self.find_link(ref)
        try:
            self.backend.set_link_state(link, up)
        except BackendError as exc:
            raise CtlError(ErrorKind.UNAVAILABLE, str(exc)) from None
        self.link_up[link.index] = up
        return self.link_view(link)

    def link_view(self, link: Link) -> pb.LinkView:
        p = link.params
        return pb.LinkView(
            id=link.index,
            a=str(link.a),
            b=str(link.b),
            rate_bps=p.rate_bps,
            delay_ns=round(p.delay_s * 1e9),
            queue_packets=p.queue_packets,
            queue_bytes=p.queue_bytes,
            loss=p.loss,
            up=self.link_up[link.index],
        )

    def check_circuits(self, circuits: list[pb.Circuit],
                       where: str = "") -> tuple[list[Circuit], dict[int, int]]:
        """Parsed circuits and their cross-connects; CtlError INVALID saying what is wrong."""
        if self.topo.fabric.kind != FabricKind.CIRCUIT:
            raise invalid(f"topology {self.topo.name} has no optical circuit switch")
        try:
            parsed = [parse_circuit(f"{c.src} -> {c.dst}") for c in circuits]
            return parsed, cross_connects(self.topo, parsed)
        except CircuitError as exc:
            raise invalid(f"{where}: {exc}" if where else str(exc)) from None

    def reconfigure(self, circuits: list[pb.Circuit], dark_s: float = 0.0) -> pb.CircuitState:
        """Apply a circuit set. With ``dark_s`` > 0 the input ports whose circuit changes
        first go dark (frames dropped and counted by the OCS program) for ``dark_s`` seconds
        of the run clock, then the new circuits are written: the mirrors moving."""
        parsed, xc = self.check_circuits(circuits)
        changed = sorted(p for p in set(xc) | set(self.cross_connects)
                         if xc.get(p) != self.cross_connects.get(p))
        try:
            if dark_s > 0 and changed:
                self.backend.darken(changed)
                self.sleep(dark_s)
            self.backend.apply_circuits(xc)
        except BackendError as exc:
            raise CtlError(ErrorKind.UNAVAILABLE, str(exc)) from None
        self.circuits = parsed
        self.cross_connects = xc
        self.circuit_generation += 1
        return self.circuit_state()

    def read_circuits(self) -> dict[int, int]:
        """The cross-connects the switch reports (P4Runtime read-back on real switches)."""
        try:
            return self.backend.read_circuits()
        except BackendError as exc:
            raise CtlError(ErrorKind.UNAVAILABLE, str(exc)) from None

    def circuit_state(self) -> pb.CircuitState:
        state = pb.CircuitState(generation=self.circuit_generation)
        state.circuits.extend(pb.Circuit(src=str(c.src), dst=str(c.dst)) for c in self.circuits)
        state.cross_connects.extend(
            pb.CrossConnect(in_port=i, out_port=o) for i, o in self.cross_connects.items()
        )
        return state

    def view(self, registered_hosts: set[str]) -> pb.TopologyView:
        topo = self.topo
        view = pb.TopologyView(
            name=topo.name,
            kind=topo.fabric.kind.value,
            planes=topo.fabric.planes,
            path_mode=topo.fabric.path_mode.value,
            mtu=topo.fabric.mtu,
            base_rtt_ns=round(base_rtt(topo) * 1e9),
        )
        for node in topo.nodes:
            nv = view.nodes.add(
                name=node.name,
                kind=node.kind.value,
                plane=-1 if node.plane is None else node.plane,
                tier=-1 if node.tier is None else node.tier,
                agent_registered=node.name in registered_hosts,
            )
            if node.kind == NodeKind.SWITCH:
                nv.usid = usid_of(topo, node.name).usid
                nv.locator = str(locator(topo, node.name))
            for port in topo.ports(node.name):
                pv = nv.ports.add(
                    port=port, peer=str(topo.peer(node.name, port)), mac=mac(topo, node.name, port)
                )
                if node.kind in (NodeKind.HOST, NodeKind.GPU):
                    pv.gid = str(host_gid(topo, node.name, port))
        view.links.extend(self.link_view(link) for link in topo.links)
        return view

"""Optical circuits of a circuit (scale-up) fabric -> OCS cross-connect entries.

A circuit ``u:i -> v:j`` carries what GPU u transmits on its port i to the receiver of GPU v
port j: the OCS connects its port cabled to u:i (ingress) to its port cabled to v:j (egress).
A GPU port transmits into at most one circuit and receives from at most one, so every GPU has
out- and in-degree at most d (Harvest's degree constraint). Pure function of the topology.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from topologies.model import Endpoint, FabricKind, NodeKind, Topology


class CircuitError(ValueError):
    """A circuit set that the OCS cannot realise; the message names the offending circuit."""


@dataclass(frozen=True, slots=True)
class Circuit:
    src: Endpoint  # GPU port that transmits
    dst: Endpoint  # GPU port that receives

    def __str__(self) -> str:
        return f"{self.src} -> {self.dst}"


def parse_circuit(text: str) -> Circuit:
    """'g0:1 -> g3:0' -> Circuit."""
    parts = [p.strip() for p in text.split("->")]
    if len(parts) != 2:
        raise CircuitError(f"circuit {text!r} must be 'gpu:port -> gpu:port'")
    ends = []
    for part in parts:
        name, _, port = part.partition(":")
        if not name or not port.isdigit():
            raise CircuitError(f"circuit end {part!r} must be 'gpu:port'")
        ends.append(Endpoint(name, int(port)))
    return Circuit(ends[0], ends[1])


def ocs_name(topo: Topology) -> str:
    if topo.fabric.kind != FabricKind.CIRCUIT:
        raise CircuitError(f"topology {topo.name} is not a circuit fabric")
    return topo.nodes_of(NodeKind.OCS)[0].name


def cross_connects(topo: Topology, circuits: Iterable[Circuit]) -> dict[int, int]:
    """OCS ingress port -> egress port for ``circuits``; raises CircuitError on any conflict."""
    ocs = ocs_name(topo)
    out: dict[int, int] = {}
    receivers: dict[int, Circuit] = {}
    senders: dict[int, Circuit] = {}
    for circuit in circuits:
        ports = []
        for end in (circuit.src, circuit.dst):
            if not topo.has_node(end.node) or topo.node(end.node).kind != NodeKind.GPU:
                raise CircuitError(f"circuit {circuit}: {end.node!r} is not a GPU of {topo.name}")
            link = topo.link_at(end.node, end.port)
            if link is None:
                raise CircuitError(f"circuit {circuit}: GPU {end.node} has no port {end.port}")
            ports.append(topo.peer(end.node, end.port).port)
            assert topo.peer(end.node, end.port).node == ocs
        if circuit.src.node == circuit.dst.node:
            raise CircuitError(f"circuit {circuit}: a GPU cannot be connected to itself")
        ingress, egress = ports
        if ingress in senders:
            raise CircuitError(
                f"circuit {circuit}: {circuit.src} already transmits into {senders[ingress]}"
            )
        if egress in receivers:
            raise CircuitError(
                f"circuit {circuit}: {circuit.dst} already receives from {receivers[egress]}"
            )
        senders[ingress] = circuit
        receivers[egress] = circuit
        out[ingress] = egress
    return dict(sorted(out.items()))

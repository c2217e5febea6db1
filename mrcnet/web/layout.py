"""Where the page draws each node: the topology by tier and plane, or a photonic domain.

Packet fabrics: one column block per plane, side by side; in each block the switches of a
tier share a row, the highest tier on top; the hosts, which have a port in every plane, share
the bottom row across the whole width. Circuit fabrics: the GPUs on a circle around the OCS.
Coordinates are abstract units (the page scales the drawing to its window). Links keep their
index in the topology file, the id every snapshot uses.
"""

from __future__ import annotations

import math
from typing import Any

from topologies.model import NodeKind, Topology

SPACING = 60.0  # units between neighbours in a row
ROW = 150.0  # units between tiers
MARGIN = 40.0
GAP = 80.0  # between plane blocks


def _node(topo: Topology, name: str, x: float, y: float) -> dict[str, Any]:
    n = topo.node(name)
    return {"id": name, "kind": n.kind.value, "plane": n.plane, "tier": n.tier,
            "x": round(x, 1), "y": round(y, 1), "ports": sorted(topo.ports(name))}


def _links(topo: Topology) -> list[dict[str, Any]]:
    out = []
    for ln in topo.links:
        plane = next((topo.node(e.node).plane for e in (ln.a, ln.b)
                      if topo.node(e.node).plane is not None), None)
        if plane is None and topo.node(ln.a.node).kind in (NodeKind.HOST, NodeKind.GPU):
            plane = ln.a.port  # a host's port p is in plane p
        out.append({"i": ln.index, "a": ln.a.node, "ap": ln.a.port, "b": ln.b.node,
                    "bp": ln.b.port, "plane": plane, "rate": ln.params.rate_bps,
                    "qbytes": ln.params.queue_bytes})
    return out


def packet_layout(topo: Topology) -> dict[str, Any]:
    planes = topo.fabric.planes
    switches = topo.switches
    top = max((s.tier or 0 for s in switches), default=0)
    widths = []
    for p in range(planes):
        rows = [sum(1 for s in switches if s.plane == p and (s.tier or 0) == t)
                for t in range(top + 1)]
        widths.append(max([*rows, 1]) * SPACING)
    hosts = topo.nodes_of(NodeKind.HOST, NodeKind.GPU)
    total = max(sum(widths) + GAP * (planes - 1), len(hosts) * SPACING * 0.6)
    scale = total / max(1.0, sum(widths) + GAP * (planes - 1))
    row_h = max(ROW, total * 0.5 / (top + 2))  # about twice as wide as tall
    nodes = []
    x0 = MARGIN
    for p in range(planes):
        w = widths[p] * scale
        for t in range(top + 1):
            row = [s for s in switches if s.plane == p and (s.tier or 0) == t]
            for i, s in enumerate(row):
                x = x0 + (i + 0.5) * w / len(row)
                nodes.append(_node(topo, s.name, x, MARGIN + 20 + (top - t) * row_h))
        x0 += w + GAP * scale
    y_hosts = MARGIN + 20 + (top + 1) * row_h
    for i, h in enumerate(hosts):
        nodes.append(_node(topo, h.name, MARGIN + (i + 0.5) * total / len(hosts), y_hosts))
    return {"width": round(total + 2 * MARGIN, 1), "height": round(y_hosts + MARGIN, 1),
            "tiers": top + 1, "nodes": nodes}


def circuit_layout(topo: Topology) -> dict[str, Any]:
    gpus = topo.nodes_of(NodeKind.GPU, NodeKind.HOST)
    r = max(150.0, len(gpus) * SPACING / (2 * math.pi))
    c = r + MARGIN + 30
    nodes = []
    for i, g in enumerate(gpus):
        a = 2 * math.pi * i / max(1, len(gpus)) - math.pi / 2
        nodes.append(_node(topo, g.name, c + r * math.cos(a), c + r * math.sin(a)))
    for o in topo.nodes_of(NodeKind.OCS, NodeKind.SWITCH):
        nodes.append(_node(topo, o.name, c, c))
    return {"width": round(2 * c, 1), "height": round(2 * c, 1), "nodes": nodes}


def layout(topo: Topology) -> dict[str, Any]:
    """The page's static model: nodes with positions, links by index, the drawing's size."""
    circuit = topo.fabric.kind.value == "circuit"
    out = circuit_layout(topo) if circuit else packet_layout(topo)
    nodes = out.pop("nodes")
    return {"name": topo.name, "kind": topo.fabric.kind.value, "planes": topo.fabric.planes,
            "nodes": nodes, "links": _links(topo), **out}

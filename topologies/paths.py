"""Shortest-path structure of each plane: next hops per (switch, destination) and the base RTT.

Hosts never forward: the breadth-first search runs from the destination through switches only.
The next hops of switch S toward D are the neighbours one hop closer to D, ordered by the
neighbour's declared position (so that they line up with uSID indexes, see addressing.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import cache

from topologies.model import NodeKind, Topology


@dataclass(frozen=True, slots=True)
class Hop:
    """Leave ``switch`` through ``port`` towards neighbour ``peer`` (arriving on ``peer_port``)."""

    port: int
    peer: str
    peer_port: int


def _switch_order(topo: Topology, name: str) -> tuple[int, int]:
    node = topo.node(name)
    return (0 if node.kind == NodeKind.HOST else 1, node.order)


@cache
def next_hops(topo: Topology, plane: int, dst: str) -> dict[str, tuple[Hop, ...]]:
    """For every switch of ``plane``: its shortest-path next hops toward node ``dst``.

    ``dst`` is a switch of the plane or a host (reached through its NIC port ``plane``).
    Switches that cannot reach ``dst`` are absent.
    """
    members = {s.name for s in topo.switches_in_plane(plane)}
    dist: dict[str, int] = {dst: 0}
    queue = deque([dst])
    while queue:
        cur = queue.popleft()
        if cur != dst and cur not in members:
            continue
        for port in topo.ports(cur):
            if cur == dst and topo.node(dst).kind == NodeKind.HOST and port != plane:
                continue
            peer = topo.peer(cur, port).node
            if peer in members and peer not in dist:
                dist[peer] = dist[cur] + 1
                queue.append(peer)
    result: dict[str, tuple[Hop, ...]] = {}
    for sw in members:
        if sw not in dist or sw == dst:
            continue
        hops = []
        for port in topo.ports(sw):
            far = topo.peer(sw, port)
            if far.node == dst and topo.node(dst).kind == NodeKind.HOST and far.port != plane:
                continue
            if dist.get(far.node) == dist[sw] - 1:
                hops.append(Hop(port, far.node, far.port))
        hops.sort(key=lambda h: (_switch_order(topo, h.peer), h.port))
        result[sw] = tuple(hops)
    return result


def attached_switch(topo: Topology, host: str, plane: int) -> tuple[str, int]:
    """The (switch, switch port) NIC port ``plane`` of ``host`` is cabled to."""
    far = topo.peer(host, plane)
    return far.node, far.port


def walk(topo: Topology, plane: int, src: str, dst: str, choose: int = 0) -> list[str]:
    """One shortest path src -> dst (host names), taking next hop ``choose % n`` at each switch."""
    sw, _ = attached_switch(topo, src, plane)
    path = [src, sw]
    table = next_hops(topo, plane, dst)
    while sw != dst:
        hops = table[sw]
        hop = hops[choose % len(hops)]
        sw = hop.peer
        path.append(sw)
    return path


def link_cost(topo: Topology, a: str, port: int) -> float:
    """Round-trip contribution of one link: 2 x delay + serialisation of an MTU and an ACK."""
    link = topo.link_at(a, port)
    assert link is not None
    p = link.params
    serial = (topo.fabric.mtu + 64) * 8 / p.rate_bps if p.rate_bps > 0 else 0.0
    return 2 * p.delay_s + serial


@cache
def base_rtt(topo: Topology) -> float:
    """Unloaded RTT of an MTU packet on the longest shortest host-to-host path (seconds).

    ``fabric.base_rtt`` in the file overrides it. Circuit fabrics: two GPU links.
    """
    if topo.fabric.base_rtt_s is not None:
        return topo.fabric.base_rtt_s
    if not topo.hosts:
        return max(2 * link_cost(topo, link.a.node, link.a.port) for link in topo.links)
    return farthest_pair(topo)[2]


@cache
def farthest_pair(topo: Topology) -> tuple[str, str, float]:
    """(source, destination, RTT): the host pair whose longest shortest path has the largest
    unloaded RTT of an MTU packet (the first such pair in declaration order)."""
    hosts = topo.hosts
    best = ("", "", -1.0)
    for plane in range(topo.fabric.planes):
        for dst in hosts:
            table = next_hops(topo, plane, dst.name)
            # longest cost over all shortest paths from each switch to dst, by memoised recursion
            memo: dict[str, float] = {}

            def cost(
                sw: str,
                table: dict[str, tuple[Hop, ...]] = table,
                memo: dict[str, float] = memo,
                dst: str = dst.name,
            ) -> float:
                if sw == dst:
                    return 0.0
                if sw not in memo:
                    memo[sw] = max(link_cost(topo, sw, h.port) + cost(h.peer) for h in table[sw])
                return memo[sw]

            for src in hosts:
                if src.name == dst.name:
                    continue
                sw, _ = attached_switch(topo, src.name, plane)
                rtt = link_cost(topo, src.name, plane) + cost(sw)
                if rtt > best[2]:
                    best = (src.name, dst.name, rtt)
    return best

"""The address plan: pure functions of a topology (definitions in docs/topologies.md).

- Host (and GPU) port GIDs: ``<gid_prefix /48>:<plane>::<n>`` where n is the host's position
  among hosts (1-based) and ``plane`` the NIC port index. One GID per NIC port.
- MACs: ``02:<kind>:<node order, 2 bytes>:<port, 2 bytes>`` (locally administered, unique).
- SRv6 uSIDs: each plane has its own 32-bit locator block (``usid_block + plane``); a switch
  owns the 16-bit uSID ``(tier + 1) << 12 | group << 6 | index``. Switches of one plane and
  tier that reach exactly the same hosts going down (e.g. all spines of a leaf-spine, the
  aggregation switches of one pod) form a *group*; ``index`` is their declared order inside
  the group. So the candidates at any choice point are one group and an EV field value v
  names the switch with index v, in Structured-EV and SRv6 mode alike.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cache

from topologies.model import NodeKind, Topology

_MAC_KIND = {NodeKind.HOST: 0x00, NodeKind.SWITCH: 0x01, NodeKind.GPU: 0x02, NodeKind.OCS: 0x03}
USID_GROUP_BITS = 6
USID_INDEX_BITS = 6


class AddressError(ValueError):
    """The topology cannot be given an address plan (too many nodes for a field)."""


def host_gid(topo: Topology, host: str, port: int) -> ipaddress.IPv6Address:
    """GID (IPv6 address) of NIC port ``port`` of a host or GPU."""
    node = topo.node(host)
    if node.kind not in (NodeKind.HOST, NodeKind.GPU):
        raise AddressError(f"{host} is a {node.kind.value}, not a host or GPU")
    if topo.link_at(host, port) is None:
        raise AddressError(f"{host} has no port {port}")
    base = int(ipaddress.IPv6Address(topo.fabric.addressing.gid_prefix))
    return ipaddress.IPv6Address(base | (port << 64) | (node.order + 1))


def gid_owner(topo: Topology, gid: str | ipaddress.IPv6Address) -> tuple[str, int] | None:
    """(host, port) owning a GID, or None."""
    addr = ipaddress.IPv6Address(gid)
    for node in topo.nodes_of(NodeKind.HOST, NodeKind.GPU):
        for port in topo.ports(node.name):
            if host_gid(topo, node.name, port) == addr:
                return node.name, port
    return None


@cache  # per topology object (compared by identity): route tables ask for every hop's MACs
def mac(topo: Topology, node_name: str, port: int) -> str:
    node = topo.node(node_name)
    if node.order > 0xFFFF or port > 0xFFFF:
        raise AddressError(f"{node_name}:{port} does not fit the MAC plan")
    raw = (
        bytes([0x02, _MAC_KIND[node.kind]])
        + node.order.to_bytes(2, "big")
        + port.to_bytes(2, "big")
    )
    return ":".join(f"{b:02x}" for b in raw)


def usid_block(topo: Topology, plane: int) -> int:
    return topo.fabric.addressing.usid_block + plane


@dataclass(frozen=True, slots=True)
class UsidAssignment:
    """A switch's uSID; ``aliases`` are the extra uSIDs it answers to (index + k x group size
    below the next power of two), so that an EV field value v selects index v mod n in SRv6
    mode exactly as in Structured-EV mode when a group is not a power of two."""

    usid: int
    group: int
    index: int
    group_size: int
    aliases: tuple[int, ...] = ()


@cache
def _usid_plan(topo: Topology) -> dict[str, UsidAssignment]:
    plan: dict[str, UsidAssignment] = {}
    cones = down_cones(topo)
    for plane in range(topo.fabric.planes):
        for tier in sorted({s.tier for s in topo.switches_in_plane(plane) if s.tier is not None}):
            members = [s for s in topo.switches_in_plane(plane) if s.tier == tier]
            groups: list[frozenset[str]] = []
            by_group: dict[int, list[str]] = {}
            for sw in members:
                cone = cones[sw.name]
                if cone not in groups:
                    groups.append(cone)
                by_group.setdefault(groups.index(cone), []).append(sw.name)
            for group, names in by_group.items():
                if group >= 1 << USID_GROUP_BITS or len(names) > 1 << USID_INDEX_BITS:
                    raise AddressError(
                        f"plane {plane} tier {tier}: more than {1 << USID_GROUP_BITS} groups or "
                        f"{1 << USID_INDEX_BITS} switches per group do not fit a uSID"
                    )
                n = len(names)
                span = 1 << max(0, (n - 1).bit_length())  # next power of two >= n
                for index, name in enumerate(names):
                    base = (tier + 1) << 12 | group << USID_INDEX_BITS
                    aliases = tuple(base | i for i in range(index + n, span, n))
                    plan[name] = UsidAssignment(base | index, group, index, n, aliases)
    return plan


def usid_of(topo: Topology, switch: str) -> UsidAssignment:
    """The uSID (with its group and index) of a packet-fabric switch."""
    try:
        return _usid_plan(topo)[switch]
    except KeyError:
        raise AddressError(f"{switch} is not a packet-fabric switch") from None


def locator(topo: Topology, switch: str) -> ipaddress.IPv6Network:
    """The /48 locator of a switch: its plane's block followed by its uSID."""
    return locators(topo, switch)[0]


def locators(topo: Topology, switch: str) -> list[ipaddress.IPv6Network]:
    """The switch's locator followed by those of its alias uSIDs."""
    plane = topo.node(switch).plane
    assert plane is not None
    a = usid_of(topo, switch)
    block = usid_block(topo, plane) << 96
    return [ipaddress.IPv6Network((block | (u << 80), 48)) for u in (a.usid, *a.aliases)]


@cache
def down_cones(topo: Topology) -> dict[str, frozenset[str]]:
    """Per switch: the host ports ('host:port') it reaches going only down tiers."""
    cones: dict[str, frozenset[str]] = {}
    for sw in sorted(topo.switches, key=lambda s: s.tier or 0):
        reach: set[str] = set()
        for port in topo.ports(sw.name):
            peer = topo.peer(sw.name, port)
            pnode = topo.node(peer.node)
            if pnode.kind == NodeKind.HOST:
                reach.add(str(peer))
            elif pnode.tier is not None and sw.tier is not None and pnode.tier < sw.tier:
                reach |= cones[pnode.name]
        cones[sw.name] = frozenset(reach)
    return cones

"""Typed model of a topology: nodes, links with their emulated characteristics, fabric policy.

A topology file (YAML) is parsed and validated by ``topologies.loader`` into these frozen
dataclasses; everything else (addresses, switch tables) is a pure function of them
(``topologies.addressing``, ``topologies.routes``). Nothing here touches the OS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from common.classes import DEFAULT_CLASSES, ClassMap


class PathMode(Enum):
    """How packets of one QP spread over the fabric (docs/topologies.md, 'Path modes')."""

    ECMP = "ecmp"  # switches hash the 5-tuple; the EV is the UDP source port
    STEV = "stev"  # Structured EV: per-tier EV bit fields pick uplinks deterministically
    SRV6 = "srv6"  # SRv6 uSID containers name the switch to take at each choice point


class FabricKind(Enum):
    PACKET = (
        "packet"  # MRC fabric: planes of leaf/spine(/core) switches, hosts with one port per plane
    )
    CIRCUIT = "circuit"  # scale-up domain: GPUs with d ports each into one optical circuit switch


class NodeKind(Enum):
    HOST = "host"
    SWITCH = "switch"
    GPU = "gpu"
    OCS = "ocs"


@dataclass(frozen=True, slots=True)
class LinkParams:
    """Emulated characteristics of one link, applied by the switch target at both ends."""

    rate_bps: float  # 0 = unlimited
    delay_s: float  # one-way propagation delay
    queue_packets: int  # egress queue depth per priority, packets
    queue_bytes: int  # egress queue depth per priority, bytes
    loss: float  # random loss probability 0..1


@dataclass(frozen=True, slots=True)
class Endpoint:
    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"


@dataclass(frozen=True, slots=True)
class Link:
    """A bidirectional link. ``index`` is its position in the file (stable link id)."""

    index: int
    a: Endpoint
    b: Endpoint
    params: LinkParams

    def other(self, node: str) -> Endpoint:
        return self.b if self.a.node == node else self.a

    def end(self, node: str) -> Endpoint:
        return self.a if self.a.node == node else self.b

    def __str__(self) -> str:
        return f"{self.a} -- {self.b}"


@dataclass(frozen=True, slots=True)
class Node:
    """A host, GPU, switch or OCS. ``order`` is the position among nodes of the same kind.

    Hosts: port index p is NIC port p and attaches to plane p. Switches: ``plane`` and
    ``tier`` (0 = leaf/ToR, 1 = spine/aggregation, 2 = core). Ports of switches are 1-based.
    """

    name: str
    kind: NodeKind
    order: int
    plane: int | None = None
    tier: int | None = None


@dataclass(frozen=True, slots=True)
class Addressing:
    gid_prefix: str  # IPv6 /48: host GIDs are <prefix48>:<plane>::<host number>
    usid_block: int  # 32-bit uSID locator block of plane 0; plane p uses usid_block + p


@dataclass(frozen=True, slots=True)
class Thresholds:
    """ECN and trim thresholds in units of the BDP of the egress link (mrc-protocol.md)."""

    ecn_bdp: float
    trim_bdp: float
    trim_lasthop_bdp: float


@dataclass(frozen=True, slots=True)
class OcsConfig:
    ports_per_gpu: int
    reconfig_delay_s: float


@dataclass(frozen=True, slots=True)
class FabricSpec:
    """The `fabric:` section of a topology file: kind, planes, path mode, MTU, classes, ..."""

    kind: FabricKind
    planes: int
    path_mode: PathMode
    mtu: int
    base_rtt_s: float | None  # None = derive from the topology (topologies.routes.base_rtt)
    classes: ClassMap = DEFAULT_CLASSES
    thresholds: Thresholds = Thresholds(0.5, 1.0, 1.5)
    addressing: Addressing = Addressing("fd00:6d72:6300::", 0xFCBBBB00)
    ocs: OcsConfig | None = None


@dataclass(frozen=True, eq=False)
class Topology:
    """A validated topology. Build with ``topologies.loader.load``; do not mutate.

    Compared and hashed by identity, so derived plans can be cached per topology object.
    """

    name: str
    description: str
    source: str  # file the topology came from (for error messages)
    fabric: FabricSpec
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    _by_name: dict[str, Node] = field(default_factory=dict, repr=False, compare=False)
    _ports: dict[str, dict[int, Link]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_name.update({n.name: n for n in self.nodes})
        for node in self.nodes:
            self._ports.setdefault(node.name, {})
        for link in self.links:
            self._ports[link.a.node][link.a.port] = link
            self._ports[link.b.node][link.b.port] = link

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"topology {self.name}: no node {name!r}") from None

    def has_node(self, name: str) -> bool:
        return name in self._by_name

    def ports(self, name: str) -> dict[int, Link]:
        """Port number -> link, for one node (sorted by port)."""
        return dict(sorted(self._ports[name].items()))

    def peer(self, name: str, port: int) -> Endpoint:
        """The endpoint at the far side of ``name:port``."""
        link = self._ports[name][port]
        a = link.a  # compared field by field: this runs millions of times on large fabrics
        return link.b if a.node == name and a.port == port else a

    def link_at(self, name: str, port: int) -> Link | None:
        return self._ports.get(name, {}).get(port)

    def nodes_of(self, *kinds: NodeKind) -> list[Node]:
        return [n for n in self.nodes if n.kind in kinds]

    @property
    def hosts(self) -> list[Node]:
        return self.nodes_of(NodeKind.HOST)

    @property
    def gpus(self) -> list[Node]:
        return self.nodes_of(NodeKind.GPU)

    @property
    def switches(self) -> list[Node]:
        return self.nodes_of(NodeKind.SWITCH)

    def switches_in_plane(self, plane: int) -> list[Node]:
        return [n for n in self.switches if n.plane == plane]

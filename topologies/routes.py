"""What the controller programs into each switch, per path mode, as pure data.

``switch_tables(topo, mode)`` returns one ``SwitchTables`` per packet-fabric switch, shaped
after the tables of p4/mrc_switch.p4 (common/p4schema/mrc_switch.py):

- ``routes`` (MrcIngress.ipv6_route, LPM): one /128 per destination host GID of the plane;
  action ``SetNextHop`` (one next hop), ``RouteEcmp`` (several; ECMP mode and SRv6 inner
  routing) or ``RouteEv`` (several; Structured-EV mode: field = (EV >> shift) & mask, looked up
  in the EV group, ``fallback`` ECMP group on a miss). SRv6 mode adds a /48 per other switch's
  locator.
- ``ecmp_groups`` (MrcIngress.ecmp + selector) and ``ev_groups`` (MrcIngress.ev_uplink):
  group id -> members; an ECMP group and the EV group over the same next hops share the id.
- ``usid_entries`` (MrcIngress.my_usid, SRv6 only): ``<block>:<my uSID>::/48`` -> shift and
  the longer ``<block>:<my uSID>:0::/64`` -> decapsulate (my uSID is the last one).
- ``port_config`` (MrcEgress.port_config): ECN and trim thresholds in bytes queued, last-hop
  flag (ports facing hosts: no ECN, trims become TRIMMED_LASTHOP), trim DSCP and priority.
- ``dscp_classes`` (MrcIngress.dscp_class): DSCP -> class id, priority, trimmable.

The 32-bit EV a switch sees in Structured-EV mode is ``flow_label[15:0] << 16 | udp_sport``.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field
from functools import cache

from common.classes import DscpClass, TrafficClass, dscp_classes
from common.p4schema.mrc_switch import THRESHOLD_BITS
from topologies.addressing import host_gid, locator, locators, mac, usid_of
from topologies.evlayout import STEV_BITS, EvLayout, ev_layout
from topologies.model import FabricKind, LinkParams, NodeKind, PathMode, Topology
from topologies.paths import Hop, base_rtt, next_hops

THRESHOLD_MAX = (1 << THRESHOLD_BITS) - 1  # widest value set_port_params takes (bytes)
# Trim thresholds are fractions of a BDP of at least this many MTU packets (port_thresholds)
LEAST_BDP_PACKETS = 12
DISABLED = 0  # a set_port_params threshold of 0 never fires


@dataclass(frozen=True, slots=True)
class NextHop:
    port: int
    smac: str
    dmac: str
    peer: str  # informational: the neighbour's name


@dataclass(frozen=True, slots=True)
class SetNextHop:
    nexthop: NextHop


@dataclass(frozen=True, slots=True)
class RouteEcmp:
    group: int


@dataclass(frozen=True, slots=True)
class RouteEv:
    group: int
    shift: int
    mask: int
    fallback: int  # ECMP group used when the field value has no entry


RouteAction = SetNextHop | RouteEcmp | RouteEv


@dataclass(frozen=True, slots=True)
class Route:
    prefix: ipaddress.IPv6Network
    action: RouteAction
    destination: str  # 'host:port' or the switch whose locator this is


@dataclass(frozen=True, slots=True)
class UsidEntry:
    prefix: ipaddress.IPv6Network
    action: str  # "shift" | "decap"


@dataclass(frozen=True, slots=True)
class EgressPortConfig:
    ecn_threshold_bytes: int  # bytes queued at or above which ECT packets get CE; 0 = disabled
    trim_threshold_bytes: int  # bytes queued at or above which trimmable packets are trimmed
    last_hop: bool  # port faces a host: the pipeline never marks ECN here
    trim_dscp: int
    trim_priority: int


@dataclass(frozen=True, slots=True)
class SwitchTables:
    switch: str
    plane: int
    tier: int
    mode: PathMode
    usid: int
    locator: ipaddress.IPv6Network
    routes: tuple[Route, ...]
    ecmp_groups: dict[int, tuple[NextHop, ...]]
    ev_groups: dict[int, dict[int, NextHop]]
    usid_entries: tuple[UsidEntry, ...]
    port_config: dict[int, EgressPortConfig]
    dscp_classes: tuple[DscpClass, ...] = field(default=())

    def lookup(self, addr: ipaddress.IPv6Address) -> Route | None:
        """Longest-prefix match in ``routes`` (a reference for tests and path tracing)."""
        best: Route | None = None
        for route in self.routes:
            if addr in route.prefix and (
                best is None or route.prefix.prefixlen > best.prefix.prefixlen
            ):
                best = route
        return best

    def usid_lookup(self, addr: ipaddress.IPv6Address) -> UsidEntry | None:
        best: UsidEntry | None = None
        for entry in self.usid_entries:
            if addr in entry.prefix and (
                best is None or entry.prefix.prefixlen > best.prefix.prefixlen
            ):
                best = entry
        return best


def _nexthop(topo: Topology, sw: str, hop: Hop) -> NextHop:
    return NextHop(hop.port, mac(topo, sw, hop.port), mac(topo, hop.peer, hop.peer_port), hop.peer)


def queue_capacity_bytes(params: LinkParams, mtu: int) -> int:
    """Bytes an egress queue holds before tail drop when filled with MTU packets."""
    return min(params.queue_packets * mtu, params.queue_bytes)


def port_thresholds(topo: Topology, sw: str, port: int) -> EgressPortConfig:
    """Thresholds of one egress port in bytes, from the BDP of its link (rate x base RTT / 8;
    for the trim thresholds at least ``LEAST_BDP_PACKETS`` MTUs).

    ``x`` BDP is ``ceil(x * BDP)`` bytes, at most the queue's byte capacity minus one MTU (so a
    trimmable packet is trimmed before the queue tail-drops it) and at least one MTU.
    Unlimited links get that upper bound. Last-hop ports: ECN disabled (0), trim threshold
    from ``trim_lasthop_bdp``.

    Why a least BDP for trimming: the thresholds are meant in units of the plane's BDP (MRC
    recommends ECN at 0.2-0.8 and trimming at 1 BDP), which on a data-centre network is tens
    of packets (100 Gb/s x 12 us: 37 of 4 KiB). On the emulation's slow links it is a few (20
    Mb/s: 4; 1 Gb/s with 5 us links: 5), and a trim threshold of 4 packets cannot absorb two
    senders' packets sprayed onto one uplink at once: measured on a permutation over clos-2p
    at 20 Mb/s, every link 84 % busy and the flows behind the trimming uplinks 15 % slower.
    ECN keeps the link's own BDP: it is the load balancer's signal, and a mark that waits
    for a longer queue steers less traffic away from a slow path (``bench congested-path``:
    REPS sent 10-12 % of its packets over the quarter-rate uplink with ECN at 6 packets, where
    the even share is 25 %).
    """
    link = topo.link_at(sw, port)
    assert link is not None
    last_hop = topo.node(topo.peer(sw, port).node).kind in (NodeKind.HOST, NodeKind.GPU)
    mtu = topo.fabric.mtu
    upper = max(mtu, min(THRESHOLD_MAX, queue_capacity_bytes(link.params, mtu) - mtu))
    th = topo.fabric.thresholds
    cm = topo.fabric.classes
    rate = link.params.rate_bps
    bdp_bytes = rate * base_rtt(topo) / 8
    trim_bdp_bytes = max(bdp_bytes, LEAST_BDP_PACKETS * mtu)

    def nbytes(frac: float, bdp: float) -> int:
        if rate <= 0:
            return upper
        return max(mtu, min(upper, math.ceil(frac * bdp)))

    if last_hop:
        return EgressPortConfig(
            DISABLED, nbytes(th.trim_lasthop_bdp, trim_bdp_bytes), True,
            cm.dscp[TrafficClass.TRIMMED_LASTHOP], cm.priority[TrafficClass.TRIMMED_LASTHOP],
        )  # fmt: skip
    return EgressPortConfig(
        nbytes(th.ecn_bdp, bdp_bytes), nbytes(th.trim_bdp, trim_bdp_bytes), False,
        cm.dscp[TrafficClass.TRIMMED], cm.priority[TrafficClass.TRIMMED],
    )  # fmt: skip


class _GroupBuilder:
    """Allocates ECMP/EV group ids of one switch; identical member lists share an id."""

    def __init__(self, topo: Topology, sw: str, tier: int, layout: EvLayout | None) -> None:
        self.topo = topo
        self.sw = sw
        self.tier = tier
        self.layout = layout
        self.groups: dict[tuple[NextHop, ...], int] = {}
        self.ev_groups: dict[int, dict[int, NextHop]] = {}

    def action(self, hops: tuple[Hop, ...], use_ev: bool) -> RouteAction:
        members = tuple(_nexthop(self.topo, self.sw, h) for h in hops)
        if len(members) == 1:
            return SetNextHop(members[0])
        gid = self.groups.setdefault(members, len(self.groups) + 1)
        fld = self.layout.field(self.tier) if (use_ev and self.layout is not None) else None
        if fld is None:
            return RouteEcmp(gid)
        self.ev_groups[gid] = {v: members[v % len(members)] for v in range(1 << fld.width)}
        return RouteEv(gid, fld.shift(STEV_BITS), fld.mask, gid)


@cache
def switch_tables(topo: Topology, mode: PathMode | None = None) -> dict[str, SwitchTables]:
    """Tables of every packet-fabric switch for ``mode`` (default: the file's path mode).

    Raises ``topologies.evlayout.LayoutError`` when the mode cannot be encoded (STEV).
    """
    if topo.fabric.kind != FabricKind.PACKET:
        return {}
    mode = mode or topo.fabric.path_mode
    layout = ev_layout(topo) if mode == PathMode.STEV else None
    out: dict[str, SwitchTables] = {}
    classes = dscp_classes(topo.fabric.classes)
    for sw_node in topo.switches:
        sw = sw_node.name
        plane, tier = sw_node.plane, sw_node.tier
        assert plane is not None and tier is not None
        builder = _GroupBuilder(topo, sw, tier, layout)
        routes: list[Route] = []
        for host in topo.hosts:
            hops = next_hops(topo, plane, host.name).get(sw)
            if not hops:
                continue
            prefix = ipaddress.IPv6Network((host_gid(topo, host.name, plane), 128))
            action = builder.action(hops, mode == PathMode.STEV)
            routes.append(Route(prefix, action, f"{host.name}:{plane}"))
        usid_entries: tuple[UsidEntry, ...] = ()
        if mode == PathMode.SRV6:
            entries = []
            for mine in locators(topo, sw):
                last = ipaddress.IPv6Network((int(mine.network_address), 64))
                entries += [UsidEntry(mine, "shift"), UsidEntry(last, "decap")]
            usid_entries = tuple(entries)
            for other in topo.switches_in_plane(plane):
                hops = next_hops(topo, plane, other.name).get(sw) if other.name != sw else None
                if hops:
                    action = builder.action(hops, False)
                    routes += [Route(net, action, other.name) for net in locators(topo, other.name)]
        out[sw] = SwitchTables(
            switch=sw,
            plane=plane,
            tier=tier,
            mode=mode,
            usid=usid_of(topo, sw).usid,
            locator=locator(topo, sw),
            routes=tuple(routes),
            ecmp_groups={gid: members for members, gid in builder.groups.items()},
            ev_groups=builder.ev_groups,
            usid_entries=usid_entries,
            port_config={p: port_thresholds(topo, sw, p) for p in topo.ports(sw)},
            dscp_classes=classes,
        )
    return out

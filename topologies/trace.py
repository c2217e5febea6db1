"""Follow a packet through the data tables of ``topologies.routes`` (a reference forwarder).

Used by tests and for explaining paths ('which switches does EV x take?'); it interprets the
tables exactly as documented in routes.py, with ECMP modelled as ``hash % n`` for a caller
given hash. It is not the switch target: the real pipeline lives in switch/.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from common.evbits import usid_container
from topologies.addressing import host_gid
from topologies.evlayout import srv6_template
from topologies.model import PathMode, Topology
from topologies.paths import attached_switch
from topologies.routes import NextHop, RouteEcmp, RouteEv, SetNextHop, switch_tables

MAX_HOPS = 64


class TraceError(RuntimeError):
    """The tables do not deliver the packet (no route, loop, wrong host)."""


@dataclass(frozen=True, slots=True)
class TraceResult:
    nodes: tuple[str, ...]  # source host, switches..., destination host
    decap_at: str | None  # SRv6: the switch that removed the outer header


def trace(
    topo: Topology,
    mode: PathMode,
    plane: int,
    src: str,
    dst: str,
    ev: int,
    ecmp_hash: int = 0,
) -> TraceResult:
    """Path of a packet src -> dst on ``plane``; ``ev`` is 32-bit (STEV) or 16-bit (SRv6/ECMP)."""
    tables = switch_tables(topo, mode)
    inner = host_gid(topo, dst, plane)
    outer: ipaddress.IPv6Address | None = None
    if mode == PathMode.SRV6:
        template = srv6_template(topo, plane, src, dst)
        if template.slots:
            outer = ipaddress.IPv6Address(usid_container(template, ev))
    sw, _ = attached_switch(topo, src, plane)
    nodes = [src]
    decap_at = None
    for _ in range(MAX_HOPS):
        nodes.append(sw)
        tab = tables[sw]
        if outer is not None:
            entry = tab.usid_lookup(outer)
            if entry is not None and entry.action == "decap":
                outer, decap_at = None, sw
            elif entry is not None:
                packed = int(outer)
                block = packed >> 96
                rest = (packed << 48) & ((1 << 128) - 1)  # drop block + my uSID, zero fill
                outer = ipaddress.IPv6Address((block << 96) | (rest >> 32))
        route = tab.lookup(outer if outer is not None else inner)
        if route is None:
            raise TraceError(f"{sw}: no route to {outer or inner} (path so far {nodes})")
        action = route.action
        hop: NextHop
        if isinstance(action, SetNextHop):
            hop = action.nexthop
        elif isinstance(action, RouteEcmp):
            members = tab.ecmp_groups[action.group]
            hop = members[ecmp_hash % len(members)]
        elif isinstance(action, RouteEv):
            value = (ev >> action.shift) & action.mask
            chosen = tab.ev_groups[action.group].get(value)
            if chosen is None:
                members = tab.ecmp_groups[action.fallback]
                chosen = members[ecmp_hash % len(members)]
            hop = chosen
        else:  # pragma: no cover - exhaustive over RouteAction
            raise TraceError(f"{sw}: unknown action {action}")
        if hop.peer == dst:
            if outer is not None:
                raise TraceError(f"{sw}: delivered to {dst} with the SRv6 outer header still on")
            nodes.append(dst)
            return TraceResult(tuple(nodes), decap_at)
        if hop.peer not in tables:
            raise TraceError(f"{sw}: forwarded to {hop.peer}, not toward {dst} (path {nodes})")
        sw = hop.peer
    raise TraceError(f"loop: {nodes[:10]}...")

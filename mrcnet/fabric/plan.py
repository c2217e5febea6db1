"""The run plan: every name, address, port and link spec of a fabric, derived from a topology.

Pure (no OS calls), so it is unit-testable and the builder only executes it:

- interface names ``<prefix>s<switch order>p<port>`` / ``<prefix>h<host order>p<port>``
  (at most 15 characters: the prefix is kept short);
- MACs and GIDs from ``topologies.addressing`` (the same plan the switch tables use), and each
  host port's static neighbour MAC (the switch port it is cabled to);
- per switch port the egress link spec and, for host-facing ports, the ingress spec (host
  links are shaped at the switch side in both directions);
- per host the SRv6 templates toward every other host on every plane (SRv6 mode).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from common.netns import IFNAMSIZ
from common.pktring import frames_for, ring_bytes
from topologies.addressing import host_gid, mac, usid_of
from topologies.evlayout import srv6_template
from topologies.model import LinkParams, NodeKind, PathMode, Topology
from topologies.paths import attached_switch

NIC_QUEUE_PACKETS = 1024  # frames a host NIC's port queue holds at least (nic_spec)

class PlanError(ValueError):
    """The topology cannot be run as asked (names too long, ...)."""


@dataclass(frozen=True)
class SwitchPlan:
    name: str
    device_id: int
    ifnames: dict[int, str]  # P4 port -> interface
    egress: dict[int, str]  # P4 port -> link spec (switch.main --link)
    ingress: dict[int, str]  # host-facing P4 port -> link spec (--ingress-link)


@dataclass(frozen=True)
class HostPort:
    port: int
    ifname: str
    mac: str
    gid: str
    neighbor_mac: str
    switch: str
    switch_port: int


@dataclass(frozen=True)
class HostPlan:
    name: str
    ports: tuple[HostPort, ...]
    srv6_templates: dict[str, dict[str, object]] = field(default_factory=dict)


@dataclass(frozen=True)
class FabricPlan:
    topo: Topology
    mode: PathMode
    prefix: str
    switches: tuple[SwitchPlan, ...]
    hosts: tuple[HostPlan, ...]

    def host(self, name: str) -> HostPlan:
        for h in self.hosts:
            if h.name == name:
                return h
        raise PlanError(f"no host {name!r} in {self.topo.name}")


def link_spec(p: LinkParams) -> str:
    return (f"rate={p.rate_bps:g},delay={p.delay_s:g},loss={p.loss:g},"
            f"qpkts={p.queue_packets},qbytes={p.queue_bytes}")


def nic_spec(p: LinkParams, mtu: int) -> str:
    """The link spec of a host's (or GPU's) side of its link, shaped at the switch's ingress:
    the link's rate, delay and loss; the NIC's priority queues (``nicprio``), each holding at
    least ``NIC_QUEUE_PACKETS`` MTU frames. A NIC's send queue is its QPs' work: it sends
    what their windows allow and drops none of it, so a queue as short as a switch's would
    turn a window's first burst into losses (measured: 1.5 BDP at 100 Mb/s with 1 ms links,
    175 KB per port against the default 128 KiB)."""
    packets = max(p.queue_packets, NIC_QUEUE_PACKETS)
    nic = replace(p, queue_packets=packets, queue_bytes=max(p.queue_bytes, packets * mtu))
    return link_spec(nic) + ",nicprio=1"


def _ifname(prefix: str, kind: str, order: int, port: int) -> str:
    name = f"{prefix}{kind}{order}p{port}"
    if len(name) > IFNAMSIZ:
        raise PlanError(f"interface name {name!r} is longer than {IFNAMSIZ} characters; "
                        "use a shorter run prefix")
    return name


def make_plan(topo: Topology, mode: PathMode, prefix: str) -> FabricPlan:
    """All names and parameters of a run of ``topo`` in ``mode`` (raises PlanError)."""
    # Circuit fabrics: the OCS is the one switch and the GPUs are the hosts (their links
    # shaped at the OCS in both directions, as host links are at leaves).
    endpoints = (NodeKind.HOST, NodeKind.GPU)
    switches = []
    for sw in topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS):
        ports = topo.ports(sw.name)
        ifnames = {p: _ifname(prefix, "s", sw.order, p) for p in sorted(ports)}
        # An OCS forwards light: a GPU's frame is serialised once, by the GPU's NIC (the
        # ingress shaping), and crosses the switch with the fibres' delay only; shaping its
        # egress at the link rate too would store and forward every frame a second time.
        egress = {p: link_spec(replace(link.params, rate_bps=0.0) if sw.kind == NodeKind.OCS
                               else link.params) for p, link in ports.items()}
        # Hosts and GPUs queue their port's traffic (own and, on a GPU, forwarded) by class,
        # as MRC NICs do: acknowledgements (CONTROL) do not wait behind the host's own data.
        # A NIC does not drop its own frames: its queue holds what its QPs' windows send.
        ingress = {p: nic_spec(link.params, topo.fabric.mtu) for p, link in ports.items()
                   if topo.node(link.other(sw.name).node).kind in endpoints}
        switches.append(SwitchPlan(sw.name, sw.order + 1, ifnames, egress, ingress))
    hosts = []
    host_nodes = topo.nodes_of(*endpoints)
    for h in host_nodes:
        hports = []
        for p, link in sorted(topo.ports(h.name).items()):
            far = link.other(h.name)
            hports.append(HostPort(
                port=p, ifname=_ifname(prefix, "h", h.order, p), mac=mac(topo, h.name, p),
                gid=str(host_gid(topo, h.name, p)), neighbor_mac=mac(topo, far.node, far.port),
                switch=far.node, switch_port=far.port))
        templates: dict[str, dict[str, object]] = {}
        if mode == PathMode.SRV6:
            for other in host_nodes:
                if other.name == h.name:
                    continue
                for p in topo.ports(other.name):
                    t = srv6_template(topo, p, h.name, other.name)
                    slots = [{"base": s.base, "ev_shift": s.ev_shift, "ev_width": s.ev_width}
                             for s in t.slots]
                    if not slots:
                        # Same leaf: the agent's framer needs a container for every SRv6
                        # destination, so name the shared leaf, which decapsulates (its
                        # <block>:<uSID>:0::/64 entry) and routes the inner packet.
                        leaf, _ = attached_switch(topo, h.name, p)
                        slots = [{"base": usid_of(topo, leaf).usid, "ev_shift": 0,
                                  "ev_width": 0}]
                    templates[str(host_gid(topo, other.name, p))] = {
                        "block": hex(t.block), "slots": slots}
        hosts.append(HostPlan(h.name, tuple(hports), templates))
    return FabricPlan(topo, mode, prefix, tuple(switches), tuple(hosts))


def receive_ring_bytes(topo: Topology, tdf: float, asked: int | None = None) -> int:
    """Kernel memory the receive rings of an embedded-switch run of ``topo`` pin: one ring
    per switch port, ``asked`` slots each, or (None) sized as the switch sizes it from the
    port's link rate and ``tdf`` (switch/main.py ``ring_slots``)."""
    total = 0
    for sw in topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS):
        for link in topo.ports(sw.name).values():
            frames = (asked if asked is not None
                      else frames_for(link.params.rate_bps, tdf, topo.fabric.mtu))
            total += ring_bytes(frames)
    return total


def derive_topology(source: Path, out: Path, rate: str | None, delay: str | None = None
                    ) -> Path:
    """Write ``source`` with every link's rate and/or delay replaced (None: kept) to
    ``out``: the topology file a run records and loads (``mrcnet up --rate/--delay``)."""
    data = yaml.safe_load(Path(source).read_text())
    for key, value in (("rate", rate), ("delay", delay)):
        if value:
            data.setdefault("link_defaults", {})[key] = value
            for link in data.get("links", []):
                if isinstance(link, dict) and key in link:
                    link[key] = value
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out

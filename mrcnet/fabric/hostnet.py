"""The host namespaces' kernel IPv6 stack, so hosts answer ``ping`` and run ``iperf3`` as
Mininet hosts do, next to the MRC agent that owns the same interfaces with raw sockets.

Per NIC port p the kernel gets the port's GID (``<gid prefix>:<p>::<n>``) as a /128 and a
route to the plane's /64 through the switch port it is cabled to (gateway ``fe80::1`` with a
permanent neighbour entry: the P4 switches answer no neighbour discovery). The switches
already route every GID (/128 per host port, docs/topologies.md), so kernel traffic crosses
the P4 fabric like MRC traffic, in the best-effort class (its DSCP is none of MRC's).

An nftables table in the namespace keeps the two stacks apart:

- ``prerouting`` (priority raw) drops UDP 4791 before the kernel looks for a socket, so MRC
  packets addressed to the host's GIDs never draw an ICMPv6 port unreachable (AF_PACKET
  sockets see frames before netfilter: the agent still receives them);
- ``output`` drops the kernel's router solicitations, neighbour solicitations and MLD
  reports, which the fabric would only count as unroutable drops.

No link-local address, no DAD, no router advertisements. Pure: returns shell commands.
"""

from __future__ import annotations

import ipaddress

from mrcnet.fabric.plan import HostPlan

GATEWAY = "fe80::1"
NFT_TABLE = "mrcnet"
ROCEV2_UDP_PORT = 4791

_IF_SYSCTLS = {"addr_gen_mode": 1, "accept_ra": 0, "autoconf": 0, "router_solicitations": 0,
               "accept_dad": 0, "dad_transmits": 0}


def plane_prefix(gid: str) -> ipaddress.IPv6Network:
    """The /64 of a GID's plane (every GID of plane p shares it)."""
    return ipaddress.IPv6Network((int(ipaddress.IPv6Address(gid)) >> 64 << 64, 64))


def nft_ruleset() -> str:
    t = f"inet {NFT_TABLE}"
    return "; ".join([
        f"add table {t}",
        f"add chain {t} prerouting {{ type filter hook prerouting priority raw; policy accept; }}",
        f"add rule {t} prerouting udp dport {ROCEV2_UDP_PORT} counter drop",
        f"add chain {t} output {{ type filter hook output priority 0; policy accept; }}",
        f"add rule {t} output icmpv6 type {{ nd-router-solicit, nd-neighbor-solicit, "
        "mld-listener-report, mld2-listener-report } counter drop",
    ])


def host_ip_commands(host: HostPlan) -> list[str]:
    """Shell commands (run inside the host's namespace, links still down) that give the
    kernel its addresses and routes; the caller brings the links up afterwards."""
    sysctls = [f"net.ipv6.conf.{scope}.{k}={v}" for scope in ("default", "all")
               for k, v in {**_IF_SYSCTLS, "disable_ipv6": 0}.items()]
    cmds = [f"sysctl -qw {' '.join(sysctls)}", f"nft '{nft_ruleset()}'"]
    for p in host.ports:
        per_if = [f"net.ipv6.conf.{p.ifname}.{k}={v}" for k, v in _IF_SYSCTLS.items()]
        cmds += [
            f"sysctl -qw {' '.join(per_if)} net.ipv6.conf.{p.ifname}.disable_ipv6=0",
            f"ip -6 addr add {p.gid}/128 dev {p.ifname} nodad",
            f"ip -6 neigh replace {GATEWAY} lladdr {p.neighbor_mac} dev {p.ifname} nud permanent",
            f"ip -6 route add {plane_prefix(p.gid)} via {GATEWAY} dev {p.ifname}",
        ]
    return cmds

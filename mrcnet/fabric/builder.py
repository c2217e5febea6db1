"""Topology plan -> Mininet network: hosts, embedded switch targets (or BMv2), links.

Mininet gives the host namespaces (one shell per host) and the CLI; the switch nodes are the
classes of switch/mininet_nodes.py, running one switch process each in the root namespace.
Interface names, MACs and per-port link specs come from the plan (mrcnet/fabric/plan.py), so
every interface carries the run prefix. Host namespaces get their kernel IPv6 addresses and
routes (mrcnet/fabric/hostnet.py: ping and iperf3 through the fabric, UDP 4791 left to the
agents' raw sockets) and every veth end gets MTU 9000 and checksum and segmentation offloads
off, as common/netns.NetKit does.

BMv2 switches shape only their egress (queue rate and depth, switch/bmv2.py). The host-to-switch
direction of a host link, which the embedded switch shapes at its ingress, is shaped at the
host instead: a TBF qdisc on the host's NIC interface with the link's rate and queue size
(``host_shaper_command``). Link delays are not emulated on BMv2; ``bmv2_notes()`` says so.

``MininetFabric.stop()`` is idempotent: switch processes by pid, links, host shells. Mininet's
global cleanup (``mn -c``) is never used: it would touch other runs.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common.netns import free_tcp_port
from mrcnet.fabric.plan import FabricPlan

MTU = 9000
TBF_BURST = 2 * MTU  # bytes: the token bucket must hold the largest frame (MTU + Ethernet)


class BuildError(RuntimeError):
    """The network could not be built or a switch did not start; the message says why."""


def _quiet(cmd: list[str]) -> None:
    subprocess.run(cmd, capture_output=True, check=False)


def host_shaper_command(ifname: str, spec: str) -> str | None:
    """The shell command that shapes a host's NIC egress like the switch ingress spec
    ``spec`` (rate in bit/s; queue = qbytes, else qpkts full cells), or None when the link
    has no rate. Run inside the host's namespace."""
    from switch.bmv2 import CELL_BYTES
    from switch.traffic import parse_link_spec

    link = parse_link_spec(spec)
    if link.rate_bps <= 0:
        return None
    limit = link.qbytes or link.qpkts * CELL_BYTES or 1 << 24
    return (f"tc qdisc replace dev {ifname} root tbf rate {int(link.rate_bps)}bit "
            f"burst {TBF_BURST} limit {max(limit, TBF_BURST)}")


class MininetFabric:
    """The Mininet part of a run: ``build()``, ``start_switches()``, ``stop()``."""

    def __init__(self, plan: FabricPlan, run_dir: Path, switch_kind: str = "embedded",
                 switch_args: list[str] | None = None) -> None:
        """``switch_args``: extra flags of every embedded switch (the run's clock, ...)."""
        self.plan = plan
        self.run_dir = run_dir
        self.switch_kind = switch_kind
        self.switch_args = tuple(switch_args or ())
        self.net: Any = None
        self.hosts: dict[str, Any] = {}
        self.switches: dict[str, Any] = {}
        self._stopped = False

    def build(self) -> None:
        from mininet.net import Mininet
        from mininet.node import Host

        from switch.mininet_nodes import Bmv2Switch, EmbeddedP4Switch

        plan = self.plan
        net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                      autoStaticArp=False)
        self.net = net
        log_dir = self.run_dir / "switches"
        used: set[int] = set()

        def grpc_port() -> int:
            # distinct within the run (gRPC and Thrift ports alike): gRPC binds with
            # SO_REUSEPORT, so a port handed out twice would silently split one address
            # between two switches
            while True:
                port = free_tcp_port()
                if port not in used:
                    used.add(port)
                    return port

        for h in plan.hosts:
            self.hosts[h.name] = net.addHost(h.name, cls=Host, ip=None)
        for s in plan.switches:
            common = {"dpid": f"{s.device_id:x}", "device_id": s.device_id,
                      "grpc_port": grpc_port(), "log_dir": str(log_dir)}
            if self.switch_kind == "bmv2":
                try:
                    self.switches[s.name] = net.addSwitch(
                        s.name, cls=Bmv2Switch, links=dict(s.egress), thrift_port=grpc_port(),
                        **common)
                except ValueError as exc:  # a link BMv2 cannot emulate (random loss)
                    raise BuildError(f"{s.name}: {exc}") from None
            else:
                self.switches[s.name] = net.addSwitch(
                    s.name, cls=EmbeddedP4Switch, links=dict(s.egress),
                    ingress_links=dict(s.ingress), python=sys.executable,
                    extra_args=self.switch_args, **common)
        by_switch = {s.name: s for s in plan.switches}
        for h in plan.hosts:
            for p in h.ports:
                sw = by_switch[p.switch]
                net.addLink(self.hosts[h.name], self.switches[p.switch], port1=p.port,
                            port2=p.switch_port, intfName1=p.ifname,
                            intfName2=sw.ifnames[p.switch_port], addr1=p.mac,
                            addr2=p.neighbor_mac)
        done: set[frozenset[tuple[str, int]]] = set()
        for link in plan.topo.links:
            a, b = link.a, link.b
            if a.node not in by_switch or b.node not in by_switch:
                continue
            key = frozenset({(a.node, a.port), (b.node, b.port)})
            if key in done:
                continue
            done.add(key)
            from topologies.addressing import mac

            net.addLink(self.switches[a.node], self.switches[b.node], port1=a.port,
                        port2=b.port, intfName1=by_switch[a.node].ifnames[a.port],
                        intfName2=by_switch[b.node].ifnames[b.port],
                        addr1=mac(plan.topo, a.node, a.port), addr2=mac(plan.topo, b.node, b.port))
        net.build()
        self._configure()

    def _configure(self) -> None:
        from mrcnet.fabric.hostnet import host_ip_commands

        for h in self.plan.hosts:
            node = self.hosts[h.name]
            for cmd in host_ip_commands(h):
                out = node.cmd(f"{cmd} 2>&1; echo mrcnet-rc=$?").strip()
                text, _, rc = out.rpartition("mrcnet-rc=")
                if rc.strip() != "0":
                    raise BuildError(f"{h.name}: {cmd!r} failed: {text.strip() or rc}")
            for p in h.ports:
                node.cmd(f"ip link set {p.ifname} mtu {MTU}; "
                         f"ethtool -K {p.ifname} tx off rx off tso off gso off gro off "
                         f">/dev/null 2>&1; ip link set {p.ifname} up")
                if self.switch_kind == "bmv2":
                    self._shape_host_port(node, p.ifname, p.switch, p.switch_port)
        for s in self.plan.switches:
            for ifname in s.ifnames.values():
                _quiet(["ip", "link", "set", ifname, "mtu", str(MTU)])
                _quiet(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"])
                _quiet(["ethtool", "-K", ifname, "tx", "off", "rx", "off"])
                _quiet(["ip", "link", "set", ifname, "up"])

    def _shape_host_port(self, node: Any, ifname: str, switch: str, port: int) -> None:
        spec = next(s.ingress.get(port) for s in self.plan.switches if s.name == switch)
        cmd = host_shaper_command(ifname, spec or "")
        if cmd is None:
            return
        out = node.cmd(f"{cmd}; echo rc=$?")
        if "rc=0" not in out:
            raise BuildError(f"{node.name}: shaping {ifname} failed: {out.strip()}")

    def bmv2_notes(self) -> list[str]:
        """What the BMv2 switches of this run do not emulate (empty for the embedded one)."""
        ignored = sorted({p for sw in self.switches.values()
                          for params in getattr(sw, "ignored", {}).values() for p in params})
        if self.switch_kind != "bmv2" or not ignored:
            return []
        return [f"BMv2 does not emulate {', '.join(ignored)} (link delay / overhead); "
                "see docs/switch.md"]

    def start_switches(self) -> None:
        """Start every switch process concurrently; each start waits for its gRPC port."""
        errors: list[str] = []

        def start(sw: Any) -> None:
            try:
                sw.start([])
            except Exception as exc:
                errors.append(str(exc))

        with ThreadPoolExecutor(max_workers=len(self.switches) or 1) as pool:
            list(pool.map(start, self.switches.values()))
        if errors:
            raise BuildError("; ".join(sorted(errors)))

    def switch_map(self) -> dict[str, dict[str, object]]:
        """``controller.server --switches`` JSON content. BMv2 switches add what the
        controller needs to keep their port state (controller/bmv2_ports.py): the Thrift
        port and the interface of every P4 port."""
        out: dict[str, dict[str, object]] = {}
        for name, sw in self.switches.items():
            entry: dict[str, object] = {"address": sw.grpc_address, "device_id": sw.device_id}
            if self.switch_kind == "bmv2":
                entry.update(target="bmv2", thrift_port=sw.thrift_port,
                             ports={str(n): ifname for n, ifname in sw.port_map().items()})
            out[name] = entry
        return out

    def host_ifname(self, host: str, port: int) -> str:
        return next(p.ifname for p in self.plan.host(host).ports if p.port == port)

    def set_host_port(self, host: str, port: int, up: bool) -> None:
        """Carrier change seen by the agent (rtnetlink) and the switch (peer carrier)."""
        ifname = self.host_ifname(host, port)
        self.hosts[host].cmd(f"ip link set {ifname} {'up' if up else 'down'}")

    def stop(self) -> None:
        """Stop switches (by pid), remove links and host shells. Idempotent."""
        if self._stopped or self.net is None:
            self._stopped = True
            return
        self._stopped = True
        net = self.net
        for sw in self.switches.values():
            try:
                sw.stop(deleteIntfs=True)
            except Exception:  # keep going: the rest must still be removed
                pass
        for link in list(net.links):
            try:
                link.stop()
            except Exception:
                pass
        for host in net.hosts:
            try:
                host.terminate()
            except Exception:
                pass
        # Interfaces whose link object failed half way: delete by our own names only.
        for s in self.plan.switches:
            for ifname in s.ifnames.values():
                if Path(f"/sys/class/net/{ifname}").exists():
                    _quiet(["ip", "link", "del", ifname])

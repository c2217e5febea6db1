"""Topology plan -> Mininet network: hosts, switch nodes of the run's kind, links.

Mininet gives the host namespaces (one shell per host) and the CLI; every switch is a
``switch.targets.mininet_node.P4Switch`` node backed by a target of the run's kind
(``switch.targets.target_class``): the builder asks the target what it needs instead of
testing the kind's name. Interface names, MACs and per-port link specs come from the plan
(mrcnet/fabric/plan.py), so every interface carries the run prefix. Host namespaces get their
kernel IPv6 addresses and routes (mrcnet/fabric/hostnet.py: ping and iperf3 through the
fabric, UDP 4791 left to the agents' raw sockets) and every veth end gets MTU 9000 and
checksum and segmentation offloads off, as common/netns.NetKit does.

A target that does not shape the host-to-switch direction of host links itself
(``shapes_host_ingress`` False: BMv2 shapes only its egress) has it shaped at the host: a TBF
qdisc on the host's NIC interface with the link's rate and queue size (the kind's
``host_shaper``). What a target does not emulate is in
``notes()``.

``MininetFabric.stop()`` is idempotent: switch processes by pid, links, switch and host shells. Mininet's
global cleanup (``mn -c``) is never used: it would touch other runs.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common.netns import free_tcp_port
from mrcnet.fabric.plan import FabricPlan
from switch.targets import DEFAULT_KIND, DEFAULT_START_TIMEOUT, SwitchTarget, target_class

MTU = 9000


class BuildError(RuntimeError):
    """The network could not be built or a switch did not start; the message says why."""


def _quiet(cmd: list[str]) -> None:
    subprocess.run(cmd, capture_output=True, check=False)


START_CPU_S = 2.0  # generous CPU seconds one switch process needs to start listening


def start_timeout(switches: int, cores: int | None = None) -> float:
    """How long one switch may take to listen when ``switches`` start at once on ``cores``
    (default: this machine's): the fixed default for a small fabric, growing with its size
    (96 switches on 2 cores start in well over the default 20 s)."""
    import os

    cores = cores or os.cpu_count() or 1
    return max(DEFAULT_START_TIMEOUT, START_CPU_S * switches / cores)


class MininetFabric:
    """The Mininet part of a run: ``build()``, ``start_switches()``, ``stop()``."""

    def __init__(self, plan: FabricPlan, run_dir: Path, switch_kind: str = DEFAULT_KIND,
                 switch_args: list[str] | None = None) -> None:
        """``switch_kind``: a registered switch kind; ``switch_args``: extra flags of every
        switch process that takes them (the run's clock, the receive ring, ...)."""
        self.plan = plan
        self.run_dir = run_dir
        self.target_cls = target_class(switch_kind)
        self.switch_args = tuple(switch_args or ())
        self.net: Any = None
        self.hosts: dict[str, Any] = {}
        self.nodes: dict[str, Any] = {}  # switch name -> Mininet node (P4Switch)
        self.switches: dict[str, SwitchTarget] = {}  # switch name -> its target
        self._stopped = False

    def _target(self, s: Any, grpc_port: int, timeout: float) -> SwitchTarget:
        params: dict[str, Any] = {
            "links": dict(s.egress), "ingress_links": dict(s.ingress),
            "grpc_port": grpc_port, "log_dir": self.run_dir / "switches",
            "start_timeout": timeout}
        if self.target_cls.takes_run_flags:
            params["extra_args"] = self.switch_args
        try:
            return self.target_cls(s.name, s.device_id, s.ifnames, **params)
        except ValueError as exc:  # a link the kind cannot emulate (BMv2: random loss)
            raise BuildError(f"{s.name}: {exc}") from None

    def build(self) -> None:
        from mininet.net import Mininet
        from mininet.node import Host

        from switch.targets.mininet_node import P4Switch

        plan = self.plan
        net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False,
                      autoStaticArp=False)
        self.net = net
        used: set[int] = set()

        def grpc_port() -> int:
            # distinct within the run: gRPC binds with SO_REUSEPORT, so a port handed out
            # twice would silently split one address between two switches
            while True:
                port = free_tcp_port()
                if port not in used:
                    used.add(port)
                    return port

        timeout = start_timeout(len(plan.switches))
        for h in plan.hosts:
            self.hosts[h.name] = net.addHost(h.name, cls=Host, ip=None)
        for s in plan.switches:
            target = self._target(s, grpc_port(), timeout)
            self.switches[s.name] = target
            self.nodes[s.name] = net.addSwitch(s.name, cls=P4Switch, target=target,
                                               dpid=f"{s.device_id:x}")
        by_switch = {s.name: s for s in plan.switches}
        for h in plan.hosts:
            for p in h.ports:
                sw = by_switch[p.switch]
                net.addLink(self.hosts[h.name], self.nodes[p.switch], port1=p.port,
                            port2=p.switch_port, intfName1=p.ifname,
                            intfName2=sw.ifnames[p.switch_port], addr1=p.mac,
                            addr2=p.neighbor_mac)
        done: set[frozenset[tuple[str, int]]] = set()
        from topologies.addressing import mac

        for link in plan.topo.links:
            a, b = link.a, link.b
            if a.node not in by_switch or b.node not in by_switch:
                continue
            key = frozenset({(a.node, a.port), (b.node, b.port)})
            if key in done:
                continue
            done.add(key)
            net.addLink(self.nodes[a.node], self.nodes[b.node], port1=a.port,
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
                if not self.target_cls.shapes_host_ingress:
                    self._shape_host_port(node, p.ifname, p.switch, p.switch_port)
        for s in self.plan.switches:
            for ifname in s.ifnames.values():
                _quiet(["ip", "link", "set", ifname, "mtu", str(MTU)])
                _quiet(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"])
                _quiet(["ethtool", "-K", ifname, "tx", "off", "rx", "off"])
                _quiet(["ip", "link", "set", ifname, "up"])

    def _shape_host_port(self, node: Any, ifname: str, switch: str, port: int) -> None:
        spec = next(s.ingress.get(port) for s in self.plan.switches if s.name == switch)
        cmd = self.target_cls.host_shaper(ifname, spec or "")
        if cmd is None:
            return
        out = node.cmd(f"{cmd}; echo rc=$?")
        if "rc=0" not in out:
            raise BuildError(f"{node.name}: shaping {ifname} failed: {out.strip()}")

    def notes(self) -> list[str]:
        """What the switches of this run do not emulate of their link specs (each note once)."""
        return sorted({note for sw in self.switches.values() for note in sw.notes()})

    def start_switches(self) -> None:
        """Start every switch process concurrently; each start waits for its gRPC port."""
        errors: list[str] = []

        def start(node: Any) -> None:
            try:
                node.start([])
            except Exception as exc:
                errors.append(str(exc))

        with ThreadPoolExecutor(max_workers=min(32, len(self.nodes) or 1)) as pool:
            list(pool.map(start, self.nodes.values()))
        if errors:
            raise BuildError("; ".join(sorted(errors)))

    def switch_map(self) -> dict[str, dict[str, object]]:
        """``controller.server --switches`` JSON content: every switch's endpoint (its kind
        and what the controller's driver of that kind needs)."""
        return {name: sw.endpoint() for name, sw in self.switches.items()}

    def host_ifname(self, host: str, port: int) -> str:
        return next(p.ifname for p in self.plan.host(host).ports if p.port == port)

    def set_host_port(self, host: str, port: int, up: bool) -> None:
        """Carrier change seen by the agent (rtnetlink) and the switch (peer carrier)."""
        ifname = self.host_ifname(host, port)
        self.hosts[host].cmd(f"ip link set {ifname} {'up' if up else 'down'}")

    def stop(self) -> None:
        """Stop switches (by pid), remove links, the switches' and hosts' shells. Idempotent."""
        if self._stopped or self.net is None:
            self._stopped = True
            return
        self._stopped = True
        net = self.net
        for node in self.nodes.values():
            try:
                node.stop(deleteIntfs=True)
            except Exception:  # keep going: the rest must still be removed
                pass
            try:
                node.terminate()  # the node's Mininet shell (else one per switch stays alive)
            except Exception:
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

"""Small testbeds for the transport: hosts in namespaces, agents as processes, bulk transfers.

Used by the emulation tests (tests/emulation/test_transport*.py) and by ``mrcnet bench
transport``. Everything is created through a caller-owned ``common.netns.NetKit`` with the
caller's run prefix, so it is all removed by ``kit.close()``, also on failure.

- ``direct_pair``: two host namespaces joined by one veth (host to host, no switch).
- ``run_transfer``: start a sink agent and a writer agent (hosts.apps) and wait for
  both to finish; return their result files (see hosts/apps.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.netns import NetKit, Process, wait_until


@dataclass(frozen=True)
class HostSpec:
    """One emulated host: its namespace and its NIC ports (one per plane)."""

    name: str
    netns: str
    ifnames: tuple[str, ...]
    macs: tuple[str, ...]
    gids: tuple[str, ...]
    neighbor_macs: tuple[str, ...]

    def config(self, **extra: Any) -> dict[str, Any]:
        """Agent configuration (JSON object) of this host."""
        return {
            "name": self.name,
            "ports": [
                {"ifname": i, "mac": m, "gid": g, "neighbor_mac": n}
                for i, m, g, n in zip(self.ifnames, self.macs, self.gids, self.neighbor_macs)
            ],
            **extra,
        }


def host_mac(host: int, port: int) -> str:
    return f"02:00:00:00:{host:02x}:{port:02x}"


def host_gid(host: int, port: int) -> str:
    return f"fd00:0:{port}::{host}"


def direct_pair(kit: NetKit, mtu: int = 9000) -> tuple[HostSpec, HostSpec]:
    """Hosts 1 and 2 in their own namespaces, port 0 of each joined by a veth."""
    ns = [kit.add_namespace(f"h{i}") for i in (1, 2)]
    ifs = [kit.name(f"h{i}p0") for i in (1, 2)]
    macs = [host_mac(i, 0) for i in (1, 2)]
    kit.add_veth(ifs[0], ifs[1], ns[0], ns[1], mtu=mtu, mac_a=macs[0], mac_b=macs[1])
    return tuple(  # type: ignore[return-value]
        HostSpec(name=f"h{i}", netns=ns[k], ifnames=(ifs[k],), macs=(macs[k],),
                 gids=(host_gid(i, 0),), neighbor_macs=(macs[1 - k],))
        for k, i in enumerate((1, 2))
    )


@dataclass
class TransferResult:
    writer: dict[str, Any]
    sink: dict[str, Any]
    logs: dict[str, Path] = field(default_factory=dict)
    qlog_dir: Path | None = None


def spawn_agent(kit: NetKit, host: HostSpec, workdir: Path, config: dict[str, Any]) -> Process:
    """Start ``python -m hosts`` in the host's namespace; wait for its ready line."""
    cfg_path = workdir / f"{host.name}.agent.json"
    cfg_path.write_text(json.dumps(config, indent=1))
    log = workdir / f"{host.name}.agent.log"
    proc = kit.spawn(f"agent-{host.name}", [sys.executable, "-m", "hosts", "--config",
                                            str(cfg_path)], netns=host.netns, log_path=log)

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"agent {host.name} exited ({proc.popen.returncode}); see {log}")
        return "ready" in log.read_text(errors="replace")

    wait_until(ready, 20, f"agent {host.name} readiness (log {log})")
    return proc


def run_transfer(
    kit: NetKit,
    src: HostSpec,
    dst: HostSpec,
    workdir: Path,
    size: int,
    qp_type: str = "MRC",
    seed: int = 1,
    timeout: float = 120.0,
    app_args: dict[str, Any] | None = None,
    agent_extra: dict[str, Any] | None = None,
    during: Callable[[], None] | None = None,
) -> TransferResult:
    """Move ``size`` bytes from ``src`` to ``dst`` with agents as processes; wait for both.

    ``during`` (e.g. link flaps) runs in the calling thread once both agents are up."""
    workdir.mkdir(parents=True, exist_ok=True)
    oob = workdir / "oob"
    qlog_dir = workdir / "qlog"
    common = {"size": size, "qp_type": qp_type, "oob_dir": str(oob), "timeout": timeout,
              **(app_args or {})}
    extra = {"qlog_dir": str(qlog_dir), **(agent_extra or {})}
    results = {h.name: workdir / f"{h.name}.result.json" for h in (src, dst)}
    sink_cfg = dst.config(apps=[{"target": "hosts.apps:sink", "args": {
        **common, "name": dst.name, "peer": src.name, "result": str(results[dst.name])}}],
        **extra)
    writer_cfg = src.config(apps=[{"target": "hosts.apps:writer", "args": {
        **common, "name": src.name, "peer": dst.name, "seed": seed,
        "result": str(results[src.name])}}], **extra)
    procs = [spawn_agent(kit, dst, workdir, sink_cfg), spawn_agent(kit, src, workdir, writer_cfg)]
    logs = {h.name: workdir / f"{h.name}.agent.log" for h in (src, dst)}
    if during is not None:
        during()
    hosts = (dst, src)

    def finished() -> bool:
        # An agent that failed (e.g. its app raised) ends the wait at once: its peer would
        # otherwise sit out its whole timeout waiting for it.
        for host, proc in zip(hosts, procs):
            if not proc.alive() and proc.popen.returncode not in (0, None):
                raise RuntimeError(f"agent {host.name} failed (exit {proc.popen.returncode}); "
                                   f"see {logs[host.name]}")
        return not any(p.alive() for p in procs)

    wait_until(finished, timeout + 30,
               f"transfer to finish (logs {', '.join(map(str, logs.values()))})", interval=0.05)
    out: dict[str, dict[str, Any]] = {}
    for name, path in results.items():
        if not path.exists():
            raise RuntimeError(f"{name} wrote no result; see {logs[name]}")
        out[name] = json.loads(path.read_text())
    return TransferResult(writer=out[src.name], sink=out[dst.name], logs=logs, qlog_dir=qlog_dir)


SWITCH_DEVICE_ID = 1


def switch_mac(port: int) -> str:
    return f"02:00:00:ff:00:{port:02x}"


@dataclass
class SwitchHandle:
    """A running embedded switch process and its gRPC address (P4Runtime + admin)."""

    address: str
    process: Process
    log: Path
    ports: dict[tuple[str, int], int]  # (host name, host port) -> switch port

    def set_port_admin(self, port: int, up: bool) -> None:
        """Administrative up/down of a switch port (both directions; down drops and counts)."""
        import grpc

        from common.proto import switch_admin_pb2 as pb
        from common.proto import switch_admin_pb2_grpc as pb_grpc

        with grpc.insecure_channel(self.address) as channel:
            pb_grpc.SwitchAdminStub(channel).SetPortAdmin(
                pb.SetPortAdminRequest(port=port, up=up), timeout=5)

    def counter(self, name: str, cell: int) -> int:
        """Packets of one cell of a P4 counter of the pipeline (read over P4Runtime), e.g.
        ``MrcIngress.rx_port_class`` cell ``port * 8 + class id``."""
        from common.p4runtime_client import P4RuntimeClient

        client = P4RuntimeClient(self.address, SWITCH_DEVICE_ID)
        try:
            return client.read_counter(name, cell).get(cell, (0, 0))[0]
        finally:
            client.channel.close()

    def port_stats(self) -> dict[int, dict[str, int]]:
        from switch.stats import fetch

        resp = fetch(self.address)
        return {p.port: {"rx_packets": p.rx_packets, "tx_packets": p.tx_packets,
                         "down_drops": p.egress.down_drops + p.ingress.down_drops,
                         "tail_drops": p.egress.tail_drops}
                for p in resp.ports}


def switch_star(
    kit: NetKit,
    workdir: Path,
    hosts: int = 2,
    planes: int = 1,
    links: dict[int, str] | None = None,
    mtu: int = 9000,
    trim_at: int = 0,
    ecn_at: int = 0,
) -> tuple[list[HostSpec], SwitchHandle]:
    """``hosts`` hosts with ``planes`` ports each, all on one embedded switch (root namespace).

    Switch port of (host h, plane p) is ``(h - 1) * planes + p + 1``. ``links`` gives egress
    link specs per switch port (``rate=1e9,...``, see switch.main --link). The switch is
    programmed over P4Runtime (common.p4runtime_client): one /128 route per host GID and
    the DSCP classes of common/classes.py. With ``trim_at`` > 0 every port trims trimmable
    packets that find at least ``trim_at`` x 4096 bytes queued, about ``trim_at`` full packets
    at the agents' default 4096-byte MTU (the switch's thresholds are in bytes; all ports are
    last hops here, so the trimmed class is TRIMMED_LASTHOP and there is no ECN marking).
    """
    from common.netns import free_tcp_port, tcp_listening

    workdir.mkdir(parents=True, exist_ok=True)
    specs: list[HostSpec] = []
    port_of: dict[tuple[str, int], int] = {}
    sw_ports: list[tuple[int, str]] = []
    for h in range(1, hosts + 1):
        ns = kit.add_namespace(f"h{h}")
        ifs, macs, gids, nmacs = [], [], [], []
        for p in range(planes):
            sp = (h - 1) * planes + p + 1
            host_if, sw_if = kit.name(f"h{h}p{p}"), kit.name(f"s1p{sp}")
            kit.add_veth(host_if, sw_if, ns, None, mtu=mtu, mac_a=host_mac(h, p),
                         mac_b=switch_mac(sp))
            ifs.append(host_if)
            macs.append(host_mac(h, p))
            gids.append(host_gid(h, p))
            nmacs.append(switch_mac(sp))
            port_of[(f"h{h}", p)] = sp
            sw_ports.append((sp, sw_if))
        specs.append(HostSpec(name=f"h{h}", netns=ns, ifnames=tuple(ifs), macs=tuple(macs),
                              gids=tuple(gids), neighbor_macs=tuple(nmacs)))
    grpc_port = free_tcp_port()
    address = f"127.0.0.1:{grpc_port}"
    log = workdir / "s1.log"
    cmd = [sys.executable, "-m", "switch.main", "--name", "s1", "--grpc-addr", address,
           "--device-id", str(SWITCH_DEVICE_ID), "--log", str(log)]
    for sp, sw_if in sw_ports:
        cmd += ["--port", f"{sp}={sw_if}"]
    for sp, spec in (links or {}).items():
        cmd += ["--link", f"{sp}:{spec}"]
    proc = kit.spawn("switch-s1", cmd, log_path=workdir / "s1.out")

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"switch exited ({proc.popen.returncode}); see {log} and "
                               f"{workdir / 's1.out'}")
        return tcp_listening("127.0.0.1", grpc_port)

    wait_until(ready, 20, f"switch gRPC on {address} (log {log})")
    handle = SwitchHandle(address=address, process=proc, log=log, ports=port_of)
    _program_star(address, specs, port_of, trim_at, ecn_at)
    return specs, handle


def _program_star(address: str, hosts: list[HostSpec], port_of: dict[tuple[str, int], int],
                  trim_at: int, ecn_at: int = 0) -> None:
    from common.classes import DEFAULT_CLASSES, TrafficClass, dscp_classes
    from common.p4runtime_client import P4RuntimeClient
    from common.p4schema.mrc_switch import dscp_class_write
    from hosts.wire import ip6, mac

    with P4RuntimeClient(address, SWITCH_DEVICE_ID) as client:
        client.push_pipeline()
        for h in hosts:
            for p, gid in enumerate(h.gids):
                sp = port_of[(h.name, p)]
                client.insert(
                    "MrcIngress.ipv6_route", {"hdr.ipv6.dst_addr": (
                        int.from_bytes(ip6(gid), "big"), 128)},
                    "MrcIngress.set_nexthop",
                    {"port": sp, "smac": int.from_bytes(mac(switch_mac(sp)), "big"),
                     "dmac": int.from_bytes(mac(h.macs[p]), "big")})
        for row in dscp_classes(DEFAULT_CLASSES):
            client.insert(*dscp_class_write(row))
        if trim_at > 0 or ecn_at > 0:
            trimmed = TrafficClass.TRIMMED if ecn_at else TrafficClass.TRIMMED_LASTHOP
            for sp in port_of.values():
                client.insert(
                    "MrcEgress.port_config", {"standard_metadata.egress_port": sp},
                    "MrcEgress.set_port_params",
                    {"ecn_threshold_bytes": ecn_at * 4096, "trim_threshold_bytes": trim_at * 4096,
                     "last_hop": 0 if ecn_at else 1,
                     "trim_dscp": DEFAULT_CLASSES.dscp[trimmed],
                     "trim_priority": DEFAULT_CLASSES.priority[trimmed]})

"""Small testbeds for the transport: hosts in namespaces, agents as processes, bulk transfers.

Used by the emulation tests (tests/emulation/test_transport*.py) and by ``mrcnet bench
transport``. Everything is created through a caller-owned ``common.netns.NetKit`` with the
caller's run prefix, so it is all removed by ``kit.close()``, also on failure.

- ``direct_pair``: two host namespaces joined by one veth (host to host, no switch).
- ``run_transfer``: start a sink agent and a writer agent (hosts.agent.apps) and wait for
  both to finish; return their result files (see hosts/agent/apps.py).
"""

from __future__ import annotations

import json
import sys
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
    """Start ``python -m hosts.agent`` in the host's namespace; wait for its ready line."""
    cfg_path = workdir / f"{host.name}.agent.json"
    cfg_path.write_text(json.dumps(config, indent=1))
    log = workdir / f"{host.name}.agent.log"
    proc = kit.spawn(f"agent-{host.name}", [sys.executable, "-m", "hosts.agent", "--config",
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
) -> TransferResult:
    """Move ``size`` bytes from ``src`` to ``dst`` with agents as processes; wait for both."""
    workdir.mkdir(parents=True, exist_ok=True)
    oob = workdir / "oob"
    qlog_dir = workdir / "qlog"
    common = {"size": size, "qp_type": qp_type, "oob_dir": str(oob), "timeout": timeout,
              **(app_args or {})}
    extra = {"qlog_dir": str(qlog_dir), **(agent_extra or {})}
    results = {h.name: workdir / f"{h.name}.result.json" for h in (src, dst)}
    sink_cfg = dst.config(apps=[{"target": "hosts.agent.apps:sink", "args": {
        **common, "name": dst.name, "peer": src.name, "result": str(results[dst.name])}}],
        **extra)
    writer_cfg = src.config(apps=[{"target": "hosts.agent.apps:writer", "args": {
        **common, "name": src.name, "peer": dst.name, "seed": seed,
        "result": str(results[src.name])}}], **extra)
    procs = [spawn_agent(kit, dst, workdir, sink_cfg), spawn_agent(kit, src, workdir, writer_cfg)]
    logs = {h.name: workdir / f"{h.name}.agent.log" for h in (src, dst)}
    wait_until(lambda: not any(p.alive() for p in procs), timeout + 30,
               f"transfer to finish (logs {', '.join(map(str, logs.values()))})", interval=0.05)
    out: dict[str, dict[str, Any]] = {}
    for name, path in results.items():
        if not path.exists():
            raise RuntimeError(f"{name} wrote no result; see {logs[name]}")
        out[name] = json.loads(path.read_text())
    return TransferResult(writer=out[src.name], sink=out[dst.name], logs=logs, qlog_dir=qlog_dir)

"""A testbed for the MRC mechanisms on real packets: hosts on one embedded switch, their
agents in this process.

``StarLab`` builds ``switch_star`` (host namespaces, one switch process programmed over
P4Runtime, optional link shaping, trimming and ECN thresholds) and runs one ``Agent`` per host
in the calling process (library use: each opens its NIC ports inside its namespace), so a test
can reach every host's transport core (counters, Dynamic MPR, EV states) through
``Agent.call`` while real frames cross the switch. ``connect`` makes a writer/sink QP pair
(two hosts/bulk ``Endpoint``s, connected directly: both are in this process);
``Transfer.write`` moves a reproducible pattern with the bulk writer of hosts/bulk and
``Transfer.exact`` compares the sink's buffer with it byte for byte. With ``controller``
set, each agent also registers with that controller (``hosts/agent/ctl_link.py``), as in a
fabric. Everything is created through the caller's ``NetKit`` and stopped by ``close()``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.netns import NetKit, wait_until
from hosts.agent.agent import Agent
from hosts.agent.config import parse_config
from hosts.agent.ctl_link import CtlLink
from hosts.agent.qlog import SUFFIX, read_qlog
from hosts.api import (
    CQ,
    MR,
    QP,
    Access,
    Completion,
    Context,
    QpAttr,
    QpHintFlag,
    QpType,
    RetryAttr,
    SendWR,
    WcStatus,
    WrOpcode,
    open_device,
)
from hosts.bulk import (
    Endpoint,
    Immediates,
    PeerInfo,
    collect,
    first_difference,
    pattern,
    write_buffer,
)
from testbed.host_lab import HostSpec, SwitchHandle, switch_star

DEFAULT_HINT = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH


@dataclass
class LabHost:
    spec: HostSpec
    agent: Agent
    ctx: Context
    link: CtlLink | None = None

    def call(self, name: str, *args: Any) -> Any:
        """A HostCore method on the agent's loop thread."""
        return self.agent.call(getattr(self.agent.core, name), *args)

    def qp_stats(self, qpn: int) -> dict[str, int]:
        return dict(self.call("qp_stats", qpn))

    def host_stats(self) -> dict[str, int]:
        return dict(self.call("host_stats"))


@dataclass
class Transfer:
    """A connected writer/sink QP pair and their memory (the writer's holds the pattern)."""

    src: LabHost
    dst: LabHost
    qp: QP
    peer_qp: QP
    cq: CQ
    peer_cq: CQ
    mr: MR
    peer_mr: MR
    data: bytearray
    sink: bytearray
    peer: PeerInfo  # the sink's buffer as the writer addresses it
    done: list[Completion] = field(default_factory=list)
    received: list[Completion] = field(default_factory=list)

    def post(self, wr_id: int, offset: int, length: int, imm: int | None = None) -> None:
        self.qp.post_send(SendWR(
            wr_id, WrOpcode.WRITE if imm is None else WrOpcode.WRITE_WITH_IMM,
            self.mr.addr + offset, length, self.mr.lkey, self.peer_mr.addr + offset,
            self.peer_mr.rkey, imm=imm or 0))

    def _sends_done(self, got: list[Completion], count: int, timeout: float) -> None:
        """Account for send completions: every one must succeed, ``count`` must be there."""
        self.done += got
        bad = [wc for wc in got if wc.status != WcStatus.SUCCESS]
        if bad:
            raise AssertionError(f"send completion {bad[0]}")
        if len(self.done) < count:
            raise TimeoutError(f"{len(self.done)}/{count} send completions after "
                               f"{timeout:.0f} s (QP {self.qp.qpn} of {self.src.spec.name}: "
                               f"{self.src.qp_stats(self.qp.qpn)})")

    def wait_sends(self, count: int, timeout: float = 60.0) -> list[Completion]:
        """Wait until ``count`` send completions in all arrived; every one must succeed."""
        got = collect(self.cq, count - len(self.done), clock=self.src.agent.clock,
                      timeout=timeout)
        self._sends_done(got, count, timeout)
        return self.done

    def write(self, size: int, chunk: int = 1 << 20, depth: int = 8, imm_all: bool = False,
              timeout: float = 60.0) -> None:
        """Write the first ``size`` bytes of the pattern in ``chunk``-byte WRs, ``depth`` in
        flight, the last a WriteImm (every one with ``imm_all``: immediate = index + 1)."""
        base = len(self.done)
        out = write_buffer(self.qp, self.cq, self.mr, self.peer, size, chunk=chunk,
                           depth=depth, imm=Immediates(every=imm_all),
                           clock=self.src.agent.clock, timeout=timeout, first_wr_id=base)
        self._sends_done(out.completions, base + out.wrs, timeout)

    def wait_receives(self, count: int, timeout: float = 30.0) -> list[Completion]:
        """The sink's receive completions once ``count`` arrived (fewer after ``timeout``
        or a failed one)."""
        self.received += collect(self.peer_cq, count - len(self.received),
                                 clock=self.dst.agent.clock, timeout=timeout)
        return self.received

    def exact(self, size: int | None = None) -> bool:
        """The sink holds the first ``size`` bytes of the pattern (all of it by default)."""
        n = len(self.data) if size is None else size
        return first_difference(memoryview(self.sink)[:n], memoryview(self.data)[:n]) is None


def start_controller(kit: NetKit, workdir: Path, ports: int) -> str:
    """A controller process (no topology: any host may register) on a unix socket in
    ``workdir``; returns its gRPC target once it listens."""
    sock = workdir / "ctl.sock"
    log = workdir / "controller.log"
    proc = kit.spawn("controller", [sys.executable, "-m", "controller.server", "--unix",
                                    str(sock), "--ports", str(ports)], log_path=log)

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"controller exited; see {log}")
        return "listening on" in log.read_text(errors="replace")

    wait_until(ready, 30, f"the controller (log {log})")
    return f"unix:{sock}"


class StarLab:
    def __init__(self, kit: NetKit, workdir: Path, hosts: int = 2, planes: int = 1,
                 links: dict[int, str] | None = None, trim_at: int = 0, ecn_at: int = 0,
                 core: dict[str, Any] | None = None, controller: str | None = None,
                 host_core: dict[int, dict[str, Any]] | None = None,
                 agent: dict[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.qlog_dir = workdir / "qlog"
        specs, self.switch = switch_star(kit, workdir, hosts, planes, links, trim_at=trim_at,
                                         ecn_at=ecn_at)
        self.switch_handle: SwitchHandle = self.switch
        self.hosts: list[LabHost] = []
        try:
            for i, spec in enumerate(specs):
                knobs = {**(core or {}), **((host_core or {}).get(i + 1, {}))}
                cfg = parse_config(spec.config(**{
                    "netns": spec.netns, "qlog_dir": str(self.qlog_dir),
                    "metrics_interval": 0.2, "core": knobs, **(agent or {})}))
                ag = Agent(cfg)
                ag.start()
                host = LabHost(spec, ag, open_device(ag))
                self.hosts.append(host)
                if controller is not None:
                    host.link = CtlLink(ag, controller)
                    host.link.start()
        except BaseException:
            self.close()
            raise

    def host(self, n: int) -> LabHost:
        """Host ``n`` (1-based, as the switch_star names them)."""
        return self.hosts[n - 1]

    def connect(self, src: int, dst: int, size: int, *, qp_type: QpType = QpType.MRC,
                attr: QpAttr | None = None, hint: QpHintFlag = DEFAULT_HINT,
                receives: int = 1, seed: int = 1) -> Transfer:
        """A writer QP on host ``src`` and a sink QP on ``dst``, connected over every plane,
        with ``size`` bytes of pattern to write and ``receives`` WriteImm receives posted."""
        a, b = self.host(src), self.host(dst)
        attr = attr or QpAttr(retry=RetryAttr(7, 25), timeout=17)
        data = pattern(size, seed)
        sink = bytearray(size)
        w = Endpoint(a.ctx, data, qp_type=qp_type, attr=attr, access=Access.LOCAL_WRITE,
                     hint=a.ctx.create_qp_hint(hint))
        s = Endpoint(b.ctx, sink, qp_type=qp_type, attr=attr, hint=b.ctx.create_qp_hint(hint),
                     receives=receives)
        peer = s.info()
        s.connect(w.info(), attr)
        w.connect(peer, attr)
        return Transfer(a, b, w.qp, s.qp, w.cq, s.cq, w.mr, s.mr, data, sink, peer)

    def qlog(self, host: int, qpn: int | None = None) -> list[dict[str, Any]]:
        """The qlog events of a host's QP (or of its agent), flushed first."""
        h = self.host(host)
        if h.agent.qlog is not None:
            h.agent.call(h.agent.qlog.flush)
        name = f"{h.spec.name}-agent" if qpn is None else f"{h.spec.name}-qp{qpn}"
        path = self.qlog_dir / f"{name}{SUFFIX}"
        return read_qlog(path)[1] if path.exists() else []

    def close(self) -> None:
        for h in self.hosts:
            if h.link is not None:
                h.link.close()
            h.agent.stop()
        errors = [h.agent.loop_error for h in self.hosts if h.agent.loop_error is not None]
        self.hosts = []
        if errors:
            raise RuntimeError(f"agent loop failed: {errors[0]!r}")

    def __enter__(self) -> StarLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

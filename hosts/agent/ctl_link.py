"""The agent side of the controller link (``MrcAgent`` in common/proto/mrc_ctl.proto).

Enabled by a ``"controller"`` key in the agent's JSON config (``"unix:/path/ctl.sock"``).
``CtlLink.start()`` registers the host's ports (GID, MAC, carrier) and installs the profile
snapshot synchronously, so an agent that printed "ready" is registered; then a thread keeps
the ``AgentChannel`` stream open:

- controller -> agent: snapshot / ``ev_profile`` (installed into the core as explicit EV
  profiles, EV ``port`` 1-based -> NIC port index), ``cc_profile`` (stored), ``ev_state``
  (DENIED / GOOD / ASSUMED_BAD applied to every QP bound to the profile), ``ep`` (EV probe or
  port status update sent by the core from the port that owns the request's source GID, a
  port status update with the request's ``port_status`` mask; the answer goes back as
  ``ep_result`` with the request's ``req_id``), ``port_admin`` (the NIC port is disabled or
  enabled: ``Agent.set_port_admin``, so the core takes it out of use and tells the peers).
- agent -> controller: datapath EV transitions to ASSUMED_BAD, and from ASSUMED_BAD back to
  GOOD, of QPs bound to a controller profile (``ev_state`` reports, which the controller fans
  out to subscribers; SKIP -> GOOD is not reported); ``port_oper`` whenever a port's usability
  changes (carrier or admin state).

DENIED EVs are also left out of the profile the core keeps, so QPs created while an EV is
denied never use it (lifting the denial re-adds it for QPs created afterwards and sets it
GOOD in the existing ones). All core calls go through ``Agent.call`` (the loop thread).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from hosts.agent.agent import Agent
from hosts.agent.ctlprofiles import core_cc_profile, core_ev_profile
from hosts.transport import (
    EndpointResponse,
    EndpointTimeout,
    EvProfile,
    EvState,
    EvStateChanged,
)

log = logging.getLogger("agent.ctl")

_TO_CORE = {pb.EV_GOOD: EvState.GOOD, pb.EV_ASSUMED_BAD: EvState.ASSUMED_BAD,
            pb.EV_DENIED: EvState.DENIED}
_REPORTED = {EvState.GOOD: pb.EV_GOOD, EvState.ASSUMED_BAD: pb.EV_ASSUMED_BAD}


class CtlLinkError(RuntimeError):
    """Registration with the controller failed; the message has the gRPC code and details."""


def _mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


class CtlLink:
    """Registration + profile stream of one agent (thread-safe, ``close()`` idempotent)."""

    def __init__(self, agent: Agent, target: str, timeout: float = 10.0) -> None:
        self.agent = agent
        self.target = target
        self.timeout = timeout
        self.agent_id = ""
        self.profiles: dict[int, pb.EvProfile] = {}  # controller EV profiles, full arrays
        self.denied: dict[int, set[int]] = {}
        self.counters = {"profiles": 0, "ev_updates": 0, "reports": 0, "ep": 0, "errors": 0,
                         "port_admin": 0, "port_oper": 0}
        self._out: queue.Queue[pb.AgentMessage | None] = queue.Queue()
        self._ep: dict[int, tuple[int, int]] = {}  # core request id -> (corr_id, req_id)
        self._closed = threading.Event()
        self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.MrcAgentStub(self._channel)
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.agent.config
        ports = [
            pb.AgentPort(port=i + 1, gid=str(ipaddress.IPv6Address(p.gid)),
                         mac=_mac_text(p.mac), up=self.agent.port_up[i])
            for i, p in enumerate(cfg.ports)
        ]
        try:
            resp = self._stub.RegisterAgent(
                pb.RegisterAgentRequest(host=cfg.name, ports=ports, version="mrcnet-agent"),
                timeout=self.timeout, wait_for_ready=True)
        except grpc.RpcError as exc:
            self._channel.close()
            raise CtlLinkError(
                f"register {cfg.name} at {self.target}: {exc.code().name} {exc.details()}"
            ) from None
        self.agent_id = resp.agent_id
        self._snapshot(resp.snapshot)
        self.agent.add_handler(self._on_core_event)
        self.agent.port_hooks.append(self._on_port_change)
        self._thread = threading.Thread(target=self._run, name="ctl-link", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.agent.remove_handler(self._on_core_event)
        if self._on_port_change in self.agent.port_hooks:
            self.agent.port_hooks.remove(self._on_port_change)
        self._out.put(None)
        self._channel.close()
        if self._thread is not None:
            self._thread.join(2.0)

    # -- controller -> agent ---------------------------------------------------------------
    def _requests(self) -> Iterator[pb.AgentMessage]:
        yield pb.AgentMessage(attach=pb.AgentAttach(agent_id=self.agent_id))
        while True:
            msg = self._out.get()
            if msg is None:
                return
            yield msg

    def _run(self) -> None:
        try:
            for msg in self._stub.AgentChannel(self._requests()):
                try:
                    self._handle(msg)
                except Exception as exc:  # a bad update must not end the stream
                    self.counters["errors"] += 1
                    log.warning("controller message %s: %r", msg.WhichOneof("msg"), exc)
        except grpc.RpcError as exc:
            if not self._closed.is_set():
                log.warning("controller channel closed: %s", exc.code().name)

    def _handle(self, msg: pb.ControllerMessage) -> None:
        kind = msg.WhichOneof("msg")
        if kind == "snapshot":
            self._snapshot(msg.snapshot)
        elif kind == "ev_profile":
            self._ev_profile(msg.ev_profile)
        elif kind == "cc_profile":
            self._cc_profile(msg.cc_profile)
        elif kind == "ev_state":
            self._ev_state(msg.ev_state)
        elif kind == "ep":
            self._endpoint_op(msg.ep)
        elif kind == "port_admin":
            self._port_admin(msg.port_admin)

    def _snapshot(self, snap: pb.ProfileSnapshot) -> None:
        for prof in snap.ev_profiles:
            self._ev_profile(prof)
        for cc in snap.cc_profiles:
            self._cc_profile(cc)

    def _core_profile(self, prof: pb.EvProfile) -> EvProfile | None:
        return core_ev_profile(prof, self.agent.config.ev_mode, self.denied.get(prof.id, set()))

    def _ev_profile(self, prof: pb.EvProfile) -> None:
        self.profiles[prof.id] = prof
        self.denied[prof.id] = {int(e.value) for e in prof.denied}
        core_prof = self._core_profile(prof)
        if core_prof is not None:
            self.agent.call(self.agent.core.set_ev_profile, core_prof)  # type: ignore[attr-defined]
        now = self.agent.now()
        for value in self.denied[prof.id]:
            self.agent.call(self.agent.core.set_ev_state,  # type: ignore[attr-defined]
                            int(prof.id), value, EvState.DENIED, now)
        self.counters["profiles"] += 1

    def _cc_profile(self, cc: pb.CcProfile) -> None:
        self.agent.call(self.agent.core.set_cc_profile,  # type: ignore[attr-defined]
                        core_cc_profile(cc))

    def _ev_state(self, upd: pb.EvStateUpdate) -> None:
        state = _TO_CORE.get(upd.state)
        if state is None:
            return
        pid, value = int(upd.profile_id), int(upd.ev.value)
        denied = self.denied.setdefault(pid, set())
        was_denied = value in denied
        if state == EvState.DENIED:
            denied.add(value)
        else:
            denied.discard(value)
        prof = self.profiles.get(pid)
        if prof is not None and was_denied != (value in denied):
            core_prof = self._core_profile(prof)
            if core_prof is not None:
                self.agent.call(self.agent.core.set_ev_profile,  # type: ignore[attr-defined]
                                core_prof)
        self.agent.call(self.agent.core.set_ev_state,  # type: ignore[attr-defined]
                        pid, value, state, self.agent.now())
        self.counters["ev_updates"] += 1

    def _endpoint_op(self, cmd: pb.EpCommand) -> None:
        """Send the endpoint operation the controller asked for (EpBatchSendWait), from the
        port that owns the request's source GID."""
        core: Any = self.agent.core
        req = cmd.request
        dst = ipaddress.IPv6Address(req.dgid).packed
        port = self.agent.config.gid_port(ipaddress.IPv6Address(req.sgid).packed)
        if port is None:
            raise ValueError(f"endpoint request {req.req_id}: {req.sgid} is not a port of "
                             f"{self.agent.config.name}")
        now = self.agent.now()
        if cmd.op_type == pb.EP_OP_EV_PROBE:
            send: Callable[[], int] = partial(core.send_ev_probe, dst, port,
                                              int(req.req_ev.value), now)
        elif cmd.op_type == pb.EP_OP_PORT_STATUS_UPDATE:
            # port_status: bit p-1 = port p usable, as the core's (and the wire's) mask
            send = partial(core.send_port_status_update, dst, now, int(req.port_status))
        else:
            return
        entry = (int(cmd.corr_id), int(req.req_id))

        def send_and_remember() -> None:
            # on the loop thread: the request id is known before its answer can be read
            self._ep[int(send())] = entry

        self.agent.call(send_and_remember)
        self.counters["ep"] += 1

    def _port_admin(self, cmd: pb.PortAdminCommand) -> None:
        """ModifyPort: disable or enable one NIC port (1-based) of this host."""
        port = int(cmd.port) - 1
        if not 0 <= port < len(self.agent.config.ports):
            raise ValueError(f"port_admin: {self.agent.config.name} has no port {cmd.port}")
        if cmd.admin_state not in (pb.PORT_ADMIN_ENABLED, pb.PORT_ADMIN_DISABLED):
            raise ValueError(f"port_admin: bad admin state {cmd.admin_state}")
        enabled = cmd.admin_state == pb.PORT_ADMIN_ENABLED
        before = self.agent.port_up[port]
        self.agent.call(self.agent.set_port_admin, port, enabled)
        self.counters["port_admin"] += 1
        if self.agent.port_up[port] != before:
            self._report_port(port, self.agent.port_up[port])

    def _on_port_change(self, port: int, carrier: bool) -> None:
        """Loop thread: a carrier change; the port's usability also needs its admin state."""
        self._report_port(port, carrier and self.agent.port_admin[port])

    def _report_port(self, port: int, up: bool) -> None:
        self.counters["port_oper"] += 1
        self._out.put(pb.AgentMessage(port_oper=pb.PortOperReport(port=port + 1, up=up)))

    # -- agent -> controller (loop thread: never block) --------------------------------------
    def _on_core_event(self, ev: object, now: float) -> None:
        if isinstance(ev, EvStateChanged):
            state = _REPORTED.get(ev.new)
            if state is None or ev.profile_id not in self.profiles:
                return
            if ev.new == EvState.GOOD and ev.old != EvState.ASSUMED_BAD:
                return  # SKIP -> GOOD (an ECN skip ending) is not news for the controller
            self.counters["reports"] += 1
            self._out.put(pb.AgentMessage(ev_state=pb.EvStateReport(
                profile_id=ev.profile_id, ev=pb.Ev(value=ev.ev, port=ev.port + 1),
                state=state, qpn=ev.qpn)))
        elif isinstance(ev, EndpointResponse):
            entry = self._ep.pop(ev.req_id, None)
            if entry is None:
                return
            corr, req_id = entry
            self._out.put(pb.AgentMessage(ep_result=pb.EpResult(corr_id=corr, response=pb.EpResponse(
                req_id=req_id, port=ev.port + 1, rtt_ns=max(0, int(ev.rtt * 1e9)),
                adj_svc_time=True))))
        elif isinstance(ev, EndpointTimeout):
            self._ep.pop(ev.req_id, None)  # the controller's batch reports it unanswered


def start_from_config_file(agent: Agent, path: str | Path) -> CtlLink | None:
    """A started CtlLink when the config file names a controller, else None."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    target = data.get("controller")
    if not target:
        return None
    link = CtlLink(agent, str(target))
    link.start()
    return link

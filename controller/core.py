"""The controller's state and operations, independent of gRPC (controller/service.py adapts).

One lock serialises every state change, so a request is validated and applied as a unit and
the messages it produces reach every agent outbox in the order the changes were made.
Blocking work (waiting for endpoint-operation answers, streaming) happens outside the lock.
"""

from __future__ import annotations

import collections
import ipaddress
import itertools
import queue
import threading
import time
from dataclasses import dataclass, field

from common.proto import mrc_ctl_pb2 as pb
from common.vclock import RunClock
from controller import profile_store as prof
from controller.agents import AgentRegistry, RegisteredAgent
from controller.collective import Collectives
from controller.errors import CtlError, ErrorKind, invalid, not_found
from controller.events import EventHub, Subscription
from controller.fabric import FabricBackend, FabricState, InMemoryFabric
from controller.switch_ops import SwitchOps
from topologies.addressing import host_gid, mac
from topologies.model import FabricKind, NodeKind, Topology

CTL_VERSION = "1.0.1"
CTL_LAST_SUPPORTED = "1.0.0"
EP_MAX_TIMEOUT_NS = 60 * 10**9
EP_MAX_REQUESTS = 1024
CAPABILITIES = (
    "EV_PROFILE_MODIFY_ONLINE",
    "CC_PROFILE_MODIFY_ONLINE",
    "EV_EVENT",
    "EV_EVENT_PRECISE_DROP_CNT",
    "EP_OP_EV_PROBE",
)


@dataclass
class _EpBatch:
    expected: dict[int, tuple[str, int]]  # corr_id -> (agent_id, req_id)
    responses: list[pb.EpResponse] = field(default_factory=list)
    answered: set[int] = field(default_factory=set)
    cond: threading.Condition = field(default_factory=threading.Condition)


def _device_ports(topo: Topology | None, ports: int | None) -> int:
    if ports:
        return ports
    if topo is None:
        return 1
    if topo.fabric.kind == FabricKind.CIRCUIT and topo.fabric.ocs is not None:
        return topo.fabric.ocs.ports_per_gpu
    return topo.fabric.planes


class Controller:
    def __init__(
        self,
        topology: Topology | None = None,
        ports: int | None = None,
        backend: FabricBackend | None = None,
        clock: RunClock | None = None,
    ) -> None:
        # The run's clock (common/vclock.py): timeouts and periods of the experiment are in
        # its seconds; OS waits convert them with clock.to_wall. gRPC deadlines stay wall.
        self.clock = clock or RunClock(1.0)
        self.topology = topology
        self.ports = _device_ports(topology, ports)
        self.lock = threading.RLock()
        self.store = prof.ProfileStore(self.ports)
        self.agents = AgentRegistry()
        self.events = EventHub()
        self.fabric = (FabricState(topology, backend or InMemoryFabric(), sleep=self.clock.sleep)
                       if topology else None)
        self.switches = SwitchOps(backend)  # switch reads and captures (controller/drivers)
        # collective barriers: times and the dark time of reconfigurations on the run clock
        self.collectives = Collectives(self._fabric, clock=self.clock.now,
                                       wall=self.clock.to_wall, readback=self._read_circuits)
        self.counters: collections.Counter[str] = collections.Counter()
        self._admin: dict[tuple[str, int], int] = {}
        self._oper: dict[tuple[str, int], bool] = {}
        self._corr = itertools.count(1)
        self._pending: dict[int, _EpBatch] = {}
        self.closed = False

    # ------------------------------------------------------------------ device and ports

    def query_version(self) -> pb.QueryVersionResponse:
        return pb.QueryVersionResponse(
            current_version=CTL_VERSION, last_supported_version=CTL_LAST_SUPPORTED
        )

    def query_device(self, host: str) -> pb.DeviceAttr:
        with self.lock:
            mask = (1 << (self.ports + 1)) - 2  # bits 1..ports
            if host:
                mask = sum(1 << p for p in self._host_ports(host))
            return pb.DeviceAttr(
                protocol_version_mask=1,
                ev_max_fmt_profiles=prof.MAX_FMT_PROFILES,
                ev_max_profiles=prof.MAX_EV_PROFILES,
                ev_max_count=prof.EV_MAX_COUNT,
                ev_free_count=prof.EV_MAX_COUNT - self.store.ev_count_used(),
                ev_max_count_profile=prof.EV_MAX_COUNT_PROFILE,
                ev_count_align=0,
                ev_max_width=prof.EV_MAX_WIDTH,
                ev_fmt_modes=[pb.EV_FMT_STEV, pb.EV_FMT_SRV6, pb.EV_FMT_UDP],
                ev_modes=[pb.EV_MODE_AUTO, pb.EV_MODE_EXP, pb.EV_MODE_GEN],
                ev_op_max_entries=prof.EV_OP_MAX_ENTRIES,
                cc_max_profiles=prof.MAX_CC_PROFILES,
                cc_algorithms=list(prof.CC_ALGORITHMS),
                phy_port_mask=mask,
                capabilities=list(CAPABILITIES),
            )

    def _host_ports(self, host: str) -> list[int]:
        """1-based ports of a host: from the topology, else from its registered agent."""
        topo = self.topology
        if topo is not None:
            if not topo.has_node(host) or topo.node(host).kind not in (NodeKind.HOST, NodeKind.GPU):
                raise not_found(f"no host {host!r} in topology {topo.name}")
            return [p + 1 for p in topo.ports(host)]
        agent = self.agents.by_host(host)
        if agent is None:
            raise not_found(f"no host {host!r}: no topology loaded and no agent registered for it")
        return sorted(agent.ports)

    def _port_attr(self, host: str, port: int) -> pb.PortAttr:
        if port == 0:
            raise invalid("ports are 1-based")
        if port not in self._host_ports(host):
            raise not_found(f"host {host} has no port {port}")
        attr = pb.PortAttr(
            host=host,
            port=port,
            plane=port - 1,
            admin_state=self._admin.get((host, port), pb.PORT_ADMIN_ENABLED),  # type: ignore[arg-type]
        )
        agent = self.agents.by_host(host)
        oper = self._oper.get((host, port))
        attr.oper_state = (
            pb.PORT_OPER_UNKNOWN
            if oper is None
            else (pb.PORT_OPER_UP if oper else pb.PORT_OPER_DOWN)
        )
        if self.topology is not None:
            attr.gid = str(host_gid(self.topology, host, port - 1))
            attr.mac = mac(self.topology, host, port - 1)
        elif agent is not None:
            attr.gid = agent.ports[port].gid
            attr.mac = agent.ports[port].mac
        return attr

    def query_port(self, req: pb.QueryPortRequest) -> pb.PortAttr:
        with self.lock:
            return self._port_attr(req.host, req.port)

    def modify_port(self, req: pb.ModifyPortRequest) -> pb.PortAttr:
        with self.lock:
            self._port_attr(req.host, req.port)  # validates host and port
            if req.HasField("admin_state"):
                if req.admin_state not in (pb.PORT_ADMIN_ENABLED, pb.PORT_ADMIN_DISABLED):
                    raise invalid("admin_state must be ENABLED or DISABLED")
                self._admin[(req.host, req.port)] = req.admin_state
                agent = self.agents.by_host(req.host)
                if agent is not None:
                    cmd = pb.PortAdminCommand(port=req.port, admin_state=req.admin_state)
                    agent.send(pb.ControllerMessage(port_admin=cmd))
            return self._port_attr(req.host, req.port)

    # ------------------------------------------------------------------ profiles

    def _distribute(self, msgs: list[pb.ControllerMessage]) -> None:
        self.agents.broadcast(msgs)
        self.counters["profile_messages_sent"] += len(msgs)

    def modify_fmt(self, req: pb.ModifyEvFmtProfileRequest) -> pb.EvFmtProfile:
        with self.lock:
            out, msgs = self.store.modify_fmt(req)
            self._distribute(msgs)
            return out

    def query_fmt(self, req: pb.QueryEvFmtProfileRequest) -> pb.EvFmtProfile:
        with self.lock:
            return self.store.fmt_profile(req.profile_id)

    def modify_ev(self, req: pb.ModifyEvProfileRequest) -> pb.ModifyEvProfileResponse:
        with self.lock:
            out, msgs = self.store.modify_ev(req)
            self._distribute(msgs)
            return pb.ModifyEvProfileResponse(profile=out)

    def query_ev(self, req: pb.QueryEvProfileRequest) -> pb.QueryEvProfileResponse:
        with self.lock:
            return self.store.query_ev(req)

    def modify_cc(self, req: pb.ModifyCcProfileRequest) -> pb.CcProfile:
        with self.lock:
            out, msgs = self.store.modify_cc(req)
            self._distribute(msgs)
            return out

    def query_cc(self, req: pb.QueryCcProfileRequest) -> pb.CcProfile:
        with self.lock:
            return self.store.cc_profile(req.profile_id)

    # ------------------------------------------------------------------ events

    def subscribe(self, req: pb.WatchEvEventsRequest) -> Subscription:
        with self.lock:
            for pid in req.profile_ids:
                self.store.ev_profile(pid)  # NOT_FOUND for ids out of range
        self.counters["event_subscriptions"] += 1
        return self.events.subscribe(set(req.profile_ids), req.queue_depth)

    # ------------------------------------------------------------------ agents

    def register(self, req: pb.RegisterAgentRequest) -> pb.RegisterAgentResponse:
        with self.lock:
            topo = self.topology
            if topo is not None:
                if not topo.has_node(req.host) or topo.node(req.host).kind not in (
                    NodeKind.HOST,
                    NodeKind.GPU,
                ):
                    raise not_found(f"RegisterAgent: no host {req.host!r} in topology {topo.name}")
                for p in req.ports:
                    if p.port == 0 or topo.link_at(req.host, p.port - 1) is None:
                        raise invalid(
                            f"RegisterAgent {req.host}: the topology has no port {p.port}"
                        )
                    want = host_gid(topo, req.host, p.port - 1)
                    try:
                        ok = ipaddress.IPv6Address(p.gid) == want
                    except ValueError:
                        ok = False
                    if not ok:
                        raise invalid(
                            f"RegisterAgent {req.host}: port {p.port} GID {p.gid!r} does not match "
                            f"the address plan ({want})"
                        )
            agent, old = self.agents.register(req, self.ports)
            if old is not None:
                self.store.forget_host(old.host)
            for p in req.ports:
                self._oper[(req.host, p.port)] = p.up
            self.counters["agents_registered"] += 1
            return pb.RegisterAgentResponse(agent_id=agent.agent_id, snapshot=self.store.snapshot())

    def unregister(self, agent_id: str) -> None:
        with self.lock:
            agent = self.agents.get(agent_id)
            self.agents.remove_host(agent.host)
            self.store.forget_host(agent.host)
            for port in agent.ports:
                self._oper.pop((agent.host, port), None)

    def get_profiles(self, agent_id: str) -> pb.ProfileSnapshot:
        with self.lock:
            self.agents.get(agent_id)
            return self.store.snapshot()

    def report(self, agent_id: str, reports: list[pb.EvStateReport]) -> int:
        with self.lock:
            agent = self.agents.get(agent_id)
            return sum(self._report_one(agent, r) for r in reports)

    def _report_one(self, agent: RegisteredAgent, rep: pb.EvStateReport) -> bool:
        agent.ev_reports += 1
        if rep.state not in prof.EVENT_STATES:
            self.counters["ev_reports_rejected"] += 1
            return False
        if rep.profile_id < 1 or rep.profile_id > prof.MAX_EV_PROFILES:
            self.counters["ev_reports_rejected"] += 1
            return False
        matches = self.store.report(agent.host, rep)
        self.counters["ev_reports"] += 1
        if matches:
            event = pb.EvEvent(
                profile_id=rep.profile_id, ev=rep.ev, state=rep.state, host=agent.host, qpn=rep.qpn
            )
            self.events.publish(event)
            self.counters["ev_events"] += 1
        return True

    def attach(self, agent_id: str) -> tuple[RegisteredAgent, int, queue.Queue[pb.ControllerMessage | None]]:
        """Attach a channel: the agent's outbox restarts with a full snapshot."""
        with self.lock:
            agent = self.agents.get(agent_id)
            if agent.attached:
                agent.detach()  # an older channel of the same agent stops
            agent.outbox = queue.Queue()
            agent.attached = True
            agent.epoch += 1
            snap = self.store.snapshot()
            agent.outbox.put(pb.ControllerMessage(generation=snap.generation, snapshot=snap))
            self.counters["agent_attaches"] += 1
            return agent, agent.epoch, agent.outbox

    def detach(self, agent: RegisteredAgent, epoch: int) -> None:
        with self.lock:
            if agent.epoch == epoch and agent.attached:
                agent.attached = False
                agent.epoch += 1
                agent.outbox.put(None)

    def on_agent_message(self, agent: RegisteredAgent, msg: pb.AgentMessage) -> None:
        kind = msg.WhichOneof("msg")
        with self.lock:
            if kind == "ep_result":
                agent.ep_results += 1
                self._ep_result(agent, msg.ep_result)
            elif kind == "ev_state":
                self._report_one(agent, msg.ev_state)
            elif kind == "port_oper":
                if msg.port_oper.port in agent.ports:
                    self._oper[(agent.host, msg.port_oper.port)] = msg.port_oper.up
                else:
                    self.counters["agent_messages_rejected"] += 1
            else:
                self.counters["agent_messages_rejected"] += 1

    # ------------------------------------------------------------------ endpoint operations

    def ep_batch(self, req: pb.EpBatchRequest, deadline: float | None = None) -> pb.EpBatchResponse:
        """Fan a batch out to the agents owning the source GIDs and wait for the answers."""
        with self.lock:
            batch, commands = self._ep_prepare(req)
            for agent, cmd in commands:
                agent.send(pb.ControllerMessage(ep=cmd))
            self.counters["ep_requests_sent"] += len(commands)
        end = time.monotonic() + self.clock.to_wall(req.rsp_timeout_ns / 1e9)
        if deadline is not None:
            end = min(end, deadline)
        with batch.cond:
            while len(batch.answered) < len(batch.expected):
                left = end - time.monotonic()
                if left <= 0:
                    break
                batch.cond.wait(left)
        with self.lock:
            for corr in batch.expected:
                self._pending.pop(corr, None)
            with batch.cond:
                resp = pb.EpBatchResponse(responses=list(batch.responses))
                missing = [
                    req_id
                    for corr, (_, req_id) in batch.expected.items()
                    if corr not in batch.answered
                ]
            resp.unanswered.extend(sorted(missing))
            resp.timed_out = bool(missing)
            if missing:
                self.counters["ep_timeouts"] += 1
            return resp

    def _ep_prepare(
        self, req: pb.EpBatchRequest
    ) -> tuple[_EpBatch, list[tuple[RegisteredAgent, pb.EpCommand]]]:
        if req.op_type not in (pb.EP_OP_EV_PROBE, pb.EP_OP_PORT_STATUS_UPDATE):
            raise invalid("op_type must be EP_OP_EV_PROBE or EP_OP_PORT_STATUS_UPDATE")
        if not req.requests or len(req.requests) > EP_MAX_REQUESTS:
            raise invalid(f"a batch holds 1..{EP_MAX_REQUESTS} requests")
        if not 0 < req.rsp_timeout_ns <= EP_MAX_TIMEOUT_NS:
            raise invalid(f"rsp_timeout_ns must be in 1..{EP_MAX_TIMEOUT_NS}")
        if req.req_tc > 63:
            raise invalid("req_tc is a DSCP value (0..63)")
        seen: set[int] = set()
        plan: list[tuple[RegisteredAgent, pb.EpRequest]] = []
        for r in req.requests:
            if r.req_id in seen or r.req_id > 0xFFFF:
                raise invalid(f"req_id {r.req_id} repeated or above 16 bits")
            seen.add(r.req_id)
            try:
                sgid = ipaddress.IPv6Address(r.sgid)
                ipaddress.IPv6Address(r.dgid)
            except ValueError:
                raise invalid(f"request {r.req_id}: sgid/dgid must be IPv6 addresses") from None
            owner = self.agents.owner_of(sgid)
            if owner is None:
                raise not_found(f"request {r.req_id}: no registered agent owns source GID {sgid}")
            agent, port = owner
            if not agent.attached:
                raise not_found(
                    f"request {r.req_id}: the agent of {agent.host} has no open channel"
                )
            if r.req_ev.port not in (0, port):
                raise invalid(
                    f"request {r.req_id}: req_ev port {r.req_ev.port} is not the port of {sgid} ({port})"
                )
            if req.op_type == pb.EP_OP_EV_PROBE and r.ev_fmt_mode == pb.EV_FMT_UNSPECIFIED:
                raise invalid(f"request {r.req_id}: an EV probe needs ev_fmt_mode")
            if req.op_type == pb.EP_OP_PORT_STATUS_UPDATE and r.port_status >> self.ports:
                raise invalid(f"request {r.req_id}: port_status {r.port_status:#x} names ports "
                              f"outside 1..{self.ports} (bit p-1 = port p)")
            plan.append((agent, r))
        batch = _EpBatch(expected={})
        commands = []
        for agent, r in plan:
            corr = next(self._corr)
            batch.expected[corr] = (agent.agent_id, r.req_id)
            self._pending[corr] = batch
            cmd = pb.EpCommand(
                corr_id=corr,
                op_type=req.op_type,
                req_tc=req.req_tc,
                request=r,
                timeout_ns=req.rsp_timeout_ns,
            )
            commands.append((agent, cmd))
        return batch, commands

    def _ep_result(self, agent: RegisteredAgent, result: pb.EpResult) -> None:
        batch = self._pending.get(result.corr_id)
        if batch is None:
            self.counters["ep_results_late_or_unknown"] += 1
            return
        agent_id, req_id = batch.expected[result.corr_id]
        if agent_id != agent.agent_id or result.response.req_id != req_id:
            self.counters["ep_results_mismatched"] += 1
            return
        with batch.cond:
            if result.corr_id in batch.answered:
                self.counters["ep_results_duplicate"] += 1
                return
            batch.answered.add(result.corr_id)
            batch.responses.append(result.response)
            batch.cond.notify_all()

    # ------------------------------------------------------------------ fabric

    def _fabric(self) -> FabricState:
        if self.fabric is None:
            raise CtlError(
                ErrorKind.BUSY, "no topology loaded (start the controller with --topology)"
            )
        return self.fabric

    def topology_view(self) -> pb.TopologyView:
        with self.lock:
            return self._fabric().view({a.host for a in self.agents.all()})

    def set_link_state(self, req: pb.SetLinkStateRequest) -> pb.LinkView:
        with self.lock:
            view = self._fabric().set_link(req.link, req.up)
            self.counters["link_state_changes"] += 1
            return view

    def reconfigure(self, req: pb.ReconfigureCircuitsRequest) -> pb.CircuitState:
        with self.lock:
            state = self._fabric().reconfigure(list(req.circuits))
            self.counters["circuit_reconfigurations"] += 1
            return state

    def _read_circuits(self) -> dict[int, int]:
        return self._fabric().read_circuits()

    def start_collective(self, req: pb.StartCollectiveRequest) -> pb.CollectiveState:
        state = self.collectives.start(req)
        with self.lock:
            self.counters["collective_sessions"] += 1
        return state

    def circuits(self) -> pb.CircuitState:
        with self.lock:
            return self._fabric().circuit_state()

    def statistics(self) -> pb.Statistics:
        with self.lock:
            stats = pb.Statistics()
            for key, value in self.counters.items():
                stats.counters[key] = value
            stats.counters["agents"] = len(self.agents.all())
            stats.counters["event_subscribers"] = self.events.subscribers
            stats.counters["ev_events_published"] = self.events.published
            stats.counters["profile_generation"] = self.store.generation
            if self.fabric is not None:
                for key, value in self.fabric.backend.stats().items():
                    stats.counters[key] = value
            for a in self.agents.all():
                stats.agents.add(
                    agent_id=a.agent_id,
                    host=a.host,
                    attached=a.attached,
                    ev_reports=a.ev_reports,
                    ep_results=a.ep_results,
                )
            return stats

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for agent in self.agents.all():
                if agent.attached:
                    agent.detach()
        self.events.close_all()

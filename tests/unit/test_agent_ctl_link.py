"""The agent's controller link against a real controller (unix socket, clos-2p) and a real
HostCore behind a minimal stand-in agent (no NIC, no loop thread)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.proto import mrc_ctl_pb2 as pb
from controller.server import ControllerServer, ServerConfig, start
from hosts.agent.config import parse_config
from hosts.agent.corecfg import build_core
from hosts.agent.ctl_link import CtlLink, CtlLinkError
from hosts.transport import EvState, EvStateChanged
from mrcnet.fabric.ctlclient import CC_PROFILE, EV_PROFILE, CtlClient, ev_array
from topologies.loader import load
from topologies.model import PathMode


class StandInAgent:
    """What CtlLink uses of hosts.agent.Agent: config, port state, core, call, now, handlers,
    set_port_admin (host ``index`` of clos-2p's address plan: GIDs fd00:6d72:6300:P::index)."""

    def __init__(self, host: str, index: int = 1) -> None:
        self.config = parse_config({"name": host, "ev_mode": "stev", "ports": [
            {"ifname": f"{host}p{p}", "mac": f"02:00:00:00:0{index}:0{p}",
             "gid": f"fd00:6d72:6300:{p}::{index}", "neighbor_mac": "02:01:00:00:00:01"}
            for p in (0, 1)]})
        self.port_up = [True, True]
        self.port_admin = [True, True]
        self.port_hooks: list[Callable[[int, bool], None]] = []
        self.core = build_core(self.config)
        self.lock = threading.RLock()
        self.handlers: list[Callable[[object, float], None]] = []

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.lock:
            out = fn(*args)
            self.drain()
            return out

    def drain(self) -> None:
        """Hand the core's events to the handlers (the real agent's loop does this)."""
        while (ev := self.core.next_event()) is not None:
            for h in list(self.handlers):
                h(ev, self.now())

    def set_port_admin(self, port: int, enabled: bool) -> None:
        self.port_admin[port] = enabled
        if self.port_up[port] != enabled:
            self.port_up[port] = enabled
            self.core.port_status(port, enabled, self.now())

    def now(self) -> float:
        return time.monotonic()

    def add_handler(self, h: Callable[[object, float], None]) -> None:
        self.handlers.append(h)

    def remove_handler(self, h: Callable[[object, float], None]) -> None:
        self.handlers.remove(h)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControllerServer]:
    srv = start(ServerConfig(unix=str(tmp_path / "ctl.sock"), topology="clos-2p", max_workers=16))
    yield srv
    srv.stop()


def _wait(pred: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_profiles_denials_and_reports(server: ControllerServer) -> None:
    ctl = CtlClient(server.address)
    ctl.setup_profiles(load("clos-2p"), PathMode.STEV, "reps")
    ctl.setup_cc_profile(load("clos-2p"), 2e-3)
    agent = StandInAgent("h0")
    link = CtlLink(agent, server.address)  # type: ignore[arg-type]
    link.start()
    events: queue.Queue[pb.EvEvent] = queue.Queue()
    try:
        # the snapshot at registration installed profile 1: the controller's array,
        # 1-based ports turned into NIC port indexes
        _fmt, _w, evs = ev_array(load("clos-2p"), PathMode.STEV)
        core_prof = agent.core._ev_profiles[EV_PROFILE]
        assert [(e.ev, e.port) for e in core_prof.entries] == [
            (int(e.value), int(e.port) - 1) for e in evs]
        assert core_prof.spray == "reps"  # the profile's load balancing
        cc = agent.core._cc_profiles[CC_PROFILE]  # the NSCC profile, stored by the core
        assert cc.algorithm == "uet-1.0-nscc" and cc.params["mtu"] == 4096
        assert cc.params["base_rtt_ns"] == 2_000_000  # the base RTT the orchestrator gave
        _wait(lambda: ctl.agents() == {"h0": True}, "agent attached")
        # DENY: sent to the agent, the EV leaves the profile new QPs bind to
        ctl.set_run_ev_state([(0x100, 1)], pb.EV_DENIED)
        _wait(lambda: (0x100, 0) not in [(e.ev, e.port) for e in
                                         agent.core._ev_profiles[EV_PROFILE].entries],
              "denied EV removed from the core's profile")
        assert link.denied[EV_PROFILE] == {0x100}
        ctl.set_run_ev_state([(0x100, 1)], pb.EV_GOOD)
        _wait(lambda: (0x100, 0) in [(e.ev, e.port) for e in
                                     agent.core._ev_profiles[EV_PROFILE].entries],
              "denial lifted")
        # datapath reports reach subscribers; SKIP -> GOOD is not reported
        ctl.watch_run_events(events.put)
        _wait(lambda: ctl.fabric.GetStatistics(pb.GetStatisticsRequest())
              .counters["event_subscribers"] == 1, "the subscription")
        report = link._on_core_event
        report(EvStateChanged(17, EV_PROFILE, 0x80000101, 1, EvState.GOOD,
                              EvState.ASSUMED_BAD, "loss"), 0.0)
        report(EvStateChanged(17, EV_PROFILE, 0x80000102, 1, EvState.SKIP, EvState.GOOD,
                              "ecn"), 0.0)
        report(EvStateChanged(17, EV_PROFILE, 0x80000101, 1, EvState.ASSUMED_BAD,
                              EvState.GOOD, "probe"), 0.0)
        report(EvStateChanged(17, 99, 0x1, 0, EvState.GOOD, EvState.ASSUMED_BAD, "x"), 0.0)
        got = [events.get(timeout=5), events.get(timeout=5)]
        assert [(e.host, e.qpn, e.ev.value, e.ev.port, e.state) for e in got] == [
            ("h0", 17, 0x80000101, 2, pb.EV_ASSUMED_BAD), ("h0", 17, 0x80000101, 2, pb.EV_GOOD)]
        assert events.empty()
    finally:
        link.close()
        ctl.close()
    link.close()  # idempotent


class Wire:
    """Moves packets between the cores of stand-in agents (lossless, at once) on a thread."""

    def __init__(self, agents: list[StandInAgent], threaded: bool = True) -> None:
        self.agents = agents
        self.by_gid = {p.gid: (a, i) for a in agents for i, p in enumerate(a.config.ports)}
        self.ports: list[tuple[str, int]] = []  # (sender, port) of every data packet
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        if threaded:
            self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            if not self.pump():
                time.sleep(0.001)

    def pump(self) -> int:
        """One pass: every packet the cores have to send is received by its peer now."""
        from hosts.transport import RxMeta

        moved = 0
        for a in self.agents:
            with a.lock:
                pkts = a.core.packets_to_send(a.now())
            for tx in pkts:
                moved += 1
                if tx.pkt.reth is not None:
                    self.ports.append((a.config.name, tx.port))
                dst, port = self.by_gid[tx.dst_gid]
                meta = RxMeta(port, a.config.ports[tx.port].gid, tx.dst_gid, tx.ev,
                              a.config.classes.dscp[tx.tclass])
                with dst.lock:
                    dst.core.receive(tx.pkt, meta, dst.now())
                    dst.drain()
        return moved

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


def _linked_pair(server: ControllerServer) -> tuple[list[StandInAgent], list[CtlLink], Wire]:
    agents = [StandInAgent("h0", 1), StandInAgent("h1", 2)]
    links = [CtlLink(a, server.address) for a in agents]  # type: ignore[arg-type]
    for link in links:
        link.start()
    return agents, links, Wire(agents)


def _connect(a: StandInAgent, b: StandInAgent) -> tuple[int, int]:
    from hosts.transport.sim import QpOptions, connect

    with a.lock, b.lock:
        return connect(a.core, b.core, QpOptions(profile_id=0, timeout=20))


def test_controller_ev_probes_are_answered_and_revive_assumed_bad_evs(
        server: ControllerServer) -> None:
    """EpBatchSendWait with EV probes from h0 to h1: the agent sends them from the port of
    the source GID, h1 answers, the controller returns every req_id with an RTT; an EV the
    probe covers that was ASSUMED_BAD on h0's QP to h1 is GOOD again (ctl_ev_probe_ok)."""
    agents, links, wire = _linked_pair(server)
    ctl = CtlClient(server.address)
    try:
        _wait(lambda: ctl.agents() == {"h0": True, "h1": True}, "agents attached")
        h0, h1 = agents
        qa, _qb = _connect(h0, h1)
        evs = [(ev, port) for ev, port, _s in h0.core.ev_states(qa)]
        bad = [e for e in evs if e[1] == 1][:2]  # two EVs of plane 1
        with h0.lock:
            for ev, _port in bad:
                h0.core.set_ev_state(0, ev, EvState.ASSUMED_BAD)
        req = pb.EpBatchRequest(op_type=pb.EP_OP_EV_PROBE, rsp_timeout_ns=2_000_000_000)
        for rid, (ev, _port) in zip((7, 9), bad):
            req.requests.add(req_id=rid, sgid="fd00:6d72:6300:1::1", dgid="fd00:6d72:6300:1::2",
                             ev_fmt_mode=pb.EV_FMT_STEV, req_ev=pb.Ev(value=ev, port=2))
        resp = ctl.ctl.EpBatchSendWait(req, timeout=10)
        assert not resp.timed_out and sorted(r.req_id for r in resp.responses) == [7, 9]
        assert all(r.port == 2 and r.rtt_ns > 0 for r in resp.responses)
        states = {ev: s for ev, _p, s in h0.core.ev_states(qa)}
        assert [states[ev] for ev, _p in bad] == [EvState.GOOD, EvState.GOOD]
        st = h0.core.qp_stats(qa)
        assert st["ev_state_ctl_ev_probe_ok"] == 2 and st.get("ev_state_ev_probe_ok", 0) == 0
        assert h1.core.host_stats()["rx_ev_probe"] == 2
        # a source GID no agent owns: refused, nothing sent
        req.requests[0].sgid = "fd00:6d72:6300:1::9"
        with pytest.raises(Exception, match="NOT_FOUND"):
            ctl.ctl.EpBatchSendWait(req, timeout=10)
        assert h0.core.host_stats()["tx_ev_probe"] == 2
    finally:
        wire.close()
        for link in links:
            link.close()
        ctl.close()


def test_controller_port_status_update_carries_its_mask_and_peers_avoid_the_plane(
        server: ControllerServer) -> None:
    agents, links, wire = _linked_pair(server)
    ctl = CtlClient(server.address)
    try:
        _wait(lambda: ctl.agents() == {"h0": True, "h1": True}, "agents attached")
        h0, h1 = agents
        _qa, qb = _connect(h0, h1)
        req = pb.EpBatchRequest(op_type=pb.EP_OP_PORT_STATUS_UPDATE, rsp_timeout_ns=2 * 10**9)
        # h0 announces to h1: only port 1 (plane 0) is usable
        req.requests.add(req_id=3, sgid="fd00:6d72:6300::1", dgid="fd00:6d72:6300::2",
                         port_status=0b01)
        resp = ctl.ctl.EpBatchSendWait(req, timeout=10)
        assert [r.req_id for r in resp.responses] == [3] and not resp.timed_out
        assert h1.core.qp_stats(qb)["peer_psu"] == 1
        # h1 now writes to h0 over plane 0 only
        buf = bytearray(256 << 10)
        from hosts.transport import ALL_ACCESS, SendWR, WrOpcode

        with h1.lock, h0.lock:
            m1 = h1.core.register_mr(buf, ALL_ACCESS)
            m0 = h0.core.register_mr(bytearray(len(buf)), ALL_ACCESS)
            wire.ports.clear()
            h1.core.post_send(qb, SendWR(1, WrOpcode.WRITE, m1.addr, len(buf), m1.lkey,
                                         m0.addr, m0.rkey), h1.now())
        _wait(lambda: sum(1 for n, _p in wire.ports if n == "h1") >= len(buf) // 4096,
              "h1's data on the wire")
        assert {p for n, p in wire.ports if n == "h1"} == {0}
        # bits for ports the device does not have are refused
        req.requests[0].port_status = 0b100
        with pytest.raises(Exception, match="INVALID_ARGUMENT"):
            ctl.ctl.EpBatchSendWait(req, timeout=10)
    finally:
        wire.close()
        for link in links:
            link.close()
        ctl.close()


class AnsweredAtOnceAgent(StandInAgent):
    """A loop that, right after running a call, moves every packet and its answer before the
    calling thread gets the result back: the fastest peer there can be."""

    wire: Wire | None = None

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        out = super().call(fn, *args)
        while self.wire is not None and self.wire.pump():
            pass
        return out


def test_an_endpoint_answer_faster_than_the_calling_thread_still_reaches_the_controller(
        server: ControllerServer) -> None:
    """The answer to a controller's endpoint operation can be read before the thread that
    asked the core to send it runs again: the request id must be known by then (a race seen
    in CI as an unanswered Port Status Update)."""
    agents = [AnsweredAtOnceAgent("h0", 1), AnsweredAtOnceAgent("h1", 2)]
    wire = Wire(list(agents), threaded=False)
    for a in agents:
        a.wire = wire
    links = [CtlLink(a, server.address) for a in agents]  # type: ignore[arg-type]
    for link in links:
        link.start()
    ctl = CtlClient(server.address)
    try:
        _wait(lambda: ctl.agents() == {"h0": True, "h1": True}, "agents attached")
        req = pb.EpBatchRequest(op_type=pb.EP_OP_PORT_STATUS_UPDATE, rsp_timeout_ns=2 * 10**9)
        req.requests.add(req_id=5, sgid="fd00:6d72:6300::1", dgid="fd00:6d72:6300::2",
                         port_status=0b11)
        resp = ctl.ctl.EpBatchSendWait(req, timeout=10)
        assert [r.req_id for r in resp.responses] == [5] and not resp.timed_out
        assert agents[0].core.host_stats()["rx_psu_response"] == 1
    finally:
        for link in links:
            link.close()
        ctl.close()


def test_modify_port_disables_and_enables_a_nic_port(server: ControllerServer) -> None:
    """ModifyPort reaches the agent (port_admin): the core takes the port out of use and
    sends a Port Status Update to its peer; the agent reports the port down, so QueryPort
    shows it DISABLED and DOWN, and back."""
    agents, links, wire = _linked_pair(server)
    ctl = CtlClient(server.address)
    try:
        _wait(lambda: ctl.agents() == {"h0": True, "h1": True}, "agents attached")
        h0, h1 = agents
        _qa, qb = _connect(h0, h1)

        def port(host: str, n: int) -> pb.PortAttr:
            return ctl.ctl.QueryPort(pb.QueryPortRequest(host=host, port=n), timeout=5)

        assert port("h0", 2).oper_state == pb.PORT_OPER_UP
        ctl.ctl.ModifyPort(pb.ModifyPortRequest(host="h0", port=2,
                                                admin_state=pb.PORT_ADMIN_DISABLED), timeout=5)
        _wait(lambda: port("h0", 2).oper_state == pb.PORT_OPER_DOWN, "port 2 reported down")
        assert port("h0", 2).admin_state == pb.PORT_ADMIN_DISABLED
        assert h0.port_up == [True, False] and h0.core.port_status_mask == 0b01
        _wait(lambda: h1.core.qp_stats(qb).get("peer_psu", 0) == 1, "the peer told")
        ctl.ctl.ModifyPort(pb.ModifyPortRequest(host="h0", port=2,
                                                admin_state=pb.PORT_ADMIN_ENABLED), timeout=5)
        _wait(lambda: port("h0", 2).oper_state == pb.PORT_OPER_UP, "port 2 reported up")
        assert h0.core.port_status_mask == 0b11
        _wait(lambda: h1.core.qp_stats(qb).get("peer_psu", 0) == 2, "the peer told again")
        assert links[0].counters["port_admin"] == 2 and links[0].counters["errors"] == 0
    finally:
        wire.close()
        for link in links:
            link.close()
        ctl.close()


def test_registration_refused_names_the_reason(server: ControllerServer) -> None:
    agent = StandInAgent("h9")  # not a host of clos-2p
    with pytest.raises(CtlLinkError, match="NOT_FOUND"):
        CtlLink(agent, server.address).start()  # type: ignore[arg-type]

"""The controller over real gRPC on a unix socket: operator API, agents, events, probes, fabric.

Agents are played by FakeAgent (a real gRPC client of the MrcAgent service). Waits use
timeouts on queues, never fixed sleeps.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from controller.profile_store import nscc_defaults
from controller.server import ControllerServer, ServerConfig, start
from topologies.addressing import host_gid
from topologies.loader import load

WAIT = 5.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControllerServer]:
    srv = start(ServerConfig(unix=str(tmp_path / "ctl.sock"), topology="clos-2p", max_workers=16))
    yield srv
    srv.stop()


@pytest.fixture
def channel(server: ControllerServer) -> Iterator[grpc.Channel]:
    ch = grpc.insecure_channel(server.address)
    yield ch
    ch.close()


@pytest.fixture
def ctl(channel: grpc.Channel) -> pb_grpc.MrcCtlStub:
    return pb_grpc.MrcCtlStub(channel)


def code_of(fn: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        fn()
    err = info.value
    return err.code(), err.details()  # type: ignore[attr-defined]


class FakeAgent:
    """Registers a host of clos-2p, attaches a channel and records what the controller sends."""

    def __init__(
        self, channel: grpc.Channel, host: str, answer_probes: bool = True, rtt_ns: int = 1234
    ) -> None:
        self.stub = pb_grpc.MrcAgentStub(channel)
        topo = load("clos-2p")
        ports = [
            pb.AgentPort(port=p + 1, gid=str(host_gid(topo, host, p)), up=True) for p in (0, 1)
        ]
        reg = self.stub.RegisterAgent(pb.RegisterAgentRequest(host=host, ports=ports), timeout=WAIT)
        self.agent_id = reg.agent_id
        self.registered_snapshot = reg.snapshot
        self.answer_probes = answer_probes
        self.rtt_ns = rtt_ns
        self.inbox: queue.Queue[pb.ControllerMessage] = queue.Queue()
        self.outgoing: queue.Queue[pb.AgentMessage | None] = queue.Queue()
        self.outgoing.put(pb.AgentMessage(attach=pb.AgentAttach(agent_id=self.agent_id)))
        self.call = self.stub.AgentChannel(self._requests())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _requests(self) -> Iterator[pb.AgentMessage]:
        while True:
            msg = self.outgoing.get()
            if msg is None:
                return
            yield msg

    def _run(self) -> None:
        try:
            for msg in self.call:
                if msg.WhichOneof("msg") == "ep" and self.answer_probes:
                    cmd = msg.ep
                    rsp = pb.EpResponse(
                        req_id=cmd.request.req_id,
                        port=cmd.request.req_ev.port or 1,
                        rtt_ns=self.rtt_ns,
                    )
                    self.outgoing.put(
                        pb.AgentMessage(ep_result=pb.EpResult(corr_id=cmd.corr_id, response=rsp))
                    )
                self.inbox.put(msg)
        except grpc.RpcError:
            pass

    def expect(self, kind: str) -> pb.ControllerMessage:
        while True:
            msg = self.inbox.get(timeout=WAIT)
            if msg.WhichOneof("msg") == kind:
                return msg

    def send(self, msg: pb.AgentMessage) -> None:
        self.outgoing.put(msg)

    def close(self) -> None:
        self.outgoing.put(None)
        self.call.cancel()


def setup_exp_profile(ctl: pb_grpc.MrcCtlStub, evs: list[tuple[int, int]], pid: int = 1) -> None:
    ctl.ModifyEvFmtProfile(
        pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_FMT_STEV)
    )
    ctl.ModifyEvFmtProfile(
        pb.ModifyEvFmtProfileRequest(
            profile_id=1, state=pb.PROFILE_ONLINE, fields=pb.FieldWidths(widths=[1, 31])
        )
    )
    op = pb.EvOp(op=pb.REPLACE_EV)
    for v, p in evs:
        op.entries.add(ev=pb.Ev(), ev_new=pb.Ev(value=v, port=p))
    ctl.ModifyEvProfile(
        pb.ModifyEvProfileRequest(
            profile_id=pid,
            state=pb.PROFILE_OFFLINE,
            mode=pb.EV_MODE_EXP,
            fmt_profile_id=1,
            ev_count=len(evs),
        )
    )
    ctl.ModifyEvProfile(pb.ModifyEvProfileRequest(profile_id=pid, ev_op=op))
    ctl.ModifyEvProfile(
        pb.ModifyEvProfileRequest(
            profile_id=pid,
            state=pb.PROFILE_ONLINE,
            ev_min_active=1,
            event_mask=pb.EventMask(states=[pb.EV_ASSUMED_BAD, pb.EV_GOOD]),
        )
    )


def test_unix_socket_is_private(server: ControllerServer) -> None:
    path = server.address.removeprefix("unix:")
    mode = os.stat(path).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600


def test_device_and_ports(ctl: pb_grpc.MrcCtlStub) -> None:
    assert ctl.QueryVersion(pb.QueryVersionRequest()).current_version == "1.0.1"
    dev = ctl.QueryDevice(pb.QueryDeviceRequest())
    assert dev.phy_port_mask == 0b110  # ports 1 and 2 (two planes)
    assert "uet-1.0-nscc" in dev.cc_algorithms
    port = ctl.QueryPort(pb.QueryPortRequest(host="h2", port=2))
    topo = load("clos-2p")
    assert port.gid == str(host_gid(topo, "h2", 1)) and port.plane == 1
    assert port.admin_state == pb.PORT_ADMIN_ENABLED and port.oper_state == pb.PORT_OPER_UNKNOWN
    assert (
        code_of(lambda: ctl.QueryPort(pb.QueryPortRequest(host="nope", port=1)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code_of(lambda: ctl.QueryPort(pb.QueryPortRequest(host="h0", port=3)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code_of(lambda: ctl.QueryPort(pb.QueryPortRequest(host="h0", port=0)))[0]
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    out = ctl.ModifyPort(
        pb.ModifyPortRequest(host="h0", port=1, admin_state=pb.PORT_ADMIN_DISABLED)
    )
    assert out.admin_state == pb.PORT_ADMIN_DISABLED
    assert (
        ctl.QueryPort(pb.QueryPortRequest(host="h0", port=1)).admin_state == pb.PORT_ADMIN_DISABLED
    )


def test_bad_requests_change_nothing(ctl: pb_grpc.MrcCtlStub) -> None:
    setup_exp_profile(ctl, [(0x10, 1), (0x20, 2)])
    before = ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=1)).profile
    cases = [
        # ONLINE profile: count may not change
        (
            pb.ModifyEvProfileRequest(profile_id=1, ev_count=5),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ev_count cannot change",
        ),
        # unknown profile id
        (
            pb.ModifyEvProfileRequest(profile_id=999, state=pb.PROFILE_OFFLINE),
            grpc.StatusCode.NOT_FOUND,
            "ids 1..64",
        ),
        # EV not in the array
        (
            pb.ModifyEvProfileRequest(
                profile_id=1,
                ev_op=pb.EvOp(
                    op=pb.MODIFY_EV_STATE,
                    entries=[pb.EvOpEntry(ev=pb.Ev(value=0x30, port=1), state=pb.EV_DENIED)],
                ),
            ),
            grpc.StatusCode.NOT_FOUND,
            "not in the EV array",
        ),
        # second entry bad: the first must not be applied
        (
            pb.ModifyEvProfileRequest(
                profile_id=1,
                ev_op=pb.EvOp(
                    op=pb.MODIFY_EV_STATE,
                    entries=[
                        pb.EvOpEntry(ev=pb.Ev(value=0x10, port=1), state=pb.EV_DENIED),
                        pb.EvOpEntry(ev=pb.Ev(value=0x20, port=2), state=pb.EV_UNKNOWN),
                    ],
                ),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "state must be",
        ),
    ]
    for req, code, text in cases:
        got, details = code_of(lambda req=req: ctl.ModifyEvProfile(req))
        assert got == code and text in details, details
    after = ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=1)).profile
    assert after == before
    assert not after.denied


def test_profiles_distributed_to_agents(channel: grpc.Channel, ctl: pb_grpc.MrcCtlStub) -> None:
    a0 = FakeAgent(channel, "h0")
    a1 = FakeAgent(channel, "h3")
    try:
        for agent in (a0, a1):
            snap = agent.expect("snapshot").snapshot
            assert list(snap.ev_profiles) == []
        setup_exp_profile(ctl, [(0x10, 1), (0x20, 2), (0x30, 1)])
        for agent in (a0, a1):
            # the format profile and the EV profile arrive when they go ONLINE, not before
            assert agent.expect("fmt_profile").fmt_profile.id == 1
            prof = agent.expect("ev_profile").ev_profile
            assert prof.state == pb.PROFILE_ONLINE
            assert [(e.value, e.port) for e in prof.evs] == [(0x10, 1), (0x20, 2), (0x30, 1)]
        # DENIED applies to the profile: every agent is told
        ctl.ModifyEvProfile(
            pb.ModifyEvProfileRequest(
                profile_id=1,
                ev_op=pb.EvOp(
                    op=pb.MODIFY_EV_STATE,
                    entries=[pb.EvOpEntry(ev=pb.Ev(value=0x20, port=2), state=pb.EV_DENIED)],
                ),
            )
        )
        for agent in (a0, a1):
            upd = agent.expect("ev_state").ev_state
            assert (upd.profile_id, upd.ev.value, upd.ev.port, upd.state) == (
                1,
                0x20,
                2,
                pb.EV_DENIED,
            )
        # a CC profile
        ctl.ModifyCcProfile(
            pb.ModifyCcProfileRequest(
                profile_id=4, state=pb.PROFILE_OFFLINE, algorithm="uet-1.0-nscc"
            )
        )
        ctl.ModifyCcProfile(
            pb.ModifyCcProfileRequest(
                profile_id=4, state=pb.PROFILE_ONLINE, nscc=nscc_defaults(1e9, 2e-4)
            )
        )
        assert a0.expect("cc_profile").cc_profile.nscc.base_rtt_ns == 200_000
        # a late agent gets everything in its snapshot, DENIED included
        late = FakeAgent(channel, "h1")
        try:
            snap = late.expect("snapshot").snapshot
            assert [p.id for p in snap.ev_profiles] == [1] and [p.id for p in snap.cc_profiles] == [
                4
            ]
            assert [(e.value, e.port) for e in snap.ev_profiles[0].denied] == [(0x20, 2)]
            assert late.stub.GetProfiles(pb.GetProfilesRequest(agent_id=late.agent_id)) == snap
        finally:
            late.close()
        # going OFFLINE withdraws it
        ctl.ModifyEvProfile(pb.ModifyEvProfileRequest(profile_id=1, state=pb.PROFILE_OFFLINE))
        removed = a1.expect("removed").removed
        assert (removed.kind, removed.profile_id) == ("ev", 1)
    finally:
        a0.close()
        a1.close()


def test_registration_is_validated(channel: grpc.Channel) -> None:
    stub = pb_grpc.MrcAgentStub(channel)
    topo = load("clos-2p")
    good = [pb.AgentPort(port=p + 1, gid=str(host_gid(topo, "h1", p))) for p in (0, 1)]
    assert (
        code_of(lambda: stub.RegisterAgent(pb.RegisterAgentRequest(host="h9", ports=good)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    wrong = [pb.AgentPort(port=1, gid=str(host_gid(topo, "h2", 0)))]
    code, details = code_of(
        lambda: stub.RegisterAgent(pb.RegisterAgentRequest(host="h1", ports=wrong))
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "does not match the address plan" in details
    bad_port = [pb.AgentPort(port=3, gid="fd00::1")]
    assert (
        code_of(lambda: stub.RegisterAgent(pb.RegisterAgentRequest(host="h1", ports=bad_port)))[0]
        == grpc.StatusCode.INVALID_ARGUMENT
    )
    assert (
        code_of(lambda: stub.GetProfiles(pb.GetProfilesRequest(agent_id="ghost")))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    reg = stub.RegisterAgent(pb.RegisterAgentRequest(host="h1", ports=good))
    stub.UnregisterAgent(pb.UnregisterAgentRequest(agent_id=reg.agent_id))
    assert (
        code_of(lambda: stub.GetProfiles(pb.GetProfilesRequest(agent_id=reg.agent_id)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    # a channel must start with attach
    call = stub.AgentChannel(iter([pb.AgentMessage(port_oper=pb.PortOperReport(port=1, up=True))]))
    assert code_of(lambda: list(call))[0] == grpc.StatusCode.INVALID_ARGUMENT


def test_ev_events_stream_with_drop_counts(channel: grpc.Channel, ctl: pb_grpc.MrcCtlStub) -> None:
    setup_exp_profile(ctl, [(0x10, 1), (0x20, 2)])
    agent = FakeAgent(channel, "h0")
    try:
        agent.expect("snapshot")
        watch = ctl.WatchEvEvents(pb.WatchEvEventsRequest(profile_ids=[1], queue_depth=2))
        received: queue.Queue[pb.EvEvent] = queue.Queue()

        def pump() -> None:
            try:
                for ev in watch:
                    received.put(ev)
            except grpc.RpcError:
                pass

        # the subscription exists once the server has it: wait on the statistics counter
        fabric = pb_grpc.MrcFabricStub(channel)
        threading.Thread(target=pump, daemon=True).start()
        for _ in range(200):
            if fabric.GetStatistics(pb.GetStatisticsRequest()).counters["event_subscribers"] == 1:
                break
            threading.Event().wait(0.01)
        rep = pb.EvStateReport(
            profile_id=1, ev=pb.Ev(value=0x10, port=1), state=pb.EV_ASSUMED_BAD, qpn=7
        )
        accepted = agent.stub.ReportEvState(
            pb.ReportEvStateRequest(agent_id=agent.agent_id, reports=[rep])
        )
        assert accepted.accepted == 1
        first = received.get(timeout=WAIT)
        assert (first.profile_id, first.ev.value, first.state, first.host, first.qpn, first.drop_count) == (
            1, 0x10, pb.EV_ASSUMED_BAD, "h0", 7, 0,
        )  # fmt: skip
        # the controller's view follows the agent
        q = pb.EvOp(op=pb.QUERY_EV_STATE, entries=[pb.EvOpEntry(ev=pb.Ev(value=0x10, port=1))])
        assert (
            ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=1, ev_op=q)).results[0].state
            == pb.EV_ASSUMED_BAD
        )
        # also through the channel
        agent.send(
            pb.AgentMessage(
                ev_state=pb.EvStateReport(
                    profile_id=1, ev=pb.Ev(value=0x10, port=1), state=pb.EV_GOOD
                )
            )
        )
        second = received.get(timeout=WAIT)
        assert second.state == pb.EV_GOOD and second.seq > first.seq
    finally:
        watch.cancel()
        agent.close()


def test_subscriber_queue_overflow_counts_drops(server: ControllerServer) -> None:
    hub = server.controller.events
    sub = hub.subscribe({1}, depth=2)
    for i in range(5):
        hub.publish(pb.EvEvent(profile_id=1, ev=pb.Ev(value=i, port=1), state=pb.EV_GOOD))
    hub.publish(
        pb.EvEvent(profile_id=2, ev=pb.Ev(value=9, port=1), state=pb.EV_GOOD)
    )  # filtered out
    got = [sub.next(0.1) for _ in range(2)]
    assert [e.ev.value for e in got if e] == [0, 1]
    hub.publish(pb.EvEvent(profile_id=1, ev=pb.Ev(value=5, port=1), state=pb.EV_GOOD))
    last = sub.next(0.1)
    assert last is not None and last.ev.value == 5 and last.drop_count == 3
    hub.unsubscribe(sub)


def test_ep_batch_fans_out_and_times_out(channel: grpc.Channel, ctl: pb_grpc.MrcCtlStub) -> None:
    topo = load("clos-2p")
    quick = FakeAgent(channel, "h0", answer_probes=True, rtt_ns=4321)
    silent = FakeAgent(channel, "h1", answer_probes=False)
    try:
        quick.expect("snapshot")
        silent.expect("snapshot")
        gid = lambda h, p: str(host_gid(topo, h, p))  # noqa: E731
        req = pb.EpBatchRequest(op_type=pb.EP_OP_EV_PROBE, req_tc=48, rsp_timeout_ns=2 * 10**9)
        req.requests.add(
            req_id=1,
            sgid=gid("h0", 0),
            dgid=gid("h2", 0),
            ev_fmt_mode=pb.EV_FMT_STEV,
            req_ev=pb.Ev(value=5, port=1),
        )
        req.requests.add(
            req_id=2,
            sgid=gid("h0", 1),
            dgid=gid("h3", 1),
            ev_fmt_mode=pb.EV_FMT_STEV,
            req_ev=pb.Ev(value=6, port=2),
        )
        resp = ctl.EpBatchSendWait(req, timeout=WAIT)
        assert not resp.timed_out and list(resp.unanswered) == []
        assert sorted((r.req_id, r.port, r.rtt_ns) for r in resp.responses) == [
            (1, 1, 4321),
            (2, 2, 4321),
        ]
        cmds = [quick.expect("ep").ep for _ in range(2)]
        assert sorted(c.request.req_id for c in cmds) == [1, 2] and all(
            c.req_tc == 48 for c in cmds
        )
        # a silent agent: partial answer after the response timeout
        req2 = pb.EpBatchRequest(op_type=pb.EP_OP_PORT_STATUS_UPDATE, rsp_timeout_ns=200 * 10**6)
        req2.requests.add(req_id=7, sgid=gid("h0", 0), dgid=gid("h1", 0), port_status=0b10)
        req2.requests.add(req_id=8, sgid=gid("h1", 0), dgid=gid("h0", 0), port_status=0b11)
        resp2 = ctl.EpBatchSendWait(req2, timeout=WAIT)
        assert resp2.timed_out and list(resp2.unanswered) == [8]
        assert [r.req_id for r in resp2.responses] == [7]
        assert silent.expect("ep").ep.request.port_status == 0b11
        assert quick.expect("ep").ep.request.req_id == 7
        # bad batches are rejected before anything is sent
        bad = pb.EpBatchRequest(op_type=pb.EP_OP_EV_PROBE, rsp_timeout_ns=10**9)
        bad.requests.add(req_id=1, sgid="fd00::dead", dgid=gid("h0", 0), ev_fmt_mode=pb.EV_FMT_UDP)
        assert code_of(lambda: ctl.EpBatchSendWait(bad))[0] == grpc.StatusCode.NOT_FOUND
        dup = pb.EpBatchRequest(op_type=pb.EP_OP_EV_PROBE, rsp_timeout_ns=10**9)
        for _ in range(2):
            dup.requests.add(
                req_id=3, sgid=gid("h0", 0), dgid=gid("h1", 0), ev_fmt_mode=pb.EV_FMT_UDP
            )
        assert code_of(lambda: ctl.EpBatchSendWait(dup))[0] == grpc.StatusCode.INVALID_ARGUMENT
        zero = pb.EpBatchRequest(op_type=pb.EP_OP_EV_PROBE, rsp_timeout_ns=0)
        zero.requests.add(req_id=1, sgid=gid("h0", 0), dgid=gid("h1", 0), ev_fmt_mode=pb.EV_FMT_UDP)
        assert code_of(lambda: ctl.EpBatchSendWait(zero))[0] == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(queue.Empty):
            quick.inbox.get(timeout=0.2)  # none of the rejected requests reached an agent
    finally:
        quick.close()
        silent.close()


def test_fabric_operations(channel: grpc.Channel) -> None:
    fabric = pb_grpc.MrcFabricStub(channel)
    view = fabric.GetTopology(pb.GetTopologyRequest())
    assert view.name == "clos-2p" and view.planes == 2 and len(view.links) == 16
    spine = next(n for n in view.nodes if n.name == "p1-spine1")
    assert spine.tier == 1 and spine.plane == 1 and spine.locator.endswith("::/48")
    link = fabric.SetLinkState(pb.SetLinkStateRequest(link="p0-leaf0:3", up=False))
    assert not link.up and {link.a, link.b} == {"p0-leaf0:3", "p0-spine0:1"}
    again = fabric.GetTopology(pb.GetTopologyRequest())
    assert [lk.up for lk in again.links].count(False) == 1
    assert (
        code_of(lambda: fabric.SetLinkState(pb.SetLinkStateRequest(link="99", up=True)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    assert (
        code_of(lambda: fabric.SetLinkState(pb.SetLinkStateRequest(link="p0-leaf0:9", up=True)))[0]
        == grpc.StatusCode.NOT_FOUND
    )
    # clos-2p has no OCS
    req = pb.ReconfigureCircuitsRequest(circuits=[pb.Circuit(src="h0:0", dst="h1:0")])
    assert code_of(lambda: fabric.ReconfigureCircuits(req))[0] == grpc.StatusCode.INVALID_ARGUMENT
    stats = fabric.GetStatistics(pb.GetStatisticsRequest())
    assert stats.counters["link_state_changes"] == 1


def test_circuits_on_scaleup(tmp_path: Path) -> None:
    srv = start(
        ServerConfig(unix=str(tmp_path / "ocs.sock"), topology="scaleup-ocs", max_workers=8)
    )
    try:
        with grpc.insecure_channel(srv.address) as ch:
            fabric = pb_grpc.MrcFabricStub(ch)
            ring = [pb.Circuit(src=f"g{i}:0", dst=f"g{(i + 1) % 8}:1") for i in range(8)]
            state = fabric.ReconfigureCircuits(pb.ReconfigureCircuitsRequest(circuits=ring))
            assert state.generation == 1
            assert {(x.in_port, x.out_port) for x in state.cross_connects} == {
                (2 * i + 1, 2 * ((i + 1) % 8) + 2) for i in range(8)
            }
            bad = [*ring, pb.Circuit(src="g0:0", dst="g5:0")]  # g0:0 already transmits
            code, details = code_of(
                lambda: fabric.ReconfigureCircuits(pb.ReconfigureCircuitsRequest(circuits=bad))
            )
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "already transmits" in details
            assert fabric.GetCircuits(pb.GetCircuitsRequest()) == state  # unchanged
            assert (
                pb_grpc.MrcCtlStub(ch).QueryDevice(pb.QueryDeviceRequest()).phy_port_mask == 0b110
            )
    finally:
        srv.stop()

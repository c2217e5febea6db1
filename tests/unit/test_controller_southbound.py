"""SwitchFabric against real embedded-switch P4Runtime servers (in process) with a recording
switch-admin service: programming at start, link state, optical circuits, roll back."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import grpc
import pytest

from common.p4runtime_client import P4RuntimeClient
from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from common.proto import switch_admin_pb2 as admin_pb
from common.proto import switch_admin_pb2_grpc as admin_grpc
from controller.core import Controller
from controller.drivers import DriverError, SwitchDriver, SwitchEndpoint, SwitchFigures
from controller.errors import CtlError, ErrorKind
from controller.fabric import FabricState
from controller.server import ServerConfig, start
from controller.southbound import SouthboundError, SwitchFabric
from switch.p4runtime import P4RuntimeServer, start_server
from switch.pipeline import Pipeline
from topologies.loader import load
from topologies.model import NodeKind, PathMode, Topology
from topologies.routes import switch_tables


class RecordingAdmin(admin_grpc.SwitchAdminServicer):  # type: ignore[misc]
    def __init__(self, name: str, calls: list[tuple[str, int, bool]], fail: bool = False) -> None:
        self.name = name
        self.calls = calls
        self.fail = fail
        self.lock = threading.Lock()

    def SetPortAdmin(
        self, request: admin_pb.SetPortAdminRequest, context: grpc.ServicerContext
    ) -> admin_pb.PortInfo:
        if self.fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "port stuck")
        with self.lock:
            self.calls.append((self.name, request.port, request.up))
        return admin_pb.PortInfo(port=request.port, admin_up=request.up)


class Switches:
    def __init__(self, topo: Topology, fail_admin: str = "") -> None:
        self.calls: list[tuple[str, int, bool]] = []
        self.servers: dict[str, P4RuntimeServer] = {}
        self.pipes: dict[str, Pipeline] = {}
        for i, node in enumerate(topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS)):
            admin = RecordingAdmin(node.name, self.calls, fail=node.name == fail_admin)
            pipe = Pipeline()
            self.pipes[node.name] = pipe
            self.servers[node.name] = start_server(
                pipe,
                "127.0.0.1:0",
                i + 1,
                extra_servicers=[
                    lambda s, a=admin: admin_grpc.add_SwitchAdminServicer_to_server(a, s)
                ],
            )
        self.endpoints = {
            n: SwitchEndpoint(f"127.0.0.1:{s.port}", i + 1, "embedded")
            for i, (n, s) in enumerate(self.servers.items())
        }

    def close(self) -> None:
        for s in self.servers.values():
            s.stop()


@pytest.fixture
def clos() -> Iterator[tuple[Topology, Switches]]:
    topo = load("clos-1p")
    sw = Switches(topo, fail_admin="spine1")
    yield topo, sw
    sw.close()


def test_start_programs_every_switch_and_links_go_through_admin(
    clos: tuple[Topology, Switches], tmp_path: Path
) -> None:
    topo, sw = clos
    fabric = SwitchFabric(topo, sw.endpoints, mode=PathMode.STEV, election_id=7)
    fabric.start()
    try:
        tables = switch_tables(topo, PathMode.STEV)
        for name, ep in sw.endpoints.items():
            with P4RuntimeClient(ep.address, ep.device_id, election_id=3) as reader:  # backup reads
                assert len(reader.read_table("MrcIngress.ipv6_route")) == len(tables[name].routes)
                assert len(reader.read_table("MrcIngress.ev_uplink")) == sum(
                    len(v) for v in tables[name].ev_groups.values()
                )
        # through the controller: a link between two switches is set down at both ends
        ctl = Controller(topo, backend=fabric)
        view = ctl.set_link_state(pb.SetLinkStateRequest(link="leaf0:3", up=False))
        assert not view.up
        assert sorted(sw.calls) == [("leaf0", 3, False), ("spine0", 1, False)]
        # an end that fails: the other end is put back, the controller records nothing
        sw.calls.clear()
        with pytest.raises(Exception) as info:
            ctl.set_link_state(pb.SetLinkStateRequest(link="leaf0:4", up=False))
        assert "spine1" in str(info.value) and "port stuck" in str(info.value)
        assert sw.calls == [("leaf0", 4, False), ("leaf0", 4, True)]
        assert ctl.topology_view().links[5].up  # link 5 = leaf0:4 -- spine1:1
    finally:
        fabric.close()


def test_start_rolls_back_and_names_the_switch(clos: tuple[Topology, Switches]) -> None:
    topo, sw = clos
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens here once closed
    endpoints = dict(sw.endpoints)
    endpoints["spine1"] = SwitchEndpoint(f"127.0.0.1:{dead}", 99, "embedded")
    fabric = SwitchFabric(topo, endpoints, timeout=1.0)
    with pytest.raises(SouthboundError, match="spine1"):
        fabric.start()
    assert fabric._clients == {}
    # the sessions were closed: another controller can become primary on the programmed ones
    ep = sw.endpoints["leaf0"]
    with P4RuntimeClient(ep.address, ep.device_id, election_id=1) as again:
        assert again.is_primary
    with pytest.raises(SouthboundError, match="no endpoint for switch"):
        SwitchFabric(topo, {k: v for k, v in sw.endpoints.items() if k != "leaf1"})


def test_circuits_written_as_differences(tmp_path: Path) -> None:
    topo = load("scaleup-ocs")
    sw = Switches(topo)
    fabric = SwitchFabric(topo, sw.endpoints)
    try:
        fabric.start()
        ctl = Controller(topo, backend=fabric)
        ep = sw.endpoints["ocs0"]

        def table() -> dict[int, int]:
            with P4RuntimeClient(ep.address, ep.device_id, program="ocs", election_id=2) as reader:
                out = {}
                for te in reader.read_table("OcsIngress.cross_connect"):
                    out[int.from_bytes(te.match[0].exact.value, "big")] = int.from_bytes(
                        te.action.action.params[0].value, "big"
                    )
                return out

        ring = [pb.Circuit(src=f"g{i}:0", dst=f"g{(i + 1) % 8}:1") for i in range(8)]
        state = ctl.reconfigure(pb.ReconfigureCircuitsRequest(circuits=ring))
        assert table() == {x.in_port: x.out_port for x in state.cross_connects}
        # next step: offset 2 on port 0, and add port-1 circuits backwards
        step = [pb.Circuit(src=f"g{i}:0", dst=f"g{(i + 2) % 8}:1") for i in range(8)]
        step += [pb.Circuit(src=f"g{i}:1", dst=f"g{(i - 1) % 8}:0") for i in range(4)]
        state2 = ctl.reconfigure(pb.ReconfigureCircuitsRequest(circuits=step))
        assert table() == {x.in_port: x.out_port for x in state2.cross_connects}
        assert len(table()) == 12
        assert fabric.read_circuits() == table()
        ctl.reconfigure(pb.ReconfigureCircuitsRequest(circuits=[]))
        assert table() == {}
    finally:
        fabric.close()
        sw.close()


def test_reconfiguration_darkens_changed_ports_first(tmp_path: Path) -> None:
    """Drop-then-connect: the input ports whose circuit changes hold the dark action for
    the dark time, the others keep their circuit throughout."""
    topo = load("scaleup-ocs")
    sw = Switches(topo)
    fabric = SwitchFabric(topo, sw.endpoints)
    try:
        fabric.start()
        seen: list[tuple[dict[int, int], int]] = []

        def sleep(seconds: float) -> None:  # observe the OCS while it is dark
            entries = fabric.clients["ocs0"].read_table("OcsIngress.cross_connect")
            seen.append((fabric.read_circuits(), len(entries)))

        state = FabricState(topo, fabric, sleep=sleep)
        ring = [pb.Circuit(src=f"g{i}:0", dst=f"g{(i + 1) % 8}:0") for i in range(8)]
        state.reconfigure(ring)
        before = fabric.read_circuits()
        # g0..g3 move to offset 2; g4..g7 keep their circuits
        moved = [pb.Circuit(src=f"g{i}:0", dst=f"g{(i + 2) % 8}:1") for i in range(4)]
        state.reconfigure(moved + ring[4:], dark_s=0.001)
        (dark_view, entries), = seen
        kept = {p: o for p, o in before.items() if p in dark_view}
        assert dark_view == kept and len(kept) == 4  # the 4 unchanged circuits stayed up
        assert entries == 8  # the 4 changed ports hold the dark action, not deleted
        after = fabric.read_circuits()
        assert len(after) == 8 and all(after[p] == o for p, o in kept.items())
    finally:
        fabric.close()
        sw.close()


def test_server_uses_the_switch_map(clos: tuple[Topology, Switches], tmp_path: Path) -> None:
    _, sw = clos

    path = tmp_path / "switches.json"
    path.write_text(
        json.dumps(
            {n: {"address": e.address, "device_id": e.device_id} for n, e in sw.endpoints.items()}
        )
    )
    srv = start(ServerConfig(unix=str(tmp_path / "c.sock"), topology="clos-1p", switches=str(path)))
    try:
        with grpc.insecure_channel(srv.address) as ch:
            fabric = pb_grpc.MrcFabricStub(ch)
            fabric.SetLinkState(pb.SetLinkStateRequest(link="h0:0", up=False))
            assert sw.calls == [("leaf0", 1, False)]  # the host end has no admin service
            with pytest.raises(grpc.RpcError) as info:
                fabric.SetLinkState(pb.SetLinkStateRequest(link="spine1:1", up=False))
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
            stats = fabric.GetStatistics(pb.GetStatisticsRequest())
            assert stats.counters["switch_switches_programmed"] == 4
    finally:
        srv.stop()


class FakeKind(SwitchDriver):
    """A new kind of switch is one driver class (here in-process: figures from a dict)."""

    kind = "fake"
    figures_by_switch: ClassVar[dict[str, SwitchFigures | str]] = {}
    admin: ClassVar[list[tuple[str, int, bool]]] = []

    def set_port_admin(self, port: int, up: bool) -> None:
        self.admin.append((self.name, port, up))

    def figures(self, detail: bool = False) -> SwitchFigures:
        got = self.figures_by_switch[self.name]
        if isinstance(got, str):
            raise DriverError(f"{self.name}: {got}")
        return got


def test_switch_reads_go_through_the_kinds_driver(
    clos: tuple[Topology, Switches], tmp_path: Path
) -> None:
    """GetSwitchStats, ReadCounters and the capture calls reach every switch through its
    kind's driver: figures and timing where there are some, an error entry (never zeros)
    for a switch that cannot be read, NOT_FOUND for an unknown switch."""
    topo, sw = clos
    endpoints = {n: SwitchEndpoint(e.address, e.device_id, "fake")
                 for n, e in sw.endpoints.items()}
    timing = admin_pb.Timing(now=2.0, start=1.0, tdf=1.0, events=10)
    FakeKind.figures_by_switch = {
        "leaf0": SwitchFigures({1: 100, 3: 7}, drops=2, trims=3, ecn=4, timing=timing),
        "leaf1": "counter read failed",
        "spine0": SwitchFigures({}, 0, 0, 0), "spine1": SwitchFigures({}, 0, 0, 0)}
    fabric = SwitchFabric(topo, endpoints, drivers={"fake": FakeKind})
    fabric.start()
    try:
        ctl = Controller(topo, backend=fabric)
        resp = ctl.switches.stats(pb.GetSwitchStatsRequest())
        by = {s.name: s for s in resp.switches}
        assert set(by) == {"leaf0", "leaf1", "spine0", "spine1"}
        assert by["leaf0"].kind == "fake" and dict(by["leaf0"].egress_bytes) == {1: 100, 3: 7}
        assert (by["leaf0"].drops, by["leaf0"].trims, by["leaf0"].ecn_marks) == (2, 3, 4)
        assert by["leaf0"].has_timing and by["leaf0"].timing.events == 10
        assert not by["spine0"].has_timing and not by["spine0"].error
        assert by["leaf1"].error == "leaf1: counter read failed" and not by["leaf1"].egress_bytes
        ctl.set_link_state(pb.SetLinkStateRequest(link="leaf0:3", up=False))
        assert sorted(FakeKind.admin) == [("leaf0", 3, False), ("spine0", 1, False)]
        # counters over the controller's own P4Runtime session, whatever the kind
        cells = ctl.switches.read_counters(pb.ReadCountersRequest(
            switch="leaf0", counter="MrcIngress.drop_reason", indexes=[1, 2]))
        assert [c.index for c in cells.cells] == [1, 2]
        with pytest.raises(CtlError) as err:
            ctl.switches.read_counters(pb.ReadCountersRequest(switch="leaf0", counter="nope"))
        assert err.value.kind == ErrorKind.INVALID and "no control-plane object 'nope'" in (
            err.value.message)
        with pytest.raises(CtlError) as err:
            ctl.switches.stats(pb.GetSwitchStatsRequest(switches=["leaf9"]))
        assert err.value.kind == ErrorKind.NOT_FOUND and "leaf0" in err.value.message
        with pytest.raises(CtlError) as err:  # this kind takes no captures
            ctl.switches.capture(pb.SwitchCaptureRequest(switch="leaf0", port=1, path="x"), True)
        assert err.value.kind == ErrorKind.UNAVAILABLE and "no captures" in err.value.message
    finally:
        fabric.close()
        FakeKind.admin.clear()


def test_a_controller_without_switches_refuses_switch_reads() -> None:
    ctl = Controller(load("clos-1p"))
    with pytest.raises(CtlError) as err:
        ctl.switches.stats(pb.GetSwitchStatsRequest())
    assert err.value.kind == ErrorKind.BUSY and "--switches" in err.value.message

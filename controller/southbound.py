"""The controller's southbound: a FabricBackend that programs and operates real switches.

``SwitchFabric.start()`` connects to every switch of the topology as primary P4Runtime
controller (election id ``CONTROLLER_ELECTION_ID``, above p4runtime-shell's default), pushes
the pipeline (mrc_switch or ocs) and writes the tables of the path mode
(controller.programming); a failure on any switch closes every session opened so far and
names the switch. Link state goes through each end's switch admin service (SetPortAdmin) on
embedded switches; on BMv2 switches (``target="bmv2"`` in the switch map) the controller keeps
the port state itself (controller/bmv2_ports.py: ``port_down`` over Thrift, port events from
its own state and from the interfaces' carrier); optical circuits become
OcsIngress.cross_connect writes (only the difference to the current set: DELETE, MODIFY,
INSERT in one Write).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from common.p4runtime_client import (
    CONTROLLER_ELECTION_ID,
    P4RuntimeClient,
    P4RuntimeError,
    P4RuntimeWriteError,
)
from common.proto import switch_admin_pb2 as admin_pb
from common.proto import switch_admin_pb2_grpc as admin_grpc
from common.proto.p4.v1 import p4runtime_pb2
from controller.bmv2_ports import Bmv2Ports, Bmv2PortState, CliRunner
from controller.fabric import BackendError
from controller.programming import apply, program_for
from topologies.model import Link, NodeKind, PathMode, Topology
from topologies.routes import switch_tables

CROSS_CONNECT = "OcsIngress.cross_connect"
INGRESS_PORT = "standard_metadata.ingress_port"
CONNECT = "OcsIngress.connect"
DARK = "OcsIngress.dark"  # the action an input port holds while its mirror moves


class SouthboundError(BackendError):
    """A switch could not be reached or refused an operation; the message names it."""


@dataclass(frozen=True)
class SwitchEndpoint:
    address: str  # "host:port" of the switch's gRPC server (P4Runtime + switch admin)
    device_id: int
    target: str = "embedded"  # or "bmv2" (simple_switch_grpc: no admin service)
    thrift_port: int = 0  # BMv2: its Thrift runtime (register writes)
    ifnames: tuple[tuple[int, str], ...] = ()  # BMv2: (P4 port, interface) of every port


class SwitchFabric:
    def __init__(
        self,
        topo: Topology,
        endpoints: Mapping[str, SwitchEndpoint],
        mode: PathMode | None = None,
        election_id: int = CONTROLLER_ELECTION_ID,
        timeout: float = 5.0,
        bmv2_cli: CliRunner | None = None,
    ) -> None:
        """``bmv2_cli``: how Thrift commands reach BMv2 switches (default simple_switch_CLI)."""
        switches = {n.name for n in topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS)}
        missing = sorted(switches - set(endpoints))
        if missing:
            raise SouthboundError(f"no endpoint for switch(es) {', '.join(missing)}")
        self.topo = topo
        self.mode = mode or topo.fabric.path_mode
        self.endpoints = dict(endpoints)
        self.election_id = election_id
        self.timeout = timeout
        self._clients: dict[str, P4RuntimeClient] = {}
        self._admin: dict[str, admin_grpc.SwitchAdminStub] = {}
        self._channels: list[grpc.Channel] = []
        self._xc: dict[int, int] = {}
        self._lock = threading.Lock()
        self._bmv2_cli = bmv2_cli
        self.bmv2_ports: Bmv2PortState | None = None
        self.counters = {"switches_programmed": 0, "link_changes": 0, "circuit_writes": 0}

    def start(self) -> None:
        """Connect, push pipelines and program every switch; all or nothing."""
        tables = switch_tables(self.topo, self.mode)
        try:
            for node in self.topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS):
                ep = self.endpoints[node.name]
                program = "ocs" if node.kind == NodeKind.OCS else "mrc_switch"
                client = P4RuntimeClient(
                    ep.address, ep.device_id, program, self.election_id, self.timeout
                )
                self._clients[node.name] = client
                try:
                    if not client.connect():
                        raise SouthboundError(
                            f"{node.name} ({ep.address}): another controller is primary"
                        )
                    # BMv2 loads p4c's JSON; the embedded target runs its own build
                    client.push_pipeline(device_config=client.bmv2_device_config()
                                         if ep.target == "bmv2" else b"")
                    if node.kind != NodeKind.OCS:  # circuits come with the collective runs
                        apply(client, program_for(tables[node.name]))
                except (
                    P4RuntimeError,
                    P4RuntimeWriteError,
                    grpc.FutureTimeoutError,
                    grpc.RpcError,
                ) as exc:
                    raise SouthboundError(
                        f"{node.name} ({ep.address}): {exc or type(exc).__name__}"
                    ) from None
                if ep.target != "bmv2":
                    channel = grpc.insecure_channel(ep.address)
                    self._channels.append(channel)
                    self._admin[node.name] = admin_grpc.SwitchAdminStub(channel)
                self.counters["switches_programmed"] += 1
            self._start_bmv2_ports()
        except BaseException:
            self.close()
            raise

    def _start_bmv2_ports(self) -> None:
        bmv2 = {name: Bmv2Ports(ep.thrift_port, dict(ep.ifnames), self._clients[name].port_events)
                for name, ep in self.endpoints.items()
                if ep.target == "bmv2" and name in self._clients}
        if not bmv2:
            return
        state = Bmv2PortState(bmv2) if self._bmv2_cli is None else Bmv2PortState(
            bmv2, self._bmv2_cli)
        self.bmv2_ports = state
        state.start()

    @property
    def clients(self) -> dict[str, P4RuntimeClient]:
        """The connected primary sessions (controller.convergence writes routes through them)."""
        return dict(self._clients)

    def close(self) -> None:
        if self.bmv2_ports is not None:
            self.bmv2_ports.close()
            self.bmv2_ports = None
        for client in self._clients.values():
            try:
                client.close()
            except Exception:  # closing must not fail half way
                pass
        for channel in self._channels:
            channel.close()
        self._clients.clear()
        self._admin.clear()
        self._channels.clear()

    # ---------------------------------------------------------------- FabricBackend

    def set_link_state(self, link: Link, up: bool) -> None:
        """Both switch ends of ``link`` administratively ``up``/down, or neither: an end that
        refuses puts the ends already changed back and raises SouthboundError."""
        ends = [e for e in (link.a, link.b) if e.node in self._clients
                and (e.node in self._admin or self._is_bmv2(e.node))]
        done = []
        with self._lock:
            try:
                for end in ends:
                    self._set_port(end.node, end.port, up)
                    done.append(end)
            except SouthboundError:
                for prev in done:  # put the ends already changed back
                    try:
                        self._set_port(prev.node, prev.port, not up)
                    except SouthboundError:
                        pass
                raise
            self.counters["link_changes"] += 1

    def _is_bmv2(self, switch: str) -> bool:
        return self.endpoints[switch].target == "bmv2"

    def _set_port(self, switch: str, port: int, up: bool) -> None:
        if self._is_bmv2(switch):
            assert self.bmv2_ports is not None
            try:
                self.bmv2_ports.set_admin(switch, port, up)
            except (RuntimeError, KeyError) as exc:
                raise SouthboundError(f"{switch}: port {port}: {exc}") from None
            return
        try:
            self._admin[switch].SetPortAdmin(
                admin_pb.SetPortAdminRequest(port=port, up=up), timeout=self.timeout
            )
        except grpc.RpcError as exc:
            raise SouthboundError(
                f"{switch}: SetPortAdmin port {port}: {exc.code().name} {exc.details()}"  # type: ignore[attr-defined]
            ) from None

    def _ocs(self) -> tuple[str, P4RuntimeClient]:
        ocs = next(n.name for n in self.topo.nodes_of(NodeKind.OCS))
        return ocs, self._clients[ocs]

    def darken(self, ports: list[int]) -> None:
        """Input ports whose circuit is about to change: their entries become the dark
        action (frames entering them are dropped and counted) in one Write."""
        ocs, client = self._ocs()
        Update = p4runtime_pb2.Update
        with self._lock:
            updates = []
            for port in sorted(ports):
                kind = Update.MODIFY if port in self._xc else Update.INSERT
                te = client.table_entry(CROSS_CONNECT, {INGRESS_PORT: port}, DARK, {})
                updates.append(client.update(kind, table_entry=te))
            if updates:
                try:
                    client.write(updates, atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
                except (P4RuntimeError, P4RuntimeWriteError) as exc:
                    raise SouthboundError(f"{ocs}: dark write failed: {exc}") from None
            for port in ports:
                self._xc[port] = -1
            self.counters["dark_writes"] = self.counters.get("dark_writes", 0) + 1

    def read_circuits(self) -> dict[int, int]:
        """The OCS's cross_connect entries that connect (read back over P4Runtime)."""
        ocs, client = self._ocs()
        connect = client.program.id(CONNECT)
        try:
            entries = client.read_table(CROSS_CONNECT)
        except P4RuntimeError as exc:
            raise SouthboundError(f"{ocs}: cross-connect read failed: {exc}") from None
        out = {}
        for te in entries:
            if te.action.action.action_id != connect:
                continue
            port = int.from_bytes(te.match[0].exact.value, "big")
            out[port] = int.from_bytes(te.action.action.params[0].value, "big")
        return out

    def apply_circuits(self, cross_connects: dict[int, int]) -> None:
        ocs, client = self._ocs()
        Update = p4runtime_pb2.Update
        updates = []
        with self._lock:
            for port in sorted(set(self._xc) - set(cross_connects)):
                te = client.table_entry(CROSS_CONNECT, {INGRESS_PORT: port})
                updates.append(client.update(Update.DELETE, table_entry=te))
            for port, out in sorted(cross_connects.items()):
                if self._xc.get(port) == out:
                    continue
                kind = Update.MODIFY if port in self._xc else Update.INSERT
                te = client.table_entry(
                    CROSS_CONNECT, {INGRESS_PORT: port}, CONNECT, {"port": out}
                )
                updates.append(client.update(kind, table_entry=te))
            if updates:
                try:
                    client.write(updates, atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
                except (P4RuntimeError, P4RuntimeWriteError) as exc:
                    raise SouthboundError(f"{ocs}: cross-connect write failed: {exc}") from None
            self._xc = dict(cross_connects)
            self.counters["circuit_writes"] += 1

    def stats(self) -> dict[str, int]:
        return {f"switch_{k}": v for k, v in self.counters.items()}

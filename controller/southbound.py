"""The controller's southbound: a FabricBackend that programs and operates real switches.

``SwitchFabric.start()`` connects to every switch of the topology as primary P4Runtime
controller (election id ``CONTROLLER_ELECTION_ID``, above p4runtime-shell's default), pushes
the pipeline (mrc_switch or ocs, with the device config the switch's kind needs) and writes
the tables of the path mode (controller.programming); a failure on any switch closes every
session opened so far and names the switch. What differs between kinds of switch (port
admin state, figures, lag meter, captures) is the switch's driver (controller/drivers/,
chosen by the kind in its endpoint); optical circuits become OcsIngress.cross_connect writes
(only the difference to the current set: DELETE, MODIFY, INSERT in one Write).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import grpc

from common.p4runtime_client import (
    CONTROLLER_ELECTION_ID,
    P4RuntimeClient,
    P4RuntimeError,
    P4RuntimeWriteError,
)
from common.proto import switch_admin_pb2 as admin_pb
from common.proto.p4.v1 import p4runtime_pb2
from controller.circuit_writes import (
    CONNECT,
    CROSS_CONNECT,
    circuit_updates,
    connects_of,
    dark_updates,
)
from controller.drivers import (
    DriverError,
    SwitchDriver,
    SwitchEndpoint,
    SwitchFigures,
    driver_class,
)
from controller.fabric import BackendError
from controller.programming import apply, program_for
from topologies.model import Link, NodeKind, PathMode, Topology
from topologies.routes import switch_tables


class SouthboundError(BackendError):
    """A switch could not be reached or refused an operation; the message names it."""


class SwitchFabric:
    def __init__(
        self,
        topo: Topology,
        endpoints: Mapping[str, SwitchEndpoint],
        mode: PathMode | None = None,
        election_id: int = CONTROLLER_ELECTION_ID,
        timeout: float = 5.0,
        drivers: Mapping[str, type[SwitchDriver]] | None = None,
    ) -> None:
        """``drivers``: kind -> driver class overriding the registered one (tests)."""
        switches = {n.name for n in topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS)}
        missing = sorted(switches - set(endpoints))
        if missing:
            raise SouthboundError(f"no endpoint for switch(es) {', '.join(missing)}")
        self.topo = topo
        self.mode = mode or topo.fabric.path_mode
        self.endpoints = dict(endpoints)
        self.election_id = election_id
        self.timeout = timeout
        self._driver_classes = dict(drivers or {})
        self._clients: dict[str, P4RuntimeClient] = {}
        self.drivers: dict[str, SwitchDriver] = {}
        self._xc: dict[int, int] = {}
        self._lock = threading.Lock()
        self.counters = {"switches_programmed": 0, "link_changes": 0, "circuit_writes": 0}

    def _driver_class(self, kind: str) -> type[SwitchDriver]:
        return self._driver_classes.get(kind) or driver_class(kind)

    def start(self) -> None:
        """Connect, push pipelines and program every switch; all or nothing."""
        tables = switch_tables(self.topo, self.mode)
        try:
            for node in self.topo.nodes_of(NodeKind.SWITCH, NodeKind.OCS):
                ep = self.endpoints[node.name]
                program = "ocs" if node.kind == NodeKind.OCS else "mrc_switch"
                driver = self._driver_class(ep.kind)(node.name, ep, self.timeout)
                client = P4RuntimeClient(
                    ep.address, ep.device_id, program, self.election_id, self.timeout
                )
                self._clients[node.name] = client
                try:
                    if not client.connect():
                        raise SouthboundError(
                            f"{node.name} ({ep.address}): another controller is primary"
                        )
                    client.push_pipeline(device_config=driver.device_config(client))
                    if node.kind != NodeKind.OCS:  # circuits come with the collective runs
                        apply(client, program_for(tables[node.name]))
                    driver.open(client)
                except (
                    P4RuntimeError,
                    P4RuntimeWriteError,
                    grpc.FutureTimeoutError,
                    grpc.RpcError,
                ) as exc:
                    raise SouthboundError(
                        f"{node.name} ({ep.address}): {exc or type(exc).__name__}"
                    ) from None
                self.drivers[node.name] = driver
                self.counters["switches_programmed"] += 1
            for cls in {type(d) for d in self.drivers.values()}:
                cls.open_group(list(self.drivers.values()))
        except BaseException:
            self.close()
            raise

    @property
    def clients(self) -> dict[str, P4RuntimeClient]:
        """The connected primary sessions (controller.convergence writes routes through them)."""
        return dict(self._clients)

    def close(self) -> None:
        drivers = list(self.drivers.values())
        for cls in {type(d) for d in drivers}:
            try:
                cls.close_group(drivers)
            except Exception:  # closing must not fail half way
                pass
        for driver in drivers:
            try:
                driver.close()
            except Exception:
                pass
        for client in self._clients.values():
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()
        self.drivers.clear()

    def driver(self, switch: str) -> SwitchDriver:
        """The driver of a programmed switch; KeyError naming the known switches."""
        try:
            return self.drivers[switch]
        except KeyError:
            raise KeyError(f"no switch {switch!r}; known: {', '.join(sorted(self.drivers))}"
                           ) from None

    def switch_figures(self, names: Sequence[str] = (), detail: bool = False
                       ) -> dict[str, SwitchFigures | str]:
        """Each named switch's figures (all when ``names`` is empty), or the reason it could
        not be read."""
        out: dict[str, SwitchFigures | str] = {}
        for name in names or sorted(self.drivers):
            try:
                out[name] = self.driver(name).figures(detail)
            except (DriverError, KeyError) as exc:
                out[name] = str(exc.args[0] if exc.args else exc)
        return out

    def start_capture(self, switch: str, port: int, path: str, direction: int, snaplen: int
                      ) -> admin_pb.CaptureInfo:
        try:
            return self.driver(switch).start_capture(port, path, direction, snaplen)
        except DriverError as exc:
            raise SouthboundError(str(exc)) from None

    def stop_capture(self, switch: str, port: int) -> admin_pb.CaptureInfo:
        try:
            return self.driver(switch).stop_capture(port)
        except DriverError as exc:
            raise SouthboundError(str(exc)) from None

    def read_counter(self, switch: str, counter: str, indexes: Sequence[int] = ()
                     ) -> dict[int, tuple[int, int]]:
        try:
            return self.driver(switch).read_counter(counter, indexes)
        except DriverError as exc:
            raise SouthboundError(str(exc)) from None

    # ---------------------------------------------------------------- FabricBackend

    def set_link_state(self, link: Link, up: bool) -> None:
        """Both switch ends of ``link`` administratively ``up``/down, or neither: an end that
        refuses puts the ends already changed back and raises SouthboundError."""
        ends = [e for e in (link.a, link.b) if e.node in self.drivers]
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

    def _set_port(self, switch: str, port: int, up: bool) -> None:
        try:
            self.drivers[switch].set_port_admin(port, up)
        except DriverError as exc:
            raise SouthboundError(str(exc)) from None

    def _ocs(self) -> tuple[str, P4RuntimeClient]:
        ocs = next(n.name for n in self.topo.nodes_of(NodeKind.OCS))
        return ocs, self._clients[ocs]

    def darken(self, ports: list[int]) -> None:
        """Input ports whose circuit is about to change: their entries become the dark
        action (frames entering them are dropped and counted) in one Write."""
        ocs, client = self._ocs()
        with self._lock:
            updates = dark_updates(client, self._xc, ports)
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
        try:
            entries = client.read_table(CROSS_CONNECT)
        except P4RuntimeError as exc:
            raise SouthboundError(f"{ocs}: cross-connect read failed: {exc}") from None
        return connects_of(client.program.id(CONNECT), entries)

    def apply_circuits(self, cross_connects: dict[int, int]) -> None:
        ocs, client = self._ocs()
        with self._lock:
            updates = circuit_updates(client, self._xc, cross_connects)
            if updates:
                try:
                    client.write(updates, atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
                except (P4RuntimeError, P4RuntimeWriteError) as exc:
                    raise SouthboundError(f"{ocs}: cross-connect write failed: {exc}") from None
            self._xc = dict(cross_connects)
            self.counters["circuit_writes"] += 1

    def stats(self) -> dict[str, int]:
        return {f"switch_{k}": v for k, v in self.counters.items()}

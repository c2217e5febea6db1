"""How the controller operates a switch of one kind: the driver interface.

The controller owns every switch's P4Runtime session (controller/southbound.py opens it,
pushes the pipeline, writes the tables); a ``SwitchDriver`` of the switch's kind adds what
differs between kinds: the device config the pipeline push carries, administrative port
state, the switch's figures (bytes per port, drops, trims, ECN marks; the full per-port
statistics where the kind has them), its lag meter, packet captures and counter reads.
Everything outside the controller asks the controller (MrcFabric GetSwitchStats,
ReadCounters, StartSwitchCapture, StopSwitchCapture), never a switch directly.

One class per kind, registered under the node kind's name (switch/targets/): a new kind of
switch is one node class and one driver class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from common.p4runtime_client import P4RuntimeClient, P4RuntimeError
from common.proto import switch_admin_pb2 as admin_pb


class DriverError(RuntimeError):
    """A switch refused or could not do an operation; the message names the switch."""


@dataclass(frozen=True)
class SwitchEndpoint:
    """Where a switch is and what its driver needs (an entry of the controller's switch map)."""

    address: str  # "host:port" of its P4Runtime server
    device_id: int
    kind: str
    extras: Mapping[str, Any] = field(default_factory=dict)  # kind-specific (BMv2: Thrift)


@dataclass(frozen=True)
class SwitchFigures:
    """What the live view, the plots and the fidelity verdict read of one switch."""

    egress_bytes: Mapping[int, int]  # port -> bytes its MRC queues sent since the start
    drops: int  # traffic-manager and emulated-link drops
    trims: int
    ecn: int
    detail: admin_pb.GetPortsResponse | None = None  # the kind's full port statistics
    timing: admin_pb.Timing | None = None  # its lag meter (None: the kind has none)


class SwitchDriver(ABC):
    kind: ClassVar[str]

    def __init__(self, name: str, endpoint: SwitchEndpoint, timeout: float = 5.0) -> None:
        self.name = name
        self.endpoint = endpoint
        self.timeout = timeout
        self.client: P4RuntimeClient | None = None

    @classmethod
    def parse_extras(cls, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        """The kind-specific part of a switch-map entry, validated (ValueError)."""
        return {}

    def device_config(self, client: P4RuntimeClient) -> bytes:
        """``p4_device_config`` of the pipeline push (empty: the target builds its own)."""
        return b""

    def open(self, client: P4RuntimeClient) -> None:
        """After the pipeline is pushed on ``client`` (the controller's primary session)."""
        self.client = client

    @classmethod
    def open_group(cls, drivers: Sequence[SwitchDriver]) -> None:
        """Once for every driver of this kind in a fabric, after each one's ``open``
        (a kind may share one resource between its switches)."""
        return None

    @classmethod
    def close_group(cls, drivers: Sequence[SwitchDriver]) -> None:
        """Undo ``open_group``; idempotent."""
        return None

    def close(self) -> None:
        """Release what ``open`` made (not the P4Runtime session: the southbound's);
        idempotent."""
        return None

    @abstractmethod
    def set_port_admin(self, port: int, up: bool) -> None:
        """Administrative state of one port (DriverError, state unchanged, when refused)."""

    @abstractmethod
    def figures(self, detail: bool = False) -> SwitchFigures:
        """The switch's figures now (DriverError when it cannot be read)."""

    def start_capture(self, port: int, path: str, direction: int, snaplen: int
                      ) -> admin_pb.CaptureInfo:
        raise DriverError(f"{self.name}: {self.kind} switches take no captures at run time")

    def stop_capture(self, port: int) -> admin_pb.CaptureInfo:
        raise DriverError(f"{self.name}: {self.kind} switches take no captures at run time")

    def read_counter(self, counter: str, indexes: Sequence[int] = ()
                     ) -> dict[int, tuple[int, int]]:
        """Cells (index -> packets, bytes) of a P4 counter over the controller's session;
        ValueError for a counter the program does not have, DriverError when the switch
        does not answer."""
        if self.client is None:
            raise DriverError(f"{self.name}: not connected")
        try:
            if not indexes:
                return self.client.read_counter(counter)
            out: dict[int, tuple[int, int]] = {}
            for index in indexes:
                out.update(self.client.read_counter(counter, index))
            return out
        except KeyError as exc:
            raise ValueError(f"{self.name}: {exc.args[0] if exc.args else exc}") from None
        except P4RuntimeError as exc:
            raise DriverError(f"{self.name}: reading {counter}: {exc}") from None

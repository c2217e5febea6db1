"""Per-port packet captures of a run's switches, as BMv2's ``--pcap`` writes them.

One pcap per switch port, both directions, into ``<run dir>/pcap/<switch>-p<port>.pcap``
(nanosecond timestamps, Ethernet), written by the switch process itself: the controller asks
the switch's driver (MrcFabric ``StartSwitchCapture``; on the embedded target its admin
service's ``StartCapture``), so a capture costs the switch one file write per frame and
nothing crosses a process boundary. A kind of switch that takes no captures at run time
(BMv2: its own ``--pcap``) answers with an error that names it. Wireshark (or ``tshark -X lua_script:hosts/wire/mrc.lua``)
dissects the MRC headers with the shipped dissector. ``mrcnet up --pcap`` starts every port;
the CLI's ``pcap SWITCH PORT [stop]`` one port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import grpc

from common.proto import switch_admin_pb2 as apb


class CaptureError(RuntimeError):
    """A capture could not be started or stopped; the message names the switch and port."""


class CaptureClient(Protocol):
    """The controller client's capture call (mrcnet.fabric.ctlclient.CtlClient.capture)."""

    def capture(self, switch: str, port: int, path: str = "", start: bool = True,
                direction: int = 0, snaplen: int = 0) -> Any: ...


class Captures:
    """Starts and stops the captures of one run (``stop_all`` is idempotent)."""

    def __init__(self, run_dir: Path, client: CaptureClient,
                 ports: dict[str, list[int]]) -> None:
        """``ports``: switch -> its port numbers."""
        self.dir = run_dir / "pcap"
        self.client = client
        self.ports = ports
        self.active: dict[tuple[str, int], Path] = {}

    def path(self, switch: str, port: int) -> Path:
        return self.dir / f"{switch}-p{port}.pcap"

    def _call(self, switch: str, port: int, path: str, start: bool) -> Any:
        try:
            return self.client.capture(switch, port, path, start=start, direction=apb.BOTH)
        except grpc.RpcError as exc:
            raise CaptureError(f"{switch} port {port}: {exc.code().name}: "  # type: ignore[attr-defined]
                               f"{exc.details()}") from None  # type: ignore[attr-defined]

    def start(self, switch: str, port: int) -> Path:
        """Capture ``switch`` port ``port`` (both directions); returns the file."""
        if switch not in self.ports:
            raise CaptureError(f"no switch {switch!r} (switches: {', '.join(self.ports)})")
        if port not in self.ports.get(switch, []):
            raise CaptureError(f"{switch} has no port {port} (ports: "
                               f"{', '.join(map(str, self.ports.get(switch, [])))})")
        if (switch, port) in self.active:
            return self.active[(switch, port)]
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path(switch, port)
        self._call(switch, port, str(path), start=True)
        self.active[(switch, port)] = path
        return path

    def start_all(self) -> int:
        for switch, ports in self.ports.items():
            for port in ports:
                self.start(switch, port)
        return len(self.active)

    def stop(self, switch: str, port: int) -> tuple[Path, int]:
        """Close one capture; returns the file and its packet count."""
        if (switch, port) not in self.active:
            raise CaptureError(f"{switch} port {port} is not being captured")
        path = self.active.pop((switch, port))
        info = self._call(switch, port, "", start=False)
        return path, int(info.packets)

    def stop_all(self) -> None:
        for switch, port in list(self.active):
            try:
                self.stop(switch, port)
            except CaptureError:
                pass  # the switch is gone: its file was closed when it exited

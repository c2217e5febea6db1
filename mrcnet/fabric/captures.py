"""Per-port packet captures of a run's switches, as BMv2's ``--pcap`` writes them.

One pcap per switch port, both directions, into ``<run dir>/pcap/<switch>-p<port>.pcap``
(nanosecond timestamps, Ethernet), written by the switch process itself through its admin
service (``StartCapture``), so a capture costs the switch one file write per frame and
nothing crosses a process boundary. Wireshark (or ``tshark -X lua_script:hosts/wire/mrc.lua``)
dissects the MRC headers with the shipped dissector. ``mrcnet up --pcap`` starts every port;
the CLI's ``pcap SWITCH PORT [stop]`` one port.
"""

from __future__ import annotations

from pathlib import Path

import grpc

from common.proto import switch_admin_pb2 as apb
from common.proto import switch_admin_pb2_grpc as apb_grpc


class CaptureError(RuntimeError):
    """A capture could not be started or stopped; the message names the switch and port."""


class Captures:
    """Starts and stops the captures of one run (``stop_all`` is idempotent)."""

    def __init__(self, run_dir: Path, addresses: dict[str, str],
                 ports: dict[str, list[int]]) -> None:
        self.dir = run_dir / "pcap"
        self.addresses = addresses
        self.ports = ports
        self.active: dict[tuple[str, int], Path] = {}
        self._channels: dict[str, grpc.Channel] = {}

    def path(self, switch: str, port: int) -> Path:
        return self.dir / f"{switch}-p{port}.pcap"

    def _stub(self, switch: str) -> apb_grpc.SwitchAdminStub:
        if switch not in self.addresses:
            raise CaptureError(f"no switch {switch!r} (switches: {', '.join(self.addresses)})")
        channel = self._channels.get(switch)
        if channel is None:
            channel = self._channels[switch] = grpc.insecure_channel(self.addresses[switch])
        return apb_grpc.SwitchAdminStub(channel)

    def start(self, switch: str, port: int) -> Path:
        """Capture ``switch`` port ``port`` (both directions); returns the file."""
        stub = self._stub(switch)
        if port not in self.ports.get(switch, []):
            raise CaptureError(f"{switch} has no port {port} (ports: "
                               f"{', '.join(map(str, self.ports.get(switch, [])))})")
        if (switch, port) in self.active:
            return self.active[(switch, port)]
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.path(switch, port)
        try:
            stub.StartCapture(apb.StartCaptureRequest(
                port=port, path=str(path), direction=apb.BOTH), timeout=10)
        except grpc.RpcError as exc:
            raise CaptureError(f"{switch} port {port}: {exc.code().name}: "  # type: ignore[attr-defined]
                               f"{exc.details()}") from None  # type: ignore[attr-defined]
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
        try:
            info = self._stub(switch).StopCapture(apb.StopCaptureRequest(port=port), timeout=10)
        except grpc.RpcError as exc:
            raise CaptureError(f"{switch} port {port}: {exc.code().name}: "  # type: ignore[attr-defined]
                               f"{exc.details()}") from None  # type: ignore[attr-defined]
        return path, int(info.packets)

    def stop_all(self) -> None:
        for switch, port in list(self.active):
            try:
                self.stop(switch, port)
            except CaptureError:
                pass  # the switch is gone: its file was closed when it exited
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

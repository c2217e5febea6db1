"""The controller's driver of the embedded target: its switch admin service beside P4Runtime.

Port admin state (SetPortAdmin: the switch turns it into its ``port_down`` register and a
port-status message on the P4Runtime stream itself), the full per-port statistics and the
data plane's lag meter (GetPorts, which carries GetTiming's answer) and packet captures
written by the switch process (StartCapture / StopCapture). The pipeline push carries no
device config: the target runs its own build of the program.
"""

from __future__ import annotations

import grpc

from common.p4runtime_client import P4RuntimeClient
from common.proto import switch_admin_pb2 as admin_pb
from common.proto import switch_admin_pb2_grpc as admin_grpc
from common.switchfigures import embedded_figures
from controller.drivers.base import DriverError, SwitchDriver, SwitchFigures


class EmbeddedDriver(SwitchDriver):
    kind = "embedded"

    def open(self, client: P4RuntimeClient) -> None:
        super().open(client)
        self._channel = grpc.insecure_channel(self.endpoint.address)
        self._admin = admin_grpc.SwitchAdminStub(self._channel)

    def close(self) -> None:
        channel = getattr(self, "_channel", None)
        if channel is not None:
            channel.close()
            self._channel = None

    def _rpc(self, what: str, method: object, request: object) -> object:
        try:
            return method(request, timeout=self.timeout)  # type: ignore[operator]
        except grpc.RpcError as exc:
            raise DriverError(f"{self.name}: {what}: {exc.code().name} "  # type: ignore[attr-defined]
                              f"{exc.details()}") from None  # type: ignore[attr-defined]

    def set_port_admin(self, port: int, up: bool) -> None:
        self._rpc(f"SetPortAdmin port {port}", self._admin.SetPortAdmin,
                  admin_pb.SetPortAdminRequest(port=port, up=up))

    def figures(self, detail: bool = False) -> SwitchFigures:
        resp = self._rpc("GetPorts", self._admin.GetPorts, admin_pb.GetPortsRequest())
        assert isinstance(resp, admin_pb.GetPortsResponse)
        sent, drops, trims, ecn = embedded_figures(resp)
        timing = resp.timing if resp.HasField("timing") else None
        return SwitchFigures(sent, drops, trims, ecn, resp if detail else None, timing)

    def start_capture(self, port: int, path: str, direction: int, snaplen: int
                      ) -> admin_pb.CaptureInfo:
        resp = self._rpc(f"StartCapture port {port}", self._admin.StartCapture,
                         admin_pb.StartCaptureRequest(port=port, path=path,
                                                      direction=direction,  # type: ignore[arg-type]
                                                      snaplen=snaplen))
        assert isinstance(resp, admin_pb.CaptureInfo)
        return resp

    def stop_capture(self, port: int) -> admin_pb.CaptureInfo:
        resp = self._rpc(f"StopCapture port {port}", self._admin.StopCapture,
                         admin_pb.StopCaptureRequest(port=port))
        assert isinstance(resp, admin_pb.CaptureInfo)
        return resp

"""Switch admin gRPC service (common/proto/switch_admin.proto): links, port state, stats, pcap,
and the data-plane loop's lag meter (``GetTiming``, also in every GetPorts answer).

Registered on the P4Runtime server through ``extra_servicers``. Every request is executed in
the data-plane thread via ``Dataplane.call`` so it sees and changes a consistent state.
Invalid requests get INVALID_ARGUMENT / NOT_FOUND with a message naming the problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc

from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc
from switch.adminstats import direction_stats
from switch.dataplane import Dataplane
from switch.traffic import LinkConfig

T = TypeVar("T")

_UPDATE_FIELDS = ("rate_bps", "delay_s", "loss", "qpkts", "qbytes", "overhead")
_CAPTURE_DIRECTIONS = {pb.BOTH: "both", pb.RX: "rx", pb.TX: "tx"}


def _link_params(cfg: LinkConfig) -> pb.LinkParams:
    return pb.LinkParams(
        rate_bps=cfg.rate_bps,
        delay_s=cfg.delay_s,
        loss=cfg.loss,
        qpkts=cfg.qpkts,
        qbytes=cfg.qbytes,
        overhead=cfg.overhead,
        up=cfg.up,
    )


def port_info(dp: Dataplane, port: int) -> pb.PortInfo:
    """Snapshot of one port (call in the data-plane thread)."""
    eg = dp.tm.egress[port]
    ing = dp.tm.ingress[port]
    pc = dp.counters[port]
    cap = dp.captures.get(port)
    return pb.PortInfo(
        port=port,
        ifname=dp.ports[port].ifname,
        admin_up=dp.tm.admin_up(port),
        carrier_up=dp.carrier[port],
        egress_link=_link_params(eg.config),
        ingress_link=_link_params(ing.config),
        rx_packets=pc.rx_packets,
        rx_bytes=pc.rx_bytes,
        tx_packets=eg.stats.packets - pc.tx_errors,
        tx_bytes=eg.stats.bytes - pc.tx_error_bytes,
        tx_errors=pc.tx_errors,
        egress=direction_stats(eg.stats, eg.depth),
        ingress=direction_stats(ing.stats, ing.depth),
        capture_path=cap.path if cap is not None else "",
    )


def timing(dp: Dataplane) -> pb.Timing:
    """The loop's lag meter now (call in the data-plane thread: a consistent snapshot)."""
    snap = dp.lag.snapshot(dp.clock())
    return pb.Timing(
        now=snap["t"], start=snap["start"], tdf=snap["tdf"], tolerance_s=snap["tolerance_s"],
        events=snap["events"], late=snap["late"], behind_s=snap["behind_s"],
        idle_s=snap["idle_s"], max_lag_s=snap["max_lag_s"], late_hist=snap["late_hist"],
        wakeups=snap["wakeups"], moderated=snap["moderated"], slack_s=snap["slack_s"],
        loop_cpu_s=snap["loop_cpu_s"])


class SwitchAdminServicer(pb_grpc.SwitchAdminServicer):
    def __init__(self, dp: Dataplane, name: str, device_id: int) -> None:
        self.dp = dp
        self.name = name
        self.device_id = device_id

    def _run(self, context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
        try:
            return self.dp.call(fn)
        except KeyError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no port {exc.args[0]}")
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except OSError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except TimeoutError:
            context.abort(grpc.StatusCode.UNAVAILABLE, "data plane did not answer in time")
        raise AssertionError("unreachable")  # context.abort raises

    def _check_port(self, port: int) -> None:
        if port not in self.dp.ports:
            raise KeyError(port)

    def GetPorts(
        self, request: pb.GetPortsRequest, context: grpc.ServicerContext
    ) -> pb.GetPortsResponse:
        def snapshot() -> pb.GetPortsResponse:
            wanted = list(request.ports) or sorted(self.dp.ports)
            for port in wanted:
                self._check_port(port)
            resp = pb.GetPortsResponse(name=self.name, device_id=self.device_id)
            resp.ports.extend(port_info(self.dp, p) for p in wanted)
            for key, value in self.dp.misc.items():
                resp.counters[key] = value
            resp.timing.CopyFrom(timing(self.dp))
            return resp

        return self._run(context, snapshot)

    def GetTiming(self, request: pb.GetTimingRequest, context: grpc.ServicerContext) -> pb.Timing:
        return self._run(context, lambda: timing(self.dp))

    def SetLink(self, request: pb.SetLinkRequest, context: grpc.ServicerContext) -> pb.PortInfo:
        changes = {
            f: getattr(request.update, f) for f in _UPDATE_FIELDS if request.update.HasField(f)
        }
        ingress = request.direction == pb.INGRESS

        def apply() -> pb.PortInfo:
            self._check_port(request.port)
            self.dp.tm.configure(request.port, self.dp.clock(), ingress=ingress, **changes)
            return port_info(self.dp, request.port)

        return self._run(context, apply)

    def SetPortAdmin(
        self, request: pb.SetPortAdminRequest, context: grpc.ServicerContext
    ) -> pb.PortInfo:
        def apply() -> pb.PortInfo:
            self._check_port(request.port)
            self.dp.set_admin(request.port, request.up)
            return port_info(self.dp, request.port)

        return self._run(context, apply)

    def StartCapture(
        self, request: pb.StartCaptureRequest, context: grpc.ServicerContext
    ) -> pb.CaptureInfo:
        if not request.path:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "capture path is empty")
        direction = _CAPTURE_DIRECTIONS.get(request.direction, "")
        if not direction:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown capture direction")

        def start() -> pb.CaptureInfo:
            self._check_port(request.port)
            w = self.dp.start_capture(request.port, request.path, direction, request.snaplen)
            return pb.CaptureInfo(port=request.port, path=w.path, packets=0, active=True)

        return self._run(context, start)

    def StopCapture(
        self, request: pb.StopCaptureRequest, context: grpc.ServicerContext
    ) -> pb.CaptureInfo:
        def stop() -> pb.CaptureInfo:
            self._check_port(request.port)
            w = self.dp.stop_capture(request.port)
            if w is None:
                return pb.CaptureInfo(port=request.port, active=False)
            return pb.CaptureInfo(port=request.port, path=w.path, packets=w.packets, active=False)

        return self._run(context, stop)


def admin_registrar(dp: Dataplane, name: str, device_id: int) -> Callable[[grpc.Server], None]:
    """The ``extra_servicers`` entry that adds this service to a gRPC server."""

    def add(server: grpc.Server) -> None:
        pb_grpc.add_SwitchAdminServicer_to_server(SwitchAdminServicer(dp, name, device_id), server)

    return add

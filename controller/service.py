"""gRPC servicers: thin adapters from common/proto/mrc_ctl.proto to controller.core.Controller.

A ``CtlError`` becomes INVALID_ARGUMENT, NOT_FOUND or FAILED_PRECONDITION with its message;
the controller has not changed anything in that case (see core.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from common.proto import switch_admin_pb2 as admin_pb
from controller.core import Controller
from controller.errors import CtlError, ErrorKind

T = TypeVar("T")

_CODES = {
    ErrorKind.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorKind.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorKind.BUSY: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorKind.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
}
POLL_S = 0.5  # how often a blocked stream checks that its RPC is still alive


def _call(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except CtlError as exc:
        context.abort(_CODES[exc.kind], exc.message)
        raise AssertionError("unreachable") from exc  # context.abort raises


def _deadline(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


class MrcCtlServicer(pb_grpc.MrcCtlServicer):  # type: ignore[misc]
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    def QueryVersion(
        self, request: pb.QueryVersionRequest, context: grpc.ServicerContext
    ) -> pb.QueryVersionResponse:
        return self.ctl.query_version()

    def QueryDevice(
        self, request: pb.QueryDeviceRequest, context: grpc.ServicerContext
    ) -> pb.DeviceAttr:
        return _call(context, lambda: self.ctl.query_device(request.host))

    def QueryPort(self, request: pb.QueryPortRequest, context: grpc.ServicerContext) -> pb.PortAttr:
        return _call(context, lambda: self.ctl.query_port(request))

    def ModifyPort(
        self, request: pb.ModifyPortRequest, context: grpc.ServicerContext
    ) -> pb.PortAttr:
        return _call(context, lambda: self.ctl.modify_port(request))

    def ModifyEvFmtProfile(
        self, request: pb.ModifyEvFmtProfileRequest, context: grpc.ServicerContext
    ) -> pb.EvFmtProfile:
        return _call(context, lambda: self.ctl.modify_fmt(request))

    def QueryEvFmtProfile(
        self, request: pb.QueryEvFmtProfileRequest, context: grpc.ServicerContext
    ) -> pb.EvFmtProfile:
        return _call(context, lambda: self.ctl.query_fmt(request))

    def ModifyEvProfile(
        self, request: pb.ModifyEvProfileRequest, context: grpc.ServicerContext
    ) -> pb.ModifyEvProfileResponse:
        return _call(context, lambda: self.ctl.modify_ev(request))

    def QueryEvProfile(
        self, request: pb.QueryEvProfileRequest, context: grpc.ServicerContext
    ) -> pb.QueryEvProfileResponse:
        return _call(context, lambda: self.ctl.query_ev(request))

    def ModifyCcProfile(
        self, request: pb.ModifyCcProfileRequest, context: grpc.ServicerContext
    ) -> pb.CcProfile:
        return _call(context, lambda: self.ctl.modify_cc(request))

    def QueryCcProfile(
        self, request: pb.QueryCcProfileRequest, context: grpc.ServicerContext
    ) -> pb.CcProfile:
        return _call(context, lambda: self.ctl.query_cc(request))

    def WatchEvEvents(
        self, request: pb.WatchEvEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.EvEvent]:
        sub = _call(context, lambda: self.ctl.subscribe(request))
        context.add_callback(lambda: self.ctl.events.unsubscribe(sub))
        try:
            while context.is_active():
                event = sub.next(POLL_S)
                if event is not None:
                    yield event
                elif sub.closed:
                    return
        finally:
            self.ctl.events.unsubscribe(sub)

    def EpBatchSendWait(
        self, request: pb.EpBatchRequest, context: grpc.ServicerContext
    ) -> pb.EpBatchResponse:
        return _call(context, lambda: self.ctl.ep_batch(request, _deadline(context)))


class MrcAgentServicer(pb_grpc.MrcAgentServicer):  # type: ignore[misc]
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    def RegisterAgent(
        self, request: pb.RegisterAgentRequest, context: grpc.ServicerContext
    ) -> pb.RegisterAgentResponse:
        return _call(context, lambda: self.ctl.register(request))

    def UnregisterAgent(
        self, request: pb.UnregisterAgentRequest, context: grpc.ServicerContext
    ) -> pb.UnregisterAgentResponse:
        _call(context, lambda: self.ctl.unregister(request.agent_id))
        return pb.UnregisterAgentResponse()

    def GetProfiles(
        self, request: pb.GetProfilesRequest, context: grpc.ServicerContext
    ) -> pb.ProfileSnapshot:
        return _call(context, lambda: self.ctl.get_profiles(request.agent_id))

    def ReportEvState(
        self, request: pb.ReportEvStateRequest, context: grpc.ServicerContext
    ) -> pb.ReportEvStateResponse:
        accepted = _call(context, lambda: self.ctl.report(request.agent_id, list(request.reports)))
        return pb.ReportEvStateResponse(accepted=accepted)

    def StepBarrier(
        self, request: pb.StepBarrierRequest, context: grpc.ServicerContext
    ) -> pb.StepBarrierResponse:
        return _call(context, lambda: self.ctl.collectives.barrier(request, _deadline(context)))

    def AgentChannel(
        self, request_iterator: Iterator[pb.AgentMessage], context: grpc.ServicerContext
    ) -> Iterator[pb.ControllerMessage]:
        try:
            first = next(request_iterator)
        except (StopIteration, grpc.RpcError):
            return
        if first.WhichOneof("msg") != "attach":
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "the first AgentChannel message must be 'attach'"
            )
        agent, epoch, outbox = _call(context, lambda: self.ctl.attach(first.attach.agent_id))

        def read() -> None:
            try:
                for msg in request_iterator:
                    if agent.epoch != epoch:
                        break
                    self.ctl.on_agent_message(agent, msg)
            except grpc.RpcError:
                pass
            finally:
                self.ctl.detach(agent, epoch)

        threading.Thread(target=read, name=f"agent-{agent.host}", daemon=True).start()
        context.add_callback(lambda: self.ctl.detach(agent, epoch))
        while True:
            msg = outbox.get()
            if msg is None:
                if agent.epoch != epoch or not agent.attached:
                    return
                continue
            yield msg


class MrcFabricServicer(pb_grpc.MrcFabricServicer):  # type: ignore[misc]
    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl

    def GetTopology(
        self, request: pb.GetTopologyRequest, context: grpc.ServicerContext
    ) -> pb.TopologyView:
        return _call(context, self.ctl.topology_view)

    def SetLinkState(
        self, request: pb.SetLinkStateRequest, context: grpc.ServicerContext
    ) -> pb.LinkView:
        return _call(context, lambda: self.ctl.set_link_state(request))

    def ReconfigureCircuits(
        self, request: pb.ReconfigureCircuitsRequest, context: grpc.ServicerContext
    ) -> pb.CircuitState:
        return _call(context, lambda: self.ctl.reconfigure(request))

    def GetCircuits(
        self, request: pb.GetCircuitsRequest, context: grpc.ServicerContext
    ) -> pb.CircuitState:
        return _call(context, self.ctl.circuits)

    def GetStatistics(
        self, request: pb.GetStatisticsRequest, context: grpc.ServicerContext
    ) -> pb.Statistics:
        return self.ctl.statistics()

    def StartCollective(
        self, request: pb.StartCollectiveRequest, context: grpc.ServicerContext
    ) -> pb.CollectiveState:
        return _call(context, lambda: self.ctl.start_collective(request))

    def GetCollective(
        self, request: pb.GetCollectiveRequest, context: grpc.ServicerContext
    ) -> pb.CollectiveState:
        return _call(context, lambda: self.ctl.collectives.state(request.session))

    def GetSwitchStats(
        self, request: pb.GetSwitchStatsRequest, context: grpc.ServicerContext
    ) -> pb.GetSwitchStatsResponse:
        return _call(context, lambda: self.ctl.switches.stats(request))

    def ReadCounters(
        self, request: pb.ReadCountersRequest, context: grpc.ServicerContext
    ) -> pb.ReadCountersResponse:
        return _call(context, lambda: self.ctl.switches.read_counters(request))

    def StartSwitchCapture(
        self, request: pb.SwitchCaptureRequest, context: grpc.ServicerContext
    ) -> admin_pb.CaptureInfo:
        return _call(context, lambda: self.ctl.switches.capture(request, start=True))

    def StopSwitchCapture(
        self, request: pb.SwitchCaptureRequest, context: grpc.ServicerContext
    ) -> admin_pb.CaptureInfo:
        return _call(context, lambda: self.ctl.switches.capture(request, start=False))


def add_services(server: grpc.Server, ctl: Controller) -> None:
    pb_grpc.add_MrcCtlServicer_to_server(MrcCtlServicer(ctl), server)
    pb_grpc.add_MrcAgentServicer_to_server(MrcAgentServicer(ctl), server)
    pb_grpc.add_MrcFabricServicer_to_server(MrcFabricServicer(ctl), server)

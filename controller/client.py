"""The one client of the controller's operator and fabric services (MrcCtl, MrcFabric).

``mrcnet ctl``, the fabric CLI, the orchestrator, the live view and the benches all talk to
the controller through a ``ControllerClient``: typed calls over one channel (a unix socket,
or TCP with a token or mutual TLS, controller/auth.py), each with the client's timeout.
What a run sets up on top (its EV and CC profiles) is mrcnet/fabric/ctlclient.py's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from controller.auth import open_channel


class ControllerClient:
    def __init__(self, address: str, timeout: float = 10.0, token: str | None = None,
                 tls: tuple[str, str, str] | None = None) -> None:
        """``address``: 'unix:/path' or 'host:port' (TCP needs ``token`` or ``tls``)."""
        self.address = address
        self.timeout = timeout
        self.channel = open_channel(address, token=token, tls=tls)
        self.ctl = pb_grpc.MrcCtlStub(self.channel)
        self.fabric = pb_grpc.MrcFabricStub(self.channel)
        self._watch: grpc.Future | None = None  # type: ignore[type-arg]
        self._watch_thread: threading.Thread | None = None

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self.channel.close()
        if self._watch_thread is not None:
            self._watch_thread.join(2.0)

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- EV profiles -------------------------------------------------------------------------
    def ev_array(self, profile_id: int) -> list[tuple[int, int]]:
        """(EV value, 1-based port) of an EV profile."""
        resp = self.ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=profile_id),
                                       timeout=self.timeout)
        return [(int(e.value), int(e.port)) for e in resp.profile.evs]

    def set_ev_state(self, profile_id: int, evs: list[tuple[int, int]],
                     state: pb.EvState) -> pb.ModifyEvProfileResponse:
        """MODIFY_EV_STATE (DENIED / GOOD / ASSUMED_BAD) for (value, port) EVs."""
        op = pb.EvOp(op=pb.MODIFY_EV_STATE, entries=[
            pb.EvOpEntry(ev=pb.Ev(value=v, port=p), state=state) for v, p in evs])
        return self.ctl.ModifyEvProfile(
            pb.ModifyEvProfileRequest(profile_id=profile_id, ev_op=op), timeout=self.timeout)

    def watch_events(self, on_event: Callable[[pb.EvEvent], None],
                     profile_ids: list[int]) -> None:
        """Stream EV events of ``profile_ids`` to ``on_event`` (a background thread)."""
        stream = self.ctl.WatchEvEvents(pb.WatchEvEventsRequest(profile_ids=profile_ids,
                                                                queue_depth=65536))
        self._watch = stream

        def pump() -> None:
            try:
                for ev in stream:
                    on_event(ev)
            except grpc.RpcError:
                pass

        self._watch_thread = threading.Thread(target=pump, name="ev-events", daemon=True)
        self._watch_thread.start()

    # -- fabric ------------------------------------------------------------------------------
    def set_link(self, link: str, up: bool) -> pb.LinkView:
        """A link (id or either endpoint "node:port") administratively up or down."""
        return self.fabric.SetLinkState(pb.SetLinkStateRequest(link=link, up=up),
                                        timeout=self.timeout)

    def topology(self) -> pb.TopologyView:
        return self.fabric.GetTopology(pb.GetTopologyRequest(), timeout=self.timeout)

    def statistics(self) -> pb.Statistics:
        return self.fabric.GetStatistics(pb.GetStatisticsRequest(), timeout=self.timeout)

    def agents(self) -> dict[str, bool]:
        """host -> attached, for every registered agent."""
        return {a.host: a.attached for a in self.statistics().agents}

    def switch_stats(self, switches: list[str] | None = None, detail: bool = False
                     ) -> pb.GetSwitchStatsResponse:
        """Every switch's figures and lag meter as the controller's drivers read them."""
        return self.fabric.GetSwitchStats(
            pb.GetSwitchStatsRequest(switches=switches or [], detail=detail),
            timeout=self.timeout)

    def read_counter(self, switch: str, counter: str, indexes: list[int] | None = None
                     ) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes) of a P4 counter of ``switch`` (every cell by default)."""
        resp = self.fabric.ReadCounters(pb.ReadCountersRequest(
            switch=switch, counter=counter, indexes=indexes or []), timeout=self.timeout)
        return {c.index: (c.packets, c.bytes) for c in resp.cells}

    def capture(self, switch: str, port: int, path: str = "", start: bool = True,
                direction: int = 0, snaplen: int = 0) -> Any:
        """Start (``path``) or stop a switch port's capture; the switch's CaptureInfo."""
        req = pb.SwitchCaptureRequest(switch=switch, port=port, path=path,
                                      direction=direction, snaplen=snaplen)  # type: ignore[arg-type]
        rpc = self.fabric.StartSwitchCapture if start else self.fabric.StopSwitchCapture
        return rpc(req, timeout=self.timeout)

"""The orchestrator's controller client: EV/CC profiles for the run, link state, EV events.

Profiles (mrc_ctl model, docs/controller.md): format profile 1 and EV profile 1 (GEN) shaped
after the topology's EV layout so that spraying covers every choice point:

- ``ecmp``: UDP format (16 bits), one field; EVs ``0xC000 | v`` (v = 0..15 per plane);
- ``stev`` (32 bits) / ``srv6`` (16 bits): the layout's choice bits (every value) followed by
  an entropy field with 8 values, so each plane gets ``2**choice_bits * 8`` EVs and every
  uplink combination is used by 8 of them.

The controller expands GEN into the explicit array the agents receive (EV i on port
``i mod planes + 1``), so agents, controller and this module agree on the EV universe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from topologies.evlayout import ev_layout
from topologies.model import PathMode, Topology

EV_PROFILE = 1
FMT_PROFILE = 1
ENTROPY_VALUES = 8


@dataclass(frozen=True)
class EvEventRecord:
    t: float  # orchestrator clock (time.monotonic) when received
    host: str
    qpn: int
    ev: int
    port: int  # 1-based
    state: str  # GOOD | ASSUMED_BAD


def gen_fields(
    topo: Topology, mode: PathMode
) -> tuple[pb.EvFmtMode, list[pb.EvField], int]:
    """(format mode, GEN fields, EVs per plane) for this topology and path mode."""
    if mode == PathMode.ECMP:
        return pb.EV_FMT_UDP, [pb.EvField(width=16, init_val=0xC000, min_val=0, max_val=15,
                                          mask=0xF)], 16
    total = 32 if mode == PathMode.STEV else 16
    fmt = pb.EV_FMT_STEV if mode == PathMode.STEV else pb.EV_FMT_SRV6
    choice = ev_layout(topo).used_bits
    fields = []
    if choice:
        fields.append(pb.EvField(width=choice, init_val=0, min_val=0,
                                 max_val=(1 << choice) - 1, mask=(1 << choice) - 1))
    fields.append(pb.EvField(width=total - choice, init_val=0x100, min_val=0,
                             max_val=ENTROPY_VALUES - 1, mask=ENTROPY_VALUES - 1))
    return fmt, fields, (1 << choice) * ENTROPY_VALUES


class CtlClient:
    """Thin typed wrapper over the controller's gRPC services on its unix socket."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        self.address = address
        self.timeout = timeout
        self.channel = grpc.insecure_channel(address)
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

    def setup_profiles(self, topo: Topology, mode: PathMode) -> int:
        """Create and bring ONLINE the run's format and EV profile; returns the EV count."""
        fmt_mode, fields, per_plane = gen_fields(topo, mode)
        t = self.timeout
        self.ctl.ModifyEvFmtProfile(pb.ModifyEvFmtProfileRequest(
            profile_id=FMT_PROFILE, state=pb.PROFILE_OFFLINE, mode=fmt_mode), timeout=t)
        self.ctl.ModifyEvFmtProfile(pb.ModifyEvFmtProfileRequest(
            profile_id=FMT_PROFILE, state=pb.PROFILE_ONLINE,
            fields=pb.FieldWidths(widths=[f.width for f in fields])), timeout=t)
        count = per_plane * topo.fabric.planes
        self.ctl.ModifyEvProfile(pb.ModifyEvProfileRequest(
            profile_id=EV_PROFILE, state=pb.PROFILE_OFFLINE, mode=pb.EV_MODE_GEN,
            fmt_profile_id=FMT_PROFILE, ev_count=count,
            fields=pb.EvFields(fields=fields)), timeout=t)
        self.ctl.ModifyEvProfile(pb.ModifyEvProfileRequest(
            profile_id=EV_PROFILE, state=pb.PROFILE_ONLINE, ev_min_active=1,
            event_mask=pb.EventMask(states=[pb.EV_GOOD, pb.EV_ASSUMED_BAD])), timeout=t)
        return count

    def ev_array(self) -> list[tuple[int, int]]:
        """(EV value, 1-based port) of the run's EV profile."""
        resp = self.ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=EV_PROFILE),
                                       timeout=self.timeout)
        return [(int(e.value), int(e.port)) for e in resp.profile.evs]

    def set_ev_state(self, evs: list[tuple[int, int]], state: pb.EvState) -> None:
        """MODIFY_EV_STATE (DENIED / GOOD / ASSUMED_BAD) for (value, port) EVs."""
        op = pb.EvOp(op=pb.MODIFY_EV_STATE, entries=[
            pb.EvOpEntry(ev=pb.Ev(value=v, port=p), state=state) for v, p in evs])
        self.ctl.ModifyEvProfile(pb.ModifyEvProfileRequest(profile_id=EV_PROFILE, ev_op=op),
                                 timeout=self.timeout)

    def set_link(self, link: str, up: bool) -> pb.LinkView:
        return self.fabric.SetLinkState(pb.SetLinkStateRequest(link=link, up=up),
                                        timeout=self.timeout)

    def topology(self) -> pb.TopologyView:
        return self.fabric.GetTopology(pb.GetTopologyRequest(), timeout=self.timeout)

    def agents(self) -> dict[str, bool]:
        """host -> attached, for every registered agent."""
        stats = self.fabric.GetStatistics(pb.GetStatisticsRequest(), timeout=self.timeout)
        return {a.host: a.attached for a in stats.agents}

    def watch_events(self, on_event: Callable[[pb.EvEvent], None]) -> None:
        """Stream EV events of the run's profile to ``on_event`` (a background thread)."""
        stream = self.ctl.WatchEvEvents(pb.WatchEvEventsRequest(profile_ids=[EV_PROFILE],
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

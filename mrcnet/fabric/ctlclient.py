"""What a run sets up through the controller client: its EV and CC profiles.

The run's EV profile (mrc_ctl model, docs/controller.md) is an explicit (EXP) array, format
profile 1 and EV profile 1, shaped after the topology's EV layout so that spraying covers
every choice point: per plane, every value of the layout's choice bits (top of the EV)
combined with 8 entropy values ``0x100 | plane << 4 | k`` in the low bits. ``ecmp`` uses the
UDP format (16 bits, EVs ``0xC000 | plane << 4 | k``, k = 0..15), ``stev`` 32 bits, ``srv6``
16 bits. The plane is part of every value, so an EV value names one EV of one port: the
agents' cores address EVs by value (``HostCore.set_ev_state``), and a DENY of ``v@1`` must
not touch plane 1.

CC profile 1 is NSCC (``uet-1.0-nscc``) scaled to the fabric's host-link rate and a base RTT
the orchestrator gives (mrcnet/fabric/orchestrator.py measures it on the running fabric).
"""

from __future__ import annotations

from collections.abc import Callable

from common.proto import mrc_ctl_pb2 as pb
from controller.client import ControllerClient
from topologies.evlayout import ev_layout
from topologies.model import NodeKind, PathMode, Topology

EV_PROFILE = 1
FMT_PROFILE = 1
CC_PROFILE = 1
ENTROPY_VALUES = 8
ENTROPY_BASE = 0x100


def ev_array(topo: Topology, mode: PathMode) -> tuple[pb.EvFmtMode, list[int], list[pb.Ev]]:
    """(format mode, format field widths, EVs as value@1-based port) of the run's profile."""
    planes = topo.fabric.planes
    if mode == PathMode.ECMP:
        evs = [pb.Ev(value=0xC000 | p << 4 | k, port=p + 1)
               for p in range(planes) for k in range(16)]
        return pb.EV_FMT_UDP, [16], evs
    total = 32 if mode == PathMode.STEV else 16
    fmt = pb.EV_FMT_STEV if mode == PathMode.STEV else pb.EV_FMT_SRV6
    choice = ev_layout(topo).used_bits
    evs = [pb.Ev(value=c << (total - choice) | ENTROPY_BASE | p << 4 | k, port=p + 1)
           for p in range(planes) for c in range(1 << choice) for k in range(ENTROPY_VALUES)]
    return fmt, ([choice] if choice else []) + [total - choice], evs


def host_link_rate(topo: Topology) -> float:
    """A host NIC's rate in bit/s: the sum of its links' rates (one per plane), the largest
    over the hosts (1 Gb/s per link when a link is unshaped). NSCC scales its window for it."""
    endpoints = (NodeKind.HOST, NodeKind.GPU)
    best = 0.0
    for node in topo.nodes_of(*endpoints):
        links = [topo.link_at(node.name, port) for port in topo.ports(node.name)]
        best = max(best, sum((ln.params.rate_bps or 1e9) for ln in links if ln is not None))
    return best or 1e9


def topo_base_rtt(topo: Topology) -> float:
    from topologies.paths import base_rtt

    return base_rtt(topo)


ProfileRequest = pb.ModifyEvFmtProfileRequest | pb.ModifyEvProfileRequest | pb.ModifyCcProfileRequest


def ev_profile_requests(topo: Topology, mode: PathMode, lb_policy: str = "rotation"
                        ) -> list[ProfileRequest]:
    """The requests that create and bring ONLINE the run's format and EV profile (its QPs
    spray with ``lb_policy``), in order: what ``CtlClient.setup_profiles`` sends and the
    simulator applies to the controller's profile store (mrcnet/sim/control.py)."""
    fmt_mode, widths, evs = ev_array(topo, mode)
    fill = pb.EvOp(op=pb.REPLACE_EV, entries=[
        pb.EvOpEntry(ev=pb.Ev(value=0, port=0), ev_new=ev) for ev in evs])
    return [
        pb.ModifyEvFmtProfileRequest(profile_id=FMT_PROFILE, state=pb.PROFILE_OFFLINE,
                                     mode=fmt_mode),
        pb.ModifyEvFmtProfileRequest(profile_id=FMT_PROFILE, state=pb.PROFILE_ONLINE,
                                     fields=pb.FieldWidths(widths=widths)),
        pb.ModifyEvProfileRequest(profile_id=EV_PROFILE, state=pb.PROFILE_OFFLINE,
                                  mode=pb.EV_MODE_EXP, fmt_profile_id=FMT_PROFILE,
                                  ev_count=len(evs)),
        pb.ModifyEvProfileRequest(profile_id=EV_PROFILE, ev_op=fill),
        pb.ModifyEvProfileRequest(profile_id=EV_PROFILE, state=pb.PROFILE_ONLINE,
                                  ev_min_active=1,
                                  event_mask=pb.EventMask(states=[pb.EV_GOOD,
                                                                  pb.EV_ASSUMED_BAD]),
                                  lb_policy=lb_policy),
    ]


def cc_profile_requests(topo: Topology, base_rtt_s: float | None = None
                        ) -> tuple[list[ProfileRequest], pb.NsccConfig]:
    """The requests that bring CC profile 1 ONLINE: NSCC scaled to the fabric's host-link rate
    and ``base_rtt_s`` (default: the topology's); and its parameters."""
    from controller.profile_store import NSCC, nscc_defaults

    nscc = nscc_defaults(host_link_rate(topo), base_rtt_s or topo_base_rtt(topo),
                         topo.fabric.mtu)
    return [
        pb.ModifyCcProfileRequest(profile_id=CC_PROFILE, state=pb.PROFILE_OFFLINE,
                                  algorithm=NSCC),
        pb.ModifyCcProfileRequest(profile_id=CC_PROFILE, state=pb.PROFILE_ONLINE, nscc=nscc),
    ], nscc


def fixed_window_requests(profile_id: int, window: int, mtu: int) -> list[ProfileRequest]:
    """The requests that bring CC profile ``profile_id`` ONLINE as a fixed window of
    ``window`` bytes (the algorithm ``none``: e.g. an RC baseline's own window, whatever the
    agents' default)."""
    from controller.profile_store import FIXED_WINDOW

    return [
        pb.ModifyCcProfileRequest(profile_id=profile_id, state=pb.PROFILE_OFFLINE,
                                  algorithm=FIXED_WINDOW),
        pb.ModifyCcProfileRequest(profile_id=profile_id, state=pb.PROFILE_ONLINE,
                                  nscc=pb.NsccConfig(max_cwnd=window, mtu=mtu)),
    ]


class CtlClient(ControllerClient):
    """The controller client (controller/client.py) with the run's profiles."""

    def setup_profiles(self, topo: Topology, mode: PathMode, lb_policy: str = "rotation") -> int:
        """Create and bring ONLINE the run's format and EV profile (its QPs spray with
        ``lb_policy``); returns the EV count."""
        for req in ev_profile_requests(topo, mode, lb_policy):
            self._send(req)
        return len(ev_array(topo, mode)[2])

    def setup_cc_profile(self, topo: Topology, base_rtt_s: float | None = None) -> pb.NsccConfig:
        """CC profile 1 ONLINE: NSCC scaled to the fabric's host-link rate and ``base_rtt_s``
        (default: the topology's). Returns its parameters."""
        requests, nscc = cc_profile_requests(topo, base_rtt_s)
        for req in requests:
            self._send(req)
        return nscc

    def setup_fixed_window(self, profile_id: int, window: int, mtu: int) -> None:
        """CC profile ``profile_id`` ONLINE: a fixed window of ``window`` bytes."""
        for req in fixed_window_requests(profile_id, window, mtu):
            self._send(req)

    def _send(self, req: ProfileRequest) -> None:
        if isinstance(req, pb.ModifyEvFmtProfileRequest):
            self.ctl.ModifyEvFmtProfile(req, timeout=self.timeout)
        elif isinstance(req, pb.ModifyEvProfileRequest):
            self.ctl.ModifyEvProfile(req, timeout=self.timeout)
        else:
            self.ctl.ModifyCcProfile(req, timeout=self.timeout)

    def run_ev_array(self) -> list[tuple[int, int]]:
        """(EV value, 1-based port) of the run's EV profile."""
        return self.ev_array(EV_PROFILE)

    def set_run_ev_state(self, evs: list[tuple[int, int]], state: pb.EvState) -> None:
        """MODIFY_EV_STATE of the run's EV profile."""
        self.set_ev_state(EV_PROFILE, evs, state)

    def watch_run_events(self, on_event: Callable[[pb.EvEvent], None]) -> None:
        """Stream EV events of the run's profile to ``on_event``."""
        self.watch_events(on_event, [EV_PROFILE])

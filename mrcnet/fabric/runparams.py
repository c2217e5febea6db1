"""What a run gives its agents and their QPs, from the topology and the run's options: the
transport part of every agent's configuration, the core tuning, the workloads' ACK timeout.

The orchestrator writes these into the agents' configuration files and job files; the
simulator (mrcnet/sim) builds its hosts and QPs from the same functions, so a simulated run
and an emulated one configure the transport alike.
"""

from __future__ import annotations

from typing import Any

from mrcnet.fabric.plan import FabricPlan
from topologies.model import PathMode

CC_CHOICES = ("nscc", "fixed")  # a run's congestion control: CC profile 1 (NSCC) or none
ACK_TIMEOUT_RTTS = 50  # the workloads' local ACK timeout: at least this many base RTTs
MIN_ACK_TIMEOUT = 17  # 1.024 us x 2^17 = 134 ms
ROUTE_BUCKETS = 64  # EV buckets of the GPUs' routes on circuit fabrics (hosts/agent/router.py)
ACK_COALESCE_MTUS = 4  # circuit fabrics: ACK delay = at least this many MTU frames' wire time
ACK_INTERVALS_PER_WINDOW = 8  # ... and at most 1/8 of the window's (wider windows, fewer ACKs)
MAX_ACK_COALESCE = 64  # the agent configuration's limit of core.ack_coalesce
CIRCUIT_PROBE_WINDOWS = 10  # circuit fabrics: reliability probes after this many windows' wire time


def ack_coalesce_frames(window: int, mtu: int) -> int:
    """Frames a GPU's SACK covers at line rate on a circuit fabric: ACK_COALESCE_MTUS, or
    an eighth of the window's frames when that is more (so a window still holds eight
    SACK intervals)."""
    return max(ACK_COALESCE_MTUS, window // (ACK_INTERVALS_PER_WINDOW * mtu))


def circuit_window_warning(plan: FabricPlan, window: int) -> str | None:
    """A warning when ``window`` cannot cover the rate times a ring's longest acknowledgement
    path on this circuit fabric (one-way circuits: the ACKs of a transfer to the next GPU
    come back n - 1 hops, each about two fibres' delay and a frame's wire time under load),
    plus a SACK interval; None when it can. Steps on such a ring are then window-limited and
    slower than the cost model, which has no window (docs/harvest.md)."""
    gpus = len(plan.hosts)
    links = plan.topo.links
    rate = min((ln.params.rate_bps for ln in links), default=0.0) or 1e9
    delay = max((ln.params.delay_s for ln in links), default=0.0)
    mtu = plan.topo.fabric.mtu
    rtt = gpus * (2 * delay + mtu * 8 / rate)
    need = int(rate / 8 * rtt) + ack_coalesce_frames(window, mtu) * mtu
    if window >= need:
        return None
    suggest = 1 << (need - 1).bit_length()
    return (f"window {window} B is below the rate times the longest acknowledgement path of "
            f"{gpus} GPUs on one-way circuits (about {rtt * 1e3:.2f} ms, {need} B with a SACK "
            f"interval): steps on a ring will be window-limited and slower than the model; "
            f"try --window {suggest >> 10}KiB")


def ack_timeout_exponent(base_rtt_s: float) -> int:
    """The mrc.h timeout exponent of the workloads' QPs: the smallest whose timeout
    (1.024 us x 2^N) covers ACK_TIMEOUT_RTTS base RTTs, at least MIN_ACK_TIMEOUT. A timeout is
    a last resort; a fixed one would be 60 RTTs on a 2 ms fabric and 12 on an 11 ms one."""
    n = MIN_ACK_TIMEOUT
    while n < 24 and 1.024e-6 * (1 << n) < ACK_TIMEOUT_RTTS * base_rtt_s:
        n += 1
    return n


def core_tuning() -> dict[str, float | int | None]:
    """Transport-core knobs for the agents (hosts/agent/config.py CORE_KNOBS): the core's
    defaults (1 ms EV-probe interval, 5 ms endpoint timeout) are sized for real NICs, and at
    the emulation's millisecond RTTs every late probe answer would become a timeout and a new
    probe: EV probes every 50 ms, answers awaited 250 ms. recovery:metrics_updated every 10 ms
    per QP: the window, RTT, ECN and penalty in qlog."""
    return {"ev_probe_interval": 0.05, "endpoint_timeout": 0.25, "cc_log_interval": 0.01}


def agent_transport(plan: FabricPlan, host: str, mode: PathMode, window: int,
                    core: dict[str, Any]) -> dict[str, Any]:
    """The transport part of ``host``'s agent configuration (hosts/agent/config.py): its
    ports (interface, MAC, GID, neighbour MAC), EV mode, SRv6 templates, MTU, fixed window
    and core knobs."""
    h = plan.host(host)
    return {
        "name": host,
        "ports": [{"ifname": p.ifname, "mac": p.mac, "gid": p.gid,
                   "neighbor_mac": p.neighbor_mac} for p in h.ports],
        "ev_mode": mode.value,
        "srv6_templates": h.srv6_templates,
        "mtu": plan.topo.fabric.mtu,
        "cc_window": window,
        "core": dict(core),
    }


def circuit_agent(plan: FabricPlan, host: str, window: int, core: dict[str, Any]
                  ) -> dict[str, Any]:
    """What a GPU's agent configuration adds on a circuit fabric: its built-in router (rank,
    buckets, every GPU's GIDs) and one EV per routing bucket; ``core`` (the core knobs) is
    adjusted in place. The orchestrator and the simulator both call it."""
    h = plan.host(host)
    core.pop("cc_log_interval", None)  # collectives keep the fixed window: no samples
    ranks = [g.name for g in plan.hosts]
    # Acknowledgements travel back over multi-hop GPU routes (circuits are one-way), up to
    # n - 1 hops, and load every circuit they cross: coalesce them over the wire time of
    # ACK_COALESCE_MTUS frames (instead of the core's NIC-speed 20 us, or the GPUs spend
    # their CPU forwarding ACKs), or of an eighth of the window when that is more (on a
    # 64-GPU ring every circuit carries the ACKs of 62 other transfers).
    rate = min(ln.params.rate_bps for ln in plan.topo.links) or 1e9
    mtu = plan.topo.fabric.mtu
    frames = ack_coalesce_frames(window, mtu)
    core.setdefault("ack_delay", min(0.01, frames * mtu * 8 / rate))
    core.setdefault("ack_coalesce", min(MAX_ACK_COALESCE, 2 * frames))
    # Congested multi-hop steps queue a fixed window at every hop: a reliability
    # probe after the core's timeout/4 would take queued packets for lost.
    core.setdefault("probe_after", CIRCUIT_PROBE_WINDOWS * window * 8 / rate)
    return {"router": {"rank": ranks.index(host), "buckets": ROUTE_BUCKETS,
                       "gids": [[p.gid for p in g.ports] for g in plan.hosts]},
            "evs_per_plane": ROUTE_BUCKETS // len(h.ports)}

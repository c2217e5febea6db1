"""Names of the mechanism counters of ``HostCore.qp_stats`` / ``host_stats``, defined once.

Every MRC mechanism counts what it does under a public name (docs/transport.md, "Counters"):
retransmissions by what triggered them, NACKs by reason, EV state changes by cause, probe
rounds, ACK timeouts with their interval, Dynamic MPR changes, WriteImm stalls, endpoint
operations. The per-packet paths index small lists by the integer codes below (no string
work per packet); names are produced only when counters are read.
"""

from __future__ import annotations

from hosts.wire import NackReason

# Why a PSN was put in the retransmit set: its retransmission is counted under this trigger.
RTX_NACK = 0  # a recoverable NACK (trimmed, no resource, out of window, ...)
RTX_SACK_GAP = 1  # SACKs showed a gap: fast loss (reordering threshold) or by time (RACK)
RTX_PROBE = 2  # a reliability probe's SACK showed the PSN missing
RTX_PER_PACKET_TIMER = 3  # the optional per-packet timer expired
RTX_ACK_TIMEOUT = 4  # the local ACK timeout expired
RTX_PLANE_DOWN = 5  # the PSN was in flight on a plane that went away
RTX_GO_BACK = 6  # RC baseline: go-back-N after a NAK (PSN sequence error)
RTX_COUNTERS = (
    "rtx_nack",
    "rtx_sack_gap",
    "rtx_probe",
    "rtx_per_packet_timer",
    "rtx_ack_timeout",
    "rtx_plane_down",
    "rtx_go_back",
)

_NACK_NAMES = {int(r): r.name.lower() for r in NackReason}


def nack_reason_name(reason: int) -> str:
    """Counter suffix of a NACK reason (``trimmed``, ``no_resource``...; unknown codes
    ``0xNN``)."""
    return _NACK_NAMES.get(reason, f"{reason:#04x}")


EV_STATE_PREFIX = "ev_state_"  # + the EvStateChanged reason: one counter per cause

# Values of qp_stats that are levels or peaks, not event counts: host totals leave them out.
GAUGES = frozenset({
    "bytes_in_flight",
    "reorder_threshold",
    "mpr_window",
    "mpr_window_peak",
    "mpr_advertised",
    "timeout_interval_us",
    "timeout_max_interval_us",
    "una_stall_max_us",
    "wimm_inflight_max",
    "wimm_open_max",
    "rx_bitmap_held_max",
    "rx_buffer_held_max",
})


def add_counts(total: dict[str, int], stats: dict[str, int]) -> None:
    """Sum the event counters of one QP's stats into ``total`` (gauges are left out)."""
    for key, value in stats.items():
        if key not in GAUGES:
            total[key] = total.get(key, 0) + value

"""NSCC parameters: the scaling rules of the reference and the CC profile's wire names.

One definition for both sides: the controller builds its ``uet-1.0-nscc`` CC profiles from
``scaled`` (controller/profile_store.py turns ``profile_fields`` into an ``NsccConfig``), and a
host's NSCC (hosts/transport/nscc.py) reads a distributed profile back with
``from_profile_fields``, filling what the profile leaves out from the same rules.

Reference network: 100 Gb/s x 12 us = 150,000 bytes. For a network of link rate R and base
RTT T (``BDP = R x T``): ``scaling_a = BDP / 150000``, ``target = 0.75 T`` when the fabric trims
(``T`` otherwise), ``scaling_b = target / T``; ``alpha = 4 scaling_a scaling_b MTU / target``,
``fi = 5 MTU scaling_a``, ``fi_scale = 0.25 scaling_a``, ``eta = 0.15 MTU scaling_a``,
``gamma = 0.8``, ``max_md_jump = 0.5``, ``qa_gate = 3``, ``qa_threshold = 4 target``,
``adjust_bytes_threshold = 8 MTU``, ``adjust_period = T``, ``max_cwnd = 1.5 BDP`` (but see
the least target below).

Not the reference's: **a least target of ``TARGET_PACKET_TIMES`` packet times.** The target
is at least 20 MTU serialisations at the host's rate (``20 x MTU x 8 / R``: 10 packets at each
link of a two-plane NIC); when that floor lifts it, ``max_cwnd`` grows by the same delay's worth
of bytes (``1.5 BDP + (floor - 0.75 T) x R / 8``), so the window can still hold the queue the
target allows. ``alpha`` (4 scaling_a MTU / T) does not change. Why: on the reference network
one 4 KiB packet is 0.33 us at a hop and the target (9 us) is 27 of them; in this emulation's
slow networks (20 Mb/s: a BDP of 8 packets at the host's rate; 1 Gb/s with 5 us links: 10) the
RTT is mostly serialisation, and the delay one packet adds at each hop in either direction (a
data packet behind another flow's, an acknowledgement behind a data packet) is most of ``0.75
T``: on a permutation over clos-2p the RTT under load sat at 1.7-1.8 x the base RTT with the
links 60-80 % busy, and the permutation reached 0.55 of the ideal rate. Where the BDP is
large (100 Mb/s with 1 ms links: 57 packets) the floor is below ``0.75 T`` and nothing changes.
The constant is measured, in ``mrcnet sim`` (clos-2p, ``shift:2`` of 4 MiB per flow in ECMP
mode, REPS, mean over six seeds of the cores' spraying; fraction of the ideal rate):

| least target (packet times) | 20 Mb/s | 100 Mb/s, 1 ms | 1 Gb/s, 5 us |
|---|---|---|---|
| 12 | 0.916 | 0.872 | 0.859 |
| 16 | 0.909 | 0.872 | 0.894 |
| 20 | 0.905 | 0.872 | 0.894 |
| 24 | 0.892 | 0.872 | 0.904 |
| fixed window, best of 64/128/256 KiB | 0.899 | 0.847 | 0.902 |

``unmarked_last_hop`` is not the reference's: MRC switches mark no ECN on the last hop (ECN
means a path problem, for load balancing), so NSCC takes a delay at or above target without
ECN as the mark of the last hop's queue (hosts/transport/nscc.py). The fabric's profiles set
it; a profile without it keeps the reference's rules.

``scaling_b``: the reference divides the target by 12 us, the reference network's RTT, which
is the same as ``target / T`` on that network. Elsewhere the two differ by ``T / 12 us``, and on
this emulation's millisecond RTTs (T of 1-12 ms) ``target / 12 us`` made the proportional
increase of one window (``alpha x target`` = 4 scaling_a scaling_b MTU per RTT) hundreds of
times the reference's share of the BDP: measured, one SACK took a window from 70 KB to the
208 KB limit. Dividing by the network's own base RTT keeps every rule the same per RTT and per
BDP when time is stretched (the emulation is a data-centre network slowed down), and equals
the reference on a 12 us network.

Units: inside ``NsccParams`` seconds and bytes. The profile (mrc_ctl ``NsccConfig``) carries
times in nanoseconds (``*_ns``) and ``alpha`` per nanosecond of delay.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

REFERENCE_RATE_BPS = 100e9
REFERENCE_RTT_S = 12e-6
REFERENCE_BDP = REFERENCE_RATE_BPS / 8 * REFERENCE_RTT_S  # 150,000 bytes
DELAY_EWMA = 0.0125  # weight of a new delay sample in the average delay (htsim's value)
FAST_INCREASE_DELAY_REF = 1e-6  # "delay ~ 0" in the reference network (htsim: 1 us)
TARGET_PACKET_TIMES = 20  # the least target delay, in MTU serialisations at the host's rate


@dataclass(frozen=True, slots=True)
class NsccParams:
    """Every NSCC parameter, in seconds and bytes (``alpha``: bytes per second of delay below
    target, per byte acknowledged)."""

    base_rtt: float
    target_delay: float
    max_cwnd: int
    mtu: int
    alpha: float
    fi: float
    fi_scale: float
    eta: float
    gamma: float = 0.8
    max_md_jump: float = 0.5
    qa_gate: int = 3
    qa_threshold: float = 0.0
    disable_qa: bool = False
    adjust_bytes_threshold: int = 0
    adjust_period: float = 0.0
    delay_ewma: float = DELAY_EWMA
    unmarked_last_hop: bool = False  # the last hop marks no ECN: delay >= target is a mark

    @property
    def fast_increase_delay(self) -> float:
        """Below this delay the path is taken as empty (1 us in the reference, scaled by
        target / 12 us like the other delay constants)."""
        return FAST_INCREASE_DELAY_REF * self.target_delay / REFERENCE_RTT_S

    def problem(self) -> str:
        """Why these parameters cannot run ('' when they can)."""
        floats = (self.base_rtt, self.target_delay, self.alpha, self.fi, self.fi_scale,
                  self.eta, self.gamma, self.max_md_jump, self.qa_threshold, self.adjust_period,
                  self.delay_ewma)
        if not all(math.isfinite(x) for x in floats):
            return "parameters must be finite"
        if self.base_rtt <= 0 or self.target_delay <= 0:
            return "base_rtt and target_delay must be > 0"
        if self.mtu <= 0 or self.max_cwnd < self.mtu:
            return "max_cwnd must be at least one MTU"
        if min(self.alpha, self.fi, self.fi_scale, self.eta) < 0:
            return "alpha, fi, fi_scale and eta must be >= 0"
        if not (0 < self.gamma <= 1 and 0 < self.max_md_jump <= 1):
            return "gamma and max_md_jump must be in (0, 1]"
        if not 0 <= self.qa_gate <= 31:
            return "qa_gate must be 0..31 (a shift)"
        if self.adjust_bytes_threshold <= 0 or self.adjust_period <= 0:
            return "adjust_bytes_threshold and adjust_period must be > 0"
        if not 0 < self.delay_ewma <= 1:
            return "delay_ewma must be in (0, 1]"
        return ""


def scaled(rate_bps: float, base_rtt_s: float, mtu: int = 4096,
           trimming: bool = True, unmarked_last_hop: bool = False) -> NsccParams:
    """The reference's defaults for a network of ``rate_bps`` links and ``base_rtt_s``
    (``unmarked_last_hop``: its switches mark no ECN towards a host, MRC's rule)."""
    if not (rate_bps > 0 and base_rtt_s > 0 and mtu > 0):
        raise ValueError("rate, base RTT and MTU must be positive")
    bdp = rate_bps / 8 * base_rtt_s
    target = (0.75 if trimming else 1.0) * base_rtt_s
    max_cwnd = 1.5 * bdp
    least = TARGET_PACKET_TIMES * mtu * 8 / rate_bps
    if least > target:  # a network of a few packets per BDP (module docstring)
        max_cwnd += (least - target) * rate_bps / 8
        target = least
    scaling_a = bdp / REFERENCE_BDP
    scaling_b = target / base_rtt_s  # the reference's target / 12 us on its own network
    return NsccParams(
        base_rtt=base_rtt_s,
        target_delay=target,
        max_cwnd=max(mtu, round(max_cwnd)),
        mtu=mtu,
        alpha=4.0 * scaling_a * scaling_b * mtu / target,
        fi=5 * mtu * scaling_a,
        fi_scale=0.25 * scaling_a,
        eta=0.15 * mtu * scaling_a,
        qa_threshold=4 * target,
        adjust_bytes_threshold=8 * mtu,
        adjust_period=base_rtt_s,
        unmarked_last_hop=unmarked_last_hop,
    )


def rate_for(max_cwnd: float, base_rtt_s: float, mtu: int = 4096) -> float:
    """The link rate for which ``scaled(rate, base_rtt_s, mtu)`` (trimming) gives ``max_cwnd``:
    ``max_cwnd / 1.5`` is the BDP, unless the least target lifted the window, then
    ``max_cwnd = 0.75 BDP + TARGET_PACKET_TIMES x MTU``."""
    rate = max_cwnd / 1.5 * 8 / base_rtt_s
    if TARGET_PACKET_TIMES * mtu * 8 / rate > 0.75 * base_rtt_s:
        rate = max(max_cwnd - TARGET_PACKET_TIMES * mtu, 0.0) / 0.75 * 8 / base_rtt_s
    return rate


def reference(mtu: int = 4096) -> NsccParams:
    """The reference network's own parameters (a profile that names no network)."""
    return scaled(REFERENCE_RATE_BPS, REFERENCE_RTT_S, mtu)


def profile_fields(p: NsccParams) -> dict[str, float | int | bool]:
    """The parameters under the CC profile's field names and units (mrc_ctl NsccConfig)."""
    return {
        "disable_qa": p.disable_qa,
        "adjust_bytes_threshold": p.adjust_bytes_threshold,
        "adjust_period_threshold_ns": round(p.adjust_period * 1e9),
        "base_rtt_ns": round(p.base_rtt * 1e9),
        "eta": p.eta,
        "fi": p.fi,
        "fi_scale": p.fi_scale,
        "gamma": p.gamma,
        "max_md_jump": p.max_md_jump,
        "max_cwnd": p.max_cwnd,
        "qa_gate": p.qa_gate,
        "qa_threshold_ns": round(p.qa_threshold * 1e9),
        "target_delay_ns": round(p.target_delay * 1e9),
        "alpha": p.alpha / 1e9,
        "mtu": p.mtu,
        "unmarked_last_hop": p.unmarked_last_hop,
    }


def from_profile_fields(fields: Mapping[str, float], mtu: int) -> NsccParams:
    """Parameters from a distributed CC profile (field names of ``profile_fields``; absent
    fields are proto defaults, i.e. left out). What the profile does not give comes from the
    scaling rules of the network it names: its base RTT and max_cwnd (the rate ``scaled`` gives
    that window, ``rate_for``), else the reference network. Raises ValueError when the result
    cannot run."""
    scale_mtu = int(fields.get("mtu", 0)) or mtu
    base_ns = float(fields.get("base_rtt_ns", 0.0))
    if base_ns > 0:
        cwnd = float(fields.get("max_cwnd", 0))
        rate = rate_for(cwnd, base_ns * 1e-9, scale_mtu) if cwnd > 0 else REFERENCE_RATE_BPS
        base = scaled(rate, base_ns * 1e-9, scale_mtu)
    else:
        base = reference(scale_mtu)
    changes: dict[str, float | int | bool] = {}
    ns = {"base_rtt_ns": "base_rtt", "target_delay_ns": "target_delay",
          "qa_threshold_ns": "qa_threshold", "adjust_period_threshold_ns": "adjust_period"}
    for name, value in fields.items():
        if name in ns:
            if value > 0:
                changes[ns[name]] = float(value) * 1e-9
        elif name == "alpha":
            changes["alpha"] = float(value) * 1e9
        elif name in ("max_cwnd", "qa_gate", "adjust_bytes_threshold", "mtu"):
            changes[name] = int(value)
        elif name in ("disable_qa", "unmarked_last_hop"):
            changes[name] = bool(value)
        elif name in ("eta", "fi", "fi_scale", "gamma", "max_md_jump"):
            changes[name] = float(value)
        else:
            raise ValueError(f"unknown NSCC parameter {name!r}")
    if "target_delay" in changes and "qa_threshold" not in changes:
        changes["qa_threshold"] = 4 * float(changes["target_delay"])
    params = replace(base, **changes)  # type: ignore[arg-type]
    problem = params.problem()
    if problem:
        raise ValueError(f"NSCC parameters: {problem}")
    return params

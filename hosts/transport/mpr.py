"""Dynamic MPR policy: how a responder host shares its PSN-tracking memory among its QPs.

MRC lets a responder change the MPR it advertises in every SACK (Dynamic MPR), so a NIC can
size bitmap memory to demand and oversubscribe it across QPs by reclaiming what idle QPs do
not use. ``SharedBitmap`` does that with the host's real use of its tracking state:

- the host has ``budget`` PSNs of tracking bitmap for all its Dynamic-MPR responder QPs;
- every QP first gets its *floor*: the bitmap span it holds right now (highest PSN received
  minus the cumulative ACK, at its peak since the last evaluation) rounded up to the 128-PSN
  MPR unit, at least one unit — what it occupies is never taken away;
- a QP that received nothing since the last evaluation keeps only its floor (reclaimed);
- the rest of the budget goes, one 128-PSN unit at a time, to the QP with the smallest grant
  among those that received data (max-min fair water-filling: a QP never gets more than the
  MPR negotiated at connection set-up, and what it cannot take goes to the others).

``HostCore`` evaluates the policy every ``HostConfig.mpr_interval`` seconds when
``HostConfig.mpr_budget`` is set; each QP's new MPR reaches its requester in the next SACK.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hosts.transport.psn import MPR_UNIT


@dataclass(frozen=True, slots=True)
class MprUse:
    """What one Dynamic-MPR responder QP uses (PSNs), read by the core at an evaluation."""

    qpn: int
    negotiated: int  # mpr_dest: the most it may advertise
    advertised: int  # what it advertises now
    span_peak: int  # largest bitmap span held since the last evaluation
    arrivals: int  # data packets received since the last evaluation


class MprPolicy(Protocol):
    def allocate(self, uses: list[MprUse]) -> dict[int, int]:
        """New MPR (PSNs, a multiple of 128) per QPN."""
        ...


def _units(psns: int) -> int:
    return max(1, -(-psns // MPR_UNIT))


class SharedBitmap:
    """A host-wide budget of tracking PSNs shared by need (see the module docstring)."""

    def __init__(self, budget: int) -> None:
        if budget < MPR_UNIT:
            raise ValueError(f"an MPR budget is at least {MPR_UNIT} PSNs")
        self.budget_units = budget // MPR_UNIT

    def allocate(self, uses: list[MprUse]) -> dict[int, int]:
        cap = {u.qpn: _units(u.negotiated) for u in uses}
        grant = {u.qpn: min(cap[u.qpn], _units(u.span_peak + 1)) for u in uses}
        left = self.budget_units - sum(grant.values())
        hungry = [u.qpn for u in uses if u.arrivals > 0 and grant[u.qpn] < cap[u.qpn]]
        while left > 0 and hungry:  # one unit at a time to the smallest grant: max-min fair
            qpn = min(hungry, key=lambda q: grant[q])
            grant[qpn] += 1
            left -= 1
            if grant[qpn] >= cap[qpn]:
                hungry.remove(qpn)
        return {qpn: units * MPR_UNIT for qpn, units in grant.items()}

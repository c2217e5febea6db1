"""How long a workload round's data packets waited in the switches' egress queues.

Every embedded switch keeps, per egress queue, a histogram of how long each transmitted packet
waited (arrival to the start of its transmission, in ``WAIT_BUCKET_S`` buckets,
switch/traffic.py). A round's histogram is the sum over every switch port's data queues
(trimmable first transmissions and retransmissions, no-trim; not control or best effort)
after the round minus the same sum before it. Its percentiles say how much queueing the
round's congestion control left in the fabric; in an incast nearly all of it is at the
receiver's port. The emulation reads the histograms through the controller (GetSwitchStats
detail), the simulator from its switches' shapers: both results.json carry the same figure
(``queue_delay`` of a workload round) and `mrcnet sim compare` sets them side by side.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from common.classes import DEFAULT_CLASSES, TrafficClass
from switch.traffic import WAIT_BUCKET_S

DATA_CLASSES = (TrafficClass.TRIMMABLE, TrafficClass.TRIMMABLE_RETX, TrafficClass.NO_TRIM)
DATA_PRIORITIES = frozenset(DEFAULT_CLASSES.priority[c] for c in DATA_CLASSES)

Hist = dict[int, int]


def add(hist: Hist, queues: Iterable[tuple[int, Mapping[int, int]]], sign: int = 1) -> None:
    """Add (``sign`` -1: subtract) the data queues of ``queues`` (priority, histogram)."""
    for prio, wait in queues:
        if prio in DATA_PRIORITIES:
            for bucket, n in wait.items():
                hist[int(bucket)] = hist.get(int(bucket), 0) + sign * int(n)


def from_details(details: Mapping[str, Any]) -> Hist:
    """Every egress data queue of the switches' port details (GetPortsResponse by name)."""
    hist: Hist = {}
    for resp in details.values():
        for port in resp.ports:
            add(hist, ((q.priority, q.wait_hist) for q in port.egress.queues))
    return hist


def from_traffic_managers(tms: Iterable[Any]) -> Hist:
    """Every egress data queue of in-process traffic managers (a queue's priority is its
    index, as the switch's admin service reports it)."""
    hist: Hist = {}
    for tm in tms:
        for shaper in tm.egress.values():
            add(hist, enumerate(q.wait_hist for q in shaper.stats.queues))
    return hist


def difference(after: Hist, before: Hist) -> Hist:
    """The packets counted in ``after`` but not in ``before`` (non-empty buckets only)."""
    return {b: n - before.get(b, 0) for b, n in after.items() if n - before.get(b, 0) > 0}


def percentile(hist: Hist, q: float, bucket_s: float = WAIT_BUCKET_S) -> float:
    """The ``q`` quantile (0..1) of a bucket histogram, as the upper edge of its bucket
    (0.0 for an empty one)."""
    total = sum(hist.values())
    if total == 0:
        return 0.0
    need = q * total
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= need:
            return (bucket + 1) * bucket_s
    return (max(hist) + 1) * bucket_s


def summary(hist: Hist) -> dict[str, float | int] | None:
    """``queue_delay`` of a round: p50/p90/p99 (s) and the packets counted (None: none)."""
    packets = sum(hist.values())
    if packets <= 0:
        return None
    return {"p50_s": percentile(hist, 0.5), "p90_s": percentile(hist, 0.9),
            "p99_s": percentile(hist, 0.99), "packets": packets}

"""Congestion-control hook: the window the core consults and the feedback it reports.

NSCC (a separate issue) implements CongestionControl; the core only calls these four methods.
``bytes_in_flight`` is what the requester has sent and not yet seen acknowledged (SACKed or
cumulatively acked); retransmissions count again when sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class SackFeedback:
    """What one SACK told the requester (per-SACK, not per packet).

    ``rcvd_bytes_delta`` is the growth of CC_STATE rcvd_bytes in bytes (256 B units on the
    wire, unwrapped). ``rtt`` is None when the sample is unusable (trigger was retransmitted,
    no timestamp). ``ecn`` is True when the responder flagged the forward path (m=SKIP_ONCE).
    """

    now: float
    ev: int
    ecn: bool
    newly_acked_bytes: int
    rcvd_bytes_delta: int
    rtt: float | None
    service_time: float
    ooo_count: int
    penalty: int
    restore: bool
    bytes_in_flight: int


@dataclass(slots=True)
class NackFeedback:
    now: float
    ev: int
    reason: int
    size: int  # bytes of the NACKed packet
    bytes_in_flight: int


class CongestionControl(Protocol):
    def can_send(self, bytes_in_flight: int, size: int) -> bool:
        """May a packet of ``size`` bytes be sent with ``bytes_in_flight`` outstanding?"""
        ...

    def on_sack(self, feedback: SackFeedback) -> None: ...

    def on_nack(self, feedback: NackFeedback) -> None: ...

    def on_timeout(self, now: float, bytes_in_flight: int) -> None: ...


class NoCongestionControl:
    """A fixed window in bytes (the MPR still bounds packets in flight)."""

    def __init__(self, window: int = 1 << 30) -> None:
        self.window = window

    def can_send(self, bytes_in_flight: int, size: int) -> bool:
        return bytes_in_flight + size <= self.window or bytes_in_flight == 0

    def on_sack(self, feedback: SackFeedback) -> None:
        return None

    def on_nack(self, feedback: NackFeedback) -> None:
        return None

    def on_timeout(self, now: float, bytes_in_flight: int) -> None:
        return None

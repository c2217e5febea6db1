"""Round-trip time estimate of one requester.

Samples come from SACKs (recovery.py): the time from our own transmission of the SACK's
trigger to the SACK's arrival, minus the responder's reported service time, and only when the
trigger was sent once (Karn: for a retransmitted PSN it is unknown which copy arrived).
"""

from __future__ import annotations

K_RTT_GAIN = 0.125  # weight of a new sample in the smoothed RTT (RFC 6298's alpha)


class RttEstimator:
    """Smoothed RTT (the first sample, then an exponentially weighted moving average), the
    smallest and the latest sample, and the latest service time the responder reported."""

    __slots__ = ("latest", "min_rtt", "samples", "service_time", "srtt")

    def __init__(self) -> None:
        self.srtt: float | None = None  # seconds; None before the first sample
        self.min_rtt: float | None = None
        self.latest: float | None = None
        self.service_time = 0.0
        self.samples = 0

    def on_sample(self, rtt: float, service_time: float = 0.0) -> None:
        srtt = self.srtt
        self.srtt = rtt if srtt is None else (1.0 - K_RTT_GAIN) * srtt + K_RTT_GAIN * rtt
        m = self.min_rtt
        if m is None or rtt < m:
            self.min_rtt = rtt
        self.latest = rtt
        self.service_time = service_time
        self.samples += 1

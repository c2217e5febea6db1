"""Per-port figures of one sample: what the web view and the overview plot draw per link.

``PortTotals`` turns each switch's admin ``GetPortsResponse`` (embedded target) into totals per
port: bytes delivered across the emulated link in each direction (``egress``: sent by this
port, ``ingress``: received on it; host links are shaped at the switch in both directions, so
the ingress side is what the host sent), the bytes queued at its egress now (all priorities)
and whether the port is up (admin and carrier). ``rates`` gives bits per second between two
readings; only non-zero figures are kept, so a sample of an idle fabric stays small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class PortReading:
    egress_bytes: int
    ingress_bytes: int
    depth_bytes: int
    up: bool


def port_readings(resp: Any) -> dict[int, PortReading]:
    """Port -> reading, from an embedded switch's ``GetPortsResponse``."""
    return {p.port: PortReading(int(p.egress.bytes), int(p.ingress.bytes),
                                sum(int(q.depth_bytes) for q in p.egress.queues),
                                bool(p.admin_up and p.carrier_up))
            for p in resp.ports}


@dataclass
class PortRates:
    """One sample's per-port figures, keyed ``switch:port``."""

    egress_bps: dict[str, float] = field(default_factory=dict)
    ingress_bps: dict[str, float] = field(default_factory=dict)
    depth_bytes: dict[str, int] = field(default_factory=dict)
    down: list[str] = field(default_factory=list)


class PortTotals:
    """The previous reading of every port, to turn totals into rates."""

    def __init__(self) -> None:
        self._last: dict[str, PortReading] = {}

    def rates(self, readings: dict[str, dict[int, PortReading]], dt: float) -> PortRates:
        """``readings``: switch -> port -> reading now; ``dt``: seconds since the last call."""
        out = PortRates()
        dt = max(dt, 1e-6)
        for switch, ports in readings.items():
            for port, now in ports.items():
                key = f"{switch}:{port}"
                prev = self._last.get(key)
                self._last[key] = now
                if not now.up:
                    out.down.append(key)
                if now.depth_bytes:
                    out.depth_bytes[key] = now.depth_bytes
                if prev is None:
                    continue
                eg = (now.egress_bytes - prev.egress_bytes) * 8 / dt
                ing = (now.ingress_bytes - prev.ingress_bytes) * 8 / dt
                if eg > 0:
                    out.egress_bps[key] = round(eg, 1)
                if ing > 0:
                    out.ingress_bps[key] = round(ing, 1)
        return out

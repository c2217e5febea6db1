"""Congestion control: the plug-in interface, the feedback it is given and the registry of
algorithms by name.

A QP builds its controller at INIT from its CC profile: ``HostConfig.cc_factory`` when the host
sets one, otherwise the factory registered under ``CcProfile.algorithm`` (a QP without an
installed CC profile gets the fixed window, ``"none"``). An algorithm is added with
``register_congestion_control(name, factory)``; a profile naming an algorithm that is not
registered makes ``modify_qp`` raise ``QpError``.

The core calls, per QP: ``can_send`` before every data packet, ``on_packet_sent`` after it,
``on_sack`` per SACK, ``on_nack`` per NACK, ``on_packets_lost`` whenever recovery infers
losses (fast loss, time, probe, per-packet timer, ACK timeout; NACKed packets go to
``on_nack`` instead), ``on_timeout`` per ACK timeout; ``get_log_data`` is read for the QP's
metrics (``HostCore.qp_cc_log``). ``bytes_in_flight`` is what the
requester has sent and not seen acknowledged (SACKed or cumulatively acked) nor declared lost;
a retransmission counts again when it is sent. Times are keyword-only ``now`` (seconds of the
core's clock), like every count, so two numbers cannot be swapped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
    def can_send(self, *, bytes_in_flight: int, size: int) -> bool:
        """May a packet of ``size`` bytes be sent with ``bytes_in_flight`` outstanding?"""
        ...

    def on_packet_sent(
        self, *, now: float, size: int, bytes_in_flight: int, retransmission: bool
    ) -> None:
        """A data packet of ``size`` bytes left (``bytes_in_flight`` includes it)."""
        ...

    def on_sack(self, feedback: SackFeedback) -> None: ...

    def on_nack(self, feedback: NackFeedback) -> None: ...

    def on_packets_lost(self, *, now: float, lost_bytes: int, bytes_in_flight: int) -> None:
        """Recovery declared ``lost_bytes`` lost without a NACK (they left bytes_in_flight)."""
        ...

    def on_timeout(self, *, now: float, bytes_in_flight: int) -> None:
        """The local ACK timeout expired (the timed-out packets are already not in flight)."""
        ...

    def get_log_data(self) -> dict[str, float]:
        """The controller's state for logs and metrics (e.g. ``{"cwnd": bytes}``)."""
        ...


@dataclass(frozen=True, slots=True)
class CcSetup:
    """What a factory gets to build one QP's controller: the QP, its profile's parameters,
    the host's MTU (payload bytes per packet) and the host's default window."""

    qpn: int
    mtu: int
    default_window: int
    params: Mapping[str, float] = field(default_factory=dict)


CcFactory = Callable[[CcSetup], CongestionControl]

_REGISTRY: dict[str, CcFactory] = {}


def register_congestion_control(name: str, factory: CcFactory) -> None:
    """Make ``factory`` the algorithm ``name`` of CC profiles; a name registers once."""
    if not name:
        raise ValueError("a congestion-control algorithm needs a name")
    if name in _REGISTRY:
        raise ValueError(f"congestion control {name!r} is already registered")
    _REGISTRY[name] = factory


def congestion_control_factory(name: str) -> CcFactory | None:
    """The factory registered under ``name``, or None."""
    return _REGISTRY.get(name)


def registered_algorithms() -> tuple[str, ...]:
    return tuple(sorted(_REGISTRY))


class NoCongestionControl:
    """A fixed window in bytes (the MPR still bounds packets in flight)."""

    def __init__(self, window: int = 1 << 30) -> None:
        self.window = window

    def can_send(self, *, bytes_in_flight: int, size: int) -> bool:
        return bytes_in_flight + size <= self.window or bytes_in_flight == 0

    def on_packet_sent(
        self, *, now: float, size: int, bytes_in_flight: int, retransmission: bool
    ) -> None:
        return None

    def on_sack(self, feedback: SackFeedback) -> None:
        return None

    def on_nack(self, feedback: NackFeedback) -> None:
        return None

    def on_packets_lost(self, *, now: float, lost_bytes: int, bytes_in_flight: int) -> None:
        return None

    def on_timeout(self, *, now: float, bytes_in_flight: int) -> None:
        return None

    def get_log_data(self) -> dict[str, float]:
        return {"cwnd": self.window}


FIXED_WINDOW = "none"
"""The fixed window's algorithm name (also ``CcProfile``'s default): no congestion control
beyond a window of bytes in flight: the profile's ``max_cwnd`` when it names one, else
``HostConfig.default_cc_window``."""


def _fixed_window(setup: CcSetup) -> NoCongestionControl:
    window = int(setup.params.get("max_cwnd", 0))
    if window < 0:
        raise ValueError(f"fixed window {window}: must be positive")
    return NoCongestionControl(max(window, setup.mtu) if window else setup.default_window)


register_congestion_control(FIXED_WINDOW, _fixed_window)

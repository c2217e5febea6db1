"""HostCore: the sans-I/O MRC endpoint of one host (all its QPs and endpoint operations).

Inputs are calls with an explicit ``now`` (seconds, any monotonic origin): receive(),
handle_timer(), post_send(), port_status(). Outputs are pulled: packets_to_send(), get_timer(),
next_event(). Nothing here touches sockets, threads or the wall clock (aioquic style), so the
same object runs under the real agent, in unit tests with a fake clock and in simulations.
"""

from __future__ import annotations

from hosts.transport.memory import MemoryRegion
from hosts.transport.profiles import CcProfile, EvProfile
from hosts.transport.types import (
    Event,
    EvState,
    HostConfig,
    QpAttr,
    QpAttrMask,
    QpType,
    RecvWR,
    RxMeta,
    SendWR,
    TxPacket,
)
from hosts.wire import MrcPacket


class HostCore:
    """All transport state of one host. Not thread-safe: drive it from one loop."""

    def __init__(self, config: HostConfig) -> None:
        raise NotImplementedError

    # -- resources ------------------------------------------------------------------------
    def register_mr(self, buf: bytearray | memoryview, access: int) -> MemoryRegion:
        """Register caller memory (no copy); returns the region with .lkey/.rkey/.addr."""
        raise NotImplementedError

    def deregister_mr(self, mr: MemoryRegion) -> None:
        raise NotImplementedError

    def set_ev_profile(self, profile: EvProfile) -> None:
        """Install or replace an EV profile (QPs bind to it at INIT by ev_profile_id)."""
        raise NotImplementedError

    def set_cc_profile(self, profile: CcProfile) -> None:
        raise NotImplementedError

    def set_ev_state(self, profile_id: int, ev: int, state: EvState, now: float = 0.0) -> None:
        """Controller override of one EV in every QP bound to the profile (DENIED / GOOD)."""
        raise NotImplementedError

    # -- QPs ------------------------------------------------------------------------------
    def create_qp(
        self,
        qp_type: QpType,
        send_cq: int,
        recv_cq: int,
        max_send_wr: int = 4096,
        max_recv_wr: int = 4096,
    ) -> int:
        """Create a QP in RESET; returns its QPN (never 0..2)."""
        raise NotImplementedError

    def modify_qp(self, qpn: int, attr: QpAttr, mask: QpAttrMask, now: float = 0.0) -> None:
        """mrc_modify_qp: apply the masked fields; raises QpError on an illegal transition or a
        missing/forbidden attribute (nothing is half-applied)."""
        raise NotImplementedError

    def query_qp(self, qpn: int) -> QpAttr:
        raise NotImplementedError

    def destroy_qp(self, qpn: int) -> None:
        raise NotImplementedError

    def post_send(self, qpn: int, wr: SendWR, now: float) -> None:
        """Queue a Write/WriteImm; raises QpError if the QP is not RTS or the SQ is full, and
        ValueError on a bad local buffer (the WR is not queued)."""
        raise NotImplementedError

    def post_recv(self, qpn: int, wr: RecvWR) -> None:
        """Pre-post a receive for one incoming WriteImm (allowed from INIT on)."""
        raise NotImplementedError

    # -- network --------------------------------------------------------------------------
    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        """Process one received packet. Malformed or unexpected input is counted and dropped
        (see ``stats``); it never raises."""
        raise NotImplementedError

    def port_status(self, port: int, up: bool, now: float) -> None:
        """A local NIC port went up/down: EVs on it stop/start at once, peers are told."""
        raise NotImplementedError

    def send_ev_probe(self, dst_gid: bytes, port: int, ev: int, now: float) -> int:
        """Send an EV probe (endpoint op on QP 0x2); returns its request id. The answer comes
        back as an EndpointResponse (or EndpointTimeout) event."""
        raise NotImplementedError

    def send_port_status_update(self, dst_gid: bytes, now: float) -> int:
        """Announce this host's port_status_mask to one peer address; returns request id."""
        raise NotImplementedError

    def packets_to_send(self, now: float, limit: int | None = None) -> list[TxPacket]:
        """Everything that may be sent now (control first, then retransmissions, then new
        data within MPR and the CC window); at most ``limit`` packets when given."""
        raise NotImplementedError

    def get_timer(self) -> float | None:
        """Earliest time handle_timer() must be called, or None."""
        raise NotImplementedError

    def handle_timer(self, now: float) -> None:
        raise NotImplementedError

    def next_event(self) -> Event | None:
        """Pop the oldest pending event (Completion, AsyncEvent, EvStateChanged,
        EndpointResponse, EndpointTimeout, LogRecord)."""
        raise NotImplementedError

    @property
    def port_status_mask(self) -> int:
        """Bit p set when local port p is up."""
        raise NotImplementedError

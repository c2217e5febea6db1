"""Receive resources of a responder NIC: out-of-order bitmap entries and packet buffer.

A NIC tracks the PSNs it received beyond the cumulative ACK in bitmap entries and stages the
data of those out-of-order packets in a packet buffer until the cumulative ACK passes them;
both are finite, per QP and per host. ``HostConfig`` sets the limits (0: unlimited, the
default, so only the MPR bounds a QP):

- ``rx_bitmap_qp`` / ``rx_bitmap_host``: out-of-order PSNs one responder QP / all the host's
  responder QPs may hold;
- ``rx_buffer_qp`` / ``rx_buffer_host``: payload bytes of those packets, per QP / per host.

A packet that would exceed a limit is dropped and answered with a NACK: NO_BITMAP (0x06) for
bitmap entries, NO_PKT_BUFFER (0x07) for buffer bytes. The packet at the cumulative ACK
(``cack + 1``) is never refused: it needs neither (it is placed and released at once) and it
frees what the QP held, so exhaustion cannot deadlock a QP. The requester retransmits a
NACKed PSN on another EV and leaves the EV's state alone (docs/transport.md, NACK handling).

``RxPool`` is the host's share, one per ``HostCore``; each ``Responder`` accounts its own use
and returns everything when its QP fails, is reset or destroyed.
"""

from __future__ import annotations

UNLIMITED = 1 << 62


def limit(value: int) -> int:
    """A configured limit (0: none) as a number a comparison can use."""
    return value if value > 0 else UNLIMITED


class RxPool:
    """The host-wide receive resources and what the host's responder QPs hold of them."""

    __slots__ = ("bitmap_limit", "bitmap_used", "buffer_limit", "buffer_used", "limited")

    def __init__(self, bitmap: int = 0, buffer: int = 0) -> None:
        if bitmap < 0 or buffer < 0:
            raise ValueError("receive resource limits are >= 0 (0: unlimited)")
        self.bitmap_limit = limit(bitmap)
        self.buffer_limit = limit(buffer)
        self.bitmap_used = 0
        self.buffer_used = 0
        self.limited = bitmap > 0 or buffer > 0


__all__ = ["UNLIMITED", "RxPool", "limit"]

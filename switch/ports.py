"""Packet I/O of the embedded switch: AF_PACKET sockets on its interfaces, link-state watching.

A port socket is bound to one interface for all protocols, in promiscuous mode, non-blocking,
and ignores its own transmissions (PACKET_IGNORE_OUTGOING), so the data-plane loop sees each
received frame exactly once. The kernel's IPv6 stack is switched off on switch interfaces
(they are switch ports, not host interfaces): otherwise it would send router solicitations
and MLD reports out of them and process received frames a second time.

Link state: ``LinkWatcher`` listens to rtnetlink RTM_NEWLINK/RTM_DELLINK messages so a cable
pulled at the far end (peer veth down) is seen at once, without polling.
"""

from __future__ import annotations

import errno
import socket
import struct
from dataclasses import dataclass
from pathlib import Path

from common import netlink
from common.netlink import IFF_RUNNING, IFF_UP, RTMGRP_LINK
from common.netlink import RTM_DELLINK as RTM_DELLINK  # re-exported for callers
from common.netlink import RTM_NEWLINK as RTM_NEWLINK
from common.pktring import RxRing

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32


MAX_FRAME = 65535  # receive buffer: larger than any MTU a veth carries here


class PortError(OSError):
    """A switch port could not be opened; the message names the interface and the cause."""


@dataclass(eq=False)
class Port:
    """One switch port: its number in the P4 program, its interface and raw socket."""

    number: int
    ifname: str
    ifindex: int
    sock: socket.socket
    ring: RxRing | None = None  # the socket's receive ring (else frames come by recvmmsg)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        if self.ring is not None:
            self.ring.close()
        self.sock.close()


def _disable_ipv6(ifname: str) -> None:
    path = Path(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6")
    try:
        path.write_text("1")
    except OSError:
        pass  # IPv6 not compiled in, or already absent: nothing to switch off


def open_port(number: int, ifname: str, bufsize: int = 32 << 20,
              ring_frames: int = 0) -> Port:
    """Open the raw socket of port ``number`` on interface ``ifname``. The large socket
    buffers absorb the moments the switch process is descheduled on a shared machine; with
    ``ring_frames`` frames arrive in a receive ring of that many slots (common/pktring.py)
    instead of the socket's queue."""
    try:
        ifindex = socket.if_nametoindex(ifname)
    except OSError:
        raise PortError(f"port {number}: no interface {ifname!r}") from None
    _disable_ipv6(ifname)
    # Protocol 0 until bound: the socket receives nothing from other interfaces meanwhile.
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        for force, plain in (
            (SO_RCVBUFFORCE, socket.SO_RCVBUF),
            (SO_SNDBUFFORCE, socket.SO_SNDBUF),
        ):
            try:
                sock.setsockopt(socket.SOL_SOCKET, force, bufsize)
            except OSError:
                sock.setsockopt(socket.SOL_SOCKET, plain, bufsize)
        mreq = struct.pack("=iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
        sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
        ring = RxRing(sock, ring_frames) if ring_frames else None
    except OSError as exc:
        sock.close()
        raise PortError(f"port {number}: cannot open raw socket on {ifname!r}: {exc}") from exc
    try:
        sock.bind((ifname, ETH_P_ALL))
        sock.setblocking(False)
    except OSError as exc:
        if ring is not None:
            ring.close()
        sock.close()
        raise PortError(f"port {number}: cannot open raw socket on {ifname!r}: {exc}") from exc
    return Port(number, ifname, ifindex, sock, ring)


def oper_up(ifname: str) -> bool:
    """Operational state of an interface now (carrier and admin up)."""
    try:
        return Path(f"/sys/class/net/{ifname}/operstate").read_text().strip() in ("up", "unknown")
    except OSError:
        return False


class LinkWatcher:
    """rtnetlink subscription to link changes; ``fileno()`` goes into the data-plane poll set."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        try:
            self.sock.bind((0, RTMGRP_LINK))
            self.sock.setblocking(False)
        except OSError:
            self.sock.close()
            raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list[tuple[int, bool]]:
        """Drain pending messages; returns (ifindex, running) for every link message."""
        changes: list[tuple[int, bool]] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except BlockingIOError:
                return changes
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    # Messages were lost: the caller re-reads every port's state.
                    changes.append((-1, False))
                    continue
                raise
            changes.extend(parse_link_messages(data))

    def close(self) -> None:
        self.sock.close()


def parse_link_messages(data: bytes) -> list[tuple[int, bool]]:
    """(ifindex, IFF_UP and IFF_RUNNING) for each RTM_NEWLINK/DELLINK in a netlink datagram."""
    both = IFF_UP | IFF_RUNNING
    msgs = netlink.parse_link_messages(data)
    return [(m.index, not m.deleted and m.flags & both == both) for m in msgs]


def close_all(ports: dict[int, Port]) -> None:
    for port in ports.values():
        try:
            port.close()
        except OSError:
            pass

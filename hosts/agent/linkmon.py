"""Link state of the NIC ports from rtnetlink (RTM_NEWLINK multicasts), without polling.

A port is usable when its interface is administratively up and has carrier (IFF_UP and
IFF_LOWER_UP). The agent turns changes into ``HostCore.port_status`` calls, which take the
port's EVs out of use at once and make the core send Port Status Updates to its peers.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from common import netlink
from common.netlink import IFF_LOWER_UP as IFF_LOWER_UP  # re-exported for callers
from common.netlink import IFF_UP as IFF_UP
from common.netlink import (
    IFINFOMSG,
    NETLINK_ROUTE,
    NLM_F_DUMP,
    NLM_F_REQUEST,
    NLMSG_DONE,
    NLMSG_ERROR,
    NLMSGHDR,
    RTM_GETLINK,
    RTMGRP_LINK,
)
from common.netlink import RTM_DELLINK as RTM_DELLINK
from common.netlink import RTM_NEWLINK as RTM_NEWLINK
from hosts.agent.netns_enter import in_netns


def parse_link_messages(data: bytes) -> list[tuple[str, bool]]:
    """(ifname, usable) for each named RTM_NEWLINK/DELLINK in a netlink datagram."""
    both = IFF_UP | IFF_LOWER_UP
    return [
        (m.name, not m.deleted and m.flags & both == both)
        for m in netlink.parse_link_messages(data)
        if m.name is not None
    ]


class LinkMonitor:
    """Non-blocking rtnetlink socket subscribed to link changes in one namespace."""

    def __init__(self, netns: str | None = None) -> None:
        with in_netns(netns):
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
            try:
                sock.bind((0, RTMGRP_LINK))
            except OSError:
                sock.close()
                raise
        self.sock = sock
        self.netns = netns

    def fileno(self) -> int:
        return self.sock.fileno()

    def dump(self, ifnames: Iterable[str]) -> dict[str, bool]:
        """Current state of the given interfaces (blocking request/response, at start-up)."""
        wanted = set(ifnames)
        req = NLMSGHDR.pack(NLMSGHDR.size + IFINFOMSG.size, RTM_GETLINK,
                             NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + IFINFOMSG.pack(0, 0, 0, 0, 0)
        # A separate socket so the dump does not interleave with multicast notifications.
        with in_netns(self.netns):
            dump_sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        with dump_sock as s:
            s.settimeout(2.0)
            s.sendto(req, (0, 0))
            state: dict[str, bool] = {}
            done = False
            while not done:
                data = s.recv(65536)
                off = 0
                while off + NLMSGHDR.size <= len(data):
                    length, mtype = NLMSGHDR.unpack_from(data, off)[:2]
                    if mtype in (NLMSG_DONE, NLMSG_ERROR) or length < NLMSGHDR.size:
                        done = True
                        break
                    off += (length + 3) & ~3
                for name, usable in parse_link_messages(data):
                    if name in wanted:
                        state[name] = usable
        return state

    def read(self) -> list[tuple[str, bool]]:
        """All link changes queued on the socket (non-blocking)."""
        out: list[tuple[str, bool]] = []
        while True:
            try:
                data = self.sock.recv(65536, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError:
                return out  # ENOBUFS: overrun; the next message carries the current state
            out.extend(parse_link_messages(data))

    def close(self) -> None:
        self.sock.close()

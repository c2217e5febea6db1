"""Link state of the NIC ports from rtnetlink (RTM_NEWLINK multicasts), without polling.

A port is usable when its interface is administratively up and has carrier (IFF_UP and
IFF_LOWER_UP). The agent turns changes into ``HostCore.port_status`` calls, which take the
port's EVs out of use at once and make the core send Port Status Updates to its peers.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

from hosts.agent.netns_enter import in_netns

NETLINK_ROUTE = 0
RTMGRP_LINK = 1
RTM_NEWLINK = 16
RTM_DELLINK = 17
RTM_GETLINK = 18
NLMSG_DONE = 3
NLMSG_ERROR = 2
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
IFLA_IFNAME = 3
IFF_UP = 0x1
IFF_LOWER_UP = 0x10000

_NLMSGHDR = struct.Struct("=IHHII")
_IFINFOMSG = struct.Struct("=BxHiII")
_RTATTR = struct.Struct("=HH")


def parse_link_messages(data: bytes) -> list[tuple[str, bool]]:
    """Decode a netlink datagram into (ifname, usable) pairs; malformed parts are skipped."""
    out: list[tuple[str, bool]] = []
    off = 0
    while off + _NLMSGHDR.size <= len(data):
        length, mtype, _flags, _seq, _pid = _NLMSGHDR.unpack_from(data, off)
        if length < _NLMSGHDR.size or off + length > len(data):
            break
        if mtype in (RTM_NEWLINK, RTM_DELLINK) and length >= _NLMSGHDR.size + _IFINFOMSG.size:
            body = off + _NLMSGHDR.size
            _fam, _type, _index, flags, _change = _IFINFOMSG.unpack_from(data, body)
            name = None
            a = body + _IFINFOMSG.size
            end = off + length
            while a + _RTATTR.size <= end:
                alen, atype = _RTATTR.unpack_from(data, a)
                if alen < _RTATTR.size or a + alen > end:
                    break
                if atype == IFLA_IFNAME:
                    name = bytes(data[a + 4 : a + alen]).split(b"\0", 1)[0].decode(errors="replace")
                a += (alen + 3) & ~3
            if name is not None:
                usable = mtype == RTM_NEWLINK and (flags & IFF_UP) != 0 and (flags & IFF_LOWER_UP) != 0
                out.append((name, usable))
        off += (length + 3) & ~3
    return out


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
        req = _NLMSGHDR.pack(_NLMSGHDR.size + _IFINFOMSG.size, RTM_GETLINK,
                             NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + _IFINFOMSG.pack(0, 0, 0, 0, 0)
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
                while off + _NLMSGHDR.size <= len(data):
                    length, mtype = _NLMSGHDR.unpack_from(data, off)[:2]
                    if mtype in (NLMSG_DONE, NLMSG_ERROR) or length < _NLMSGHDR.size:
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

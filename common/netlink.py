"""rtnetlink link messages (RTM_NEWLINK / RTM_DELLINK): one parser for every link watcher.

The switch watches its ports by interface index, host agents watch theirs by name; both read
the same datagrams, so the message layout is decoded here once. Malformed parts end the
parse (what came before is kept): a bad datagram never raises.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

NETLINK_ROUTE = 0
RTMGRP_LINK = 1
RTM_NEWLINK = 16
RTM_DELLINK = 17
RTM_GETLINK = 18
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
IFLA_IFNAME = 3
IFF_UP = 0x1
IFF_RUNNING = 0x40
IFF_LOWER_UP = 0x10000

NLMSGHDR = struct.Struct("=IHHII")
IFINFOMSG = struct.Struct("=BxHiII")
RTATTR = struct.Struct("=HH")


@dataclass(frozen=True, slots=True)
class LinkMessage:
    index: int
    name: str | None  # IFLA_IFNAME when the message carries it
    flags: int
    deleted: bool  # RTM_DELLINK


def _ifname(data: bytes, start: int, end: int) -> str | None:
    a = start
    while a + RTATTR.size <= end:
        alen, atype = RTATTR.unpack_from(data, a)
        if alen < RTATTR.size or a + alen > end:
            return None
        if atype == IFLA_IFNAME:
            return bytes(data[a + 4 : a + alen]).split(b"\0", 1)[0].decode(errors="replace")
        a += (alen + 3) & ~3
    return None


def parse_link_messages(data: bytes) -> list[LinkMessage]:
    """Every well-formed RTM_NEWLINK/RTM_DELLINK in one netlink datagram, in order."""
    out: list[LinkMessage] = []
    off = 0
    while off + NLMSGHDR.size <= len(data):
        length, mtype, _flags, _seq, _pid = NLMSGHDR.unpack_from(data, off)
        if length < NLMSGHDR.size or off + length > len(data):
            break
        if mtype in (RTM_NEWLINK, RTM_DELLINK) and length >= NLMSGHDR.size + IFINFOMSG.size:
            body = off + NLMSGHDR.size
            _fam, _type, index, flags, _change = IFINFOMSG.unpack_from(data, body)
            name = _ifname(data, body + IFINFOMSG.size, off + length)
            out.append(LinkMessage(index, name, flags, mtype == RTM_DELLINK))
        off += (length + 3) & ~3
    return out

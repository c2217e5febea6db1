"""The NIC ports' socket filter: MRC frames pass, the host kernel's own IPv6 traffic does not.

Checked on a datagram socketpair (the kernel runs socket filters on those too), with frames
built by scapy, independently of the filter's own constants."""

from __future__ import annotations

import socket

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, ICMPv6MLReport2, IPv6, IPv6ExtHdrSegmentRouting
from scapy.layers.l2 import Ether

from hosts.agent.sockfilter import attach_mrc_filter

SRC, DST = "fd00:6d72:6300::1", "fd00:6d72:6300::3"


def delivered(frames: list[bytes]) -> list[bytes]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        attach_mrc_filter(b)
        b.setblocking(False)
        for f in frames:
            a.send(f)
        out = []
        while True:
            try:
                out.append(b.recv(65535))
            except BlockingIOError:
                return out


def ip6(payload: object) -> bytes:
    return bytes(Ether() / IPv6(src=SRC, dst=DST) / payload)  # type: ignore[operator]


@pytest.mark.parametrize("frame", [
    ip6(UDP(sport=0xC000, dport=4791) / (b"\x00" * 64)),
    ip6(IPv6ExtHdrSegmentRouting(addresses=[DST]) / UDP(dport=4791) / (b"\x00" * 12)),
    ip6(IPv6(src=SRC, dst=DST) / UDP(dport=4791) / (b"\x00" * 12)),
], ids=["rocev2", "srh", "ipv6-in-ipv6"])
def test_mrc_frames_pass_whole(frame: bytes) -> None:
    assert delivered([frame]) == [frame]


@pytest.mark.parametrize("frame", [
    ip6(ICMPv6EchoRequest(data=b"ping")),
    ip6(TCP(sport=40000, dport=5201)),
    ip6(UDP(sport=4791, dport=53)),
    ip6(ICMPv6MLReport2()),
], ids=["ping", "iperf3-tcp", "udp-other-port", "mld"])
def test_the_host_kernels_traffic_is_kept_out(frame: bytes) -> None:
    assert delivered([frame]) == []

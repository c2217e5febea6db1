"""Down ports and malformed frames: dropped, counted, and the switch keeps forwarding."""

from __future__ import annotations

import os
import queue
import random
import struct

import grpc
import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from common.netns import run, wait_until
from common.p4runtime_client import P4RuntimeClient, PortEvent
from common.p4schema.mrc_switch import DropReason
from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc
from testbed.switch_lab import Lab
from tests.emulation.switch_util import (
    HOST_MAC,
    SWITCH_MAC,
    connect,
    lab,
    mark_frame,
    mrc_frame,
    psn_of,
    route,
)

pytestmark = pytest.mark.emulation
__all__ = ["lab"]

DST = "fd00:0:0:2::1"


def _drops(client: P4RuntimeClient, reason: DropReason) -> int:
    return client.read_counter("MrcIngress.drop_reason", reason)[reason][0]


def _next_event(client: P4RuntimeClient) -> PortEvent:
    try:
        return client.port_events.get(timeout=10)
    except queue.Empty:
        raise AssertionError("no port status notification on the P4Runtime stream") from None


def test_down_port_drops_and_counts_admin_and_carrier(lab: Lab) -> None:
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    sw = lab.start_switch("s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")})
    with connect(sw) as client, grpc.insecure_channel(sw.address) as channel:
        admin = pb_grpc.SwitchAdminStub(channel)
        route(client, "fd00:0:0:2::", 64, 2)
        h1, h2 = lab.ifname("h1"), lab.ifname("h2")

        # Administrative down: the controller hears about it, traffic is dropped and counted.
        info = admin.SetPortAdmin(pb.SetPortAdminRequest(port=2, up=False), timeout=5)
        assert not info.admin_up and info.carrier_up
        assert _next_event(client) == PortEvent(2, False)
        sniffer = lab.sniff(ns, [h2])
        lab.send(ns, h1, [mrc_frame(DST, psn=i) for i in range(5)])
        admin.SetPortAdmin(pb.SetPortAdminRequest(port=2, up=True), timeout=5)
        assert _next_event(client) == PortEvent(2, True)
        lab.send(ns, h1, [mark_frame(DST)])
        capture = sniffer.result()
        assert capture.marks == 1 and capture.frames == []
        assert _drops(client, DropReason.PORT_DOWN) == 5

        # Carrier loss at the far end (the host's interface goes down): same treatment.
        def carrier() -> bool:
            return bool(
                admin.GetPorts(pb.GetPortsRequest(ports=[2]), timeout=5).ports[0].carrier_up
            )

        lab.kit.set_link(h2, False, ns)
        wait_until(lambda: not carrier(), 10, "switch to see carrier loss on port 2")
        assert _next_event(client) == PortEvent(2, False)
        lab.send(ns, h1, [mrc_frame(DST, psn=10 + i) for i in range(3)])
        lab.kit.set_link(h2, True, ns)
        wait_until(carrier, 10, "switch to see carrier on port 2")
        assert _next_event(client) == PortEvent(2, True)
        sniffer = lab.sniff(ns, [h2])
        lab.send(ns, h1, [mrc_frame(DST, psn=20), mark_frame(DST)])
        capture = sniffer.result()
        assert [psn_of(f) for _, _, f in capture.frames] == [20]
        assert _drops(client, DropReason.PORT_DOWN) == 8
        assert sw.alive()


def _valid() -> bytes:
    return mrc_frame(DST, psn=77, size=300)


def _with(frame: bytes, offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(frame)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def test_malformed_frames_are_counted_and_dropped_and_forwarding_continues(lab: Lab) -> None:
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    sw = lab.start_switch("s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")})
    good = _valid()
    eth = bytes(Ether(src=HOST_MAC, dst=SWITCH_MAC, type=0x86DD))
    udp_off = 14 + 40
    truncated = [
        eth,  # Ethernet only
        good[:30],  # inside the IPv6 header
        good[: udp_off + 4],  # inside the UDP header
        good[: udp_off + 8 + 5],  # inside the BTH
        good[: udp_off + 8 + 12 + 2],  # inside METH/RETH of a Write
    ]
    bad_length = [
        _with(good, 18, "!H", 5000),  # IPv6 payload length beyond the frame
        _with(good, udp_off + 4, "!H", 3),  # UDP length below its own header
        _with(good, udp_off + 4, "!H", 4000),  # UDP length beyond the frame
    ]
    rng = random.Random(9)
    not_ipv6 = [
        bytes(Ether(src=HOST_MAC, dst=SWITCH_MAC, type=0x0800)) + os.urandom(50),
        bytes(Ether(src=HOST_MAC, dst=SWITCH_MAC, type=0x88B5)) + b"garbage" * 8,
    ]
    garbage = [
        eth + bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200))) for _ in range(20)
    ]
    with connect(sw) as client:
        route(client, "fd00:0:0:2::", 64, 2)
        sniffer = lab.sniff(ns, [lab.ifname("h2")])
        lab.send(ns, lab.ifname("h1"), [*truncated, *bad_length, *not_ipv6, *garbage])
        lab.send(ns, lab.ifname("h1"), [good, mark_frame(DST)])
        capture = sniffer.result()
        got = [f for _, _, f in capture.frames]
        assert len(got) == 1 and psn_of(got[0]) == 77
        assert bytes(Ether(got[0])[UDP]) == bytes(Ether(good)[UDP])
        assert Ether(got[0])[IPv6].hlim == 63
        assert _drops(client, DropReason.PARSE_ERROR) >= len(truncated)
        assert _drops(client, DropReason.BAD_LENGTH) >= len(bad_length)
        assert _drops(client, DropReason.NOT_IPV6) == len(not_ipv6)
        # Every malformed frame was dropped for exactly one counted reason.
        total = sum(pkts for pkts, _b in client.read_counter("MrcIngress.drop_reason").values())
        assert total == len(truncated) + len(bad_length) + len(not_ipv6) + len(garbage)
    assert sw.alive()


def _misc(admin: pb_grpc.SwitchAdminStub) -> dict[str, int]:
    return dict(admin.GetPorts(pb.GetPortsRequest(ports=[1]), timeout=5).counters)


@pytest.mark.parametrize("rx_ring", ["ring", "recvmmsg"])
def test_a_deleted_interface_leaves_the_loop_and_the_rest_forwards(lab: Lab,
                                                                   rx_ring: str) -> None:
    """A port whose interface vanishes (its veth peer deleted, as when a host's namespace
    goes) is down, counted once in ``ports_gone``, no longer read, and the other ports go on
    forwarding. Before, such a switch kept waking on the dead socket."""
    ns = lab.namespace("h")
    for i in (1, 2, 3):
        lab.wire(f"p{i}", f"h{i}", None, ns)
    extra = ("--rx-ring", "0") if rx_ring == "recvmmsg" else ()
    sw = lab.start_switch("s1", {i: lab.ifname(f"p{i}") for i in (1, 2, 3)}, extra=extra)
    with connect(sw) as client, grpc.insecure_channel(sw.address) as channel:
        admin = pb_grpc.SwitchAdminStub(channel)
        route(client, "fd00:0:0:2::", 64, 2)
        run(["ip", "link", "del", lab.ifname("h3")], netns=ns)
        assert _next_event(client) == PortEvent(3, False)
        wait_until(lambda: _misc(admin)["ports_gone"] == 1, 10, "port 3 to leave the loop")
        before = _misc(admin)
        sniffer = lab.sniff(ns, [lab.ifname("h2")])
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=30 + i) for i in range(3)]
                 + [mark_frame(DST)])
        capture = sniffer.result()
        assert [psn_of(f) for _, _, f in capture.frames] == [30, 31, 32]
        after = _misc(admin)
        assert after["ports_gone"] == 1 and after["rx_errors"] == before["rx_errors"], after
        ports = admin.GetPorts(pb.GetPortsRequest(ports=[3]), timeout=5).ports
        assert not ports[0].carrier_up
    assert sw.alive()

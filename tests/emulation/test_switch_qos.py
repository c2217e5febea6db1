"""Queues and marking through a real switch process on a slow emulated link.

The egress link of port 2 runs at 100 kb/s, so a burst sent at once queues up for seconds
and the checks depend on ordering, not on timing: a packet can only see a queue depth of at
most its index in the burst (in bytes: index x frame size, the unit of the ECN and trim
thresholds), and the last packets of a burst see a deep queue.

Each test runs on the embedded target and on BMv2 (where installed). On BMv2 the link is
3 packets/s (100 kb/s in 4096-byte cells), a queued packet counts as 4096 bytes whatever its
size, a trimmed packet stays in the queue it was classified to, and the per-queue admin
statistics do not exist (the program's P4Runtime counters are checked on both); see the
deviation table in docs/switch.md.
"""

from __future__ import annotations

import math
from collections import Counter as Tally
from collections.abc import Iterator

import grpc
import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from common.classes import DEFAULT_CLASSES, TrafficClass
from common.p4runtime_client import P4RuntimeClient
from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc
from testbed.switch_lab import Lab, SwitchProcess
from tests.emulation.switch_util import (
    TRIM_DSCP,
    TRIM_PRIO,
    connect,
    dscp_of,
    ecn_of,
    install_classes,
    lab,
    mrc_frame,
    parse,
    port_params,
    psn_of,
    queued_bytes_unit,
    route,
    switch_kind,
)

pytestmark = pytest.mark.emulation
__all__ = ["lab", "switch_kind"]

SLOW = "rate=1e5,qpkts=1000"
DST = "fd00:0:0:2::1"
D = DEFAULT_CLASSES.dscp
P = DEFAULT_CLASSES.priority


class Rig:
    """One switch: port 1 from the sender h1, port 2 (slow link) to the sink h2."""

    def __init__(self, lab: Lab, kind: str, link: str = SLOW) -> None:
        self.lab = lab
        self.kind = kind
        self.ns = lab.namespace("h")
        lab.wire("p1", "h1", None, self.ns)
        lab.wire("p2", "h2", None, self.ns)
        self.sw: SwitchProcess = lab.start_switch(
            "s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")}, links={2: link}, kind=kind
        )
        self.client: P4RuntimeClient = connect(self.sw)
        self.channel = grpc.insecure_channel(self.sw.address)
        self.admin = pb_grpc.SwitchAdminStub(self.channel)
        install_classes(self.client)
        route(self.client, "fd00:0:0:2::", 64, 2)

    @property
    def embedded(self) -> bool:
        """The switch has the embedded target's admin service (per-queue statistics)."""
        return self.kind == "embedded"

    def first_marked(self, threshold_bytes: int, frame_bytes: int) -> int:
        """Index of the first packet of a burst that can see ``threshold_bytes`` queued."""
        return math.ceil(threshold_bytes / queued_bytes_unit(self.kind, frame_bytes))

    def burst(self, frames: list[bytes]) -> list[bytes]:
        """Send frames from h1 at once and return what h2 received, in arrival order."""
        sniffer = self.lab.sniff(self.ns, [self.lab.ifname("h2")], count=len(frames), marks=0)
        self.lab.send(self.ns, self.lab.ifname("h1"), frames)
        return [d for _, _, d in sniffer.result(timeout=60).frames]

    def egress_queues(self, port: int = 2) -> list[pb.QueueStats]:
        info = self.admin.GetPorts(pb.GetPortsRequest(ports=[port]), timeout=5).ports[0]
        return list(info.egress.queues)

    def close(self) -> None:
        self.channel.close()
        self.client.close()


@pytest.fixture
def rig(lab: Lab, switch_kind: str) -> Iterator[Rig]:
    r = Rig(lab, switch_kind)
    try:
        yield r
    finally:
        r.close()


def test_dscp_classes_use_their_queues_and_high_priority_overtakes(rig: Rig) -> None:
    classes = list(TrafficClass)
    frames = [mrc_frame(DST, dscp=D[cls], psn=i, size=200) for i, cls in enumerate(classes)]
    got = rig.burst(frames)
    assert sorted(psn_of(f) for f in got) == list(range(len(classes)))
    want = Tally(P[cls] for cls in classes)
    if rig.embedded:
        queues = rig.egress_queues()
        assert {q.priority: q.packets for q in queues if q.packets} == dict(want)
    counters = rig.client.read_counter("MrcEgress.tx_port_queue")
    assert {i - 16: pkts for i, (pkts, _b) in counters.items() if 16 <= i < 24 and pkts} == dict(
        want
    )

    # Ten low-priority packets queue behind each other; a CONTROL packet sent last overtakes
    # every one still waiting (at 100 kb/s each 1000-byte packet holds the wire 80 ms).
    lows = [
        mrc_frame(DST, dscp=D[TrafficClass.TRIMMABLE], psn=100 + i, size=1000) for i in range(10)
    ]
    high = mrc_frame(DST, dscp=D[TrafficClass.CONTROL], psn=999, size=1000)
    order = [psn_of(f) for f in rig.burst([*lows, high])]
    assert [p for p in order if p != 999] == list(range(100, 110))  # FIFO within a class
    assert order.index(999) < 5, f"CONTROL did not overtake the queued packets: {order}"


def test_ecn_marks_over_threshold_but_not_on_last_hop_ports(rig: Rig) -> None:
    size = 500
    port_params(rig.client, 2, ecn_bytes=3 * size)
    n = 12
    frames = [
        mrc_frame(DST, dscp=D[TrafficClass.NO_TRIM], ecn=2, psn=i, size=size) for i in range(n)
    ]
    frames.append(mrc_frame(DST, dscp=D[TrafficClass.NO_TRIM], ecn=0, psn=n, size=500))
    got = {psn_of(f): f for f in rig.burst(frames)}
    assert sorted(got) == list(range(n + 1))
    ce = {psn for psn, f in got.items() if ecn_of(f) == 3}
    # Packet i sees at most i packets (i * 500 bytes) queued: the first three are below the
    # 1500-byte threshold (BMv2: i * 4096 bytes, only the first is below it).
    assert not ce & set(range(rig.first_marked(3 * size, size)))
    assert n - 1 in ce  # the end of the burst saw a deep queue
    assert ecn_of(got[n]) == 0  # not ECN-capable: never marked
    assert all(ecn_of(got[p]) == 2 for p in range(n) if p not in ce)
    if rig.embedded:
        queue = rig.egress_queues()[P[TrafficClass.NO_TRIM]]
        assert queue.ecn_marks == len(ce)
    cell = 2 * 8 + P[TrafficClass.NO_TRIM]
    assert rig.client.read_counter("MrcEgress.ecn_port_queue", cell)[cell][0] == len(ce)

    # The same burst on a port configured as the last hop to the receiver: no marks.
    port_params(rig.client, 2, ecn_bytes=3 * size, last_hop=True, modify=True)
    got = {psn_of(f): f for f in rig.burst(frames)}
    assert len(got) == n + 1 and all(ecn_of(f) != 3 for f in got.values())
    if rig.embedded:
        assert rig.egress_queues()[P[TrafficClass.NO_TRIM]].ecn_marks == len(ce)
    assert rig.client.read_counter("MrcEgress.ecn_port_queue", cell)[cell][0] == len(ce)


def test_trimming_cuts_to_headers_with_trimmed_codepoint_at_high_priority(rig: Rig) -> None:
    n = 8
    size = 1500
    port_params(rig.client, 2, trim_bytes=2 * size)
    frames = [mrc_frame(DST, dscp=D[TrafficClass.TRIMMABLE], psn=i, size=size) for i in range(n)]
    # NO_TRIM data is never trimmed, whatever the depth.
    frames.append(mrc_frame(DST, dscp=D[TrafficClass.NO_TRIM], psn=n, size=size))
    got = rig.burst(frames)
    order = [psn_of(f) for f in got]
    assert sorted(order) == list(range(n + 1))
    # Header stack of a Write Only: Ethernet 14 + IPv6 40 + UDP 8 + BTH 12 + METH 4 + RETH 16.
    header_len = 14 + 40 + 8 + 12 + 4 + 16
    trimmed = {psn_of(f): f for f in got if len(f) < size}
    # at most 1500 bytes queued before packet 2: below the threshold (BMv2: 4096 per packet)
    assert not trimmed.keys() & set(range(rig.first_marked(2 * size, size)))
    assert n - 1 in trimmed and n not in trimmed
    for psn, f in trimmed.items():
        original = parse(frames[psn])
        pkt = parse(f)
        assert len(f) == header_len
        assert dscp_of(f) == TRIM_DSCP
        assert pkt[IPv6].plen == header_len - 54 and pkt[UDP].len == header_len - 54
        assert bytes(pkt[UDP].payload) == bytes(original[UDP].payload)[: header_len - 62]
    for f in got:
        if len(f) == size:
            assert dscp_of(f) in (D[TrafficClass.TRIMMABLE], D[TrafficClass.NO_TRIM])
    if rig.embedded:
        # A trimmed header overtakes the full packets queued before it.
        for psn in trimmed:
            later = [o for o in order if o > psn and o not in trimmed]
            if later:
                assert order.index(psn) < order.index(later[0])
        queues = rig.egress_queues()
        assert queues[TRIM_PRIO].trims == len(trimmed)
        assert queues[TRIM_PRIO].packets == len(trimmed)
    else:
        # BMv2 trims at dequeue, when the queue was already chosen: the TRIMMABLE packets,
        # trimmed or not, leave in the order they arrived.
        assert [o for o in order if o < n] == list(range(n))
    # mrc_switch.p4 counts a trim in the cell of the queue the packet was classified to, and
    # the trimmed packet as sent at the trim priority.
    cell = 2 * 8 + P[TrafficClass.TRIMMABLE]
    assert rig.client.read_counter("MrcEgress.trim_port_queue", cell)[cell][0] == len(trimmed)
    sent = 2 * 8 + TRIM_PRIO
    packets, nbytes = rig.client.read_counter("MrcEgress.tx_port_queue", sent)[sent]
    assert packets == len(trimmed)
    # bytes: the length the packet was received with (v1model counters, on both targets)
    assert nbytes == len(trimmed) * size

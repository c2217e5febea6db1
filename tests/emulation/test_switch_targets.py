"""Where the embedded target and BMv2 differ at the link level, measured on both (each test
runs once per switch kind, BMv2 skipped with a reason where it is not installed), plus the
host-side shaper that stands in for BMv2's missing ingress shaping. The deviation table in
docs/switch.md cites these tests.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

from common.netns import run, wait_until
from common.p4runtime_client import P4RuntimeClient
from switch.targets.bmv2 import host_shaper_command
from testbed.switch_lab import Lab, SwitchProcess
from tests.emulation.switch_util import connect, driver_for, lab, mrc_frame, route, switch_kind

pytestmark = pytest.mark.emulation
__all__ = ["lab", "switch_kind"]

DST = "fd00:0:0:2::1"
BMV2_RX_RING = 32  # frames BMv2's libpcap receive ring holds per port
EMBEDDED_RX_FRAMES = 100  # far below what the embedded target's 32 MiB socket buffers hold


# sends N copies of a frame, a refused send (ENOBUFS: the qdisc dropped it) counted, not fatal
SEND_COUNTING = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.bind((sys.argv[1], 0))
frame, ok = bytes.fromhex(sys.argv[2]), 0
for _ in range(int(sys.argv[3])):
    try:
        s.send(frame)
        ok += 1
    except OSError:
        pass
print(ok)
"""


def _rig(lab: Lab, kind: str, link: str = "") -> tuple[str, SwitchProcess]:
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    sw = lab.start_switch("s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")},
                          links={2: link} if link else None, kind=kind)
    return ns, sw


def _received(client: P4RuntimeClient) -> int:
    return sum(p for p, _b in client.read_counter("MrcIngress.rx_port_class").values())


def test_a_stopped_switch_keeps_what_its_receive_buffers_hold(lab: Lab, switch_kind: str) -> None:
    """100 frames arrive while the switch process is stopped (SIGSTOP). The embedded target's
    socket buffers keep them all; BMv2's receive ring keeps 32 and the kernel drops the rest,
    which is why bursts to BMv2 are paced in the tests and shaped at the hosts in fabrics."""
    ns, sw = _rig(lab, switch_kind)
    client = connect(sw)
    try:
        route(client, "fd00:0:0:2::", 64, 2)
        frames = [mrc_frame(DST, psn=i, size=1000) for i in range(100)]
        os.kill(sw.process.pid, signal.SIGSTOP)
        try:
            lab.send(ns, lab.ifname("h1"), frames)
        finally:
            os.kill(sw.process.pid, signal.SIGCONT)
        want = BMV2_RX_RING if switch_kind == "bmv2" else EMBEDDED_RX_FRAMES
        wait_until(lambda: _received(client) >= want, 20, f"{want} frames counted")
        # a marker after the burst: once it is counted, nothing of the burst is still coming
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=999, size=100)])
        wait_until(lambda: _received(client) >= want + 1, 20, "the marker counted")
        assert _received(client) == want + 1
    finally:
        client.close()


def test_tail_drops_beyond_the_queue_depth_are_what_the_live_view_counts(
    lab: Lab, switch_kind: str
) -> None:
    """A burst of 20 into a 4-packet queue behind a slow link: the sink gets the few that fit,
    and the live view's drop figure (admin statistics on the embedded target, derived from the
    program's counters on BMv2) equals the frames sent minus the frames the sink received."""
    ns, sw = _rig(lab, switch_kind, "rate=1e5,qpkts=4")
    client = connect(sw)
    try:
        route(client, "fd00:0:0:2::", 64, 2)
        frames = [mrc_frame(DST, psn=i, size=1000) for i in range(20)]
        sniffer = lab.sniff(ns, [lab.ifname("h2")], count=20, timeout=6, marks=0)
        lab.send(ns, lab.ifname("h1"), frames)
        got = len(sniffer.result().frames)
        assert 4 <= got <= 6, got  # 4 queued, plus what left while the burst arrived
        wait_until(lambda: _received(client) == 20, 10, "every frame counted at ingress")
        driver = driver_for(sw)  # what the controller reads the live view's figures with
        driver.open(client)
        try:
            figures = driver.figures()
        finally:
            driver.close()
        assert figures.drops == 20 - got
    finally:
        client.close()


def test_the_host_side_shaper_holds_a_links_queue_and_drops_the_rest(lab: Lab) -> None:
    """BMv2 fabrics shape a host link's host-to-switch direction at the host (TBF, the link's
    rate and queue): a burst of 40 frames of 4194 bytes into a 1 Mb/s link whose queue holds
    8 cells (32 KiB) passes the bucket (18 KB) and the queue, and the kernel drops the rest."""
    ns = lab.namespace("h")
    lab.wire("a", "b", ns, ns)
    a, b = lab.ifname("a"), lab.ifname("b")
    cmd = host_shaper_command(a, "rate=1e6,qpkts=8,qbytes=0")
    assert cmd is not None
    run(["sh", "-c", cmd], netns=ns)
    frame = mrc_frame(DST, size=4194)
    sniffer = lab.sniff(ns, [b], count=40, timeout=3, marks=0)
    accepted = int(run([sys.executable, "-c", SEND_COUNTING, a, frame.hex(), "40"], netns=ns))
    got = len(sniffer.result().frames)
    stats = run(["tc", "-s", "qdisc", "show", "dev", a], netns=ns)
    dropped = int(stats.split("dropped ")[1].split(",")[0])
    assert got == accepted and got + dropped == 40, stats  # refused sends are ENOBUFS
    # bucket (18000 bytes: 4 frames) + queue (32768 bytes: 7 frames), one more if a token
    # arrived during the burst
    assert 11 <= got <= 13, (got, stats)


def test_two_busy_priorities_share_the_ports_rate_only_on_the_embedded_target(
    lab: Lab, switch_kind: str
) -> None:
    """Six TRIMMABLE frames, then six CONTROL frames, at once into a slow port. The embedded
    target has one wire per port: after the first low frame, every CONTROL frame leaves before
    the next low one. BMv2 paces each priority queue on its own (both at the port's rate in
    packets per second), so the low queue keeps sending while the high one is busy."""
    from common.classes import DEFAULT_CLASSES, TrafficClass
    from tests.emulation.switch_util import install_classes, psn_of

    ns, sw = _rig(lab, switch_kind, "rate=1e5,qpkts=100")
    client = connect(sw)
    try:
        install_classes(client)
        route(client, "fd00:0:0:2::", 64, 2)
        d = DEFAULT_CLASSES.dscp
        lows = [mrc_frame(DST, dscp=d[TrafficClass.TRIMMABLE], psn=i, size=1000)
                for i in range(6)]
        highs = [mrc_frame(DST, dscp=d[TrafficClass.CONTROL], psn=100 + i, size=1000)
                 for i in range(6)]
        sniffer = lab.sniff(ns, [lab.ifname("h2")], count=12, timeout=30, marks=0)
        lab.send(ns, lab.ifname("h1"), lows + highs)
        order = [psn_of(f) for _, _, f in sniffer.result(timeout=60).frames]
    finally:
        client.close()
    assert sorted(order) == [*range(6), *range(100, 106)]
    lows_before_last_high = [p for p in order[: order.index(105)] if p < 100]
    if switch_kind == "embedded":
        assert len(lows_before_last_high) <= 1, order  # only the one on the wire already
    else:
        assert len(lows_before_last_high) >= 3, order  # the low queue went on meanwhile

"""NIC ports and link monitoring on real veths in namespaces, opened from this process."""

from __future__ import annotations

import select

import pytest

from common.netns import NetKit, wait_until
from hosts.agent.linkmon import LinkMonitor
from hosts.agent.nic import NicPort

pytestmark = pytest.mark.emulation


def _ipv6_frame(seq: int, size: int) -> bytes:
    head = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x86\xdd"
    body = seq.to_bytes(4, "big") + bytes((seq + i) & 0xFF for i in range(size - 4))
    return head + body


def test_ports_in_namespaces_exchange_frames_and_ignore_own(run_prefix: str) -> None:
    with NetKit(run_prefix) as kit:
        a = kit.add_namespace("a")
        b = kit.add_namespace("b")
        kit.add_veth(f"{run_prefix}a0", f"{run_prefix}b0", a, b)
        pa = NicPort(f"{run_prefix}a0", netns=a, batch=16, mrc_only=False)
        pb = NicPort(f"{run_prefix}b0", netns=b, batch=16, mrc_only=False)
        filtered = NicPort(f"{run_prefix}b0", netns=b, batch=16)  # the agents' default
        try:
            mrc = _ipv6_frame(0, 64)
            mrc = mrc[:20] + b"\x11" + mrc[21:56] + (4791).to_bytes(2, "big") + mrc[58:]
            assert pa.send(_ipv6_frame(1, 64)) and pa.send(mrc)  # next header 3: not MRC
            wait_until(lambda: filtered.recv_batch() > 0 or False, 5, "the MRC frame")
            assert bytes(filtered.views[0][: filtered.lengths[0]]) == mrc
            assert filtered.counters.rx_frames == 1  # the other never reached the socket
            while pb.recv_batch():  # what the unfiltered port saw meanwhile
                pass
            sent = [_ipv6_frame(i, 100 + 37 * i) for i in range(40)]
            for f in sent:
                assert pa.send(f)
            got: list[bytes] = []

            def drain() -> bool:
                select.select([pb.fileno()], [], [], 0.05)
                n = pb.recv_batch()
                got.extend(bytes(pb.views[i][: pb.lengths[i]]) for i in range(n))
                return len(got) >= len(sent)

            wait_until(drain, 5, "40 frames on the b side")
            assert got == sent  # a veth keeps order; contents byte-exact
            assert pb.counters.rx_frames == 40 + 2
            assert pb.counters.rx_bytes == sum(map(len, sent)) + 2 * (14 + 64)
            assert pa.counters.tx_frames == 40 + 2
            # PACKET_IGNORE_OUTGOING: a's own transmissions never come back on a.
            assert pa.recv_batch() == 0
        finally:
            pa.close()
            pb.close()
            filtered.close()


def test_link_monitor_sees_carrier_loss_and_return(run_prefix: str) -> None:
    with NetKit(run_prefix) as kit:
        a = kit.add_namespace("a")
        b = kit.add_namespace("b")
        kit.add_veth(f"{run_prefix}a0", f"{run_prefix}b0", a, b)
        mon = LinkMonitor(b)
        try:
            name = f"{run_prefix}b0"
            wait_until(lambda: mon.dump([name]).get(name) is True, 5, "b0 carrier up")
            seen: list[bool] = []

            def saw(state: bool) -> bool:
                select.select([mon.fileno()], [], [], 0.05)
                seen.extend(up for n, up in mon.read() if n == name)
                return bool(seen) and seen[-1] is state

            kit.set_link(f"{run_prefix}a0", False, netns=a)  # peer down -> b0 loses carrier
            wait_until(lambda: saw(False), 5, "b0 carrier loss notification")
            assert mon.dump([name]) == {name: False}
            kit.set_link(f"{run_prefix}a0", True, netns=a)
            wait_until(lambda: saw(True), 5, "b0 carrier return notification")
            assert mon.dump([name, "nonexistent0"]) == {name: True}
        finally:
            mon.close()


def test_sending_on_a_down_link_is_a_counted_drop(run_prefix: str) -> None:
    with NetKit(run_prefix) as kit:
        a = kit.add_namespace("a")
        b = kit.add_namespace("b")
        kit.add_veth(f"{run_prefix}a0", f"{run_prefix}b0", a, b)
        kit.set_link(f"{run_prefix}a0", False, netns=a)
        pa = NicPort(f"{run_prefix}a0", netns=a)
        try:
            results = [pa.send(_ipv6_frame(i, 64)) for i in range(5)]
            assert results == [False] * 5
            assert pa.counters.tx_drops == 5 and pa.counters.tx_frames == 0
        finally:
            pa.close()

"""common.pktring: a TPACKET_V2 receive ring on a real veth pair (namespace prefix ``prg``),
walked by the C accelerator and by the pure-Python reference: order and contents, the
ring's wrap-around, frames longer than a slot, a full ring's drops, select readiness, the
receive timestamps, and clean closing."""

from __future__ import annotations

import secrets
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from common import pktio, pktring
from common.pktring import RxRing

pytestmark = pytest.mark.emulation

C = pktio._c
IMPLS = [
    pytest.param(True, id="c", marks=pytest.mark.skipif(C is None, reason="_pktio not built")),
    pytest.param(False, id="python"),
]


@pytest.fixture
def veth() -> Iterator[tuple[str, str, str]]:
    from common.netns import NetKit

    with NetKit("prg" + secrets.token_hex(2)) as kit:
        ns = kit.add_namespace("n")
        kit.add_veth(kit.name("a"), kit.name("b"), ns, ns)
        yield ns, kit.name("a"), kit.name("b")


def _sock(ns: str, ifname: str, ring_frames: int = 0, frame_size: int = pktring.FRAME_SIZE,
          c_ext: bool | None = None) -> tuple[socket.socket, RxRing | None]:
    """An AF_PACKET socket bound to ``ifname`` (with a ring set up before binding)."""
    from hosts.agent.netns_enter import in_netns

    with in_netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
        ring = RxRing(s, ring_frames, frame_size, c_ext=c_ext) if ring_frames else None
        s.bind((ifname, 0x0003))
    s.setblocking(False)
    return s, ring


@contextmanager
def _pair(veth: tuple[str, str, str], frames: int, frame_size: int,
          c_ext: bool | None = None) -> Iterator[tuple[socket.socket, socket.socket, RxRing]]:
    """A sender on one end of the veth, a ring socket on the other; both closed after."""
    ns, a_name, b_name = veth
    a, _ = _sock(ns, a_name)
    b, ring = _sock(ns, b_name, ring_frames=frames, frame_size=frame_size, c_ext=c_ext)
    assert ring is not None
    try:
        yield a, b, ring
    finally:
        ring.close()
        a.close()
        b.close()


def _eth(seq: int, size: int) -> bytes:
    head = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"
    return head + seq.to_bytes(4, "big") + bytes((seq + i) & 0xFF for i in range(size - 18))


def _drain(ring: RxRing, want: int, limit: int = 64) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 5
    while len(got) < want and time.monotonic() < deadline:
        if select.select([ring], [], [], 0.5)[0]:
            got.extend(ring.recv_bytes(limit))
    return got


@pytest.mark.parametrize("c_ext", IMPLS)
def test_frames_come_in_order_across_the_wrap_and_long_ones_are_counted(
        veth: tuple[str, str, str], c_ext: bool) -> None:
    with _pair(veth, 8, 4096, c_ext) as (a, b, ring):
        assert ring.frames == 16 and ring.size_bytes == 65536  # whole blocks
        sent = [_eth(i, 60 + 37 * i) for i in range(40)]  # 2.5 times around the ring
        for i in range(0, len(sent), 10):  # in bursts that fit, so the kernel drops none
            res = pktio.send_batch(a, sent[i:i + 10])
            assert res.sent == 10
            assert _drain(ring, 10, limit=3) == sent[i:i + 10]  # small batches: partial walks
        t0 = time.time()
        pktio.send_batch(a, [_eth(77, 5000), _eth(78, 100)])  # 5000 > a 4096-byte slot
        assert _drain(ring, 1) == [_eth(78, 100)]
        assert ring.truncated == 1
        assert t0 - 1 < ring.newest <= time.time() and 0 <= ring.age() < 5
        assert not select.select([ring], [], [], 0)[0]  # all read: not readable
        assert ring.recv_bytes(64) == []
        with pytest.raises(BlockingIOError):  # with a ring, nothing reaches the socket queue
            b.recv(100, socket.MSG_DONTWAIT)
        ring.close()
        ring.close()  # idempotent
        with pytest.raises(OSError):
            ring.recv_bytes(1)


@pytest.mark.parametrize("c_ext", IMPLS)
def test_a_full_ring_drops_and_counts_and_keeps_the_order(
        veth: tuple[str, str, str], c_ext: bool) -> None:
    with _pair(veth, 16, 4096, c_ext) as (a, _b, ring):
        sent = [_eth(i, 200) for i in range(24)]
        assert pktio.send_batch(a, sent).sent == 24
        got = _drain(ring, 16)
        assert got == sent[:16]  # the first 16 filled the ring, the rest were dropped
        assert ring.read_drops() == 8 and ring.read_drops() == 8  # cumulative
        later = [_eth(100 + i, 300) for i in range(5)]
        pktio.send_batch(a, later)
        assert _drain(ring, 5) == later  # after the drops: in order from the next slot


def test_c_and_python_walks_agree(veth: tuple[str, str, str]) -> None:
    """The two walks share one ring: frames read by either, alternately, in order."""
    if C is None:
        pytest.skip("_pktio not built")
    with _pair(veth, 32, 8192) as (a, _b, ring):
        sent = [_eth(i, 64 + 113 * i) for i in range(60)]
        got: list[bytes] = []
        for i in range(0, 60, 12):
            pktio.send_batch(a, sent[i:i + 12])
            while len(got) < i + 12:
                assert select.select([ring], [], [], 2)[0], f"only {len(got)} frames"
                ring._c = C if len(got) % 2 else None
                got.extend(ring.recv_bytes(5))
        assert got == sent


def test_bad_geometry_and_a_closed_ring_are_errors_not_crashes() -> None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        for frames, size in ((0, 4096), (4, 1000), (4, 48), (4, 1 << 17)):
            with pytest.raises(ValueError):
                RxRing(s, frames, size)
        with pytest.raises(OSError):
            RxRing(s, 4, 4096)  # not a packet socket
    finally:
        s.close()
    if C is not None:
        buf = bytearray(4096)
        for head, size, nr in ((0, 4096, 2), (5, 4096, 1), (0, 8, 1)):
            with pytest.raises(ValueError):
                C.ring_recv(buf, head, size, nr, 1)
        assert C.ring_recv(buf, 0, 4096, 1, 8) == ([], 0, 0.0, 0)  # nothing handed over

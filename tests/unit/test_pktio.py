"""common.pktio: the C accelerator (recvmmsg/sendmmsg) against the pure-Python reference.

Datagram socketpairs stand in for raw sockets in the unit tests (same message semantics);
the emulation tests use a real veth pair with AF_PACKET sockets in a namespace of their own
(prefix ``pio``), including a downed link.
"""

from __future__ import annotations

import array
import errno
import random
import secrets
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from common import pktio
from hosts.agent.nic import NicPort

C = pktio._c
IMPLS = [
    pytest.param(True, id="c", marks=pytest.mark.skipif(C is None, reason="_pktio not built")),
    pytest.param(False, id="python"),
]


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    b.setblocking(False)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _frames(n: int, seed: int = 0, low: int = 1, high: int = 3000) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(low, high)) for _ in range(n)]


@pytest.mark.parametrize("c_ext", IMPLS)
def test_batches_partial_batches_and_eagain(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    a, b = pair
    sent = _frames(11, seed=1)
    res = pktio.send_batch(a, sent, c_ext=c_ext)
    assert (res.sent, res.sent_bytes, res.failed, res.first_errno) == (
        11, sum(map(len, sent)), [], 0
    )
    rx = pktio.RxBuffers(4, 4096, c_ext=c_ext)
    got: list[bytes] = []
    counts = []
    while n := rx.recv(b):
        counts.append(n)
        got.extend(bytes(rx.views[i][: rx.lengths[i]]) for i in range(n))
    assert counts == [4, 4, 3]  # full batches, then the partial one; then EAGAIN -> 0
    assert got == sent
    assert rx.recv(b) == 0 and rx.recv_bytes(b) == []


@pytest.mark.parametrize("c_ext", IMPLS)
def test_receive_times_come_with_the_frames(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    import time

    a, b = pair
    rx = pktio.RxBuffers(8, 4096, c_ext=c_ext)
    stamps = [-1.0] * 8
    a.send(b"no stamp")  # timestamps are off: the frame carries none
    assert rx.recv(b, None, stamps) == 1 and stamps[0] == 0.0
    b.setsockopt(socket.SOL_SOCKET, pktio.SO_TIMESTAMPNS, 1)
    t0 = time.time()
    sent = _frames(5, seed=7)
    pktio.send_batch(a, sent, c_ext=c_ext)
    t1 = time.time()
    n = rx.recv(b, None, stamps)
    assert n == 5
    assert [bytes(rx.views[i][: rx.lengths[i]]) for i in range(n)] == sent
    assert all(t0 - 1e-3 <= t <= t1 + 1e-3 for t in stamps[:5])  # CLOCK_REALTIME seconds
    assert stamps[:5] == sorted(stamps[:5]) and stamps[5:] == [-1.0] * 3
    assert rx.recv(b, None, stamps) == 0
    with pytest.raises(ValueError, match="stamps"):
        rx.recv(b, 8, [0.0] * 3)


@pytest.mark.parametrize("c_ext", IMPLS)
def test_recv_bytes_returns_independent_copies_and_honours_limit(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    a, b = pair
    sent = _frames(6, seed=2)
    pktio.send_batch(a, sent, c_ext=c_ext)
    rx = pktio.RxBuffers(8, 4096, c_ext=c_ext)
    first = rx.recv_bytes(b, limit=2)
    assert first == sent[:2]
    rest = rx.recv_bytes(b, limit=100)  # clamped to the slots
    assert first == sent[:2]  # the copies did not change when the slots were reused
    assert rest == sent[2:]
    assert all(type(f) is bytes for f in first + rest)
    assert rx.recv_bytes(b, limit=0) == []


@pytest.mark.parametrize("c_ext", IMPLS)
def test_oversized_frames_are_truncated_like_recv_into(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    a, b = pair
    sent = [bytes(range(256)) * 8, b"short", bytes(100)]  # 2048, 5, 100 bytes
    pktio.send_batch(a, sent, c_ext=c_ext)
    rx = pktio.RxBuffers(4, 100, c_ext=c_ext)
    n = rx.recv(b)
    assert n == 3
    assert rx.lengths[:3] == [100, 5, 100]
    assert bytes(rx.views[0]) == sent[0][:100]
    # the reference: what socket.recv_into does with the same slot size
    a.send(sent[0])
    ref = bytearray(100)
    assert b.recv_into(ref) == 100 and bytes(ref) == sent[0][:100]


@pytest.mark.parametrize("c_ext", IMPLS)
def test_send_with_lengths_sends_prefixes_and_checks_bounds(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    a, b = pair
    bufs: list[pktio.Buffer] = [bytearray(b"x" * 50), memoryview(b"y" * 50), b"z" * 50]
    res = pktio.send_batch(a, bufs, lengths=[10, 0, 50], c_ext=c_ext)
    assert (res.sent, res.sent_bytes) == (3, 60)
    assert pktio.RxBuffers(4, 64, c_ext=c_ext).recv_bytes(b) == [b"x" * 10, b"", b"z" * 50]
    for bad in ([10, 51, 1], [10, -1, 1]):
        with pytest.raises(ValueError, match="lengths"):
            pktio.send_batch(a, bufs, lengths=bad, c_ext=c_ext)
    with pytest.raises(ValueError, match="lengths"):
        pktio.send_batch(a, bufs, lengths=[1], c_ext=c_ext)
    with pytest.raises(TypeError):
        pktio.send_batch(a, [b"ok", 12], c_ext=c_ext)  # type: ignore[list-item]


@pytest.mark.parametrize("c_ext", IMPLS)
def test_closed_socket_is_a_clear_error(c_ext: bool) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.close()
    b.close()
    rx = pktio.RxBuffers(2, 64, c_ext=c_ext)
    for call in (lambda: rx.recv(b), lambda: rx.recv_bytes(b),
                 lambda: pktio.send_batch(a, [b"x"], c_ext=c_ext)):
        with pytest.raises(OSError) as info:
            call()
        assert info.value.errno == errno.EBADF


@pytest.mark.parametrize("c_ext", IMPLS)
def test_full_peer_queue_gives_counted_drops_and_the_rest_goes_out(c_ext: bool) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        a.setblocking(False)
        b.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        sent = [bytes([i]) * 4000 for i in range(40)]
        res = pktio.send_batch(a, sent, c_ext=c_ext)
        assert res.failed and res.first_errno == errno.EAGAIN
        assert res.sent + len(res.failed) == 40
        assert res.failed == sorted(res.failed)
        rx = pktio.RxBuffers(64, 4096, c_ext=c_ext)
        got = rx.recv_bytes(b)
        delivered = [f for i, f in enumerate(sent) if i not in set(res.failed)]
        assert got == delivered  # exactly the frames not reported as dropped, in order
        assert res.sent_bytes == sum(map(len, delivered))
    finally:
        a.close()
        b.close()


class _Index:
    """An integer-like length (numpy integers behave so): only ``__index__`` and comparisons."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value

    def __le__(self, other: int) -> bool:
        return self.value <= other

    def __ge__(self, other: int) -> bool:
        return self.value >= other


@pytest.mark.parametrize("c_ext", IMPLS)
def test_lengths_may_be_any_integer_sequence(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    """``lengths`` is a Sequence[int] in both paths: an array, a range, index-able numbers."""
    a, b = pair
    frames = [b"a" * 40, b"b" * 40, b"c" * 40]
    rx = pktio.RxBuffers(8, 64, c_ext=c_ext)
    shapes: list[Any] = [array.array("H", [5, 0, 40]), range(3, 6), [_Index(7), 1, _Index(40)]]
    for lengths, want in zip(shapes, ([5, 0, 40], [3, 4, 5], [7, 1, 40])):
        res = pktio.send_batch(a, frames, lengths, c_ext=c_ext)
        assert (res.sent, res.sent_bytes) == (3, sum(want))
        assert rx.recv_bytes(b) == [f[:n] for f, n in zip(frames, want)]
    with pytest.raises(ValueError, match="lengths"):
        pktio.send_batch(a, frames, [_Index(41), 1, 1], c_ext=c_ext)  # type: ignore[list-item]


@pytest.mark.parametrize("c_ext", IMPLS)
def test_lengths_and_byte_counts_are_bytes_for_any_buffer_shape(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    """A memoryview of 4-byte items or of two dimensions is sent whole; ``lengths`` and
    ``sent_bytes`` count bytes (the reference counted items: len() of the view)."""
    a, b = pair
    words = memoryview(array.array("I", range(4)))  # 16 bytes, len() == 4
    grid = memoryview(bytes(range(12))).cast("B", (3, 4))  # 12 bytes, len() == 3
    res = pktio.send_batch(a, [words, grid], c_ext=c_ext)
    assert (res.sent, res.sent_bytes) == (2, 28)
    assert [b.recv(100) for _ in range(2)] == [words.tobytes(), grid.tobytes()]
    res = pktio.send_batch(a, [words, grid], [6, 10], c_ext=c_ext)
    assert (res.sent, res.sent_bytes) == (2, 16)
    assert [b.recv(100) for _ in range(2)] == [words.tobytes()[:6], grid.tobytes()[:10]]
    with pytest.raises(ValueError, match="lengths"):
        pktio.send_batch(a, [words, grid], [17, 1], c_ext=c_ext)


def test_c_send_pins_frames_and_copies_the_lists(pair: tuple[socket.socket, socket.socket]) -> None:
    """Python code runs inside C send (a length's ``__index__``; another thread while the GIL
    is released): it can neither resize an exported frame nor change what is sent by
    emptying the caller's lists (C reads private copies)."""
    if C is None:
        pytest.skip("_pktio not built")
    a, b = pair
    frames: list[Any] = [bytearray(b"a" * 100), bytearray(b"b" * 100), b"c" * 100]
    seen: list[str] = []

    class Meddling:
        def __index__(self) -> int:
            try:
                frames[0].extend(b"!" * 10**6)  # would move the storage C points into
            except BufferError:
                seen.append("pinned")
            frames.clear()
            lengths.clear()
            return 10

    lengths: list[Any] = [5, Meddling(), 100]
    assert C.send(a.fileno(), frames, lengths, 0, -1) == (3, 115, 0)
    assert seen == ["pinned"] and frames == [] and lengths == []
    assert [b.recv(200) for _ in range(3)] == [b"a" * 5, b"b" * 10, b"c" * 100]


@pytest.mark.parametrize("c_ext", IMPLS)
def test_frames_before_a_bad_one_go_out_as_in_the_reference(
    pair: tuple[socket.socket, socket.socket], c_ext: bool
) -> None:
    """A bad length or a frame that is not a buffer raises when sending reaches it: the frames
    before it have been sent (C checked a whole vector first and sent none of it)."""
    a, b = pair
    frames: list[Any] = [b"a" * 10, b"b" * 10, b"c" * 10]
    with pytest.raises(ValueError, match="lengths"):
        pktio.send_batch(a, frames, [5, 50, 1], c_ext=c_ext)
    with pytest.raises(TypeError):
        pktio.send_batch(a, [b"d" * 3, b"e" * 4, 12, b"f"], c_ext=c_ext)  # type: ignore[list-item]
    rx = pktio.RxBuffers(8, 64, c_ext=c_ext)
    assert rx.recv_bytes(b) == [b"a" * 5, b"d" * 3, b"e" * 4]


class _CountingC:
    """Stands in for the C module and counts its send calls."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.sends = 0

    def send(self, *args: object) -> object:
        self.sends += 1
        return self.real.send(*args)  # type: ignore[attr-defined]


@pytest.mark.parametrize("drop_errnos", [pktio.DROP_ERRNOS, None], ids=["drop-set", "any"])
def test_drops_are_skipped_inside_one_c_call(
    monkeypatch: pytest.MonkeyPatch, drop_errnos: frozenset[int] | None
) -> None:
    """Every frame of a batch to a full queue fails. The C path must skip the drops within one
    call: one call per dropped frame re-copied and re-exported the rest of the batch each time
    (quadratic: 13 us of CPU per frame for 1024 drops against 3 us in the reference)."""
    if C is None:
        pytest.skip("_pktio not built")
    counting = _CountingC(C)
    monkeypatch.setattr(pktio, "_c", counting)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        a.setblocking(False)
        while True:  # fill the peer's queue
            try:
                a.send(b"f" * 1000)
            except BlockingIOError:
                break
        frames = [bytes([i]) * 1000 for i in range(200)]
        res = pktio.send_batch(a, frames, drop_errnos=drop_errnos)
        assert (res.sent, res.sent_bytes, res.first_errno) == (0, 0, errno.EAGAIN)
        assert res.failed == list(range(200))
        assert counting.sends == 1
        while True:  # drain
            try:
                b.recv(2000, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
        res = pktio.send_batch(a, frames[:5], [10, 0, 1000, 3, 7], drop_errnos=drop_errnos)
        assert (res.sent, res.sent_bytes, res.failed, res.first_errno) == (5, 1020, [], 0)
        assert [b.recv(2000) for _ in range(5)] == [f[:n] for f, n in zip(frames, (10, 0, 1000, 3, 7))]
    finally:
        a.close()
        b.close()


def test_c_send_drop_argument() -> None:
    """send(..., drop, failed): failures whose errno is in ``drop`` (True: any) are appended
    to ``failed`` and skipped; another errno stops the call and is returned."""
    if C is None:
        pytest.skip("_pktio not built")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        a.setblocking(False)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        frames = [bytes([i]) * 4000 for i in range(30)]
        failed: list[int] = []
        sent, nbytes, err, first = C.send(a.fileno(), frames, None, 2, -1, True, failed)
        assert failed and err == 0 and first == errno.EAGAIN
        assert sent + len(failed) == 28 and nbytes == 4000 * sent
        assert failed == sorted(failed) and failed[0] >= 2
        failed2: list[int] = []
        # EAGAIN not in the drop set: the first failure stops the call
        assert C.send(a.fileno(), frames, None, 0, -1, frozenset({errno.ENOBUFS}), failed2) == (
            0, 0, errno.EAGAIN, errno.EAGAIN,
        )
        assert failed2 == []
        with pytest.raises(TypeError):
            C.send(a.fileno(), frames, None, 0, -1, True, (1, 2))  # failed must be a list
        with pytest.raises(TypeError):
            C.send(a.fileno(), frames, None, 0, -1, 5, [])  # drop: None, True or a container
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("c_ext", IMPLS)
def test_non_drop_errors_raise_with_what_was_sent(c_ext: bool) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.setblocking(False)
    b.close()  # the peer is gone: ECONNREFUSED, not a drop errno
    try:
        with pytest.raises(pktio.SendError) as info:
            pktio.send_batch(a, [b"a", b"b"], c_ext=c_ext)
        assert info.value.errno == errno.ECONNREFUSED
        assert info.value.result.sent == 0
        res = pktio.send_batch(a, [b"a", b"b"], drop_errnos=None, c_ext=c_ext)
        # the first refusal disconnected the socket: ENOTCONN from then on
        assert (res.sent, res.failed, res.first_errno) == (0, [0, 1], errno.ENOTCONN)
    finally:
        a.close()


@pytest.mark.parametrize("c_ext", IMPLS)
def test_batches_beyond_one_syscall_vector(c_ext: bool) -> None:
    """More frames than one sendmmsg takes (1024): sent in chunks; what the peer's queue
    refuses is reported, never lost silently."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        b.setblocking(False)
        frames = [i.to_bytes(2, "big") for i in range(1500)]
        res = pktio.send_batch(a, frames, drop_errnos=None, c_ext=c_ext)
        assert res.sent + len(res.failed) == 1500 and res.sent >= 1
        rx = pktio.RxBuffers(pktio.MAX_BATCH, 16, c_ext=c_ext)
        got = rx.recv_bytes(b)
        assert got == [f for i, f in enumerate(frames) if i not in set(res.failed)]
    finally:
        a.close()
        b.close()


def test_c_and_python_agree_on_random_batches() -> None:
    if C is None:
        pytest.skip("_pktio not built")
    rng = random.Random(7)
    for trial in range(30):
        frames = _frames(rng.randint(0, 40), seed=trial, low=0, high=2500)
        slot = rng.choice([1, 64, 1500, 4096])
        limit = rng.randint(0, 50)
        outputs = []
        for c_ext in (True, False):
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                b.setblocking(False)
                res = pktio.send_batch(a, frames, c_ext=c_ext)
                rx = pktio.RxBuffers(32, slot, c_ext=c_ext)
                n = rx.recv(b, limit)
                views = [bytes(rx.views[i][: rx.lengths[i]]) for i in range(n)]
                outputs.append((res, n, views, rx.recv_bytes(b)))
            finally:
                a.close()
                b.close()
        assert outputs[0] == outputs[1], f"trial {trial}"


def test_c_entry_points_reject_bad_arguments_without_crashing() -> None:
    if C is None:
        pytest.skip("_pktio not built")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        buf = bytearray(1000)
        fd = b.fileno()
        for args, exc in [
            ((fd, buf, 0, 1, [0] * 4, 1), ValueError),  # stride 0
            ((fd, buf, -5, 1, [0] * 4, 1), ValueError),
            ((fd, buf, 100, 101, [0] * 4, 1), ValueError),  # slot larger than the stride
            ((fd, buf, 100, 0, [0] * 4, 1), ValueError),
            ((fd, buf, 300, 300, [0] * 4, 4), ValueError),  # 4 slots of 300 > 1000 bytes
            ((fd, buf, 330, 11, [0] * 4, 4), ValueError),  # the 4th slot, 990..1001, ends past
            ((fd, buf, 100, 100, [0] * 2, 3), ValueError),  # lengths too short
            ((fd, buf, 100, 100, [0] * 4, -1), ValueError),
            ((fd, b"read-only", 3, 3, [0], 1), TypeError),  # not writable
            ((fd, buf, 100, 100, (0, 0), 1), TypeError),  # lengths must be a list
            ((-1, buf, 100, 100, [0], 1), OSError),
        ]:
            with pytest.raises(exc):
                C.recv_into(*args)
        assert C.recv_into(fd, buf, 330, 10, [0] * 4, 4) == 0  # 4 slots fit exactly; none ready
        with pytest.raises(ValueError):
            C.recv_bytes(fd, buf, 2000, 2000, 1)
        with pytest.raises(ValueError):
            C.send(a.fileno(), [b"x"], None, 2, -1)  # start beyond the frames
        with pytest.raises(ValueError):
            C.send(a.fileno(), [b"x"], [5], 0, -1)  # length beyond the frame
        with pytest.raises(TypeError):
            C.send(a.fileno(), [b"x"], {0: 1}, 0, -1)
        with pytest.raises(TypeError):
            C.send(a.fileno(), 42, None, 0, -1)
        with pytest.raises(OSError):
            C.send(-1, [b"x"], None, 0, -1)
        assert C.send(a.fileno(), [], None, 0, -1) == (0, 0, 0)
        assert C.send(a.fileno(), [b"ab", b"cde"], None, 1, 1) == (1, 3, 0)  # start/count
        assert C.recv_bytes(fd, buf, 100, 100, 5) == [b"cde"]
    finally:
        a.close()
        b.close()


def test_rx_buffers_validate_their_shape() -> None:
    with pytest.raises(ValueError):
        pktio.RxBuffers(0, 100)
    with pytest.raises(ValueError):
        pktio.RxBuffers(pktio.MAX_BATCH + 1, 100)
    with pytest.raises(ValueError):
        pktio.RxBuffers(4, 0)
    rx = pktio.RxBuffers(3, 10)
    assert rx.stride == 64 and len(rx.buf) == 138 and [len(v) for v in rx.views] == [10] * 3
    # slots an odd number of cache lines apart: never a power of two
    assert [pktio.slot_stride(n) for n in (1, 64, 65, 128, 9216, 65535)] == [
        64, 64, 192, 192, 9280, 65600
    ]


def test_pure_python_path_can_be_forced(monkeypatch: pytest.MonkeyPatch) -> None:
    from common import cext

    monkeypatch.setenv(cext.PURE_ENV, "1")
    assert cext.load("common._pktio") is None
    assert not pktio.RxBuffers(1, 10, c_ext=False).accelerated


@pytest.mark.parametrize("c_ext", IMPLS)
def test_nic_port_send_batch_counts(c_ext: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not c_ext:
        monkeypatch.setattr(pktio, "_c", None)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    pa, pb = NicPort.from_socket(a, "pa", batch=8), NicPort.from_socket(b, "pb", batch=8)
    try:
        assert pa._rx.accelerated is c_ext
        frames = [bytes([i]) * (60 + i) for i in range(5)]
        assert pa.send_batch(frames) == 5
        assert pa.send_batch([bytearray(100)] * 2, lengths=[64, 70]) == 2
        c = pa.counters
        assert (c.tx_frames, c.tx_bytes, c.tx_drops) == (7, sum(map(len, frames)) + 134, 0)
        assert pb.recv_batch() == 7
        assert [bytes(pb.views[i][: pb.lengths[i]]) for i in range(5)] == frames
        assert (pb.counters.rx_frames, pb.counters.rx_bytes) == (7, c.tx_bytes)
        assert pb.recv_batch() == 0
        b.close()
        with pytest.raises(OSError):  # peer gone (ECONNREFUSED): an error, not a drop
            pa.send_batch(frames)
        assert pb.recv_batch() == 0 and pb.counters.rx_errors == 1  # closed: counted
    finally:
        pa.close()
        b.close()


# -- real veths -----------------------------------------------------------------------------


@pytest.fixture
def veth() -> Iterator[tuple[str, str, str]]:
    from common.netns import NetKit

    prefix = "pio" + secrets.token_hex(2)
    with NetKit(prefix) as kit:
        ns = kit.add_namespace("n")
        kit.add_veth(kit.name("a"), kit.name("b"), ns, ns)
        yield ns, kit.name("a"), kit.name("b")


def _raw(ns: str, ifname: str) -> socket.socket:
    from hosts.agent.netns_enter import in_netns

    with in_netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        s.setsockopt(263, 23, 1)  # PACKET_IGNORE_OUTGOING
        s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: the whole burst fits
        s.bind((ifname, 0x0003))
    s.setblocking(False)
    return s


def _eth(seq: int, size: int) -> bytes:
    head = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"
    return head + seq.to_bytes(4, "big") + bytes((seq + i) & 0xFF for i in range(size - 18))


@pytest.mark.emulation
@pytest.mark.parametrize("c_ext", IMPLS)
def test_veth_batches_and_truncation(veth: tuple[str, str, str], c_ext: bool) -> None:
    import select

    ns, a_name, b_name = veth
    a, b = _raw(ns, a_name), _raw(ns, b_name)
    try:
        sent = [_eth(i, 60 + 97 * i) for i in range(90)] + [_eth(99, 9014)]  # last: full MTU
        res = pktio.send_batch(a, sent, c_ext=c_ext)
        assert (res.sent, res.failed) == (91, [])
        rx = pktio.RxBuffers(100, 9000, c_ext=c_ext)  # beyond the C path's stack arrays
        got: list[bytes] = []
        while len(got) < len(sent):
            assert select.select([b], [], [], 2)[0], f"only {len(got)} frames arrived"
            got.extend(rx.recv_bytes(b))
        assert got[:90] == sent[:90]  # order and contents kept
        assert got[90] == sent[90][:9000]  # longer than the slot: truncated, as recv_into does
        assert rx.recv(a) == 0  # own transmissions ignored
        # more than one sendmmsg vector (1024 frames): sent in chunks, all of them, in order
        small = [_eth(i, 64) for i in range(1500)]
        res = pktio.send_batch(a, small, c_ext=c_ext)
        assert (res.sent, res.failed) == (1500, [])
        big = pktio.RxBuffers(pktio.MAX_BATCH, 128, c_ext=c_ext)
        got = []
        while len(got) < len(small):
            assert select.select([b], [], [], 2)[0], f"only {len(got)} small frames arrived"
            got.extend(big.recv_bytes(b))
        assert got == small
    finally:
        a.close()
        b.close()


@pytest.mark.emulation
@pytest.mark.parametrize("c_ext", IMPLS)
def test_veth_down_link_gives_counted_drops(
    veth: tuple[str, str, str], c_ext: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from common.netns import run

    if not c_ext:
        monkeypatch.setattr(pktio, "_c", None)
    ns, a_name, _b = veth
    port = NicPort(a_name, netns=ns, batch=8)
    try:
        run(["ip", "link", "set", a_name, "down"], netns=ns)
        frames = [_eth(i, 100) for i in range(6)]
        res = pktio.send_batch(port.sock, frames)
        assert res.sent == 0 and res.failed == list(range(6))
        assert res.first_errno == errno.ENETDOWN
        assert port.send_batch(frames) == 0  # no exception: drops
        assert (port.counters.tx_drops, port.counters.tx_frames) == (6, 0)
    finally:
        port.close()

"""The one bulk writer/sink/verification library (hosts/bulk): its pure parts checked
against brute force, its out-of-band files, and a writer and a sink on two agents with the
real transport core (joined by a socketpair, in this process).
"""

from __future__ import annotations

import hashlib
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from hosts.api import QpAttr, RetryAttr, WcStatus, open_device
from hosts.bulk import (
    DONE_IMM,
    Endpoint,
    Immediates,
    PeerInfo,
    await_done,
    await_published,
    await_writeimms,
    connect_by_files,
    digest,
    first_difference,
    pattern,
    pattern_digest,
    publish,
    publish_done,
    wr_count,
    write_buffer,
    write_json,
)
from tests.unit.test_agent_loop import Pair

ATTR = QpAttr(retry=RetryAttr(linear_cnt=7, exp_cnt=25), timeout=17, max_wimm=16,
              max_wimm_dest=16)


# -- data and verification -------------------------------------------------------------------

def test_the_pattern_is_reproducible_and_its_digest_is_sha256() -> None:
    a, b = pattern(100_003, 5), pattern(100_003, 5)
    assert a == b and len(a) == 100_003 and a != pattern(100_003, 6)
    assert digest(a) == hashlib.sha256(bytes(a)).hexdigest() == pattern_digest(100_003, 5)


def _brute_first_difference(a: bytes, b: bytes) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def test_first_difference_agrees_with_a_byte_by_byte_scan() -> None:
    rng = random.Random(3)
    cases = [(b"", b""), (b"", b"x"), (b"abc", b"abc"), (b"abc", b"abd"), (b"abc", b"ab"),
             (b"xbc", b"abc")]
    for _ in range(300):
        n = rng.randrange(0, 70)
        a = bytearray(rng.randbytes(n))
        b = bytearray(a)
        if n and rng.random() < 0.8:
            b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        if rng.random() < 0.2:
            b = b[:rng.randrange(n + 1)]
        cases.append((bytes(a), bytes(b)))
    for a, b in cases:
        assert first_difference(a, b) == _brute_first_difference(a, b), (a, b)


# -- what is written, and what the sink expects ------------------------------------------------

@pytest.mark.parametrize(("imm", "count", "want"), [
    (Immediates(last=DONE_IMM), 4, [None, None, None, DONE_IMM]),  # the apps
    (Immediates(), 4, [None, None, None, 4]),  # the mechanism lab
    (Immediates(every=True), 3, [1, 2, 3]),
    (Immediates(every=True, last=DONE_IMM), 3, [1, 2, DONE_IMM]),  # fabric jobs, "wimm"
    (Immediates(last=DONE_IMM), 1, [DONE_IMM]),
])
def test_immediates(imm: Immediates, count: int, want: list[int | None]) -> None:
    assert [imm.of(i, count) for i in range(count)] == want
    assert imm.expected(count) == [v for v in want if v is not None]


def test_wr_count() -> None:
    assert [wr_count(s, 4) for s in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]
    for size, chunk in ((0, 4), (4, 0), (-1, 4)):
        with pytest.raises(ValueError, match="positive size and chunk"):
            wr_count(size, chunk)


# -- out-of-band files ------------------------------------------------------------------------

def test_published_records_are_read_back_and_atomic(tmp_path: Path) -> None:
    folder = tmp_path / "oob"  # made on first publish
    publish(folder, "w", {"qpn": 7})
    assert await_published(folder, "w", 1.0) == {"qpn": 7}
    write_json(folder / "x.json", {"a": 1})
    assert sorted(p.name for p in folder.iterdir()) == ["w.json", "x.json"]  # no temp file


def test_a_record_that_never_comes_is_a_timeout_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match=r"'nobody' did not publish .*nobody\.json"):
        await_published(tmp_path, "nobody", 0.05)
    (tmp_path / "odd.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        await_published(tmp_path, "odd", 1.0)


def test_the_done_marker(tmp_path: Path) -> None:
    assert await_done(tmp_path, "w", 0.05) is False
    publish_done(tmp_path, "w")
    assert await_done(tmp_path, "w", 0.05) is True


def test_peer_info_round_trip_and_refusals() -> None:
    info = PeerInfo(5, (bytes(range(16)), bytes(16)), 4096, 9, 1 << 20)
    assert PeerInfo.from_json(info.to_json()) == info
    assert info.remote_qp.qpn == 5 and info.remote_qp.gids == info.gids
    for bad in ({}, {**info.to_json(), "gids": ["zz"]}, {**info.to_json(), "qpn": None}):
        with pytest.raises(ValueError, match="a peer record needs"):
            PeerInfo.from_json(bad)


# -- a writer and a sink on real transport cores ---------------------------------------------

@pytest.fixture
def pair() -> Any:
    p = Pair(real_core=True)
    try:
        yield p
    finally:
        p.close()


def _endpoints(p: Pair, size: int, receives: int) -> tuple[Endpoint, Endpoint, bytearray]:
    data = pattern(size, 9)
    w = Endpoint(open_device(p.a), data, attr=ATTR)
    s = Endpoint(open_device(p.b), bytearray(size), attr=ATTR, receives=receives)
    s.connect(w.info(), ATTR)
    w.connect(s.info(), ATTR)
    return w, s, data


def test_every_byte_lands_and_every_writeimm_arrives_in_order(pair: Pair) -> None:
    size, chunk = (1 << 20) + 1000, 128 << 10  # a short last WR
    imm = Immediates(every=True, last=DONE_IMM)
    count = wr_count(size, chunk)
    w, s, data = _endpoints(pair, size, receives=count)
    out = write_buffer(w.qp, w.cq, w.mr, s.info(), size, chunk=chunk, depth=3, imm=imm,
                       clock=pair.a.clock, timeout=60)
    got = await_writeimms(s.cq, imm.expected(count), clock=pair.b.clock, timeout=60)
    assert out.ok and out.errors == [] and not out.timed_out, out.errors
    assert sorted(wc.wr_id for wc in out.completions) == list(range(count))
    assert out.acked_bytes == size
    assert [b for _t, b in out.progress] == sorted(b for _t, b in out.progress)
    assert out.progress[0][1] == 0 and out.progress[-1][1] == size
    assert got.ok, got.errors
    assert [wc.imm for wc in got.completions] == [*range(1, count), DONE_IMM]
    assert first_difference(s.buf, data) is None and digest(s.buf) == digest(data)
    for ep in (w, s):
        ep.release()
        ep.release()  # once is what counts
    for agent in (pair.a, pair.b):
        assert not agent.call(agent.core.qp_numbers)  # type: ignore[attr-defined]


def test_a_sink_names_what_did_not_come(pair: Pair) -> None:
    """Two receives posted, the writer sends one WriteImm: the sink reports 1 of 2 after its
    timeout; with a different immediate than expected, it says they are out of order."""
    w, s, _data = _endpoints(pair, 4096, receives=2)
    out = write_buffer(w.qp, w.cq, w.mr, s.info(), 4096, chunk=4096, depth=1,
                       imm=Immediates(last=5), clock=pair.a.clock, timeout=30)
    assert out.ok
    got = await_writeimms(s.cq, [5, 6], clock=pair.b.clock, timeout=0.2)
    assert not got.ok and got.errors == ["WriteImm completions: 1/2"]
    w2, s2, _ = _endpoints(pair, 4096, receives=1)
    write_buffer(w2.qp, w2.cq, w2.mr, s2.info(), 4096, chunk=4096, depth=1,
                 imm=Immediates(last=5), clock=pair.a.clock, timeout=30)
    wrong = await_writeimms(s2.cq, [6], clock=pair.b.clock, timeout=30)
    assert wrong.errors == ["WriteImm completions: 1/1, out of send order"]
    for ep in (w, s, w2, s2):
        ep.release()


def test_a_failed_write_stops_the_writer_with_its_error(pair: Pair) -> None:
    """A wrong rkey: the responder refuses the Write, the writer's completion fails and it
    posts nothing more (depth 1: the second WR is never posted)."""
    w, s, _data = _endpoints(pair, 8192, receives=0)
    info = s.info()
    bad = PeerInfo(info.qpn, info.gids, info.addr, info.rkey ^ 0x5A5A, info.length)
    out = write_buffer(w.qp, w.cq, w.mr, bad, 8192, chunk=4096, depth=1, imm=Immediates(),
                       clock=pair.a.clock, timeout=30)
    assert not out.ok and not out.timed_out
    assert len(out.completions) == 1 and out.completions[0].status != WcStatus.SUCCESS
    assert out.errors == [f"wr 0: {out.completions[0].status.value}"]
    assert bytes(s.buf) == bytes(8192)
    for ep in (w, s):
        ep.release()


def test_the_file_handshake_connects_and_refuses_a_short_buffer(
        pair: Pair, tmp_path: Path) -> None:
    """Writer and sink connect through files (the sink says when it is ready); a writer
    whose data does not fit its peer's buffer is refused before it connects."""
    size = 64 << 10
    data = pattern(size, 4)
    w = Endpoint(open_device(pair.a), data, attr=ATTR)
    s = Endpoint(open_device(pair.b), bytearray(size), attr=ATTR, receives=1)
    infos: dict[str, PeerInfo] = {}

    def sink_side() -> None:
        infos["sink"] = connect_by_files(s, tmp_path, "s", "w", sink=True, attr=ATTR,
                                         timeout=30)

    t = threading.Thread(target=sink_side)
    t.start()
    peer = connect_by_files(w, tmp_path, "w", "s", sink=False, attr=ATTR, timeout=30,
                            need=size)
    t.join(30)
    assert peer == s.info() and infos["sink"] == w.info()
    assert (tmp_path / "s-ready.json").exists()
    out = write_buffer(w.qp, w.cq, w.mr, peer, size, chunk=16 << 10, depth=2,
                       imm=Immediates(last=DONE_IMM), clock=pair.a.clock, timeout=30)
    got = await_writeimms(s.cq, [DONE_IMM], clock=pair.b.clock, timeout=30)
    assert out.ok and got.ok and digest(s.buf) == pattern_digest(size, 4)
    w3 = Endpoint(open_device(pair.a), pattern(size + 1, 4), attr=ATTR)
    with pytest.raises(ValueError, match=f"{size} bytes, {size + 1} are to be written"):
        connect_by_files(w3, tmp_path, "w3", "s", sink=False, attr=ATTR, timeout=30,
                         need=size + 1)
    for ep in (w, s, w3):
        ep.release()


def test_the_collectives_exchange_is_the_same_files(tmp_path: Path) -> None:
    """A GPU's QP details go through the bulk library's out-of-band records (``rank<r>``);
    a rank that never publishes is named in the error."""
    from hosts.collective.rendezvous import FileExchange, RendezvousError

    FileExchange(tmp_path, 3).publish({"rank": 3, "qpns": {"1": 9}})
    assert await_published(tmp_path, "rank3", 1.0) == {"rank": 3, "qpns": {"1": 9}}
    assert FileExchange(tmp_path, 1).fetch(3, 1.0)["qpns"] == {"1": 9}
    with pytest.raises(RendezvousError, match="rank 5: 'rank5' did not publish"):
        FileExchange(tmp_path, 1).fetch(5, 0.05)

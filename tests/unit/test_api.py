"""The mrc.h-shaped API over running agents (stand-in cores from test_agent_loop; no root)."""

from __future__ import annotations

import random
import select
import threading
from collections.abc import Iterator

import pytest

from hosts.api import (
    CQ,
    QP,
    Access,
    ApiError,
    AsyncEvent,
    AsyncEventKind,
    Completion,
    Context,
    DeviceCap,
    PortState,
    QpAttr,
    QpAttrMask,
    QpError,
    QpInitAttr,
    QpState,
    RecvWR,
    SendWR,
    WcOpcode,
    WcStatus,
    WrOpcode,
    open_device,
)
from tests.unit.test_agent_loop import Pair

RTS_MASK = QpAttrMask.STATE | QpAttrMask.DEST_QPN | QpAttrMask.DEST_GIDS


@pytest.fixture
def pair() -> Iterator[Pair]:
    p = Pair()
    try:
        yield p
    finally:
        p.close()


def _qp(ctx: Context, cq: CQ) -> QP:
    return ctx.create_qp(QpInitAttr(send_cq=cq, recv_cq=cq))


def _connect(qa: QP, qb: QP, gid_a: bytes, gid_b: bytes) -> None:
    qa.modify(QpAttr(qp_state=QpState.RTS, dest_qpn=qb.qpn, dest_gids=(gid_b,)), RTS_MASK)
    qb.modify(QpAttr(qp_state=QpState.RTS, dest_qpn=qa.qpn, dest_gids=(gid_a,)), RTS_MASK)


def test_device_and_port_queries(pair: Pair) -> None:
    ctx = open_device(pair.a)
    dev = ctx.query_device()
    assert dev.phys_port_cnt == 1 and dev.path_mtu == 4096
    assert dev.caps & DeviceCap.TRIM_NACK and dev.caps & DeviceCap.DYNAMIC_MPR
    assert ctx.query_version() == dev.api_version
    port = ctx.query_port(0)
    assert port.gid == pair.cfg_a.ports[0].gid and port.state == PortState.ACTIVE
    pair.a.port_up[0] = False
    assert ctx.query_port(0).state == PortState.DOWN
    with pytest.raises(ValueError, match="port 1"):
        ctx.query_port(1)


def test_write_imm_completes_through_channel_on_both_sides(pair: Pair) -> None:
    ca, cb = open_device(pair.a), open_device(pair.b)
    chan_a, chan_b = ca.create_comp_channel(), cb.create_comp_channel()
    cq_a, cq_b = ca.create_cq(64, chan_a), cb.create_cq(64, chan_b)
    qa, qb = _qp(ca, cq_a), _qp(cb, cq_b)
    _connect(qa, qb, pair.cfg_a.ports[0].gid, pair.cfg_b.ports[0].gid)
    src = bytearray(random.Random(2).randbytes(300_000))
    dst = bytearray(len(src) + 100)
    mr_a = ca.reg_mr(src, Access.LOCAL_WRITE)
    mr_b = cb.reg_mr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
    assert (mr_b.length, mr_a.length) == (len(dst), len(src))
    qb.post_recv(RecvWR(wr_id=500))
    cq_a.req_notify()
    cq_b.req_notify()
    qa.post_send([
        SendWR(1, WrOpcode.WRITE, mr_a.addr, 100_000, mr_a.lkey, mr_b.addr + 100, mr_b.rkey),
        SendWR(2, WrOpcode.WRITE_WITH_IMM, mr_a.addr + 100_000, 200_000, mr_a.lkey,
               mr_b.addr + 100_100, mr_b.rkey, imm=0xC0FFEE),
    ])
    assert chan_b.get_cq_event(timeout=10) is cq_b
    chan_b.ack_cq_events(cq_b, 1)
    wcs = cq_b.poll(10)
    assert wcs == [Completion(cq_b.cq_id, qb.qpn, 500, WcStatus.SUCCESS,
                              WcOpcode.RECV_RDMA_WITH_IMM, 0, 0xC0FFEE)]
    assert dst[100:] == src and dst[:100] == bytes(100)
    assert chan_a.get_cq_event(timeout=10) is cq_a
    got = cq_a.wait(2, timeout=10)
    assert [(w.wr_id, w.status, w.byte_len) for w in got] == [
        (1, WcStatus.SUCCESS, 100_000), (2, WcStatus.SUCCESS, 200_000)]
    chan_a.ack_cq_events(cq_a, 1)
    # Not re-armed: a further completion does not reach the channel.
    assert chan_a.get_cq_event(timeout=0.05) is None
    with pytest.raises(ApiError):
        chan_a.ack_cq_events(cq_a, 1)  # nothing left to acknowledge


def test_waiting_thread_is_woken_by_completion(pair: Pair) -> None:
    ca, cb = open_device(pair.a), open_device(pair.b)
    chan = ca.create_comp_channel()
    cq_a, cq_b = ca.create_cq(8, chan), cb.create_cq(8)
    qa, qb = _qp(ca, cq_a), _qp(cb, cq_b)
    _connect(qa, qb, pair.cfg_a.ports[0].gid, pair.cfg_b.ports[0].gid)
    buf = bytearray(b"x" * 5000)
    mr_a, mr_b = ca.reg_mr(buf), cb.reg_mr(bytearray(5000))
    woken: list[CQ | None] = []
    fd = chan.fileno()
    assert select.select([fd], [], [], 0)[0] == []  # nothing pending
    cq_a.req_notify()
    t = threading.Thread(target=lambda: woken.append(chan.get_cq_event(timeout=10)))
    t.start()
    qa.post_send(SendWR(9, WrOpcode.WRITE, mr_a.addr, 5000, mr_a.lkey, mr_b.addr, mr_b.rkey))
    t.join(15)
    assert woken == [cq_a]
    assert select.select([fd], [], [], 0)[0] == []  # the event was consumed
    cq_a.req_notify()
    qa.post_send(SendWR(10, WrOpcode.WRITE, mr_a.addr, 10, mr_a.lkey, mr_b.addr, mr_b.rkey))
    assert select.select([fd], [], [], 10)[0] == [fd]
    assert chan.get_cq_event(timeout=0) is cq_a
    chan.ack_cq_events(cq_a, 2)
    assert [w.wr_id for w in cq_a.poll(4)] == [9, 10]


def test_misuse_gives_clear_errors(pair: Pair) -> None:
    ctx = open_device(pair.a)
    cq = ctx.create_cq(4)
    qp = _qp(ctx, cq)
    mr = ctx.reg_mr(bytearray(64))
    wr = SendWR(5, WrOpcode.WRITE, mr.addr, 64, mr.lkey, 0, 0)
    with pytest.raises(QpError, match="wr_id=5"):
        qp.post_send(wr)  # QP in RESET
    with pytest.raises(QpError):
        qp.modify(QpAttr(qp_state=QpState.RESET), QpAttrMask.STATE)
    assert qp.query().qp_state == QpState.RESET
    with pytest.raises(ApiError, match="still used"):
        cq.destroy()
    with pytest.raises(ApiError, match="without a completion channel"):
        cq.req_notify()
    with pytest.raises(ValueError, match="cqe"):
        ctx.create_cq(0)
    other = open_device(pair.b)
    with pytest.raises(ApiError):
        other.create_qp(QpInitAttr(send_cq=cq, recv_cq=cq))
    qp.destroy()
    with pytest.raises(ApiError, match="destroyed"):
        qp.post_send(wr)
    cq.destroy()  # no QP left: allowed
    ctx.close()
    with pytest.raises(ApiError, match="closed"):
        ctx.reg_mr(bytearray(8))


def test_async_events_and_cq_overrun(pair: Pair) -> None:
    ca, cb = open_device(pair.a), open_device(pair.b)
    cq_a, cq_b = ca.create_cq(1), cb.create_cq(8)
    qa, qb = _qp(ca, cq_a), _qp(cb, cq_b)
    _connect(qa, qb, pair.cfg_a.ports[0].gid, pair.cfg_b.ports[0].gid)
    assert ca.get_async_event(timeout=0.01) is None
    fatal = AsyncEvent(AsyncEventKind.RETRY_EXCEEDED, qa.qpn, detail="retry exceeded")
    pair.a.call(pair.core_a.events.append, fatal)
    pair.a.call(pair.core_a.events.append, AsyncEvent(AsyncEventKind.QP_FATAL, 999))  # not ours
    assert ca.get_async_event(timeout=5) == fatal
    ca.ack_async_event(fatal)
    with pytest.raises(ApiError):
        ca.ack_async_event(fatal)
    # Two completions into a CQ of one entry: the second is an overrun, reported async.
    mr_a, mr_b = ca.reg_mr(bytearray(10)), cb.reg_mr(bytearray(10))
    qa.post_send([SendWR(i, WrOpcode.WRITE, mr_a.addr, 10, mr_a.lkey, mr_b.addr, mr_b.rkey)
                  for i in (1, 2)])
    ev = ca.get_async_event(timeout=10)
    assert ev is not None and ev.kind == AsyncEventKind.QP_FATAL and "overrun" in ev.detail
    assert cq_a.overruns == 1 and [w.wr_id for w in cq_a.poll(5)] == [1]
    ca.close()
    assert qa.destroyed and qa.qpn not in pair.core_a.qps


def test_real_core_through_api_with_hint_and_write_imm() -> None:
    """The real HostCore behind the API (agents over a socketpair): a QP hint object is
    applied at INIT, a 2 MiB Write + WriteImm completes byte-exact on both sides."""
    from hosts.api import QpHintFlag, RemoteQp, connect_qp, init_qp

    p = Pair(real_core=True)
    try:
        ca, cb = open_device(p.a), open_device(p.b)
        hint = ca.create_qp_hint(QpHintFlag.TRIM_NACK | QpHintFlag.SVC_TIME)
        assert hint.query() == QpHintFlag.TRIM_NACK | QpHintFlag.SVC_TIME
        hint.modify(QpHintFlag.TRIM_NACK | QpHintFlag.TSETH)
        cq_a, cq_b = ca.create_cq(16), cb.create_cq(16)
        qa, qb = _qp(ca, cq_a), _qp(cb, cq_b)
        src = bytearray(random.Random(9).randbytes(2 * 1024 * 1024))
        dst = bytearray(len(src))
        mr_a = ca.reg_mr(src, Access.LOCAL_WRITE)
        mr_b = cb.reg_mr(dst, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        init_qp(qb)
        qb.post_recv(RecvWR(wr_id=3))
        connect_qp(qa, RemoteQp(qb.qpn, (pair_gid(p, "b"),)), hint=hint)
        connect_qp(qb, RemoteQp(qa.qpn, (pair_gid(p, "a"),)))
        assert qa.query().qp_state == QpState.RTS
        assert qa.query().qp_hint == QpHintFlag.TRIM_NACK | QpHintFlag.TSETH
        half = len(src) // 2
        qa.post_send([
            SendWR(1, WrOpcode.WRITE, mr_a.addr, half, mr_a.lkey, mr_b.addr, mr_b.rkey),
            SendWR(2, WrOpcode.WRITE_WITH_IMM, mr_a.addr + half, half, mr_a.lkey,
                   mr_b.addr + half, mr_b.rkey, imm=77),
        ])
        got = cq_a.wait(2, 20)
        assert [(w.wr_id, w.status) for w in got] == [(1, WcStatus.SUCCESS), (2, WcStatus.SUCCESS)]
        rx = cq_b.wait(1, 20)
        assert [(w.wr_id, w.opcode, w.imm) for w in rx] == [
            (3, WcOpcode.RECV_RDMA_WITH_IMM, 77)]
        assert dst == src
        hint.destroy()
        with pytest.raises(ApiError):
            hint.query()
    finally:
        p.close()


def pair_gid(p: Pair, side: str) -> bytes:
    return (p.cfg_a if side == "a" else p.cfg_b).ports[0].gid


def test_calls_after_the_loop_stopped_fail_cleanly() -> None:
    p = Pair()
    ctx = open_device(p.a)
    cq = ctx.create_cq(4)
    qp = _qp(ctx, cq)
    p.a.request_stop()
    wait_until_stopped = p.a._thread
    assert wait_until_stopped is not None
    wait_until_stopped.join(5)
    # The loop is gone: the call runs directly (no thread left to hand it to) and still
    # reports the core's answer; nothing hangs.
    assert qp.query().qp_state == QpState.RESET
    p.close()

"""Sans-I/O transport core: lifecycle, segmentation, placement, SACK, loss recovery, timeouts,
WriteImm, bounds checks, RC baseline — all on a fake clock with an in-memory lossy network."""

from __future__ import annotations

import pytest

from hosts.transport import (
    ALL_ACCESS,
    Access,
    AsyncEvent,
    AsyncEventKind,
    Completion,
    EvProfile,
    LogRecord,
    QpAttr,
    QpAttrMask,
    QpError,
    QpHintFlag,
    QpState,
    QpType,
    RecvWR,
    RetryAttr,
    RxMeta,
    SendWR,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from hosts.transport.psn import ack_timeout, unwrap_psn
from hosts.transport.sim import DROP, PASS, LinkModel, QpOptions, connect, default_profile, is_data
from hosts.wire import Bth, MrcPacket, NackReason, Opcode
from tests.unit.transport_util import gid, make_host, make_pair

M = QpAttrMask
KIB = 1024
MIB = 1024 * 1024


# -- lifecycle -------------------------------------------------------------------------------
def _init_attr() -> QpAttr:
    return QpAttr(qp_state=QpState.INIT, ev_profile_id=1)


def test_lifecycle_rules() -> None:
    h = make_host(1)
    h.set_ev_profile(default_profile())
    q = h.create_qp(QpType.MRC, 0, 0)
    assert h.query_qp(q).qp_state == QpState.RESET
    # RESET -> RTR is illegal; INIT needs hint + EV + CC profile
    with pytest.raises(QpError):
        h.modify_qp(q, QpAttr(qp_state=QpState.RTR), M.STATE)
    with pytest.raises(QpError, match="needs"):
        h.modify_qp(q, _init_attr(), M.STATE | M.HINT | M.EV_PROFILE)
    with pytest.raises(QpError, match="not allowed"):
        h.modify_qp(q, _init_attr(), M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE | M.MPR)
    with pytest.raises(QpError, match="not installed"):
        h.modify_qp(
            q,
            QpAttr(qp_state=QpState.INIT, ev_profile_id=9),
            M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE,
        )
    assert h.query_qp(q).qp_state == QpState.RESET  # nothing half-applied
    h.modify_qp(q, _init_attr(), M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
    assert h.query_qp(q).qp_state == QpState.INIT
    # post_send before RTS is refused; post_recv is fine from INIT
    with pytest.raises(QpError):
        h.post_send(q, SendWR(1, WrOpcode.WRITE, 0, 0, 0, 0, 0), 0.0)
    h.post_recv(q, RecvWR(1))
    rtr = QpAttr(
        qp_state=QpState.RTR, mpr_dest=300, max_wimm_dest=4, dest_qpn=77, dest_gids=(gid(2, 0),)
    )
    rtr_mask = M.STATE | M.MPR_DEST | M.MAX_WIMM_DEST | M.DEST_QPN | M.DEST_GIDS
    with pytest.raises(QpError, match="mpr_dest"):
        h.modify_qp(q, rtr, rtr_mask)
    rtr.mpr_dest = 2
    with pytest.raises(QpError, match="needs"):
        h.modify_qp(q, rtr, rtr_mask & ~M.DEST_GIDS)
    h.modify_qp(q, rtr, rtr_mask)
    rts = QpAttr(qp_state=QpState.RTS, mpr=2, max_wimm=4, timeout=30, retry=RetryAttr(3, 2))
    rts_mask = M.STATE | M.MPR | M.MAX_WIMM | M.RETRY | M.TIMEOUT
    with pytest.raises(QpError, match="timeout"):
        h.modify_qp(q, rts, rts_mask)
    rts.timeout = 12
    h.modify_qp(q, rts, rts_mask)
    got = h.query_qp(q)
    assert (got.qp_state, got.mpr, got.mpr_dest, got.max_wimm, got.dest_qpn) == (
        QpState.RTS,
        2,
        2,
        4,
        77,
    )
    assert got.retry.linear_cnt == 3 and got.retry.exp_cnt == 2
    # RTS -> RTS may change timeout/retry only
    h.modify_qp(q, QpAttr(qp_state=QpState.RTS, timeout=13), M.STATE | M.TIMEOUT)
    assert h.query_qp(q).timeout == 13
    with pytest.raises(QpError):
        h.modify_qp(q, QpAttr(qp_state=QpState.RTS, mpr=1), M.STATE | M.MPR)
    # any -> ERR flushes the posted receive; ERR -> RESET -> INIT works again
    h.modify_qp(q, QpAttr(qp_state=QpState.ERR), M.STATE)
    flushed = [e for e in iter(h.next_event, None) if isinstance(e, Completion)]
    assert [(c.wr_id, c.status) for c in flushed] == [(1, WcStatus.WR_FLUSH_ERR)]
    with pytest.raises(QpError):
        h.modify_qp(q, QpAttr(qp_state=QpState.RTS), M.STATE)
    h.modify_qp(q, QpAttr(qp_state=QpState.RESET), M.STATE)
    h.modify_qp(q, _init_attr(), M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
    assert h.query_qp(q).qp_state == QpState.INIT
    h.destroy_qp(q)
    with pytest.raises(QpError):
        h.query_qp(q)


def test_post_send_checks_local_buffer() -> None:
    p = make_pair(64 * KIB)
    with pytest.raises(ValueError):
        p.a.post_send(
            p.qa,
            SendWR(
                1, WrOpcode.WRITE, p.ma.addr + 60 * KIB, 8 * KIB, p.ma.lkey, p.mb.addr, p.mb.rkey
            ),
            0.0,
        )
    with pytest.raises(ValueError):
        p.a.post_send(
            p.qa, SendWR(1, WrOpcode.WRITE, p.ma.addr, 1, 0xBAD, p.mb.addr, p.mb.rkey), 0.0
        )
    assert p.a.packets_to_send(0.0) == []


# -- lossless data path ------------------------------------------------------------------------
def test_segmentation_and_placement_lossless() -> None:
    p = make_pair(64 * KIB)
    p.net.record = True
    length = 3 * 4096 + 100
    p.write(7, 1000, length, dst_off=5000)
    assert p.run_until_completions(1)
    assert p.dst[5000 : 5000 + length] == p.src[1000 : 1000 + length]
    assert not any(p.dst[:5000]) and not any(p.dst[5000 + length :])
    data = [tx for (_t, src, tx) in p.net.sent if src == 0 and is_data(tx)]
    assert [tx.pkt.bth.opcode for tx in data] == [
        Opcode.WRITE_FIRST,
        Opcode.WRITE_MIDDLE,
        Opcode.WRITE_MIDDLE,
        Opcode.WRITE_LAST,
    ]
    assert [len(tx.pkt.payload) for tx in data] == [4096, 4096, 4096, 100]
    for k, tx in enumerate(data):
        assert tx.pkt.reth is not None and tx.pkt.meth is not None
        assert tx.pkt.reth.va == p.mb.addr + 5000 + k * 4096  # RETH in every packet
        assert tx.pkt.reth.dma_len == length
        assert tx.pkt.bth.psn == k
    assert data[-1].pkt.bth.ack_req
    (c,) = p.completions(0)
    assert (c.wr_id, c.status, c.opcode, c.byte_len) == (
        7,
        WcStatus.SUCCESS,
        WcOpcode.RDMA_WRITE,
        length,
    )
    # SACKs coalesce: fewer SACKs than data packets, and every one carries a cumulative PSN
    sacks = [tx for (_t, src, tx) in p.net.sent if src == 1 and tx.pkt.bth.opcode == Opcode.SACK]
    assert 1 <= len(sacks) <= len(data)
    assert sacks[-1].pkt.seth is not None and sacks[-1].pkt.seth.cack_psn == 3
    assert p.a.stats.get("rx_errors", 0) == 0 and p.b.stats.get("rx_errors", 0) == 0


def test_zero_length_write_and_psn_wrap() -> None:
    start = (1 << 24) - 3  # PSNs wrap at 2**24 during this transfer
    p = make_pair(256 * KIB, opts=QpOptions(start_psn=start))
    p.net.record = True
    p.write(1, 0, 0)
    p.write(2, 0, 200 * KIB)
    assert p.run_until_completions(2)
    assert [(c.wr_id, c.status) for c in p.completions(0)] == [
        (1, WcStatus.SUCCESS),
        (2, WcStatus.SUCCESS),
    ]
    assert p.dst[: 200 * KIB] == p.src[: 200 * KIB]
    psns = [tx.pkt.bth.psn for (_t, s, tx) in p.net.sent if s == 0 and is_data(tx)]
    assert psns[:5] == [start, start + 1, start + 2, 0, 1]


def test_unsignaled_write_completes_silently() -> None:
    p = make_pair(16 * KIB)
    p.a.post_send(
        p.qa,
        SendWR(
            1, WrOpcode.WRITE, p.ma.addr, 8 * KIB, p.ma.lkey, p.mb.addr, p.mb.rkey, signaled=False
        ),
        0.0,
    )
    p.write(2, 8 * KIB, 8 * KIB)
    assert p.run_until_completions(1)
    assert [c.wr_id for c in p.completions(0)] == [2]
    assert p.dst == p.src


# -- 16 MiB byte-exact under loss, reordering, duplication and trimming --------------------------
@pytest.mark.parametrize("imm", [False, True], ids=["write", "writeimm"])
@pytest.mark.parametrize("loss", [0.0, 0.01, 0.10])
def test_16mib_byte_exact(loss: float, imm: bool) -> None:
    model = LinkModel(
        delay=5e-6,
        jitter=8e-6,
        loss=loss,
        trim=loss / 2,
        dup=loss / 4,
        rate=12.5e9,
        seed=int(loss * 1000) + imm,
    )
    p = make_pair(16 * MIB, model)
    n = 32
    chunk = 16 * MIB // n
    for i in range(n):
        if imm:
            p.b.post_recv(p.qb, RecvWR(1000 + i))
        p.write(i, i * chunk, chunk, imm=(0xABC00 + i) if imm else None)
    assert p.run_until_completions(n, n if imm else 0)
    assert p.dst == p.src
    sends = p.completions(0)
    assert [c.wr_id for c in sends] == list(range(n))  # posting order
    assert all(c.status == WcStatus.SUCCESS and c.byte_len == chunk for c in sends)
    if imm:
        recvs = p.completions(1)
        assert [(c.wr_id, c.imm, c.byte_len) for c in recvs] == [
            (1000 + i, 0xABC00 + i, chunk) for i in range(n)
        ]
        assert all(c.opcode == WcOpcode.RECV_RDMA_WITH_IMM for c in recvs)
    st = p.a.qp_stats(p.qa)
    if loss == 0.0:
        assert st.get("tx_rtx", 0) == 0
    else:
        assert st["tx_rtx"] >= p.net.stats.get("dropped", 0) * 0.9
        assert st["tx_rtx"] < 4 * (p.net.stats.get("dropped", 0) + p.net.stats.get("trimmed", 0))
    assert p.a.stats.get("rx_errors", 0) == 0 and p.b.stats.get("rx_errors", 0) == 0


# -- WriteImm ordering and limits ---------------------------------------------------------------
def test_writeimm_completes_in_send_order_when_later_message_lands_first() -> None:
    p = make_pair(64 * KIB)
    held: list[object] = []

    def hold_first(src: int, tx: object) -> str:
        from hosts.transport import TxPacket

        assert isinstance(tx, TxPacket)
        if src == 0 and tx.pkt.bth.psn == 0 and not tx.pkt.bth.rtx and not held:
            held.append(tx)
            return DROP
        return PASS

    p.net.verdict = hold_first
    for i in range(3):
        p.b.post_recv(p.qb, RecvWR(50 + i))
    p.write(0, 0, 8 * KIB, imm=10)
    p.write(1, 8 * KIB, 4 * KIB, imm=11)
    p.write(2, 12 * KIB, 100, imm=12)
    # messages 1 and 2 land completely while message 0 misses its first packet
    assert p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_data", 0) >= 3, max_time=1.0)
    assert p.b.qp_stats(p.qb)["rx_data"] == 3  # PSNs 1..3 placed, PSN 0 still missing
    assert p.completions(1) == []
    assert p.run_until_completions(3, 3)
    assert [(c.wr_id, c.imm) for c in p.completions(1)] == [(50, 10), (51, 11), (52, 12)]
    assert p.dst[: 12 * KIB + 100] == p.src[: 12 * KIB + 100]


def test_max_wimm_limits_concurrent_writeimm_at_requester() -> None:
    p = make_pair(256 * KIB, opts=QpOptions(max_wimm=2))
    p.net.record = True
    for i in range(6):
        p.b.post_recv(p.qb, RecvWR(i))
        p.write(i, i * 32 * KIB, 32 * KIB, imm=i)
    assert p.run_until_completions(6, 6)
    # replay: at no time more than 2 WriteImm messages sent but not completed at the requester
    started: set[int] = set()
    acked_by: dict[float, int] = {}
    for c_time, dst, pkt, _m in p.net.delivered:
        if dst == 0 and pkt.bth.opcode == Opcode.SACK:
            acked_by[c_time] = unwrap_psn(pkt.bth.psn, 0)
    max_open = 0
    for t, src, tx in p.net.sent:
        if src != 0 or not is_data(tx):
            continue
        assert tx.pkt.meth is not None
        started.add(tx.pkt.meth.rqmsn)
        cack = max([v for k, v in acked_by.items() if k <= t], default=-1)
        done = sum(1 for r in started if (r + 1) * 8 - 1 <= cack)  # 8 packets per message
        max_open = max(max_open, len(started) - done)
    assert max_open <= 2
    assert p.a.qp_stats(p.qa).get("tx_wimm_blocked", 0) > 0


def test_writeimm_without_posted_receive_waits_for_it() -> None:
    p = make_pair(16 * KIB)
    p.write(1, 0, 4 * KIB, imm=5)
    p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_no_recv", 0) >= 1, max_time=1.0)
    assert p.completions(0) == []
    p.b.post_recv(p.qb, RecvWR(9))
    assert p.run_until_completions(1, 1)
    assert [(c.wr_id, c.imm) for c in p.completions(1)] == [(9, 5)]
    assert p.completions(0)[0].status == WcStatus.SUCCESS


def test_responder_enforces_max_wimm_dest() -> None:
    p = make_pair(16 * KIB, opts=QpOptions(max_wimm=4))
    for i in range(8):
        p.b.post_recv(p.qb, RecvWR(i))
    # a misbehaving requester: RQMSN 6 while the responder allows 4 in flight
    from hosts.wire import ImmDt, Meth, Reth

    pkt = MrcPacket(
        Bth(opcode=Opcode.WRITE_ONLY_IMM, dest_qp=p.qb, psn=3),
        Meth(6, 6),
        None,
        Reth(p.mb.addr, p.mb.rkey, 4),
        ImmDt(1),
        payload=b"abcd",
    )
    p.b.receive(pkt, RxMeta(0, gid(1, 0), gid(2, 0), 0x8000), 0.0)
    assert p.b.query_qp(p.qb).qp_state == QpState.ERR
    out = p.b.packets_to_send(0.0)
    assert [tx.pkt.bth.opcode for tx in out] == [Opcode.NACK]
    assert out[0].pkt.neth is not None and out[0].pkt.neth.reason == NackReason.UNEXP_EVENT
    assert p.dst[:4] == b"\x00" * 4


# -- bounds checks ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["past_end", "bad_rkey", "no_remote_write"])
def test_bad_remote_access_is_nacked_and_errors_both_sides(case: str) -> None:
    a = make_host(1)
    b = make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile())
    qa, qb = connect(a, b)
    src = bytearray(b"\x11" * 16384)
    arena = bytearray(b"\xee" * 32768)  # the region is the middle 8 KiB; guards around it
    ma = a.register_mr(src, ALL_ACCESS)
    access = Access.LOCAL_WRITE if case == "no_remote_write" else ALL_ACCESS
    mb = b.register_mr(memoryview(arena)[8192:16384], access)
    from hosts.transport.sim import Network

    net = Network([a, b])
    rkey = 0xDEAD if case == "bad_rkey" else mb.rkey
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, 12288, ma.lkey, mb.addr, rkey), 0.0)
    a.post_send(qa, SendWR(2, WrOpcode.WRITE, ma.addr, 10, ma.lkey, mb.addr, mb.rkey), 0.0)
    net.run(lambda: a.query_qp(qa).qp_state == QpState.ERR, max_time=1.0)
    assert a.query_qp(qa).qp_state == QpState.ERR
    assert b.query_qp(qb).qp_state == QpState.ERR
    assert arena[:8192] == b"\xee" * 8192 and arena[16384:] == b"\xee" * 16384  # never outside
    if case != "past_end":
        assert arena[8192:16384] == b"\xee" * 8192
    sends = [e for e in net.events[0] if isinstance(e, Completion)]
    assert [(c.wr_id, c.status) for c in sends] == [
        (1, WcStatus.REM_ACCESS_ERR),
        (2, WcStatus.WR_FLUSH_ERR),
    ]
    kinds_b = {e.kind for e in net.events[1] if isinstance(e, AsyncEvent)}
    assert {AsyncEventKind.REMOTE_ACCESS_ERROR, AsyncEventKind.QP_FATAL} <= kinds_b
    assert AsyncEventKind.QP_FATAL in {e.kind for e in net.events[0] if isinstance(e, AsyncEvent)}


# -- timeouts and retry exhaustion ------------------------------------------------------------------
@pytest.mark.parametrize(("linear", "exp"), [(0, 0), (3, 0), (2, 3), (7, 2)])
def test_retry_exhaustion_timing_and_err(linear: int, exp: int) -> None:
    timeout = 8  # 262 us
    p = make_pair(16 * KIB, opts=QpOptions(timeout=timeout, retry=RetryAttr(linear, exp)))
    p.net.plane_up[0] = False  # black hole
    p.write(1, 0, 4096)
    p.net.run(lambda: p.a.query_qp(p.qa).qp_state == QpState.ERR, max_time=10.0)
    t = ack_timeout(timeout)
    # first wait T, then `linear` retries at T, then `exp` retries doubling: T*2, T*4, ...
    expected = t + linear * t + sum(t * 2**j for j in range(1, exp + 1))
    assert p.net.now == pytest.approx(expected, rel=1e-6)
    assert p.a.qp_stats(p.qa)["timeouts"] == linear + exp + 1
    kinds = [e.kind for e in p.net.events[0] if isinstance(e, AsyncEvent)]
    assert kinds == [AsyncEventKind.RETRY_EXCEEDED, AsyncEventKind.QP_FATAL]
    (c,) = p.completions(0)
    assert c.status == WcStatus.RETRY_EXC_ERR
    # one retransmission per timeout of the black-holed packet, nothing after ERR
    assert p.a.qp_stats(p.qa).get("tx_rtx", 0) == linear + exp
    assert p.a.packets_to_send(p.net.now) == []


def test_timeout_recovers_when_path_returns() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=8, retry=RetryAttr(7, 5)))
    p.net.plane_up[0] = False
    p.write(1, 0, 64 * KIB)
    p.net.run(lambda: p.a.qp_stats(p.qa).get("timeouts", 0) >= 2, max_time=1.0)
    p.net.plane_up[0] = True
    assert p.run_until_completions(1)
    assert p.completions(0)[0].status == WcStatus.SUCCESS and p.dst == p.src


def test_tail_loss_recovered_by_reliability_probe_before_timeout() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=12))  # 4.2 ms timeout, probe after 1 ms
    dropped: list[int] = []

    def drop_last_once(src: int, tx: object) -> str:
        from hosts.transport import TxPacket

        assert isinstance(tx, TxPacket)
        if src == 0 and is_data(tx) and tx.pkt.bth.psn == 15 and not dropped:
            dropped.append(1)
            return DROP
        return PASS

    p.net.verdict = drop_last_once
    p.write(1, 0, 64 * KIB)
    assert p.run_until_completions(1)
    st = p.a.qp_stats(p.qa)
    assert st.get("tx_probe", 0) >= 1 and st.get("loss_probe", 0) == 1
    assert st.get("timeouts", 0) == 0
    lost = [
        e.data
        for e in p.net.events[0]
        if isinstance(e, LogRecord) and e.name == "recovery:packets_lost"
    ]
    assert lost == [{"trigger": "probe", "count": 1, "una": 15}]
    assert p.net.now < ack_timeout(12)
    assert p.dst == p.src


def test_a_vanished_oldest_psn_and_the_probe_take_the_ev_that_delivered_last() -> None:
    """A 64 KiB Write (PSNs 0-15) lands; of a second one (PSNs 16, 17) the tail PSN 17
    vanishes on its EV: the probe and PSN 17's retransmission (the PSN the cumulative ACK
    waits for) go on the EV of the latest packet known delivered (PSN 16's), not on the
    rotation's next EV, which may cross the same dead link."""
    from hosts.transport import TxPacket

    p = make_pair(72 * KIB, opts=QpOptions(timeout=12))
    p.net.record = True

    def drop_first_17(src: int, tx: object) -> str:
        assert isinstance(tx, TxPacket)
        if src == 0 and is_data(tx) and tx.pkt.bth.psn == 17 and not tx.pkt.bth.rtx:
            return DROP
        return PASS

    p.net.verdict = drop_first_17
    p.write(1, 0, 64 * KIB)
    assert p.run_until_completions(1)
    p.write(2, 64 * KIB, 8 * KIB)
    assert p.run_until_completions(2)
    assert p.dst == p.src
    sent = [tx for (_t, s, tx) in p.net.sent if s == 0]
    data = {(tx.pkt.bth.psn, tx.pkt.bth.rtx): tx.ev for tx in sent if is_data(tx)}
    assert set(data) == {(psn, False) for psn in range(18)} | {(17, True)}
    probes = [tx.ev for tx in sent if tx.pkt.bth.opcode == Opcode.PROBE]
    assert probes == [data[16, False]] and data[17, True] == data[16, False]
    # the answer came twice (two SACKs with pr = 1), read once
    answers = [pkt for (_t, d, pkt, _m) in p.net.delivered
               if d == 0 and pkt.seth is not None and pkt.seth.pr]
    assert len(answers) == 2 and p.a.qp_stats(p.qa)["probe_answered"] == 1


def test_per_packet_timer_recovers_tail_loss() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=14), per_packet_timeout=200e-6, probe_after=1.0)
    dropped: list[int] = []

    def drop_last_once(src: int, tx: object) -> str:
        from hosts.transport import TxPacket

        assert isinstance(tx, TxPacket)
        if src == 0 and is_data(tx) and tx.pkt.bth.psn == 15 and not dropped:
            dropped.append(1)
            return DROP
        return PASS

    p.net.verdict = drop_last_once
    p.write(1, 0, 64 * KIB)
    assert p.run_until_completions(1)
    st = p.a.qp_stats(p.qa)
    assert st.get("loss_per_packet_timer", 0) >= 1 and st.get("timeouts", 0) == 0
    assert p.net.now < 1e-3


def test_trimmed_packets_get_nacked_and_retransmitted_on_another_ev() -> None:
    p = make_pair(64 * KIB)
    p.net.record = True
    trimmed: list[int] = []

    def trim_some(src: int, tx: object) -> str:
        from hosts.transport import TxPacket

        assert isinstance(tx, TxPacket)
        if src == 0 and is_data(tx) and not tx.pkt.bth.rtx and tx.pkt.bth.psn in (2, 5):
            trimmed.append(tx.ev)
            return "trim"
        return PASS

    p.net.verdict = trim_some
    p.write(1, 0, 64 * KIB)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    nacks = [
        pkt for (_t, d, pkt, _m) in p.net.delivered if d == 0 and pkt.bth.opcode == Opcode.NACK
    ]
    assert sorted(n.neth.nack_psn for n in nacks if n.neth) == [2, 5]
    assert all(n.neth is not None and n.neth.reason == NackReason.TRIMMED for n in nacks)
    rtx = {
        tx.pkt.bth.psn: tx
        for (_t, s, tx) in p.net.sent
        if s == 0 and is_data(tx) and tx.pkt.bth.rtx
    }
    assert set(rtx) == {2, 5}
    from common.classes import TrafficClass

    for psn, ev in zip((2, 5), trimmed):
        assert rtx[psn].ev != ev  # not on the NACKed EV
        assert rtx[psn].tclass == TrafficClass.TRIMMABLE_RETX


def test_out_of_window_packet_gets_psn_oor_nack() -> None:
    p = make_pair(16 * KIB, opts=QpOptions(mpr=1))
    from hosts.wire import Meth, Reth

    pkt = MrcPacket(
        Bth(opcode=Opcode.WRITE_ONLY, dest_qp=p.qb, psn=128),  # cack=-1: window is [0, 127)
        Meth(0, 0),
        None,
        Reth(p.mb.addr, p.mb.rkey, 4),
        payload=b"zzzz",
    )
    p.b.receive(pkt, RxMeta(0, gid(1, 0), gid(2, 0), 0x8001), 0.0)
    out = p.b.packets_to_send(0.0)
    assert len(out) == 1 and out[0].pkt.neth is not None
    assert out[0].pkt.neth.reason == NackReason.PSN_OOR_WINDOW and out[0].pkt.neth.nack_psn == 128
    assert out[0].pkt.neth.entropy == 0x8001  # reflected EV
    assert p.dst[:4] == b"\x00" * 4 and p.b.query_qp(p.qb).qp_state == QpState.RTS


def test_bad_input_is_counted_not_raised() -> None:
    p = make_pair(16 * KIB)
    meta = RxMeta(0, gid(1, 0), gid(2, 0), 1)
    p.b.receive(MrcPacket(Bth(opcode=Opcode.WRITE_ONLY, dest_qp=0x999, psn=0)), meta, 0.0)
    assert p.b.stats["rx_unknown_qp"] == 1
    # data without RETH: fatal protocol error for that QP, but no exception
    p.b.receive(MrcPacket(Bth(opcode=Opcode.WRITE_ONLY, dest_qp=p.qb, psn=0)), meta, 0.0)
    assert p.b.query_qp(p.qb).qp_state == QpState.ERR
    # SACK without SETH, unknown opcode
    p.a.receive(MrcPacket(Bth(opcode=Opcode.SACK, dest_qp=p.qa, psn=0)), meta, 0.0)
    p.a.receive(MrcPacket(Bth(opcode=0x00, dest_qp=p.qa, psn=0)), meta, 0.0)
    st = p.a.qp_stats(p.qa)
    assert st["rx_dropped_state"] == 1 and st["rx_bad_opcode"] == 1


# -- RTT, service time, Dynamic MPR ---------------------------------------------------------------
def test_rtt_from_tseth_and_service_time_compensation() -> None:
    delay = 20e-6
    ack_delay = 50e-6
    results = {}
    for svc in (False, True):
        hint = (
            QpHintFlag.TRIM_NACK
            | QpHintFlag.TSETH
            | (QpHintFlag.SVC_TIME if svc else QpHintFlag(0))
        )
        p = make_pair(
            256 * KIB,
            LinkModel(delay=delay),
            QpOptions(hint=hint),
            ack_coalesce=1000,
            ack_delay=ack_delay,
        )
        p.write(0, 0, 64 * KIB)  # the last packet asks for an ACK at once
        assert p.run_until_completions(1)
        results[svc] = p.a.qp_rtt(p.qa)
        # responder side: a packet without AckReq is answered after ack_delay; with SVC_TIME
        # the reflected timestamp is moved forward by that service time (128 ns ticks)
        from hosts.wire import Meth, Reth, Tseth

        pkt = MrcPacket(
            Bth(opcode=Opcode.WRITE_MIDDLE, dest_qp=p.qb, psn=16),
            Meth(0, 1),
            Tseth(1000),
            Reth(p.mb.addr, p.mb.rkey, 8),
            payload=b"12345678",
        )
        t0 = p.net.now
        p.b.receive(pkt, RxMeta(0, gid(1, 0), gid(2, 0), 0x8003), t0)
        assert p.b.packets_to_send(t0) == []
        timer = p.b.get_timer()
        assert timer is not None and timer == pytest.approx(t0 + ack_delay)
        p.b.handle_timer(timer)
        (sack,) = p.b.packets_to_send(timer)
        assert sack.pkt.cc_state is not None and sack.pkt.seth is not None
        assert sack.pkt.seth.entropy == 0x8003 and sack.pkt.seth.cack_psn == 16
        expect = 1000 + (round(ack_delay * 7_812_500) if svc else 0)
        assert abs(sack.pkt.cc_state.tx_timestamp - expect) <= 1
    # requester: RTT samples are network RTTs (2 x delay at 128 ns resolution)
    assert results[True] == pytest.approx(2 * delay, abs=0.3e-6)
    assert results[False] == pytest.approx(2 * delay, abs=0.3e-6)


def test_the_packet_closing_the_last_hole_below_an_ack_request_is_acknowledged_at_once(
) -> None:
    """A sprayed message's last packet (AckReq) can arrive before packets on slower paths:
    the packet that fills the last hole below it completes what the requester asked to hear
    about and is acknowledged at once; filling a hole with no AckReq above it waits for the
    coalescing delay as before."""
    from hosts.wire import Meth, Reth

    ack_delay = 50e-6
    p = make_pair(256 * KIB, LinkModel(delay=1e-6), QpOptions(), ack_coalesce=1000,
                  ack_delay=ack_delay)
    p.write(0, 0, 64 * KIB)  # PSNs 0..15
    assert p.run_until_completions(1)

    def data(psn: int, ack_req: bool) -> MrcPacket:
        bth = Bth(opcode=Opcode.WRITE_MIDDLE, dest_qp=p.qb, psn=psn, ack_req=ack_req)
        return MrcPacket(bth, Meth(0, 1), None, Reth(p.mb.addr + 8 * psn, p.mb.rkey, 8),
                         payload=b"12345678")

    meta = RxMeta(0, gid(1, 0), gid(2, 0), 0x8003)
    for req_above, psns in ((True, (16, 17, 18)), (False, (19, 20, 21))):
        first, hole, top = psns
        t0 = p.net.now
        p.b.receive(data(first, False), meta, t0)  # in order: coalesced
        p.b.receive(data(top, req_above), meta, t0)  # a hole opens: SACK at once
        (gap_sack,) = p.b.packets_to_send(t0)
        assert gap_sack.pkt.seth is not None and gap_sack.pkt.seth.cack_psn == first
        p.b.receive(data(hole, False), meta, t0)  # the hole closes
        sent = p.b.packets_to_send(t0)
        if req_above:
            (sack,) = sent
            assert sack.pkt.seth is not None and sack.pkt.seth.cack_psn == top
        else:
            assert sent == []
            timer = p.b.get_timer()
            assert timer == pytest.approx(t0 + ack_delay)
            p.b.handle_timer(timer)
            (sack,) = p.b.packets_to_send(timer)
            assert sack.pkt.seth is not None and sack.pkt.seth.cack_psn == top
            p.net.now = timer


def test_dynamic_mpr_shrink_is_obeyed() -> None:
    hint = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH | QpHintFlag.DYNAMIC_MPR
    p = make_pair(4 * MIB, LinkModel(delay=5e-6, rate=12.5e9), QpOptions(mpr=8, hint=hint))
    p.net.record = True
    p.b.set_dynamic_mpr(p.qb, 1)  # 128 PSNs
    p.write(1, 0, 4 * MIB)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    # after the first SACK advertising mpr=1 arrived, no PSN >= cack + 128 was sent
    first = next(t for (t, d, pkt, _m) in p.net.delivered if d == 0 and pkt.seth is not None)
    cack = -1
    deliveries = [
        (t, pkt) for (t, d, pkt, _m) in p.net.delivered if d == 0 and pkt.seth is not None
    ]
    i = 0
    for t, src, tx in p.net.sent:
        while i < len(deliveries) and deliveries[i][0] <= t:
            s = deliveries[i][1].seth
            assert s is not None and s.mpr == 1
            cack = max(cack, unwrap_psn(s.cack_psn, cack))
            i += 1
        if src == 0 and is_data(tx) and t > first:
            assert unwrap_psn(tx.pkt.bth.psn, cack) < cack + 128
    assert p.b.qp_stats(p.qb).get("rx_oor", 0) == 0


# -- RC baseline ----------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [0.0, 0.01])
def test_rc_baseline_go_back_n(loss: float) -> None:
    model = LinkModel(delay=5e-6, loss=loss, rate=12.5e9, seed=3)
    p = make_pair(4 * MIB, model, QpOptions(qp_type=QpType.RC))
    p.net.record = True
    p.write(1, 0, 4 * MIB)
    assert p.run_until_completions(1, max_time=20.0)
    assert p.dst == p.src
    sent = [(s, tx) for (_t, s, tx) in p.net.sent]
    assert {tx.ev for s, tx in sent if s == 0 and is_data(tx)} == {sent[0][1].ev}  # one EV
    ops_b = {tx.pkt.bth.opcode for s, tx in sent if s == 1}
    assert ops_b == {Opcode.ACK}  # no SACKs, no bitmaps
    st = p.a.qp_stats(p.qa)
    if loss:
        assert st.get("rc_go_back", 0) > 0
        # go-back-N resends everything after a loss: far more than the drops
        assert st["tx_rtx"] > 3 * p.net.stats["dropped"]
    else:
        assert st.get("tx_rtx", 0) == 0


def test_log_records_carry_state_changes() -> None:
    p = make_pair(16 * KIB)
    names = [e.name for e in p.net.events[0] if isinstance(e, LogRecord)]
    drained = [e for e in iter(p.a.next_event, None) if isinstance(e, LogRecord)]
    assert names == [] and [r.data["new"] for r in drained if r.name == "qp:state"] == [
        "INIT",
        "RTR",
        "RTS",
    ]


def test_ev_profile_validation() -> None:
    h = make_host(1)
    with pytest.raises(ValueError):
        h.set_ev_profile(EvProfile(3, per_plane=0))


def test_every_packet_survives_the_wire_codec() -> None:
    """Same transfer with each packet encoded and decoded by hosts.wire on the way."""
    model = LinkModel(delay=5e-6, jitter=3e-6, loss=0.05, trim=0.05, dup=0.02, rate=12.5e9, seed=9)
    p = make_pair(2 * MIB, model, opts=QpOptions(start_psn=(1 << 24) - 100))
    p.net.wire = True
    p.net.record = True
    for i in range(8):
        p.b.post_recv(p.qb, RecvWR(i))
        p.write(i, i * 256 * KIB, 256 * KIB - 3 * i, imm=0xFFFFFFF0 + i)
    assert p.run_until_completions(8, 8)
    for i in range(8):
        base = i * 256 * KIB
        assert p.dst[base : base + 256 * KIB - 3 * i] == p.src[base : base + 256 * KIB - 3 * i]
    assert [c.imm for c in p.completions(1)] == [0xFFFFFFF0 + i for i in range(8)]
    ops = {pkt.bth.opcode for (_t, _d, pkt, _m) in p.net.delivered}
    assert {Opcode.WRITE_FIRST, Opcode.WRITE_LAST_IMM, Opcode.SACK, Opcode.NACK} <= ops
    assert p.a.stats.get("rx_errors", 0) == 0 and p.b.stats.get("rx_errors", 0) == 0


def test_no_usable_port_waits_then_exhausts_retries_without_busy_timers() -> None:
    p = make_pair(64 * KIB, opts=QpOptions(timeout=8, retry=RetryAttr(2, 1)))
    p.write(1, 0, 16 * KIB)
    p.net.run(lambda: p.b.qp_stats(p.qb).get("rx_data", 0) >= 1, max_time=1.0)
    p.a.port_status(0, False, p.net.now)  # the only port: nothing can be sent any more
    p.net.plane_up[0] = False
    steps = 0

    def done() -> bool:
        nonlocal steps
        steps += 1
        return p.a.query_qp(p.qa).qp_state == QpState.ERR

    assert p.net.run(done, max_time=1.0)  # the sim raises if a timer ever stays in the past
    assert steps < 200
    assert p.completions(0)[0].status == WcStatus.RETRY_EXC_ERR


def test_requester_subtracts_reported_service_time() -> None:
    from hosts.transport import CcProfile, NoCongestionControl, SackFeedback, TxPacket

    delay, ack_delay = 10e-6, 50e-6
    for svc in (False, True):
        seen: list[SackFeedback] = []

        class Capture(NoCongestionControl):
            def __init__(self, sink: list[SackFeedback]) -> None:
                super().__init__()
                self.sink = sink

            def on_sack(self, feedback: SackFeedback) -> None:
                self.sink.append(feedback)

        def factory(
            _profile: CcProfile | None, _qpn: int, sink: list[SackFeedback] = seen
        ) -> Capture:
            return Capture(sink)

        hint = (
            QpHintFlag.TRIM_NACK
            | QpHintFlag.TSETH
            | (QpHintFlag.SVC_TIME if svc else QpHintFlag(0))
        )
        p = make_pair(
            16 * KIB,
            LinkModel(delay=delay),
            QpOptions(hint=hint),
            ack_coalesce=1000,
            ack_delay=ack_delay,
            cc_factory=factory,
        )

        def drop_last_once(src: int, tx: TxPacket, done: list[int] = []) -> str:  # noqa: B006
            if src == 0 and is_data(tx) and tx.pkt.bth.psn == 1 and not done:
                done.append(1)
                return DROP
            return PASS

        p.net.verdict = drop_last_once
        p.write(1, 0, 8 * KIB)  # PSN 0 (no AckReq) arrives; PSN 1 (AckReq) is lost
        assert p.run_until_completions(1)
        first = seen[0]  # the coalesced SACK for PSN 0, sent ack_delay after it arrived
        assert first.rtt is not None
        if svc:
            assert first.service_time == pytest.approx(ack_delay, abs=0.3e-6)
            assert first.rtt == pytest.approx(2 * delay, abs=0.3e-6)
        else:
            assert first.service_time == 0.0
            assert first.rtt == pytest.approx(2 * delay + ack_delay, abs=0.3e-6)


def test_burst_loss_recovers_without_timeout_or_spurious_retransmissions() -> None:
    """The last 246 packets of a Write lost at once (e.g. a NIC queue overflow): a probe finds
    the first 64, their retransmissions (identified by their timestamps) let the fast-loss
    detector find the rest."""
    from hosts.transport import TxPacket

    p = make_pair(1024 * KIB, LinkModel(delay=5e-6, rate=12.5e9))

    def drop_burst(src: int, tx: TxPacket) -> str:
        if src == 0 and is_data(tx) and not tx.pkt.bth.rtx and tx.pkt.bth.psn >= 10:
            return DROP
        return PASS

    p.net.verdict = drop_burst
    p.write(1, 0, 1024 * KIB)
    assert p.run_until_completions(1)
    assert p.dst == p.src
    st = p.a.qp_stats(p.qa)
    assert st.get("timeouts", 0) == 0
    assert st["tx_rtx"] == 246
    assert st.get("loss_probe", 0) == 64
    assert st.get("loss_fast", 0) + st.get("loss_time", 0) == 246 - 64
    probe_after = ack_timeout(QpOptions().timeout) / 4
    assert p.net.now < probe_after + 200e-6


def test_backpressure_reaches_the_requesters_cc() -> None:
    from hosts.transport import CcProfile, NoCongestionControl, SackFeedback

    seen: list[SackFeedback] = []

    class Capture(NoCongestionControl):
        def on_sack(self, feedback: SackFeedback) -> None:
            seen.append(feedback)

    def factory(_profile: CcProfile | None, _qpn: int) -> Capture:
        return Capture()

    p = make_pair(256 * KIB, cc_factory=factory)
    p.write(1, 0, 64 * KIB)
    assert p.run_until_completions(1)
    assert seen and all(f.penalty == 0 and not f.restore for f in seen)
    n = len(seen)
    p.b.set_backpressure(p.qb, 200, restore=True)  # clamped to the 7-bit field
    p.write(2, 64 * KIB, 64 * KIB)
    assert p.run_until_completions(2)
    assert all(f.penalty == 127 and f.restore for f in seen[n:])
    assert sum(f.newly_acked_bytes for f in seen) == 128 * KIB
    assert sum(f.rcvd_bytes_delta for f in seen) == 128 * KIB


def test_packets_to_send_shares_the_budget_between_qps() -> None:
    from hosts.transport.sim import connect as connect_qps

    p = make_pair(2 * MIB)
    qa2, qb2 = connect_qps(p.a, p.b)
    p.write(1, 0, MIB)
    p.a.post_send(
        qa2,
        SendWR(2, WrOpcode.WRITE, p.ma.addr + MIB, MIB, p.ma.lkey, p.mb.addr + MIB, p.mb.rkey),
        0.0,
    )
    by_qp: dict[int, int] = {}
    for _ in range(4):
        for tx in p.a.packets_to_send(0.0, 40):
            by_qp[tx.pkt.bth.dest_qp] = by_qp.get(tx.pkt.bth.dest_qp, 0) + 1
    assert sum(by_qp.values()) == 160 and len(by_qp) == 2
    assert abs(by_qp[p.qb] - by_qp[qb2]) <= 16

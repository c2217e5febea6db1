"""Property tests of the transport core: whatever the loss/reorder/dup/trim pattern, data is
byte-exact, completions come in posting order, and no PSN is ever sent beyond cack + MPR as
known to the requester from the SACKs it had received at that moment."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hosts.transport import QpType, RecvWR, WcStatus
from hosts.transport.psn import unwrap_psn
from hosts.transport.sim import LinkModel, QpOptions, is_data
from hosts.wire import NackReason, Opcode
from tests.unit.transport_util import make_pair

KIB = 1024

messages = st.lists(st.tuples(st.integers(0, 40 * KIB), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=messages,
    mpr=st.sampled_from([1, 2, 4]),
    loss=st.floats(0.0, 0.25),
    trim=st.floats(0.0, 0.1),
    dup=st.floats(0.0, 0.05),
    jitter=st.floats(0.0, 20e-6),
    seed=st.integers(0, 10_000),
    mtu=st.sampled_from([1024, 4096]),
    start=st.sampled_from([0, (1 << 24) - 40]),
    rc=st.booleans(),
)
def test_transfer_properties(
    msgs: list[tuple[int, bool]],
    mpr: int,
    loss: float,
    trim: float,
    dup: float,
    jitter: float,
    seed: int,
    mtu: int,
    start: int,
    rc: bool,
) -> None:
    total = sum(n for n, _ in msgs)
    model = LinkModel(
        delay=3e-6, jitter=jitter, loss=loss, trim=trim, dup=dup, rate=12.5e9, seed=seed
    )
    p = make_pair(
        max(total, 1),
        model,
        QpOptions(qp_type=QpType.RC if rc else QpType.MRC, mpr=mpr, start_psn=start),
        mtu=mtu,
        seed=seed,
    )
    p.net.record = True
    off = 0
    n_imm = 0
    for i, (n, imm) in enumerate(msgs):
        if imm:
            p.b.post_recv(p.qb, RecvWR(100 + i))
            n_imm += 1
        p.write(i, off, n, imm=i if imm else None)
        off += n
    assert p.run_until_completions(len(msgs), n_imm, max_time=30.0)
    assert p.dst[:total] == p.src[:total]
    sends = p.completions(0)
    assert [(c.wr_id, c.status) for c in sends] == [(i, WcStatus.SUCCESS) for i in range(len(msgs))]
    recvs = p.completions(1)
    expect = [(100 + i, i, n) for i, (n, imm) in enumerate(msgs) if imm]
    assert [(c.wr_id, c.imm, c.byte_len) for c in recvs] == expect
    # MPR: replay sends against the SACKs delivered to the requester so far
    window = mpr * 128
    cack = start - 1
    acks = [
        (t, pkt)
        for (t, d, pkt, _m) in p.net.delivered
        if d == 0 and (pkt.seth is not None or pkt.aeth is not None)
    ]
    i = 0
    for t, src, tx in p.net.sent:
        while i < len(acks) and acks[i][0] <= t:
            # SACK: SETH cumulative PSN; RC ACK: BTH PSN is the last in-order PSN; RC NAK
            # (sequence error): BTH PSN is the expected one, everything before it arrived
            pkt = acks[i][1]
            wire = pkt.seth.cack_psn if pkt.seth is not None else pkt.bth.psn
            psn = unwrap_psn(wire, cack)
            if pkt.aeth is not None and pkt.aeth.syndrome & 0x60 == 0x60:
                psn -= 1
            cack = max(cack, psn)
            i += 1
        if src == 0 and is_data(tx):
            assert unwrap_psn(tx.pkt.bth.psn, cack) < cack + window
    nacks = [
        pkt.neth.reason
        for (_t, d, pkt, _m) in p.net.delivered
        if d == 0 and pkt.bth.opcode == Opcode.NACK and pkt.neth is not None
    ]
    assert NackReason.PSN_OOR_WINDOW not in nacks
    assert p.a.stats.get("rx_errors", 0) == 0 and p.b.stats.get("rx_errors", 0) == 0


@settings(max_examples=40, deadline=None)
@given(
    order=st.permutations(list(range(200))).map(lambda p: p[: len(p) - len(p) // 3]),
    start=st.sampled_from([0, (1 << 24) - 100]),
    coalesce=st.integers(1, 16),
)
def test_sacks_report_every_arrival(order: list[int], start: int, coalesce: int) -> None:
    """Feed a responder PSNs in arbitrary order (a third never arrive); the union of what its
    SACKs acknowledge (cumulative part + bitmaps) must equal the set that arrived."""
    from hosts.transport import RxMeta
    from hosts.wire import Bth, Meth, MrcPacket, Reth
    from tests.unit.transport_util import gid

    p = make_pair(4096, opts=QpOptions(mpr=4, start_psn=start), ack_coalesce=coalesce)
    meta = RxMeta(0, gid(1, 0), gid(2, 0), 0x8000)
    reported: set[int] = set()
    cack = start - 1
    now = 0.0

    def collect() -> None:
        nonlocal cack
        for tx in p.b.packets_to_send(now):
            s = tx.pkt.seth
            assert s is not None
            c = unwrap_psn(s.cack_psn, cack)
            assert c >= cack  # cumulative ACK never goes backwards
            cack = c
            base = c + s.sack_offset
            reported.update(base + i for i in range(64) if (s.bitmap >> i) & 1)

    for rel in order:
        psn = start + rel
        pkt = MrcPacket(
            Bth(opcode=Opcode.WRITE_MIDDLE, dest_qp=p.qb, psn=psn & 0xFFFFFF),
            Meth(0, 0),
            None,
            Reth(p.mb.addr, p.mb.rkey, 8),
            payload=b"\x01" * 8,
        )
        now += 1e-6
        p.b.receive(pkt, meta, now)
        collect()
    t = p.b.get_timer()
    if t is not None:
        now = t
        p.b.handle_timer(now)
        collect()
    arrived = {start + r for r in order}
    acked = {q for q in arrived if q <= cack} | reported
    assert acked == arrived
    expected_cack = start - 1
    while expected_cack + 1 in arrived:
        expected_cack += 1
    assert cack == expected_cack

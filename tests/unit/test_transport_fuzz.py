"""Hostile input: random (but codec-shaped) packets thrown at live QPs must never raise inside
the core (``rx_errors`` stays 0: every case is handled on purpose), never write outside the
registered region, and leave the QPs either working or cleanly in ERR."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hosts.transport import ALL_ACCESS, QpState, RxMeta
from hosts.transport.sim import Network, connect, default_profile
from hosts.wire import (
    Aeth,
    Bth,
    CcState,
    Eeth,
    Erth,
    ImmDt,
    Meth,
    MrcPacket,
    Neth,
    Opcode,
    Peth,
    Reth,
    Seth,
    Tseth,
)
from tests.unit.transport_util import gid, make_host

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u24 = st.integers(0, 0xFFFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
s16 = st.integers(-0x8000, 0x7FFF)


@st.composite
def packets(draw: st.DrawFn, qpns: tuple[int, int], rkey: int, va: int) -> MrcPacket:
    op = draw(st.sampled_from([int(o) for o in Opcode] + [0x00, 0x04, 0xFF]))
    dest = draw(st.sampled_from([*qpns, 2, 0x999]))
    near_psn = draw(st.one_of(u24, st.integers(0, 300)))
    bth = Bth(
        opcode=op, dest_qp=dest, psn=near_psn, ack_req=draw(st.booleans()), rtx=draw(st.booleans())
    )
    pkt = MrcPacket(bth)
    present = draw(st.integers(0, 0xFFF))
    if present & 1:
        pkt.meth = Meth(draw(u16), draw(u16))
    if present & 2:
        pkt.tseth = Tseth(draw(u16))
    if present & 4:
        pkt.reth = Reth(
            draw(st.one_of(u32, st.integers(va - 64, va + 70000))),
            draw(st.sampled_from([rkey, 0, draw(u32)])),
            draw(u32),
        )
    if present & 8:
        pkt.immdt = ImmDt(draw(u32))
    if present & 16:
        pkt.seth = Seth(
            m=draw(st.integers(0, 3)),
            pr=draw(st.booleans()),
            ack_psn_offset=draw(s16),
            entropy=draw(u32),
            cack_psn=draw(st.one_of(u24, st.integers(0, 300))),
            mpr=draw(u8),
            sack_offset=draw(s16),
            bitmap=draw(st.integers(0, (1 << 64) - 1)),
        )
    if present & 32:
        pkt.cc_state = CcState(
            draw(u16), draw(st.integers(0, 0x7FFF)), False, draw(st.integers(0, 127)), draw(u24)
        )
    if present & 64:
        pkt.neth = Neth(
            reason=draw(u8), entropy=draw(u32), nack_psn=draw(st.one_of(u24, st.integers(0, 300)))
        )
    if present & 128:
        pkt.peth = Peth(draw(u16), draw(u16))
    if present & 256:
        pkt.erth = Erth(draw(st.integers(0, 3)), draw(u32), draw(u16))
    if present & 512:
        pkt.eeth = Eeth(draw(st.integers(0, 3)), draw(u32), draw(u16), draw(u16))
    if present & 1024:
        pkt.aeth = Aeth(draw(u8), draw(u24))
    pkt.payload = draw(st.binary(max_size=96))
    pkt.trimmed = draw(st.booleans())
    return pkt


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_random_packets_never_break_the_core(data: st.DataObject) -> None:
    a = make_host(1)
    b = make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile())
    qa, qb = connect(a, b)
    arena = bytearray(b"\xee" * 3 * 65536)
    mb = b.register_mr(memoryview(arena)[65536 : 2 * 65536], ALL_ACCESS)
    src = bytearray(65536)
    ma = a.register_mr(src, ALL_ACCESS)
    from hosts.transport import RecvWR, SendWR, WrOpcode

    b.post_recv(qb, RecvWR(1))
    a.post_send(qa, SendWR(1, WrOpcode.WRITE, ma.addr, 40000, ma.lkey, mb.addr, mb.rkey), 0.0)
    net = Network([a, b])
    now = 0.0
    for _ in range(data.draw(st.integers(1, 40))):
        target = data.draw(st.sampled_from([0, 1]))
        host = (a, b)[target]
        pkt = data.draw(packets((qa, qb), mb.rkey, mb.addr))
        meta = RxMeta(
            port=data.draw(st.integers(0, 3)),
            src_gid=data.draw(st.sampled_from([gid(2 - target, 0), b"\x01" * 16])),
            dst_gid=gid(1 + target, 0),
            ev=data.draw(u32),
            dscp=data.draw(st.integers(0, 63)),
            ce=data.draw(st.booleans()),
        )
        now += data.draw(st.floats(0.0, 1e-3))
        host.receive(pkt, meta, now)
        if data.draw(st.booleans()):
            net.now = now
            net.step()
            now = net.now
        t = host.get_timer()
        if t is not None and t <= now:
            host.handle_timer(now)
    net.now = now
    net.run(lambda: False, max_time=now + 0.02)
    for h in (a, b):
        assert h.stats.get("rx_errors", 0) == 0, [e for e in net.events[0] + net.events[1]]
    assert arena[:65536] == b"\xee" * 65536 and arena[2 * 65536 :] == b"\xee" * 65536
    for h, q in ((a, qa), (b, qb)):
        assert h.query_qp(q).qp_state in (QpState.RTS, QpState.ERR)

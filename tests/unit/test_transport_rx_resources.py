"""Responder receive resources (hosts/transport/rxres.py): out-of-order bitmap entries and
packet-buffer bytes per QP and per host; NO_BITMAP / NO_PKT_BUFFER NACKs when they run out,
and the requester's recovery from them (retransmission, EV states untouched)."""

from __future__ import annotations

import pytest

from hosts.agent.config import ConfigError, parse_core
from hosts.transport import (
    ALL_ACCESS,
    HostConfig,
    HostCore,
    PortConfig,
    QpAttr,
    QpAttrMask,
    QpState,
    RetryAttr,
    RxMeta,
)
from hosts.transport.rxres import RxPool
from hosts.transport.sim import LinkModel, QpOptions, connect, default_profile
from hosts.wire import Bth, Meth, MrcPacket, NackReason, Opcode, Reth
from tests.unit.transport_util import gid, make_host, make_pair

KIB = 1024
MIB = 1024 * 1024


def _data(qpn: int, psn: int, addr: int, rkey: int, payload: bytes) -> MrcPacket:
    return MrcPacket(
        Bth(opcode=Opcode.WRITE_ONLY, dest_qp=qpn, psn=psn),
        Meth(0, psn),
        None,
        Reth(addr, rkey, len(payload)),
        payload=payload,
    )


class Responder:
    """Host b of a pair, fed hand-made Write packets; what it answers, by kind."""

    def __init__(self, **cfg: int) -> None:
        self.p = make_pair(64 * KIB, **cfg)  # type: ignore[arg-type]  # HostConfig knobs

    def send(self, psn: int, payload: bytes = b"abcd", qpn: int | None = None) -> list[MrcPacket]:
        p = self.p
        q = p.qb if qpn is None else qpn
        p.b.receive(_data(q, psn, p.mb.addr + psn * 4, p.mb.rkey, payload),
                    RxMeta(0, gid(1, 0), gid(2, 0), 0x8000 + psn), 0.0)
        return [tx.pkt for tx in p.b.packets_to_send(0.0)]

    def stats(self) -> dict[str, int]:
        return self.p.b.qp_stats(self.p.qb)


def _nack(out: list[MrcPacket]) -> tuple[int, int] | None:
    nacks = [pkt.neth for pkt in out if pkt.neth is not None]
    assert len(nacks) <= 1
    return (nacks[0].reason, nacks[0].nack_psn) if nacks else None


def test_bitmap_entries_per_qp_run_out_and_come_back() -> None:
    r = Responder(rx_bitmap_qp=2)
    assert _nack(r.send(1)) is None and _nack(r.send(2)) is None  # PSN 0 missing: 2 held
    out = r.send(3)
    assert _nack(out) == (NackReason.NO_BITMAP, 3)
    nack = next(pkt.neth for pkt in out if pkt.neth is not None)
    assert nack.entropy == 0x8003  # the refused packet's EV, reflected
    assert r.p.dst[12:16] == bytes(4)  # dropped: not placed
    st = r.stats()
    assert st["rx_no_bitmap"] == 1 and st["tx_nack_no_bitmap"] == 1
    assert st["rx_bitmap_held_max"] == 2
    # the packet at the cumulative ACK is never refused, and frees what was held
    assert _nack(r.send(0)) is None
    assert r.p.b.rx_pool.bitmap_used == 0
    assert _nack(r.send(3)) is None  # the retransmission lands
    assert r.p.dst[:16] == b"abcd" * 4


def test_packet_buffer_bytes_per_qp_run_out() -> None:
    r = Responder(rx_buffer_qp=10)
    assert _nack(r.send(1)) is None and _nack(r.send(2)) is None  # 8 bytes held
    assert _nack(r.send(3)) == (NackReason.NO_PKT_BUFFER, 3)  # 12 > 10
    assert _nack(r.send(4, b"zz")) is None  # 10 fits exactly
    st = r.stats()
    assert st["rx_no_pkt_buffer"] == 1 and st["tx_nack_no_pkt_buffer"] == 1
    assert st["rx_buffer_held_max"] == 10 and st.get("rx_no_bitmap", 0) == 0
    assert _nack(r.send(0)) is None  # cack jumps to 2; PSN 4 (2 bytes) still held
    assert r.p.b.rx_pool.buffer_used == 2 and r.p.b.rx_pool.bitmap_used == 1


def test_a_bitmap_refusal_is_checked_before_the_buffer() -> None:
    r = Responder(rx_bitmap_qp=1, rx_buffer_qp=4)
    assert _nack(r.send(1)) is None
    assert _nack(r.send(2)) == (NackReason.NO_BITMAP, 2)


def test_host_pool_is_shared_and_returned_when_a_qp_goes_away() -> None:
    a, b = make_host(1), make_host(2, rx_bitmap_host=2, rx_buffer_host=1 << 20)
    for h in (a, b):
        h.set_ev_profile(default_profile(1, 1, 16))
    q1 = connect(a, b)[1]
    q2 = connect(a, b)[1]
    dst = bytearray(64 * KIB)
    mr = b.register_mr(dst, ALL_ACCESS)

    def send(qpn: int, psn: int) -> tuple[int, int] | None:
        b.receive(_data(qpn, psn, mr.addr + psn * 4, mr.rkey, b"wxyz"),
                  RxMeta(0, gid(1, 0), gid(2, 0), 0x8000), 0.0)
        return _nack([tx.pkt for tx in b.packets_to_send(0.0)])

    assert send(q1, 1) is None and send(q1, 2) is None
    assert send(q2, 1) == (NackReason.NO_BITMAP, 1)  # the host's two entries are q1's
    assert send(q2, 0) is None  # in order: never refused
    assert b.rx_pool.bitmap_used == 2 and b.rx_pool.buffer_used == 8
    b.modify_qp(q1, QpAttr(qp_state=QpState.ERR), QpAttrMask.STATE)  # q1 fails: returned
    assert b.rx_pool.bitmap_used == 0 and b.rx_pool.buffer_used == 0
    assert send(q2, 2) is None
    b.destroy_qp(q2)
    assert b.rx_pool.bitmap_used == 0 and b.rx_pool.buffer_used == 0
    b.destroy_qp(q1)  # already returned at ERR: not twice
    assert b.rx_pool.bitmap_used == 0


def test_no_limits_by_default_and_no_accounting() -> None:
    r = Responder()
    for psn in range(1, 200):
        assert _nack(r.send(psn)) is None
    st = r.stats()
    assert "rx_bitmap_held_max" not in st and st.get("tx_nack", 0) == 0
    assert r.p.b.rx_pool.bitmap_used == 0 and not r.p.b.rx_pool.limited
    cfg = HostConfig(ports=[PortConfig(gid(9, 0))])
    assert (cfg.rx_bitmap_qp, cfg.rx_bitmap_host, cfg.rx_buffer_qp, cfg.rx_buffer_host) == (
        0, 0, 0, 0)
    assert not HostCore(cfg).rx_pool.limited


@pytest.mark.parametrize(("knob", "reason"), [("rx_bitmap_qp", "no_bitmap"),
                                              ("rx_buffer_qp", "no_pkt_buffer"),
                                              ("rx_bitmap_host", "no_bitmap"),
                                              ("rx_buffer_host", "no_pkt_buffer")])
def test_transfers_recover_from_exhaustion_byte_exact(knob: str, reason: str) -> None:
    """Reordering (jitter) and loss with 4 bitmap entries / 4 packets of buffer: the
    responder refuses, the requester retransmits every refused PSN (counted as a NACK
    retransmission) without touching EV states, and the data lands exactly."""
    value = 4 if "bitmap" in knob else 4 * 4096
    model = LinkModel(delay=5e-6, jitter=20e-6, loss=0.01)
    limits: dict[str, int] = {knob: value}
    p = make_pair(MIB // 2, model=model, opts=QpOptions(retry=RetryAttr(7, 25)), seed=3,
                  **limits)  # type: ignore[arg-type]
    for i in range(2):
        p.write(i + 1, i * 256 * KIB, 256 * KIB)
    assert p.run_until_completions(2, max_time=30.0)
    assert p.dst == p.src
    w, s = p.a.qp_stats(p.qa), p.b.qp_stats(p.qb)
    assert s[f"rx_{reason}"] > 0 and s[f"tx_nack_{reason}"] == s[f"rx_{reason}"]
    assert w[f"rx_nack_{reason}"] == s[f"tx_nack_{reason}"]
    assert w["rtx_nack"] >= w["loss_nack"] > 0
    assert not [k for k in w if k.startswith("ev_state_nack")], w  # NACKs leave EVs alone
    if knob.endswith("_qp"):
        key = "rx_bitmap_held_max" if "bitmap" in knob else "rx_buffer_held_max"
        assert 0 < s[key] <= value
    # everything delivered in order at the end: nothing is held any more
    assert (p.b.rx_pool.bitmap_used, p.b.rx_pool.buffer_used) == (0, 0)


def test_knobs_are_agent_options() -> None:
    got = parse_core({"rx_bitmap_qp": 64, "rx_bitmap_host": 1024, "rx_buffer_qp": 1 << 20,
                      "rx_buffer_host": 1 << 24})
    assert got == {"rx_bitmap_qp": 64, "rx_bitmap_host": 1024, "rx_buffer_qp": 1 << 20,
                   "rx_buffer_host": 1 << 24}
    with pytest.raises(ConfigError):
        parse_core({"rx_bitmap_qp": -1})
    with pytest.raises(ValueError):
        RxPool(-1)

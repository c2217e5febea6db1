"""Qp.receive's opcode table: which half gets a packet, which headers it must carry."""

from __future__ import annotations

import pytest

from hosts.transport import Completion, QpAttr, QpAttrMask, QpState, QpType, RxMeta
from hosts.transport.sim import connect, default_profile
from hosts.wire import Aeth, Bth, CcState, Eeth, Erth, MrcPacket, Neth, Opcode, Peth, Seth
from hosts.wire import layout as L
from tests.unit.transport_util import gid, make_host, make_pair

M = QpAttrMask
META = RxMeta(0, gid(2, 0), gid(1, 0), 0x8000)
FULL = {
    "seth": Seth(),
    "cc_state": CcState(),
    "neth": Neth(),
    "aeth": Aeth(),
    "peth": Peth(),
    "erth": Erth(),
    "eeth": Eeth(),
}


def _packet(op: Opcode, dest: int, without: str | None = None) -> MrcPacket:
    pkt = MrcPacket(Bth(opcode=op, dest_qp=dest, psn=0))
    for name in L.OPCODE_HEADERS[op]:
        if name in FULL and name != without:
            setattr(pkt, name, FULL[name])
    return pkt


# what the requester counts for each (nothing sent yet, so the feedback refers to nothing)
REACHED = {Opcode.SACK: "rx_bad_sack", Opcode.NACK: "rx_nack_stale", Opcode.ACK: "rx_ack"}


@pytest.mark.parametrize("op", list(REACHED))
def test_requester_feedback_without_a_required_header_is_a_counted_drop(op: Opcode) -> None:
    for missing in L.OPCODE_HEADERS[op]:
        p = make_pair(4096)
        p.a.receive(_packet(op, p.qa, without=missing), META, 0.0)
        st = p.a.qp_stats(p.qa)
        assert st.get("rx_dropped_state") == 1 and REACHED[op] not in st, missing
    # complete: it reaches the requester
    p = make_pair(4096)
    p.a.receive(_packet(op, p.qa), META, 0.0)
    st = p.a.qp_stats(p.qa)
    assert "rx_dropped_state" not in st and st[REACHED[op]] == 1


def test_endpoint_and_unknown_opcodes_sent_to_a_qp_are_bad_opcodes() -> None:
    p = make_pair(4096)
    for op in (Opcode.EP_REQUEST, Opcode.EP_RESPONSE):
        p.a.receive(_packet(op, p.qa), META, 0.0)
    p.a.receive(MrcPacket(Bth(opcode=0x04, dest_qp=p.qa, psn=0)), META, 0.0)
    assert p.a.qp_stats(p.qa)["rx_bad_opcode"] == 3


def test_feedback_before_rts_is_dropped_and_data_is_placed() -> None:
    a, b = make_host(1), make_host(2)
    for h in (a, b):
        h.set_ev_profile(default_profile())
    qa, _qb = connect(a, b)
    # a fresh QP on b taken only to RTR: it has a responder but no requester yet
    q = b.create_qp(QpType.MRC, 0, 0)
    attr = QpAttr(qp_state=QpState.INIT, ev_profile_id=1)
    b.modify_qp(q, attr, M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
    attr = QpAttr(qp_state=QpState.RTR, dest_qpn=qa, dest_gids=(gid(1, 0),))
    b.modify_qp(q, attr, M.STATE | M.MPR_DEST | M.MAX_WIMM_DEST | M.DEST_QPN | M.DEST_GIDS)
    b.receive(_packet(Opcode.SACK, q), META, 0.0)
    b.receive(_packet(Opcode.PROBE, q), META, 0.0)
    st = b.qp_stats(q)
    assert st["rx_dropped_state"] == 1 and st["rx_probe"] == 1
    # the probe's answer, twice (on two control EVs)
    assert [tx.pkt.bth.opcode for tx in b.packets_to_send(0.0)] == [Opcode.SACK, Opcode.SACK]
    assert not [e for e in iter(b.next_event, None) if isinstance(e, Completion)]

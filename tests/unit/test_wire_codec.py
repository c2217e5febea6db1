"""Round trips for every opcode and frame shape, plus byte positions checked against the spec.

The byte-position tests build the expected bytes by hand from the offsets in
shared/reference/mrc-protocol.md, independently of hosts/wire/layout.py.
"""

from __future__ import annotations

import pytest

from hosts.wire import (
    Bth,
    Frame,
    Meth,
    MrcPacket,
    Opcode,
    Peth,
    Reth,
    Seth,
    WireError,
    build_frame,
    decode_frame,
    decode_packet,
    encode_frame,
    encode_packet,
    frame_len,
    packet_len,
)
from hosts.wire.samples import plain_frame, sample_packets, srv6_frame

FRAMES = {
    "plain": plain_frame(),
    "srv6": srv6_frame(0),
    "srv6+srh": srv6_frame(2),
}


def _eq_packets(a: MrcPacket, b: MrcPacket) -> None:
    a_payload, b_payload = bytes(a.payload), bytes(b.payload)
    assert a_payload == b_payload
    a.payload = b.payload = b""
    assert a == b


@pytest.mark.parametrize("shape", FRAMES)
@pytest.mark.parametrize("index", range(len(sample_packets())))
def test_frame_round_trip(shape: str, index: int) -> None:
    frame = FRAMES[shape]
    pkt = sample_packets()[index]
    data = build_frame(frame, pkt)
    assert len(data) == frame_len(frame, pkt)
    frame2, pkt2 = decode_frame(data)
    assert frame2 == frame
    assert not pkt2.trimmed
    _eq_packets(pkt2, pkt)


@pytest.mark.parametrize("index", range(len(sample_packets())))
def test_packet_round_trip_at_offset(index: int) -> None:
    pkt = sample_packets()[index]
    buf = bytearray(8 + packet_len(pkt) + 5)
    end = encode_packet(pkt, buf, 8)
    assert end == 8 + packet_len(pkt)
    pkt2 = decode_packet(buf, 8, end)
    _eq_packets(pkt2, pkt)


def _be(value: int, n: int) -> bytes:
    return value.to_bytes(n, "big")


def _header_bytes(pkt: MrcPacket) -> bytes:
    buf = bytearray(packet_len(pkt))
    encode_packet(pkt, buf)
    return bytes(buf)


def test_bth_byte_positions() -> None:
    pkt = MrcPacket(
        Bth(opcode=Opcode.PROBE, se=True, m=True, tver=0xA, pkey=0x1234, fecn=True, becn=True,
            dest_qp=0xABCDEF, ack_req=True, rtx=True, psn=0x123456),
        peth=Peth(),
    )  # fmt: skip
    b = _header_bytes(pkt)[:12]
    expected = (
        bytes([0xDE, 0x80 | 0x40 | 0x0A])
        + _be(0x1234, 2)
        + bytes([0x80 | 0x40])
        + _be(0xABCDEF, 3)
        + bytes([0x80 | 0x20])  # AckReq bit 7, rtx bit 5
        + _be(0x123456, 3)
    )
    assert b == expected


def test_write_header_positions_and_tsh_pad() -> None:
    from hosts.wire import ImmDt, Tseth

    pkt = MrcPacket(
        Bth(opcode=Opcode.WRITE_ONLY_IMM, dest_qp=1, psn=2),
        meth=Meth(rqmsn=0x0102, msn=0x0304),
        tseth=Tseth(tx_timestamp=0xA1B2, tsr=True, ftype=0x9),
        reth=Reth(va=0x0102030405060708, rkey=0x11223344, dma_len=0x55667788),
        immdt=ImmDt(0xCAFEF00D),
        payload=b"xyz",
    )
    b = _header_bytes(pkt)
    assert b[1] & 0x30 == 0x10  # PadCnt = 1 (3-byte payload padded to 4)
    assert b[8] == 0x10  # tsh bit 4 set by the encoder
    assert b[12:16] == _be(0x0102, 2) + _be(0x0304, 2)  # METH
    assert b[16:20] == _be(0xA1B2, 2) + bytes([0x80, 0x09])  # TSETH: ts | tsr rsvd11 ftype4
    assert b[20:36] == _be(0x0102030405060708, 8) + _be(0x11223344, 4) + _be(0x55667788, 4)
    assert b[36:40] == _be(0xCAFEF00D, 4)
    assert b[40:] == b"xyz\x00"
    assert pkt.bth.pad == 1 and pkt.bth.tsh


def test_sack_and_cc_state_positions() -> None:
    from hosts.wire import CcState

    pkt = MrcPacket(
        Bth(opcode=Opcode.SACK, dest_qp=3, psn=4),
        seth=Seth(m=1, pr=True, ack_psn_offset=-2, entropy=0x01020304, src_id=0x0A0B, dst_id=0x0C0D,
                  cack_psn=0xABCDEF, cc_type=0x5, cc_flags=0x6, mpr=8, sack_offset=-1,
                  bitmap=0x0102030405060708),
        cc_state=CcState(tx_timestamp=0x1111, ooo_count=0x2222, restore=True, rcv_cwnd_pen=0x33,
                         rcvd_bytes=0x445566),
    )  # fmt: skip
    s = _header_bytes(pkt)[12:]
    assert len(s) == 28 + 8
    assert s[0] == 0 and s[1] == (1 << 5) | (1 << 3)  # m (2 bits at 6..5), pr (bit 3)
    assert s[2:4] == (-2 & 0xFFFF).to_bytes(2, "big")
    assert s[4:8] == _be(0x01020304, 4)
    assert s[8:12] == _be(0x0A0B, 2) + _be(0x0C0D, 2)
    assert s[12] == 0 and s[13:16] == _be(0xABCDEF, 3)
    assert s[16] == 0x56 and s[17] == 8
    assert s[18:20] == b"\xff\xff"
    assert s[20:28] == _be(0x0102030405060708, 8)
    cc = s[28:]
    assert cc[0:2] == _be(0x1111, 2)
    assert cc[2:4] == _be(0x2222, 2)  # reserved msb 0 + ooo_count 15
    assert cc[4] == 0x80 | 0x33
    assert cc[5:8] == _be(0x445566, 3)


def test_nack_probe_endpoint_positions() -> None:
    from hosts.wire import Eeth, Erth, Neth, Peth

    n = _header_bytes(MrcPacket(Bth(opcode=Opcode.NACK), neth=Neth(
        reason=0x0B, vendor=0x42, entropy=0xAABBCCDD, src_id=1, dst_id=2, nack_psn=0x010203,
        cc_type=0xF, cc_flags=0x1, tx_timestamp=0x7788)))[12:]  # fmt: skip
    assert n == (
        b"\x00\x00\x0b\x42" + _be(0xAABBCCDD, 4) + _be(1, 2) + _be(2, 2) + b"\x00"
        + _be(0x010203, 3) + b"\xf1\x00" + _be(0x7788, 2)
    )  # fmt: skip
    p = _header_bytes(
        MrcPacket(Bth(opcode=Opcode.PROBE), peth=Peth(probe_id=0x0102, tx_timestamp=0x0304))
    )[12:]
    assert p == bytes(4) + _be(0x0102, 2) + bytes(6) + _be(0x0304, 2) + bytes(2)
    e = _header_bytes(MrcPacket(Bth(opcode=Opcode.EP_REQUEST, dest_qp=2), erth=Erth(
        op=1, port_status_mask=0x80000001, tx_timestamp=0x0506)))[12:]  # fmt: skip
    assert e == b"\x00\x01\x00\x00" + _be(0x80000001, 4) + bytes(4) + _be(0x0506, 2) + bytes(2)
    r = _header_bytes(MrcPacket(Bth(opcode=Opcode.EP_RESPONSE, dest_qp=2), eeth=Eeth(
        op=1, port_status_mask=3, service_time=0x99, tx_timestamp=0x0506)))[12:]  # fmt: skip
    assert len(r) == 36 and r[1] == 1 and r[4:8] == _be(3, 4)
    assert r[24:28] == _be(0x99, 4) and r[28:30] == _be(0x0506, 2)


def test_frame_network_layer_positions() -> None:
    frame = plain_frame(dscp=0x2A, ecn=3, flow_label=0xFEDCB, hop_limit=17, udp_sport=0x1234)
    pkt = sample_packets()[0]
    data = build_frame(frame, pkt)
    assert data[0:6] == frame.eth_dst and data[6:12] == frame.eth_src and data[12:14] == b"\x86\xdd"
    word = int.from_bytes(data[14:18], "big")
    assert word >> 28 == 6 and (word >> 20) & 0xFF == (0x2A << 2) | 3 and word & 0xFFFFF == 0xFEDCB
    plen = int.from_bytes(data[18:20], "big")
    assert plen == len(data) - 54 and data[20] == 17 and data[21] == 17
    assert data[22:38] == frame.ip_src and data[38:54] == frame.ip_dst
    assert data[54:56] == _be(0x1234, 2) and data[56:58] == _be(4791, 2)
    assert int.from_bytes(data[58:60], "big") == plen and data[60:62] == b"\x00\x00"
    assert data[62] == pkt.bth.opcode


def test_srv6_outer_and_srh_layout() -> None:
    frame = srv6_frame(2)
    pkt = sample_packets()[-3]
    data = build_frame(frame, pkt)
    assert frame.srv6 is not None
    assert data[20] == 43  # outer next header: routing
    assert data[38:54] == frame.srv6.dst
    srh = data[54:]
    assert srh[0] == 41 and srh[1] == 4 and srh[2] == 4 and srh[3] == 1 and srh[4] == 1
    assert srh[8:24] == frame.srv6.segments[0] and srh[24:40] == frame.srv6.segments[1]
    inner = srh[40:]
    assert inner[0] >> 4 == 6 and inner[6] == 17 and inner[24:40] == frame.ip_dst
    outer_plen = int.from_bytes(data[18:20], "big")
    assert outer_plen == len(data) - 54
    no_srh = build_frame(srv6_frame(0), pkt)
    assert no_srh[20] == 41 and len(no_srh) == len(data) - 40


def test_decoded_payload_is_a_view_not_a_copy() -> None:
    pkt = sample_packets()[8]  # WRITE_ONLY
    buf = bytearray(frame_len(plain_frame(), pkt) + 100)
    n = encode_frame(plain_frame(), pkt, buf, 100)
    view = memoryview(buf)[100 : 100 + n]
    _, pkt2 = decode_frame(view)
    assert isinstance(pkt2.payload, memoryview)
    assert pkt2.payload.obj is buf
    buf[100 + n - 4 - 1 - 1] ^= 0xFF  # last payload byte (before 1 pad byte and the ICRC)
    assert pkt2.payload[-1] == buf[100 + n - 6]


def test_pad_and_lengths() -> None:
    for size in (0, 1, 2, 3, 4, 4096):
        pkt = MrcPacket(
            Bth(opcode=Opcode.WRITE_ONLY), meth=Meth(), reth=Reth(dma_len=size), payload=bytes(size)
        )
        data = build_frame(plain_frame(), pkt)
        assert (len(data) - 14 - 40 - 8 - 4) % 4 == 0
        _, pkt2 = decode_frame(data)
        assert len(pkt2.payload) == size and pkt2.bth.pad == -size % 4


def test_trimmed_packet_decodes_as_trimmed() -> None:
    pkt = sample_packets()[9]  # WRITE_ONLY with TSETH
    data = bytearray(build_frame(plain_frame(), pkt))
    hdr_len = 14 + 40 + 8 + 12 + 4 + 4 + 16
    cut = data[:hdr_len]
    new_plen = hdr_len - 54
    cut[18:20] = new_plen.to_bytes(2, "big")
    cut[58:60] = new_plen.to_bytes(2, "big")
    _frame, pkt2 = decode_frame(bytes(cut))
    assert pkt2.trimmed and bytes(pkt2.payload) == b""
    assert pkt2.bth.psn == pkt.bth.psn and pkt2.reth == pkt.reth and pkt2.tseth == pkt.tseth


def test_icrc_verification_and_skip() -> None:
    data = bytearray(build_frame(plain_frame(), sample_packets()[8]))
    data[200] ^= 0x01
    with pytest.raises(WireError, match="ICRC"):
        decode_frame(bytes(data))
    _, pkt = decode_frame(bytes(data), verify_icrc=False)
    assert pkt.payload[200 - 94] == sample_packets()[8].payload[200 - 94] ^ 0x01


def test_variant_fields_do_not_change_icrc() -> None:
    """Switches may rewrite DSCP/ECN, flow label and hop limit without breaking the ICRC."""
    pkt = sample_packets()[8]
    a = bytearray(build_frame(plain_frame(), pkt))
    b = build_frame(plain_frame(dscp=40, ecn=3, flow_label=1, hop_limit=1), pkt)
    assert a[-4:] == b[-4:]
    a[66] |= 0xC0  # FECN/BECN
    decode_frame(bytes(a))
    a[63] ^= 0x80  # SE is covered by the ICRC
    with pytest.raises(WireError, match="ICRC"):
        decode_frame(bytes(a))


def test_ethernet_padding_is_ignored() -> None:
    pkt = sample_packets()[-1]
    data = build_frame(plain_frame(), pkt)
    _frame, pkt2 = decode_frame(data + bytes(17))
    assert pkt2 == decode_frame(data)[1]


def test_encode_errors_are_wire_errors() -> None:
    with pytest.raises(WireError, match="missing"):
        build_frame(plain_frame(), MrcPacket(Bth(opcode=Opcode.WRITE_ONLY), reth=Reth()))
    with pytest.raises(WireError, match="unknown MRC opcode"):
        build_frame(plain_frame(), MrcPacket(Bth(opcode=0x04)))
    pkt = sample_packets()[0]
    with pytest.raises(WireError, match="too small"):
        encode_frame(plain_frame(), pkt, bytearray(100))
    with pytest.raises(WireError) as info:
        encode_packet(pkt, bytearray(10), 0)
    assert info.value.offset == 0 and "too small" in info.value.reason


def test_fields_wrap_modulo_width_without_touching_neighbours() -> None:
    pkt = MrcPacket(Bth(opcode=Opcode.PROBE, dest_qp=(1 << 24) + 3, psn=(1 << 24) + 5, pkey=0x1FFFF),
                    peth=Peth())  # fmt: skip
    data = build_frame(plain_frame(), pkt)
    _, pkt2 = decode_frame(data)
    assert pkt2.bth.psn == 5 and pkt2.bth.dest_qp == 3 and pkt2.bth.pkey == 0xFFFF
    assert not pkt2.bth.fecn and not pkt2.bth.ack_req


def test_ce_property() -> None:
    assert plain_frame(ecn=3).ce and not plain_frame(ecn=2).ce
    f = srv6_frame(0)
    assert f.srv6 is not None
    f.srv6.ecn = 3
    assert f.ce


def test_decoded_opcode_is_enum_member() -> None:
    _, pkt = decode_frame(build_frame(plain_frame(), sample_packets()[-2]))
    assert pkt.bth.opcode is Opcode.EP_REQUEST
    assert isinstance(Frame(), Frame)


@pytest.mark.parametrize("index", range(len(sample_packets())))
def test_whole_stack_and_per_header_decoders_agree(index: int) -> None:
    """The generated whole-stack decoder and the per-header (diagnostic) path give equal packets."""
    from hosts.wire.codec import _decode_headers, _finish_payload

    pkt = sample_packets()[index]
    buf = bytearray(packet_len(pkt))
    end = encode_packet(pkt, buf)
    fast = decode_packet(buf, 0, end)
    slow, off, has_payload = _decode_headers(memoryview(buf), 0, end)
    _finish_payload(slow, memoryview(buf), off, end, has_payload)
    assert bytes(fast.payload) == bytes(slow.payload)
    fast.payload = slow.payload = b""
    assert fast == slow


def test_frame_rejects_wrong_address_lengths() -> None:
    from hosts.wire import Srv6Outer

    with pytest.raises(ValueError, match="ip_dst"):
        Frame(ip_dst=bytes(4))
    with pytest.raises(ValueError, match="eth_src"):
        Frame(eth_src=bytes(5))
    with pytest.raises(ValueError, match="segment"):
        Srv6Outer(src=bytes(16), dst=bytes(16), segments=(bytes(15),))


def test_out_of_range_values_wrap_in_every_word_position() -> None:
    """Top-of-word fields take the unmasked fast path; out-of-range values fall back to masks."""
    from hosts.wire import CcState

    sack = MrcPacket(
        Bth(opcode=Opcode.SACK, se=2, ack_req=3, pkey=-1, psn=-1),  # type: ignore[arg-type]
        seth=Seth(
            entropy=(1 << 32) + 7,
            src_id=-2,
            cack_psn=(1 << 24) + 9,
            bitmap=(1 << 64) + 3,
            mpr=256 + 4,
        ),
        cc_state=CcState(tx_timestamp=(1 << 16) + 1, restore=3, rcv_cwnd_pen=128 + 5),  # type: ignore[arg-type]
    )
    write = MrcPacket(
        Bth(opcode=Opcode.WRITE_ONLY, pkey=-1, psn=-1),
        meth=Meth(rqmsn=-1, msn=(1 << 16) + 2),
        reth=Reth(va=(1 << 64) + 1, rkey=-1, dma_len=4),
        payload=b"abcd",
    )
    for pkt in (sack, write):
        for decoded in (decode_frame(build_frame(plain_frame(udp_sport=(1 << 16) + 3), pkt))[1],):
            assert decoded.bth.pkey == 0xFFFF and decoded.bth.psn == 0xFFFFFF
            if decoded.seth is not None:
                assert decoded.bth.se is False and decoded.bth.ack_req is True
                assert decoded.seth.entropy == 7 and decoded.seth.src_id == 0xFFFE
                assert (
                    decoded.seth.cack_psn == 9
                    and decoded.seth.bitmap == 3
                    and decoded.seth.mpr == 4
                )
                assert decoded.cc_state is not None and decoded.cc_state.tx_timestamp == 1
                assert decoded.cc_state.restore and decoded.cc_state.rcv_cwnd_pen == 5
            else:
                assert decoded.meth == Meth(rqmsn=0xFFFF, msn=2)
                assert decoded.reth == Reth(va=1, rkey=0xFFFFFFFF, dma_len=4)
        buf = bytearray(packet_len(pkt))
        end = encode_packet(pkt, buf)
        again = decode_packet(buf, 0, end)
        assert again.bth.pkey == 0xFFFF

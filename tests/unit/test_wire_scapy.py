"""Scapy layers dissect codec output field by field, and scapy-crafted packets decode."""

from __future__ import annotations

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from hosts.wire import Opcode, build_frame, decode_frame
from hosts.wire import layout as L
from hosts.wire.samples import plain_frame, sample_packets, srv6_frame
from hosts.wire.scapy_layers import LAYERS, MrcBTH, MrcMETH, MrcRETH, MrcTSETH


@pytest.mark.parametrize("index", range(len(sample_packets())))
@pytest.mark.parametrize("srv6", [False, True])
def test_scapy_dissects_every_header(index: int, srv6: bool) -> None:
    pkt = sample_packets()[index]
    data = build_frame(srv6_frame(1) if srv6 else plain_frame(), pkt)
    s = Ether(data)
    bth = s[MrcBTH]
    for f in L.BTH.fields:
        assert int(getattr(bth, f.name)) == int(getattr(pkt.bth, f.name)), f.name
    assert bth.icrc == int.from_bytes(data[-4:], "little")
    for attr in L.OPCODE_HEADERS[Opcode(pkt.bth.opcode)]:
        header = getattr(pkt, attr)
        if header is None:
            assert LAYERS[attr] not in s
            continue
        layer = s[LAYERS[attr]]
        for f in L.MRC_HEADERS[attr].fields:
            assert int(getattr(layer, f.name)) == int(getattr(header, f.name)), (attr, f.name)
    if pkt.payload:
        assert bytes(s[Raw].load)[: len(pkt.payload)] == bytes(pkt.payload)


def test_scapy_crafted_write_decodes_with_valid_icrc() -> None:
    crafted = (
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IPv6(src="fd00::1", dst="fd00::2", tc=(10 << 2) | 1, fl=0x2345)
        / UDP(sport=0xBEEF, dport=4791, chksum=0)
        / MrcBTH(opcode="WRITE_ONLY", dest_qp=0x55, psn=0x10, rtx=1)
        / MrcMETH(msn=3)
        / MrcTSETH(tx_timestamp=0x777)
        / MrcRETH(va=0x1000, rkey=9, dma_len=7)
        / Raw(b"1234567")
    )
    frame, pkt = decode_frame(bytes(crafted))  # tsh, pad and ICRC filled in by the layers
    assert frame.dscp == 10 and frame.ecn == 1 and frame.flow_label == 0x2345
    assert pkt.bth.opcode is Opcode.WRITE_ONLY and pkt.bth.rtx and pkt.bth.dest_qp == 0x55
    assert pkt.tseth is not None and pkt.tseth.tx_timestamp == 0x777
    assert pkt.meth is not None and pkt.meth.msn == 3
    assert bytes(pkt.payload) == b"1234567" and pkt.bth.pad == 1 and pkt.bth.tsh


def test_stacking_a_header_sets_the_opcode() -> None:
    from hosts.wire.scapy_layers import MrcNETH, MrcSETH

    assert (
        Ether(bytes(Ether() / IPv6() / UDP() / MrcBTH() / MrcSETH()))[MrcBTH].opcode == Opcode.SACK
    )
    assert (MrcBTH() / MrcNETH()).opcode == Opcode.NACK
    assert (MrcBTH() / MrcMETH()).opcode == Opcode.WRITE_ONLY
    assert (MrcBTH(opcode=Opcode.WRITE_FIRST) / MrcMETH()).opcode == Opcode.WRITE_FIRST

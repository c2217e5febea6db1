"""ICRC equals scapy.contrib.roce's computation on the same packets (independent check)."""

from __future__ import annotations

import zlib

import pytest
from scapy.contrib import roce
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from hosts.wire import build_frame, decode_frame
from hosts.wire.icrc import compute_icrc
from hosts.wire.samples import plain_frame, sample_packets, srv6_frame

FRAMES = {"plain": plain_frame(), "srv6": srv6_frame(0), "srv6+srh": srv6_frame(2)}


def _scapy_icrc(frame_bytes: bytes) -> bytes:
    """Re-dissect the UDP payload as a RoCEv2 BTH and let scapy.contrib.roce compute the ICRC."""
    pkt = Ether(frame_bytes)
    udp = pkt[UDP]
    udp_payload = bytes(udp.payload)
    udp.remove_payload()
    udp.add_payload(roce.BTH(udp_payload))
    pkt[roce.BTH].icrc = None
    return bytes(pkt)[len(frame_bytes) - 4 : len(frame_bytes)]


@pytest.mark.parametrize("shape", FRAMES)
@pytest.mark.parametrize("index", range(len(sample_packets())))
def test_icrc_matches_scapy_roce(shape: str, index: int) -> None:
    data = build_frame(FRAMES[shape], sample_packets()[index])
    assert data[-4:] == _scapy_icrc(data)


def test_icrc_matches_textbook_definition() -> None:
    """Spell the RoCEv2 masking out by hand with zlib.crc32 on a plain frame."""
    data = build_frame(plain_frame(), sample_packets()[0])
    ip = bytearray(data[14:54])
    ip[0] = 0x6F
    ip[1:4] = b"\xff\xff\xff"
    ip[7] = 0xFF
    udp = bytearray(data[54:62])
    udp[6:8] = b"\xff\xff"
    bth = bytearray(data[62:74])
    bth[4] = 0xFF
    crc = zlib.crc32(b"\xff" * 8 + ip + udp + bth + data[74:-4])
    assert data[-4:] == crc.to_bytes(4, "little")
    assert compute_icrc(data, 14, len(data) - 4) == crc


def test_scapy_roce_crafted_packet_verifies() -> None:
    """A packet built and checksummed entirely by scapy.contrib.roce passes our ICRC check."""
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw

    # MRC PROBE (0xDE) stack: BTH + 16-byte PETH, built as raw bytes after a RoCE BTH.
    pkt = (
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IPv6(src="fd00::1", dst="fd00::2", tc=0x28, fl=0x12345, hlim=9)
        / UDP(sport=0xBEEF, dport=4791, chksum=0)
        / roce.BTH(opcode=0xDE, dqpn=0x55, psn=0x1234)
        / Raw(bytes(4) + b"\x12\x34" + bytes(6) + b"\x56\x78" + bytes(2))
    )
    data = bytes(pkt)
    _, mrc = decode_frame(data)
    assert mrc.peth is not None and mrc.peth.probe_id == 0x1234 and mrc.peth.tx_timestamp == 0x5678
    assert mrc.bth.dest_qp == 0x55 and mrc.bth.psn == 0x1234

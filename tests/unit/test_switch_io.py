"""Pure parts of the switch process: netlink parsing, pcap files, arguments, link updates."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from switch.main import build_parser
from switch.pcap import PcapWriter
from switch.ports import IFF_RUNNING, IFF_UP, RTM_DELLINK, RTM_NEWLINK, parse_link_messages
from switch.traffic import LinkConfig


def _nl(mtype: int, index: int, flags: int, pad: int = 0) -> bytes:
    body = struct.pack("=BxHiII", 10, 1, index, flags, 0xFFFFFFFF) + bytes(pad)
    return struct.pack("=IHHII", 16 + len(body), mtype, 0, 0, 0) + body


def test_netlink_link_messages() -> None:
    data = (
        _nl(RTM_NEWLINK, 7, IFF_UP | IFF_RUNNING, pad=20)  # attributes follow: skipped
        + _nl(RTM_NEWLINK, 8, IFF_UP)  # up but no carrier
        + _nl(RTM_DELLINK, 9, IFF_UP | IFF_RUNNING)
        + _nl(3, 1, 0)  # NLMSG_DONE: ignored
    )
    assert parse_link_messages(data) == [(7, True), (8, False), (9, False)]
    assert parse_link_messages(data[:10]) == []  # truncated header
    bad = struct.pack("=IHHII", 4, RTM_NEWLINK, 0, 0, 0)  # length below the header
    assert parse_link_messages(bad + data) == []


def test_pcap_writer_is_read_back_by_scapy(tmp_path: Path) -> None:
    frames = [
        bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")) + bytes([i]) * 60
        for i in range(3)
    ]
    path = tmp_path / "x.pcap"
    w = PcapWriter(str(path), snaplen=40)
    for f in frames:
        w.write(f)
    w.close()
    w.close()  # idempotent
    w.write(frames[0])  # ignored after close
    got = rdpcap(str(path))
    assert [bytes(p) for p in got] == [f[:40] for f in frames]
    assert w.packets == 3
    with pytest.raises(ValueError, match="direction"):
        PcapWriter(str(tmp_path / "y.pcap"), direction="sideways")


def test_switch_arguments() -> None:
    p = build_parser()
    args = p.parse_args(
        [
            "--name",
            "s",
            "--grpc-addr",
            "127.0.0.1:1",
            "--port",
            "1=eth1",
            "--link",
            "1:rate=1e9,delay=1e-5",
        ]
    )
    assert args.port == [(1, "eth1")]
    assert args.link == [(1, LinkConfig(rate_bps=1e9, delay_s=1e-5))]
    for bad in (
        ["--port", "x=eth1"],
        ["--port", "1="],
        ["--link", "1:speed=3"],
        ["--link", "rate=1"],
    ):
        with pytest.raises(SystemExit):
            p.parse_args(["--name", "s", "--grpc-addr", "a:1", *bad])


def test_ctl_link_update_sets_exactly_the_given_fields() -> None:
    from switch.ctl import link_update

    upd = link_update("rate=1e9, qpkts=128")
    assert upd.HasField("rate_bps") and upd.rate_bps == 1e9
    assert upd.HasField("qpkts") and upd.qpkts == 128
    assert not upd.HasField("delay_s") and not upd.HasField("loss")
    with pytest.raises(ValueError, match="loss"):
        link_update("loss=2")
    with pytest.raises(ValueError, match="administrative"):
        link_update("up=0")

"""Pure parts of the switch process: netlink parsing, pcap files, arguments, rate estimates."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from switch.bench import mrc_frame, rate_estimates
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


def test_rate_estimates_recover_a_known_rate_despite_late_frames() -> None:
    rate, size, n = 1e9, 8290, 2000
    stamps = [i * size * 8 / rate for i in range(n)]
    sizes = [size] * n
    e2e, fit = rate_estimates(stamps, sizes)
    assert e2e == pytest.approx(rate, rel=1e-9) and fit == pytest.approx(rate, rel=1e-9)
    late = list(stamps)
    late[-1] += 0.01  # the last frame handed over 10 ms late (the process was descheduled)
    e2e_late, fit_late = rate_estimates(late, sizes)
    assert e2e_late < 0.995 * rate  # the end-to-end figure suffers ...
    assert fit_late == pytest.approx(rate, rel=2e-3)  # ... the fitted slope barely moves
    with pytest.raises(ValueError):
        rate_estimates([1.0], [size])


def test_bench_frame_is_a_consistent_write_only_packet() -> None:
    from scapy.layers.inet import UDP
    from scapy.layers.inet6 import IPv6

    dst = bytes.fromhex("fd000000000000020000000000000001")
    frame = mrc_frame(dst, payload=4096)
    pkt = Ether(frame)
    assert len(frame) == 14 + 40 + 8 + 12 + 4 + 16 + 4096 + 4
    assert pkt[IPv6].plen == len(frame) - 54 and pkt[UDP].len == len(frame) - 54
    assert pkt[UDP].dport == 4791 and bytes(pkt[UDP].payload)[0] == 0xCA


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

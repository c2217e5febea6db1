"""`mrcnet pcap` output read back with scapy's pcap reader and decoded with ICRC verification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scapy.utils import rdpcap

from common.classes import DEFAULT_CLASSES, TrafficClass
from hosts.wire import EvMode, Opcode, decode_frame, fields_to_ev
from hosts.wire.pcapgen import samples
from mrcnet.cli import main as cli_main


def test_pcap_holds_every_opcode_in_every_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "out" / "mrc.pcap"
    assert cli_main(["pcap", str(path), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    records = rdpcap(str(path))
    assert summary["packets"] == len(records) == len(list(samples()))
    seen: set[tuple[EvMode, Opcode]] = set()
    trimmed = 0
    for record in records:
        frame, pkt = decode_frame(bytes(record))  # ICRC verified unless trimmed
        mode = (
            EvMode.SRV6
            if frame.srv6 is not None
            else EvMode.STRUCTURED
            if frame.flow_label
            else EvMode.ECMP
        )
        seen.add((mode, Opcode(pkt.bth.opcode)))
        cls = DEFAULT_CLASSES.class_of(frame.dscp)
        if pkt.trimmed:
            trimmed += 1
            assert cls == TrafficClass.TRIMMED and len(pkt.payload) == 0
        elif pkt.bth.opcode in (Opcode.SACK, Opcode.NACK, Opcode.ACK, Opcode.EP_RESPONSE):
            assert cls == TrafficClass.CONTROL
        elif pkt.reth is not None:
            assert cls == (TrafficClass.TRIMMABLE_RETX if pkt.bth.rtx else TrafficClass.TRIMMABLE)
        if pkt.seth is not None:  # the SACK reflects the EV its frame carries
            assert pkt.seth.entropy == fields_to_ev(mode, frame.udp_sport, frame.flow_label)
    assert seen == {(m, op) for m in EvMode for op in Opcode}
    assert trimmed == len(EvMode)


def test_pcap_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    assert cli_main(["pcap", str(a)]) == 0
    assert cli_main(["pcap", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()

"""tshark with the shipped Lua dissector decodes `mrcnet pcap` output to the values we encoded."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hosts.wire import EvMode, Opcode
from hosts.wire.icrc import compute_icrc
from hosts.wire.luagen import LUA_PATH
from hosts.wire.pcapgen import samples
from mrcnet.cli import main as cli_main

TSHARK = shutil.which("tshark")
pytestmark = pytest.mark.skipif(
    TSHARK is None, reason="tshark is not installed (apt-get install tshark)"
)

FIELDS = [
    "mrc.bth.opcode",
    "mrc.bth.dest_qp",
    "mrc.bth.psn",
    "mrc.bth.rtx",
    "mrc.bth.tsh",
    "mrc.seth.cack_psn",
    "mrc.seth.bitmap",
    "mrc.seth.sack_offset",
    "mrc.seth.m",
    "mrc.neth.reason",
    "mrc.neth.nack_psn",
    "mrc.reth.va",
    "mrc.erth.port_status_mask",
    "mrc.ev",
    "mrc.ev_mode",
    "mrc.trimmed",
    "mrc.payload_len",
    "mrc.icrc",
    "mrc.icrc_ok",
]


def _tshark_rows(pcap: Path) -> list[dict[str, str]]:
    assert TSHARK is not None
    cmd = [TSHARK, "-n", "-o", "udp.try_heuristic_first:TRUE", "-X", f"lua_script:{LUA_PATH}"]
    cmd += ["-r", str(pcap), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    return [dict(zip(FIELDS, line.split("|"))) for line in out.splitlines()]


def _num(text: str) -> int:
    return int(text, 0)


def test_tshark_decodes_every_sample(tmp_path: Path) -> None:
    pcap = tmp_path / "mrc.pcap"
    assert cli_main(["pcap", str(pcap), "--json"]) == 0
    expected = list(samples())
    rows = _tshark_rows(pcap)
    assert len(rows) == len(expected)
    seen: set[tuple[EvMode, Opcode]] = set()
    for row, sample in zip(rows, expected):
        pkt = sample.packet
        seen.add((sample.mode, sample.opcode))
        assert _num(row["mrc.bth.opcode"]) == sample.opcode
        assert _num(row["mrc.bth.dest_qp"]) == pkt.bth.dest_qp
        assert _num(row["mrc.bth.psn"]) == pkt.bth.psn
        assert _num(row["mrc.bth.rtx"]) == pkt.bth.rtx
        assert _num(row["mrc.bth.tsh"]) == (pkt.tseth is not None)
        assert _num(row["mrc.ev"]) == sample.ev
        assert row["mrc.ev_mode"] == sample.mode.name
        if pkt.seth is not None:
            assert _num(row["mrc.seth.cack_psn"]) == pkt.seth.cack_psn
            assert _num(row["mrc.seth.bitmap"]) == pkt.seth.bitmap
            assert _num(row["mrc.seth.sack_offset"]) == pkt.seth.sack_offset
            assert _num(row["mrc.seth.m"]) == pkt.seth.m
        else:
            assert row["mrc.seth.cack_psn"] == ""
        if pkt.neth is not None:
            assert _num(row["mrc.neth.reason"]) == pkt.neth.reason
            assert _num(row["mrc.neth.nack_psn"]) == pkt.neth.nack_psn
        if pkt.reth is not None:
            assert _num(row["mrc.reth.va"]) == pkt.reth.va
        if pkt.erth is not None:
            assert _num(row["mrc.erth.port_status_mask"]) == pkt.erth.port_status_mask
        if sample.trimmed:
            assert row["mrc.trimmed"] in ("1", "True") and row["mrc.icrc"] == ""
        else:
            assert _num(row["mrc.icrc"]) == int.from_bytes(sample.data[-4:], "little")
            assert row["mrc.icrc_ok"] in ("1", "True")  # the Lua CRC agrees with ours
            if pkt.reth is not None:
                assert _num(row["mrc.payload_len"]) == len(pkt.payload)
    assert seen == {(m, op) for m in EvMode for op in Opcode}


def test_tshark_flags_truncated_unknown_and_bad_icrc(tmp_path: Path) -> None:
    from hosts.wire.pcapgen import write_pcap

    good = next(s for s in samples() if s.opcode == Opcode.SACK).data
    truncated = bytearray(good[:80])  # SETH cut short; lengths fixed up so UDP hands it over
    truncated[18:20] = (80 - 54).to_bytes(2, "big")
    truncated[58:60] = (80 - 54).to_bytes(2, "big")
    unknown = bytearray(good)
    unknown[62] = 0x04
    corrupt = bytearray(good)
    corrupt[80] ^= 0x01  # a SETH byte: the ICRC no longer matches
    pcap = tmp_path / "bad.pcap"
    write_pcap(pcap, [bytes(truncated), bytes(unknown), bytes(corrupt)])
    assert TSHARK is not None
    out = subprocess.run(
        [TSHARK, "-n", "-X", f"lua_script:{LUA_PATH}", "-r", str(pcap), "-V"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "SETH truncated" in out
    assert "unknown MRC opcode" in out
    expected = compute_icrc(bytes(corrupt), 14, len(corrupt) - 4)  # Lua CRC == ours
    assert f"bad ICRC, expected 0x{expected:08x}" in out

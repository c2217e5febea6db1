"""`mrcnet pcap FILE`: write sample MRC packets of every opcode in every EV mode to a pcap.

Every frame carries a valid ICRC and the DSCP of its MRC class (common/classes.py defaults), so
the file can be opened in Wireshark (with hosts/wire/mrc.lua) or read back by the codec. The
output is deterministic (fixed timestamps) so it can be compared across runs.
"""

from __future__ import annotations

import argparse
import json
import struct
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from common.classes import DEFAULT_CLASSES, ClassMap, TrafficClass
from hosts.wire.codec import build_frame
from hosts.wire.enums import EvMode, Opcode
from hosts.wire.packet import MrcPacket
from hosts.wire.samples import frame_for, sample_packets

PCAP_MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1
_EPOCH = 1_767_225_600  # 2026-01-01 00:00:00 UTC: fixed, so the file is reproducible
_EVS = {EvMode.ECMP: 0xC000, EvMode.STRUCTURED: 0x1A2BC000, EvMode.SRV6: 0xC021}


@dataclass(frozen=True, slots=True)
class Sample:
    mode: EvMode
    opcode: Opcode
    ev: int
    trimmed: bool
    srh: bool
    data: bytes
    packet: MrcPacket


def traffic_class(pkt: MrcPacket) -> TrafficClass:
    """The MRC class a packet is sent in (docs/wire-format.md, "DSCP")."""
    op = Opcode(pkt.bth.opcode)
    if op in (Opcode.ACK, Opcode.SACK, Opcode.NACK, Opcode.EP_RESPONSE):
        return TrafficClass.CONTROL
    if op in (Opcode.PROBE, Opcode.EP_REQUEST):
        return TrafficClass.NO_TRIM
    return TrafficClass.TRIMMABLE_RETX if pkt.bth.rtx else TrafficClass.TRIMMABLE


def samples(classes: ClassMap = DEFAULT_CLASSES) -> Iterator[Sample]:
    """Every sample packet in every EV mode, plus trimmed and SRH variants."""
    for mode in EvMode:
        base_ev = _EVS[mode]
        for i, pkt in enumerate(sample_packets()):
            ev = base_ev + i
            _reflect_ev(pkt, ev)
            dscp = classes.dscp[traffic_class(pkt)]
            data = build_frame(frame_for(mode, ev, dscp), pkt)
            yield Sample(mode, Opcode(pkt.bth.opcode), ev, False, False, data, pkt)
            if mode == EvMode.SRV6 and pkt.bth.opcode in (Opcode.WRITE_ONLY, Opcode.SACK):
                data = build_frame(frame_for(mode, ev, dscp, srh=True), pkt)
                yield Sample(mode, Opcode(pkt.bth.opcode), ev, False, True, data, pkt)
        write = next(p for p in sample_packets() if p.bth.opcode == Opcode.WRITE_ONLY)
        frame = frame_for(mode, base_ev, classes.dscp[TrafficClass.TRIMMED])
        data = trim(build_frame(frame, write))
        yield Sample(mode, Opcode.WRITE_ONLY, base_ev, True, False, data, write)


def _reflect_ev(pkt: MrcPacket, ev: int) -> None:
    if pkt.seth is not None:
        pkt.seth.entropy = ev
    if pkt.neth is not None:
        pkt.neth.entropy = ev


def trim(frame: bytes) -> bytes:
    """Cut a data frame to its header stack as a trimming switch does (lengths rewritten)."""
    from hosts.wire.codec import decode_frame, packet_len

    _f, pkt = decode_frame(frame)
    payload_and_icrc = len(pkt.payload) + pkt.bth.pad + 4
    cut = bytearray(frame[: len(frame) - payload_and_icrc])
    ip_off = 14
    while True:  # rewrite every IPv6 payload length up to the UDP header
        nh = cut[ip_off + 6]
        plen = int.from_bytes(cut[ip_off + 4 : ip_off + 6], "big") - payload_and_icrc
        cut[ip_off + 4 : ip_off + 6] = plen.to_bytes(2, "big")
        if nh == 17:
            break
        ip_off += 40 if nh == 41 else 40 + 8 + cut[ip_off + 41] * 8
    udp = ip_off + 40
    ulen = int.from_bytes(cut[udp + 4 : udp + 6], "big") - payload_and_icrc
    cut[udp + 4 : udp + 6] = ulen.to_bytes(2, "big")
    assert len(cut) - udp - 8 == packet_len(pkt) - len(pkt.payload) - pkt.bth.pad
    return bytes(cut)


def write_pcap(
    path: Path, frames: Iterable[bytes], start: float = _EPOCH, step_us: int = 1000
) -> int:
    """Write classic pcap (microsecond timestamps, Ethernet); return the number of frames."""
    count = 0
    with path.open("wb") as out:
        out.write(struct.pack("<IHHiIII", PCAP_MAGIC, 2, 4, 0, 0, 65535, LINKTYPE_ETHERNET))
        for data in frames:
            t_us = int(start * 1_000_000) + count * step_us
            out.write(
                struct.pack("<IIII", t_us // 1_000_000, t_us % 1_000_000, len(data), len(data))
            )
            out.write(data)
            count += 1
    return count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="pcap file to write")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    all_samples = list(samples())
    n = write_pcap(path, (s.data for s in all_samples))
    per_mode = Counter(s.mode.name for s in all_samples)
    opcodes = sorted({s.opcode.name for s in all_samples})
    summary = {"file": str(path), "packets": n, "per_mode": dict(per_mode), "opcodes": opcodes}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"wrote {n} packets to {path}")
        for mode, count in per_mode.items():
            print(f"  {mode:10s} {count} packets, every opcode: {', '.join(opcodes)}")
        print(f"open with: tshark -X lua_script:{Path(__file__).with_name('mrc.lua')} -r {path} -V")
    return 0

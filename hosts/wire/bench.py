"""`mrcnet bench codec`: encode+decode rate of 4096-byte Write frames (the per-packet path).

One iteration encodes an Ethernet/IPv6/UDP/BTH/METH/RETH/4096 B/ICRC frame into a preallocated
buffer and decodes it back from a memoryview (payload as a view, no copy). Figures:

- packets_per_s: encode (with ICRC) + decode without ICRC verification (the receive path may
  skip it when the NIC model trusts its link, `decode_frame(verify_icrc=False)`),
- packets_per_s_verified: the same with the ICRC verified on decode,
- encode_per_s / decode_per_s: each half alone, decode without verification,
- packet_only_per_s: MRC headers only (encode_packet + decode_packet, no frame, no ICRC).

Each figure is the best of ``--rounds`` timed rounds (the machine is shared; the best round is
the least disturbed one). The target is 200,000 packets/s for ``packets_per_s``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from hosts.wire import icrc
from hosts.wire.codec import decode_frame, decode_packet, encode_frame, encode_packet, frame_len
from hosts.wire.enums import Opcode
from hosts.wire.headers import Bth, Meth, Reth
from hosts.wire.packet import MrcPacket
from hosts.wire.samples import plain_frame

TARGET = 200_000
PAYLOAD = 4096


def _rate(step: Callable[[], object], seconds: float, rounds: int) -> float:
    best = 0.0
    batch = 200
    for _ in range(rounds):
        n = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(batch):
                step()
            n += batch
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n / (now - start))
    return best


def measure(seconds: float = 0.5, rounds: int = 3) -> dict[str, object]:
    frame = plain_frame(udp_sport=0xC123, flow_label=0)
    pkt = MrcPacket(
        Bth(opcode=Opcode.WRITE_MIDDLE, dest_qp=0x1234, psn=1000, ack_req=False),
        meth=Meth(rqmsn=1, msn=7),
        reth=Reth(va=0x7F0000001000, rkey=0x1234, dma_len=PAYLOAD),
        payload=bytes(range(256)) * (PAYLOAD // 256),
    )
    buf = bytearray(frame_len(frame, pkt))
    view = memoryview(buf)
    n = encode_frame(frame, pkt, buf)
    wire = view[:n]
    decode_frame(wire)  # sanity: the frame is valid

    def both() -> None:
        encode_frame(frame, pkt, buf)
        decode_frame(wire, verify_icrc=False)

    def both_verified() -> None:
        encode_frame(frame, pkt, buf)
        decode_frame(wire)

    def enc() -> None:
        encode_frame(frame, pkt, buf)

    def dec() -> None:
        decode_frame(wire, verify_icrc=False)

    pbuf = bytearray(PAYLOAD + 64)
    pend = encode_packet(pkt, pbuf)

    def packet_only() -> None:
        encode_packet(pkt, pbuf)
        decode_packet(pbuf, 0, pend)

    rate = _rate(both, seconds, rounds)
    return {
        "packets_per_s": round(rate),
        "packets_per_s_verified": round(_rate(both_verified, seconds, rounds)),
        "encode_per_s": round(_rate(enc, seconds, rounds)),
        "decode_per_s": round(_rate(dec, seconds, rounds)),
        "packet_only_per_s": round(_rate(packet_only, seconds, rounds)),
        "frame_bytes": n,
        "payload_bytes": PAYLOAD,
        "crc_backend": icrc.crc32.__module__,
        "target_packets_per_s": TARGET,
        "meets_target": rate >= TARGET,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--seconds", type=float, default=0.5, help="length of one timed round")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the best is kept")


def run(args: argparse.Namespace) -> int:
    figures = measure(max(0.05, args.seconds), max(1, args.rounds))
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(
                f"{key:24s} {value:,}"
                if isinstance(value, int) and not isinstance(value, bool)
                else f"{key:24s} {value}"
            )
    return 0

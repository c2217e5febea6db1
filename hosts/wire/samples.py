"""Sample MRC packets and frames: one packet of every opcode, frames in every EV mode.

Used by `mrcnet pcap`, the codec benchmark and the tests. Every field carries a non-default
value so a decoder that mixes fields up is caught.
"""

from __future__ import annotations

from common.evbits import UsidSlot, UsidTemplate, usid_container
from hosts.wire import (
    WRITE_OPCODES,
    Aeth,
    Bth,
    CcState,
    Eeth,
    EndpointOp,
    Erth,
    EvMode,
    Frame,
    ImmDt,
    Meth,
    MrcPacket,
    NackReason,
    Neth,
    Opcode,
    Peth,
    Reth,
    SackVerdict,
    Seth,
    Srv6Outer,
    Tseth,
    ev_to_fields,
    ip6,
    mac,
)


def plain_frame(**kw: object) -> Frame:
    base: dict[str, object] = {
        "eth_dst": mac("02:00:00:00:00:02"),
        "eth_src": mac("02:00:00:00:00:01"),
        "ip_src": ip6("fd00:0:1::1"),
        "ip_dst": ip6("fd00:0:2::1"),
        "dscp": 10,
        "ecn": 2,
        "flow_label": 0xABCDE,
        "hop_limit": 63,
        "udp_sport": 0xC123,
    }
    base.update(kw)
    return Frame(**base)  # type: ignore[arg-type]


def srv6_frame(segments: int = 0) -> Frame:
    segs = tuple(ip6(f"fd00:0:{i + 2}::1") for i in range(segments))
    outer = Srv6Outer(
        src=ip6("fd00:0:1::1"),
        dst=ip6("fc00:0:100:201:302:400::"),
        segments=segs,
        segments_left=min(1, segments),
        dscp=10,
        ecn=1,
        flow_label=0x12345,
        hop_limit=60,
    )
    return plain_frame(srv6=outer)


def sample_packets() -> list[MrcPacket]:
    """One packet per opcode, non-default values in every field; Writes with and without TSETH."""
    out: list[MrcPacket] = []
    payload = bytes((i * 7) & 0xFF for i in range(1023))  # odd length: padding 1
    for op in sorted(WRITE_OPCODES):  # opcode order: FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM
        for ts in (False, True):
            out.append(
                MrcPacket(
                    Bth(opcode=op, se=True, dest_qp=0x00ABCD, psn=0xFEDCBA, ack_req=True, rtx=ts),
                    meth=Meth(rqmsn=0x1234, msn=0xBEEF),
                    tseth=Tseth(tx_timestamp=0xCAFE, tsr=True, ftype=5) if ts else None,
                    reth=Reth(va=0x1122334455667788, rkey=0xDEADBEEF, dma_len=len(payload)),
                    immdt=ImmDt(0xA5A5A5A5)
                    if op in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM)
                    else None,
                    payload=payload,
                )
            )
    out.append(
        MrcPacket(Bth(opcode=Opcode.ACK, dest_qp=7, psn=99), aeth=Aeth(syndrome=0x1F, msn=0x123456))
    )
    out.append(
        MrcPacket(
            Bth(opcode=Opcode.SACK, dest_qp=0x10, psn=0x100),
            seth=Seth(
                m=SackVerdict.ALWAYS_SKIP,
                pr=True,
                ack_psn_offset=-5,
                entropy=0x89ABCDEF,
                cack_psn=0xFFFFF0,
                cc_type=3,
                cc_flags=9,
                mpr=8,
                sack_offset=-2,
                bitmap=0x8000_0000_0000_0005,
            ),
            cc_state=CcState(
                tx_timestamp=0x4321,
                ooo_count=0x7FFF,
                restore=True,
                rcv_cwnd_pen=127,
                rcvd_bytes=0xABCDEF,
            ),
        )
    )
    out.append(
        MrcPacket(
            Bth(opcode=Opcode.NACK, dest_qp=0x10, psn=0x200),
            neth=Neth(
                reason=NackReason.TRIMMED,
                vendor=0x77,
                entropy=0x0000BEEF,
                nack_psn=0x000201,
                cc_type=1,
                cc_flags=2,
                tx_timestamp=0x1357,
            ),
        )
    )
    out.append(
        MrcPacket(
            Bth(opcode=Opcode.PROBE, dest_qp=0x10, psn=0),
            peth=Peth(probe_id=0x4242, tx_timestamp=0x2468),
        )
    )
    out.append(
        MrcPacket(
            Bth(opcode=Opcode.EP_REQUEST, dest_qp=2, psn=0x000777),
            erth=Erth(
                op=EndpointOp.PORT_STATUS_UPDATE, port_status_mask=0b1011, tx_timestamp=0x1111
            ),
        )
    )
    out.append(
        MrcPacket(
            Bth(opcode=Opcode.EP_RESPONSE, dest_qp=2, psn=0x000777),
            eeth=Eeth(
                op=EndpointOp.EV_PROBE,
                port_status_mask=0xF,
                service_time=0x500,
                tx_timestamp=0x1111,
            ),
        )
    )
    return out


# ---------------------------------------------------------------- EV modes (for mrcnet pcap)
SAMPLE_TEMPLATE = UsidTemplate(
    block=0xFC000000,
    slots=(
        UsidSlot(base=0x0100, ev_shift=0, ev_width=4),  # leaf uplink from EV bits 3..0
        UsidSlot(base=0x0200, ev_shift=4, ev_width=4),  # spine downlink plane from EV bits 7..4
        UsidSlot(base=0x0300),  # destination leaf
        UsidSlot(base=0x0E01),  # decapsulate at the destination leaf (End.DT6-like)
    ),
)
"""Per-destination uSID template used for the SRv6 samples."""


def frame_for(mode: EvMode, ev: int, dscp: int, *, srh: bool = False) -> Frame:
    """A frame between two sample hosts with ``ev`` placed as ``mode`` prescribes."""
    sport, flow_label = ev_to_fields(mode, ev)
    frame = plain_frame(dscp=dscp, ecn=2, flow_label=flow_label, udp_sport=sport)
    if mode == EvMode.SRV6:
        frame.srv6 = Srv6Outer(
            src=frame.ip_src,
            dst=usid_container(SAMPLE_TEMPLATE, ev),
            segments=(frame.ip_dst,) if srh else (),
            segments_left=0,
            dscp=dscp,
            ecn=2,
            flow_label=flow_label,
            hop_limit=64,
        )
    return frame

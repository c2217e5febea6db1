"""The pipeline's output decodes with the hosts' wire codec (ICRC intact; trims recognised)."""

from __future__ import annotations

import ipaddress

import pytest

from hosts.wire.codec import build_frame, decode_frame
from hosts.wire.enums import Opcode
from hosts.wire.headers import Bth, Meth, Reth, Tseth
from hosts.wire.packet import Frame, MrcPacket, Srv6Outer
from tests.unit.pipeline_helpers import add, add_route, call, mrc_pipeline, nexthop


def ip(text: str) -> bytes:
    return ipaddress.IPv6Address(text).packed


@pytest.mark.parametrize("srv6", [False, True])
@pytest.mark.parametrize("tsh", [False, True])
def test_forwarded_marked_and_trimmed_frames_decode(srv6: bool, tsh: bool) -> None:
    pipe, state = mrc_pipeline()
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    add_route(state, "fc00:0:100::", 48, nexthop(2))
    add(state, "MrcEgress.port_config", (2,), call("MrcEgress.set_port_params", 4000, 5000, 0, 40, 6))
    add(state, "MrcIngress.dscp_class", (10,), call("MrcIngress.set_class", 1, 1, 1))
    outer = Srv6Outer(src=ip("2001:db8:1::1"), dst=ip("fc00:0:100::"), dscp=10, ecn=1)
    frame = Frame(ip_src=ip("2001:db8:1::1"), ip_dst=ip("2001:db8:2::1"), dscp=10, ecn=1,
                  udp_sport=1234, srv6=outer if srv6 else None)
    pkt = MrcPacket(bth=Bth(opcode=Opcode.WRITE_ONLY, dest_qp=5, psn=9), meth=Meth(1, 2),
                    tseth=Tseth(5) if tsh else None, reth=Reth(0x1000, 7, 4000),
                    payload=bytes(range(256)) * 16)
    raw = build_frame(frame, pkt)

    plain = pipe.process(raw, 1, 0.0, lambda p, q: (10, 3999))[0]
    f, p = decode_frame(plain.data)  # verifies the ICRC
    assert not p.trimmed and bytes(p.payload) == pkt.payload and not f.ce

    marked = pipe.process(raw, 1, 0.0, lambda p, q: (1, 4000))[0]  # thresholds in bytes
    f, p = decode_frame(marked.data)
    assert marked.ecn_marked and f.ce and bytes(p.payload) == pkt.payload

    trimmed = pipe.process(raw, 1, 0.0, lambda p, q: (1, 5000))[0]
    f, p = decode_frame(trimmed.data)
    assert trimmed.trimmed and p.trimmed and len(p.payload) == 0
    assert p.bth.psn == 9 and p.reth is not None and p.reth.dma_len == 4000
    assert (p.tseth is not None) == tsh
    assert f.dscp == 40 and (f.srv6 is None or f.srv6.dscp == 40)

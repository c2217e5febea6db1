"""MRC wire codec: headers, packets, frames, ICRC and entropy-value placement.

Data model (all dataclasses with slots, fields in wire order, every field defaulted):

- Headers: Bth, Meth, Tseth, Reth, ImmDt, Aeth, Seth, CcState, Neth, Peth, Erth, Eeth.
- MrcPacket(bth, meth=None, tseth=None, reth=None, immdt=None, aeth=None, seth=None,
  cc_state=None, neth=None, peth=None, erth=None, eeth=None, payload=b"", trimmed=False):
  BTH, the extension headers required by the opcode (layout.OPCODE_HEADERS) and the payload.
  TSETH is optional on data packets; ``trimmed`` marks a decoded header-only (switch-trimmed)
  data packet.
- Frame(eth_dst, eth_src, ip_src, ip_dst, dscp, ecn, flow_label, hop_limit, udp_sport,
  udp_dport=4791, srv6=None): the network layer; Srv6Outer(src, dst, segments, ...) is the
  optional SRv6 outer IPv6 header (+ SRH when segments are given). ``Frame.ce`` tells
  whether either IPv6 header carries ECN CE.
- Enums: Opcode, NackReason, SackVerdict, EndpointOp, EvMode, Ecn.

Functions:

- encode_frame(frame, pkt, buf, offset=0) -> length: Ethernet..ICRC into a preallocated
  bytearray or memoryview; build_frame(frame, pkt) -> bytes; frame_len(frame, pkt).
- decode_frame(data, verify_icrc=True) -> (Frame, MrcPacket); the payload is a memoryview
  into ``data`` (no copy).
- encode_packet(pkt, buf, offset=0) -> end offset; decode_packet(data, offset=0, end=None):
  the MRC part only (BTH..payload+pad, no ICRC). packet_len(pkt).
- The encoder sets ``bth.pad`` and ``bth.tsh`` from the payload and TSETH presence. Integer
  fields are written modulo 2**width.
- hosts.wire.icrc.compute_icrc: RoCEv2 ICRC (equal to scapy.contrib.roce).
- EV placement (hosts.wire.ev_placement): ev_to_fields / fields_to_ev per EvMode. EV
  subfields and uSID templates and containers are common.evbits.

Errors: decoding arbitrary bytes returns a packet or raises WireError (``.reason``,
``.offset``); nothing else. Encoding problems raise WireError too.

Bit layouts are defined once, in hosts.wire.layout; compile.py and stacks.py generate the
codec from them, scapy_layers.py the scapy layers (tests/tools only), luagen.py the Wireshark
dissector mrc.lua and docgen.py the tables of docs/wire-format.md. fastpath.py compiles the
same plans into tables for the optional C fast path _fastwire.c (codec.BACKEND says whether it
is in use; MRCNET_PURE_PYTHON=1 disables it). pcapgen.py is `mrcnet pcap`,
bench.py `mrcnet bench codec`, samples.py holds sample packets. See docs/wire-format.md.
"""

from hosts.wire.codec import (
    build_frame,
    decode_frame,
    decode_packet,
    encode_frame,
    encode_packet,
    frame_len,
    packet_len,
)
from hosts.wire.enums import (
    ENDPOINT_QP,
    ICRC_LEN,
    IMM_OPCODES,
    ROCEV2_UDP_PORT,
    WRITE_OPCODES,
    Ecn,
    EndpointOp,
    EvMode,
    NackReason,
    Opcode,
    SackVerdict,
)
from hosts.wire.errors import WireError
from hosts.wire.ev_placement import ev_to_fields, fields_to_ev
from hosts.wire.headers import (
    Aeth,
    Bth,
    CcState,
    Eeth,
    Erth,
    ImmDt,
    Meth,
    Neth,
    Peth,
    Reth,
    Seth,
    Tseth,
)
from hosts.wire.packet import Frame, MrcPacket, Payload, Srv6Outer, ip6, ip6_str, mac, mac_str

__all__ = [
    "ENDPOINT_QP",
    "ICRC_LEN",
    "IMM_OPCODES",
    "ROCEV2_UDP_PORT",
    "WRITE_OPCODES",
    "Aeth",
    "Bth",
    "CcState",
    "Ecn",
    "Eeth",
    "EndpointOp",
    "Erth",
    "EvMode",
    "Frame",
    "ImmDt",
    "Meth",
    "MrcPacket",
    "NackReason",
    "Neth",
    "Opcode",
    "Payload",
    "Peth",
    "Reth",
    "SackVerdict",
    "Seth",
    "Srv6Outer",
    "Tseth",
    "WireError",
    "build_frame",
    "decode_frame",
    "decode_packet",
    "encode_frame",
    "encode_packet",
    "ev_to_fields",
    "fields_to_ev",
    "frame_len",
    "ip6",
    "ip6_str",
    "mac",
    "mac_str",
    "packet_len",
]

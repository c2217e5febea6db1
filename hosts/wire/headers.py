"""Typed values of every MRC header (one dataclass per header, fields in wire order).

These classes hold values only; bit positions live in hosts/wire/layout.py. Integer fields are
written modulo 2**width (PSNs wrap at 2**24 naturally); signed fields (SACK offsets) are two's
complement. Decoded opcode/op/reason fields are plain ints or the matching IntEnum member.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Bth:
    """Base Transport Header (12 B) with MRC's ``rtx`` and ``tsh`` bits.

    ``pad`` and ``tsh`` are derived by the encoder (payload padding to 4 bytes, TSETH present);
    after decoding they show what was on the wire. For probes and endpoint operations ``psn``
    carries a request id.
    """

    opcode: int = 0
    se: bool = False
    m: bool = False
    pad: int = 0
    tver: int = 0
    pkey: int = 0xFFFF
    fecn: bool = False
    becn: bool = False
    dest_qp: int = 0
    ack_req: bool = False
    rtx: bool = False
    tsh: bool = False
    psn: int = 0


@dataclass(slots=True)
class Meth:
    """Message header (4 B): RQMSN numbers WriteImm messages, MSN all requester messages."""

    rqmsn: int = 0
    msn: int = 0


@dataclass(slots=True)
class Tseth:
    """Timestamp header (4 B): tx_timestamp in units of 128 ns."""

    tx_timestamp: int = 0
    tsr: bool = False
    ftype: int = 0


@dataclass(slots=True)
class Reth:
    """RDMA extended header (16 B), present in every MRC data packet."""

    va: int = 0
    rkey: int = 0
    dma_len: int = 0


@dataclass(slots=True)
class ImmDt:
    """Immediate data (4 B)."""

    imm: int = 0


@dataclass(slots=True)
class Aeth:
    """ACK extended header (4 B, RC layout): syndrome and 24-bit MSN."""

    syndrome: int = 0
    msn: int = 0


@dataclass(slots=True)
class Seth:
    """SACK extended header (28 B).

    ``m`` is a SackVerdict, ``pr`` marks a probe answer. The triggering PSN is
    ``cack_psn + ack_psn_offset``; bitmap bit i covers PSN ``cack_psn + sack_offset + i``.
    """

    m: int = 0
    pr: bool = False
    ack_psn_offset: int = 0
    entropy: int = 0
    src_id: int = 0
    dst_id: int = 0
    cack_psn: int = 0
    cc_type: int = 0
    cc_flags: int = 0
    mpr: int = 0
    sack_offset: int = 0
    bitmap: int = 0


@dataclass(slots=True)
class CcState:
    """Congestion-control state carried after SETH (8 B)."""

    tx_timestamp: int = 0
    ooo_count: int = 0
    restore: bool = False
    rcv_cwnd_pen: int = 0
    rcvd_bytes: int = 0


@dataclass(slots=True)
class Neth:
    """NACK extended header (20 B); ``reason`` is a NackReason value."""

    reason: int = 0
    vendor: int = 0
    entropy: int = 0
    src_id: int = 0
    dst_id: int = 0
    nack_psn: int = 0
    cc_type: int = 0
    cc_flags: int = 0
    tx_timestamp: int = 0


@dataclass(slots=True)
class Peth:
    """Reliability probe header (16 B)."""

    probe_id: int = 0
    tx_timestamp: int = 0


@dataclass(slots=True)
class Erth:
    """Endpoint request header (16 B); ``op`` is an EndpointOp value."""

    op: int = 0
    port_status_mask: int = 0
    tx_timestamp: int = 0


@dataclass(slots=True)
class Eeth:
    """Endpoint response header (36 B): echoes ``op`` and the request's timestamp.

    ``port_status_mask`` is the responder's own mask; ``service_time`` is the responder's
    processing time in units of 128 ns (used for service-time compensation).
    """

    op: int = 0
    port_status_mask: int = 0
    service_time: int = 0
    tx_timestamp: int = 0

"""Public value types of the sans-I/O transport core: states, attributes, work requests, events.

Everything the agent (hosts/agent) and the API (hosts/api.py) exchange with HostCore is defined
here, as plain dataclasses and enums, so they can be logged, compared in tests and serialised.
PSNs inside the core are unbounded integers; only the wire carries them modulo 2**24.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum, IntFlag
from typing import TYPE_CHECKING, Any

from common.classes import DEFAULT_CLASSES, ClassMap, TrafficClass
from hosts.wire import MrcPacket

if TYPE_CHECKING:
    from hosts.transport.cc import CongestionControl
    from hosts.transport.loss import LossDetector
    from hosts.transport.profiles import CcProfile
    from hosts.transport.spray import SprayPolicy


class QpError(Exception):
    """Bad QP operation: unknown QPN, illegal state transition, missing/forbidden attribute."""


class QpType(Enum):
    MRC = "MRC"  # multipath, SACK, selective retransmission
    RC = "RC"  # baseline: one EV, go-back-N, cumulative ACK/NAK only


class QpState(IntEnum):
    RESET = 0
    INIT = 1
    RTR = 2
    RTS = 3
    ERR = 4


class EvState(IntEnum):
    """Per-QP state of one entropy value (mrc_ctl: GOOD, ASSUMED_BAD, DENIED; SKIP is local)."""

    GOOD = 0  # used for spraying
    SKIP = 1  # skipped once by the rotation, then GOOD again by itself
    ASSUMED_BAD = 2  # unused until an EV probe (or a reliability probe) comes back clean
    DENIED = 3  # set by the controller; only the controller brings it back


class QpAttrMask(IntFlag):
    """Which QpAttr fields a modify_qp call sets (mrc_modify_qp attr_mask)."""

    STATE = 1 << 0
    HINT = 1 << 1
    EV_PROFILE = 1 << 2
    CC_PROFILE = 1 << 3
    MPR_DEST = 1 << 4
    MAX_WIMM_DEST = 1 << 5
    MPR = 1 << 6
    MAX_WIMM = 1 << 7
    RETRY = 1 << 8
    TIMEOUT = 1 << 9
    DEST_QPN = 1 << 10
    DEST_GIDS = 1 << 11
    RQ_PSN = 1 << 12
    SQ_PSN = 1 << 13
    PATH_MTU = 1 << 14


class QpHintFlag(IntFlag):
    """QP hints given at INIT: optional features this side enables."""

    NONE = 0
    DYNAMIC_MPR = 1 << 0  # advertise / obey MPR in SACKs (effective only if both sides enable)
    TRIM_NACK = 1 << 1  # answer trimmed packets with NACK TRIMMED / TRIMMED_LASTHOP
    SVC_TIME = 1 << 2  # responder compensates reflected timestamps for its service time
    TSETH = 1 << 3  # requester puts a TSETH timestamp in every data packet


@dataclass(slots=True)
class RetryAttr:
    """mrc.h retry: linear_cnt retries at the timeout, then exp_cnt doubling ones (25 = inf)."""

    linear_cnt: int = 7
    exp_cnt: int = 0


EXP_CNT_INFINITE = 25


@dataclass(slots=True)
class QpAttr:
    """mrc_qp_attr plus the out-of-band connection fields (peer QPN, peer GID per plane, PSNs).

    ``mpr``/``mpr_dest`` are in units of 128 PSNs. ``timeout`` is the exponent of the local ACK
    timeout 1.024 us * 2**timeout. ``dest_gids[p]`` is the peer's 16-byte address on plane
    (port index) p; a plane without an entry is unusable towards that peer.
    """

    qp_state: QpState = QpState.RESET
    qp_hint: QpHintFlag = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH | QpHintFlag.SVC_TIME
    ev_profile_id: int = 0
    cc_profile_id: int = 0
    mpr_dest: int = 8
    max_wimm_dest: int = 16
    mpr: int = 8
    max_wimm: int = 16
    retry: RetryAttr = field(default_factory=RetryAttr)
    timeout: int = 14  # 1.024 us * 2**14 = 16.8 ms
    dest_qpn: int = 0
    dest_gids: tuple[bytes, ...] = ()
    rq_psn: int = 0
    sq_psn: int = 0
    path_mtu: int = 4096


class WrOpcode(Enum):
    WRITE = "WRITE"
    WRITE_WITH_IMM = "WRITE_WITH_IMM"


@dataclass(slots=True)
class SendWR:
    """A Write or WriteImm work request: local bytes [local_addr, +length) of MR ``lkey`` to
    remote [remote_addr, +length) of the peer's MR ``rkey``. ``signaled=False`` suppresses the
    success completion (errors always complete)."""

    wr_id: int
    opcode: WrOpcode
    local_addr: int
    length: int
    lkey: int
    remote_addr: int
    rkey: int
    imm: int = 0
    signaled: bool = True


@dataclass(slots=True)
class RecvWR:
    """A receive consumed by one incoming WriteImm (the data itself lands at the RETH address)."""

    wr_id: int


class WcStatus(Enum):
    SUCCESS = "SUCCESS"
    LOC_PROT_ERR = "LOC_PROT_ERR"  # local MR/lkey check failed at post time
    REM_ACCESS_ERR = "REM_ACCESS_ERR"  # peer NACKed UNEXP_EVENT (bad rkey/bounds/limit)
    REM_OP_ERR = "REM_OP_ERR"  # responder-side protocol error (this side detected it)
    RETRY_EXC_ERR = "RETRY_EXC_ERR"  # local ACK timeout / NACK retries exhausted
    WR_FLUSH_ERR = "WR_FLUSH_ERR"  # outstanding when the QP went to ERR


class WcOpcode(Enum):
    RDMA_WRITE = "RDMA_WRITE"  # send side, Write and WriteImm
    RECV_RDMA_WITH_IMM = "RECV_RDMA_WITH_IMM"  # receive side of a WriteImm


class AsyncEventKind(Enum):
    QP_FATAL = "QP_FATAL"  # QP moved to ERR (see ``detail``)
    RETRY_EXCEEDED = "RETRY_EXCEEDED"  # retry budget exhausted (QP also goes to ERR)
    REMOTE_ACCESS_ERROR = "REMOTE_ACCESS_ERROR"  # a peer attempted a bad access on our MR
    PORT_ACTIVE = "PORT_ACTIVE"
    PORT_ERR = "PORT_ERR"
    PEER_PORT_STATUS = "PEER_PORT_STATUS"  # a peer announced a new port_status_mask


@dataclass(slots=True)
class Completion:
    """One work completion for CQ ``cq`` (the API keeps the queues; the core only tags)."""

    cq: int
    qpn: int
    wr_id: int
    status: WcStatus
    opcode: WcOpcode
    byte_len: int = 0
    imm: int | None = None


@dataclass(slots=True)
class AsyncEvent:
    kind: AsyncEventKind
    qpn: int | None = None
    port: int | None = None
    detail: str = ""


@dataclass(slots=True)
class EvStateChanged:
    """EV ``ev`` (bound to local ``port``) of QP ``qpn`` moved ``old`` -> ``new``."""

    qpn: int
    profile_id: int
    ev: int
    port: int
    old: EvState
    new: EvState
    reason: str


@dataclass(slots=True)
class EndpointResponse:
    """Answer to an endpoint request this host sent (EV probe or port status update).

    ``rtt`` is measured by the core (seconds) minus the responder's reported service time.
    """

    req_id: int
    op: int
    peer_gid: bytes
    port: int
    ev: int
    rtt: float
    service_time: float
    peer_port_status_mask: int


@dataclass(slots=True)
class EndpointTimeout:
    """An endpoint request got no response within its timeout (after its retries)."""

    req_id: int
    op: int
    peer_gid: bytes
    port: int
    ev: int


@dataclass(slots=True)
class LogRecord:
    """qlog-like record: ``time`` (core clock, s), ``qpn``, ``category:event`` name, data."""

    time: float
    qpn: int
    name: str
    data: dict[str, Any]


Event = Completion | AsyncEvent | EvStateChanged | EndpointResponse | EndpointTimeout | LogRecord


@dataclass(slots=True)
class TxPacket:
    """A packet the agent must put on the wire.

    Source address is ``HostConfig.ports[port].gid``; ``ev`` goes into the UDP source port (and
    flow label / SRv6 path per path mode); ``tclass`` selects the DSCP via the class map;
    ``ecn_capable`` asks for ECT(0) (data) instead of Not-ECT (control).
    """

    pkt: MrcPacket
    port: int
    dst_gid: bytes
    ev: int
    tclass: TrafficClass
    ecn_capable: bool = False


@dataclass(slots=True)
class RxMeta:
    """Network-layer facts about a received packet that the MRC headers do not carry.

    ``ev`` is recovered from the UDP source port (and flow label) by the agent; ``ce`` is ECN
    Congestion Experienced; ``dscp`` lets the core recognise trimmed packets; ``length`` is the
    frame length (for accounting); ``rx_time`` is when the frame reached the host, on the
    core's clock (the NIC's receive timestamp; 0.0: unknown, the ``now`` of ``receive``).
    """

    port: int
    src_gid: bytes
    dst_gid: bytes
    ev: int
    dscp: int = 0
    ce: bool = False
    length: int = 0
    rx_time: float = 0.0


@dataclass(slots=True)
class PortConfig:
    """One NIC port = one plane: its address and whether the link is up."""

    gid: bytes
    up: bool = True


@dataclass(slots=True)
class HostConfig:
    """Per-host settings of the core (everything has a default except the ports).

    Timing knobs are in seconds of the caller's clock. ``cc_factory`` builds one congestion
    controller per QP from its CC profile (None: fixed window of ``default_cc_window`` bytes).
    """

    ports: list[PortConfig]
    classes: ClassMap = DEFAULT_CLASSES
    mtu: int = 4096
    ack_coalesce: int = 8  # SACK after this many new in-order packets ...
    ack_delay: float = 20e-6  # ... or this long after the first unacknowledged one
    reorder_threshold: int = 32  # fast-loss: packets sent later and delivered (transmit order)
    probe_after: float | None = None  # quiet time before a reliability probe (None: timeout/4)
    per_packet_timeout: float | None = None  # optional per-packet timer (None: off)
    ev_probe_interval: float = 1e-3  # how often ASSUMED_BAD EVs are EV-probed
    endpoint_timeout: float = 5e-3  # endpoint request response timeout
    endpoint_retries: int = 3  # port status update retransmissions
    ack_backoff_cap: int = 64  # the exponential ACK-timeout backoff stops growing at T x this
    # Dynamic MPR policy (hosts/transport/mpr.py): tracking PSNs shared by this host's
    # Dynamic-MPR responder QPs (0: no policy, each advertises its negotiated MPR) and how
    # often the shares are recomputed
    mpr_budget: int = 0
    mpr_interval: float = 1e-3
    default_cc_window: int = 1 << 30  # bytes, for the default NoCongestionControl
    cc_factory: Callable[[CcProfile | None, int], CongestionControl] | None = None
    # pluggable policies: (each EV's NIC port, seed) -> spraying policy; (qpn) -> loss detector
    spray_factory: Callable[[Sequence[int], int], SprayPolicy] | None = None
    loss_factory: Callable[[int], LossDetector] | None = None
    seed: int = 1  # rotation permutations and request ids (deterministic)
    log_packets: bool = False  # emit a LogRecord per data packet sent/received (costly)
    # congestion-control samples (recovery:metrics_updated) at most this often per QP, at a
    # SACK (None: never)
    cc_log_interval: float | None = None
    rx_penalty: int = 0  # responder backpressure (CC_STATE rcv_cwnd_pen), 0..127
    # receive resources (hosts/transport/rxres.py; 0: unlimited): out-of-order PSNs held in
    # the tracking bitmap, per responder QP and per host (beyond them: NACK NO_BITMAP), and
    # their payload bytes in the packet buffer (beyond them: NACK NO_PKT_BUFFER)
    rx_bitmap_qp: int = 0
    rx_bitmap_host: int = 0
    rx_buffer_qp: int = 0
    rx_buffer_host: int = 0
    max_qps: int = 1 << 16

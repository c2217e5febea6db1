"""Sans-I/O MRC transport core (see docs/transport.md, section "Core").

HostCore is the per-host state machine: register memory, create/modify QPs, post work, feed
received packets with receive(pkt, meta, now), pull packets_to_send(now), honour get_timer() /
handle_timer(now), and drain next_event(). All value types live in hosts.transport.types;
congestion-control algorithms register by name (hosts.transport.cc).
"""

from hosts.transport.cc import (
    FIXED_WINDOW,
    CcSetup,
    CongestionControl,
    NackFeedback,
    NoCongestionControl,
    SackFeedback,
    register_congestion_control,
    registered_algorithms,
)
from hosts.transport.core import HostCore
from hosts.transport.loss import LossDetector, ReorderThreshold
from hosts.transport.memory import ALL_ACCESS, Access, MemoryRegion
from hosts.transport.profiles import CcProfile, EvEntry, EvProfile, EvProfileMode
from hosts.transport.spray import FixedRotation, SprayPolicy
from hosts.transport.types import (
    EXP_CNT_INFINITE,
    AsyncEvent,
    AsyncEventKind,
    Completion,
    EndpointResponse,
    EndpointTimeout,
    Event,
    EvState,
    EvStateChanged,
    HostConfig,
    LogRecord,
    PortConfig,
    QpAttr,
    QpAttrMask,
    QpError,
    QpHintFlag,
    QpState,
    QpType,
    RecvWR,
    RetryAttr,
    RxMeta,
    SendWR,
    TxPacket,
    WcOpcode,
    WcStatus,
    WrOpcode,
)

__all__ = [
    "ALL_ACCESS",
    "EXP_CNT_INFINITE",
    "FIXED_WINDOW",
    "Access",
    "AsyncEvent",
    "AsyncEventKind",
    "CcProfile",
    "CcSetup",
    "Completion",
    "CongestionControl",
    "EndpointResponse",
    "EndpointTimeout",
    "EvEntry",
    "EvProfile",
    "EvProfileMode",
    "EvState",
    "EvStateChanged",
    "Event",
    "FixedRotation",
    "HostConfig",
    "HostCore",
    "LogRecord",
    "LossDetector",
    "MemoryRegion",
    "NackFeedback",
    "NoCongestionControl",
    "PortConfig",
    "QpAttr",
    "QpAttrMask",
    "QpError",
    "QpHintFlag",
    "QpState",
    "QpType",
    "RecvWR",
    "ReorderThreshold",
    "RetryAttr",
    "RxMeta",
    "SackFeedback",
    "SendWR",
    "SprayPolicy",
    "TxPacket",
    "WcOpcode",
    "WcStatus",
    "WrOpcode",
    "register_congestion_control",
    "registered_algorithms",
]

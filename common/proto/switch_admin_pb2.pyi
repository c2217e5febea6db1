from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EGRESS: _ClassVar[Direction]
    INGRESS: _ClassVar[Direction]

class CaptureDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOTH: _ClassVar[CaptureDirection]
    RX: _ClassVar[CaptureDirection]
    TX: _ClassVar[CaptureDirection]
EGRESS: Direction
INGRESS: Direction
BOTH: CaptureDirection
RX: CaptureDirection
TX: CaptureDirection

class LinkParams(_message.Message):
    __slots__ = ("rate_bps", "delay_s", "loss", "qpkts", "qbytes", "overhead", "up")
    RATE_BPS_FIELD_NUMBER: _ClassVar[int]
    DELAY_S_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    QPKTS_FIELD_NUMBER: _ClassVar[int]
    QBYTES_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    rate_bps: float
    delay_s: float
    loss: float
    qpkts: int
    qbytes: int
    overhead: int
    up: bool
    def __init__(self, rate_bps: _Optional[float] = ..., delay_s: _Optional[float] = ..., loss: _Optional[float] = ..., qpkts: _Optional[int] = ..., qbytes: _Optional[int] = ..., overhead: _Optional[int] = ..., up: _Optional[bool] = ...) -> None: ...

class LinkUpdate(_message.Message):
    __slots__ = ("rate_bps", "delay_s", "loss", "qpkts", "qbytes", "overhead")
    RATE_BPS_FIELD_NUMBER: _ClassVar[int]
    DELAY_S_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    QPKTS_FIELD_NUMBER: _ClassVar[int]
    QBYTES_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    rate_bps: float
    delay_s: float
    loss: float
    qpkts: int
    qbytes: int
    overhead: int
    def __init__(self, rate_bps: _Optional[float] = ..., delay_s: _Optional[float] = ..., loss: _Optional[float] = ..., qpkts: _Optional[int] = ..., qbytes: _Optional[int] = ..., overhead: _Optional[int] = ...) -> None: ...

class QueueStats(_message.Message):
    __slots__ = ("priority", "packets", "bytes", "drops", "trims", "ecn_marks", "max_depth_pkts", "max_depth_bytes", "depth_pkts", "depth_bytes", "wait_hist", "wait_bucket_s")
    class WaitHistEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    DROPS_FIELD_NUMBER: _ClassVar[int]
    TRIMS_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKS_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_PKTS_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    DEPTH_PKTS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_HIST_FIELD_NUMBER: _ClassVar[int]
    WAIT_BUCKET_S_FIELD_NUMBER: _ClassVar[int]
    priority: int
    packets: int
    bytes: int
    drops: int
    trims: int
    ecn_marks: int
    max_depth_pkts: int
    max_depth_bytes: int
    depth_pkts: int
    depth_bytes: int
    wait_hist: _containers.ScalarMap[int, int]
    wait_bucket_s: float
    def __init__(self, priority: _Optional[int] = ..., packets: _Optional[int] = ..., bytes: _Optional[int] = ..., drops: _Optional[int] = ..., trims: _Optional[int] = ..., ecn_marks: _Optional[int] = ..., max_depth_pkts: _Optional[int] = ..., max_depth_bytes: _Optional[int] = ..., depth_pkts: _Optional[int] = ..., depth_bytes: _Optional[int] = ..., wait_hist: _Optional[_Mapping[int, int]] = ..., wait_bucket_s: _Optional[float] = ...) -> None: ...

class DirectionStats(_message.Message):
    __slots__ = ("packets", "bytes", "tail_drops", "down_drops", "loss_drops", "queues")
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TAIL_DROPS_FIELD_NUMBER: _ClassVar[int]
    DOWN_DROPS_FIELD_NUMBER: _ClassVar[int]
    LOSS_DROPS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    packets: int
    bytes: int
    tail_drops: int
    down_drops: int
    loss_drops: int
    queues: _containers.RepeatedCompositeFieldContainer[QueueStats]
    def __init__(self, packets: _Optional[int] = ..., bytes: _Optional[int] = ..., tail_drops: _Optional[int] = ..., down_drops: _Optional[int] = ..., loss_drops: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueStats, _Mapping]]] = ...) -> None: ...

class PortInfo(_message.Message):
    __slots__ = ("port", "ifname", "admin_up", "carrier_up", "egress_link", "ingress_link", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_errors", "egress", "ingress", "capture_path")
    PORT_FIELD_NUMBER: _ClassVar[int]
    IFNAME_FIELD_NUMBER: _ClassVar[int]
    ADMIN_UP_FIELD_NUMBER: _ClassVar[int]
    CARRIER_UP_FIELD_NUMBER: _ClassVar[int]
    EGRESS_LINK_FIELD_NUMBER: _ClassVar[int]
    INGRESS_LINK_FIELD_NUMBER: _ClassVar[int]
    RX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    RX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_PACKETS_FIELD_NUMBER: _ClassVar[int]
    TX_BYTES_FIELD_NUMBER: _ClassVar[int]
    TX_ERRORS_FIELD_NUMBER: _ClassVar[int]
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    INGRESS_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_PATH_FIELD_NUMBER: _ClassVar[int]
    port: int
    ifname: str
    admin_up: bool
    carrier_up: bool
    egress_link: LinkParams
    ingress_link: LinkParams
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int
    tx_errors: int
    egress: DirectionStats
    ingress: DirectionStats
    capture_path: str
    def __init__(self, port: _Optional[int] = ..., ifname: _Optional[str] = ..., admin_up: _Optional[bool] = ..., carrier_up: _Optional[bool] = ..., egress_link: _Optional[_Union[LinkParams, _Mapping]] = ..., ingress_link: _Optional[_Union[LinkParams, _Mapping]] = ..., rx_packets: _Optional[int] = ..., rx_bytes: _Optional[int] = ..., tx_packets: _Optional[int] = ..., tx_bytes: _Optional[int] = ..., tx_errors: _Optional[int] = ..., egress: _Optional[_Union[DirectionStats, _Mapping]] = ..., ingress: _Optional[_Union[DirectionStats, _Mapping]] = ..., capture_path: _Optional[str] = ...) -> None: ...

class GetPortsRequest(_message.Message):
    __slots__ = ("ports",)
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ports: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ports: _Optional[_Iterable[int]] = ...) -> None: ...

class GetPortsResponse(_message.Message):
    __slots__ = ("name", "device_id", "ports", "counters", "timing")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_id: int
    ports: _containers.RepeatedCompositeFieldContainer[PortInfo]
    counters: _containers.ScalarMap[str, int]
    timing: Timing
    def __init__(self, name: _Optional[str] = ..., device_id: _Optional[int] = ..., ports: _Optional[_Iterable[_Union[PortInfo, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...

class GetTimingRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Timing(_message.Message):
    __slots__ = ("now", "start", "tdf", "tolerance_s", "events", "late", "behind_s", "idle_s", "max_lag_s", "late_hist", "wakeups", "moderated", "slack_s", "loop_cpu_s")
    NOW_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    TDF_FIELD_NUMBER: _ClassVar[int]
    TOLERANCE_S_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    BEHIND_S_FIELD_NUMBER: _ClassVar[int]
    IDLE_S_FIELD_NUMBER: _ClassVar[int]
    MAX_LAG_S_FIELD_NUMBER: _ClassVar[int]
    LATE_HIST_FIELD_NUMBER: _ClassVar[int]
    WAKEUPS_FIELD_NUMBER: _ClassVar[int]
    MODERATED_FIELD_NUMBER: _ClassVar[int]
    SLACK_S_FIELD_NUMBER: _ClassVar[int]
    LOOP_CPU_S_FIELD_NUMBER: _ClassVar[int]
    now: float
    start: float
    tdf: float
    tolerance_s: float
    events: int
    late: int
    behind_s: float
    idle_s: float
    max_lag_s: float
    late_hist: _containers.RepeatedScalarFieldContainer[int]
    wakeups: int
    moderated: int
    slack_s: float
    loop_cpu_s: float
    def __init__(self, now: _Optional[float] = ..., start: _Optional[float] = ..., tdf: _Optional[float] = ..., tolerance_s: _Optional[float] = ..., events: _Optional[int] = ..., late: _Optional[int] = ..., behind_s: _Optional[float] = ..., idle_s: _Optional[float] = ..., max_lag_s: _Optional[float] = ..., late_hist: _Optional[_Iterable[int]] = ..., wakeups: _Optional[int] = ..., moderated: _Optional[int] = ..., slack_s: _Optional[float] = ..., loop_cpu_s: _Optional[float] = ...) -> None: ...

class SetLinkRequest(_message.Message):
    __slots__ = ("port", "direction", "update")
    PORT_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    port: int
    direction: Direction
    update: LinkUpdate
    def __init__(self, port: _Optional[int] = ..., direction: _Optional[_Union[Direction, str]] = ..., update: _Optional[_Union[LinkUpdate, _Mapping]] = ...) -> None: ...

class SetPortAdminRequest(_message.Message):
    __slots__ = ("port", "up")
    PORT_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    port: int
    up: bool
    def __init__(self, port: _Optional[int] = ..., up: _Optional[bool] = ...) -> None: ...

class StartCaptureRequest(_message.Message):
    __slots__ = ("port", "path", "direction", "snaplen")
    PORT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    SNAPLEN_FIELD_NUMBER: _ClassVar[int]
    port: int
    path: str
    direction: CaptureDirection
    snaplen: int
    def __init__(self, port: _Optional[int] = ..., path: _Optional[str] = ..., direction: _Optional[_Union[CaptureDirection, str]] = ..., snaplen: _Optional[int] = ...) -> None: ...

class StopCaptureRequest(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...

class CaptureInfo(_message.Message):
    __slots__ = ("port", "path", "packets", "active")
    PORT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    port: int
    path: str
    packets: int
    active: bool
    def __init__(self, port: _Optional[int] = ..., path: _Optional[str] = ..., packets: _Optional[int] = ..., active: _Optional[bool] = ...) -> None: ...

from common.proto import switch_admin_pb2 as _switch_admin_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProfileState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROFILE_INIT: _ClassVar[ProfileState]
    PROFILE_OFFLINE: _ClassVar[ProfileState]
    PROFILE_ONLINE: _ClassVar[ProfileState]

class EvState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EV_STATE_UNSPECIFIED: _ClassVar[EvState]
    EV_GOOD: _ClassVar[EvState]
    EV_ASSUMED_BAD: _ClassVar[EvState]
    EV_DENIED: _ClassVar[EvState]
    EV_UNKNOWN: _ClassVar[EvState]

class EvFmtMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EV_FMT_UNSPECIFIED: _ClassVar[EvFmtMode]
    EV_FMT_STEV: _ClassVar[EvFmtMode]
    EV_FMT_SRV6: _ClassVar[EvFmtMode]
    EV_FMT_UDP: _ClassVar[EvFmtMode]

class EvMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EV_MODE_UNSPECIFIED: _ClassVar[EvMode]
    EV_MODE_AUTO: _ClassVar[EvMode]
    EV_MODE_EXP: _ClassVar[EvMode]
    EV_MODE_GEN: _ClassVar[EvMode]

class EvOpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EV_OP_UNSPECIFIED: _ClassVar[EvOpType]
    REPLACE_EV: _ClassVar[EvOpType]
    MODIFY_EV_STATE: _ClassVar[EvOpType]
    QUERY_EV_STATE: _ClassVar[EvOpType]
    QUERY_EV_ARRAY: _ClassVar[EvOpType]

class PortAdminState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PORT_ADMIN_UNSPECIFIED: _ClassVar[PortAdminState]
    PORT_ADMIN_ENABLED: _ClassVar[PortAdminState]
    PORT_ADMIN_DISABLED: _ClassVar[PortAdminState]

class PortOperState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PORT_OPER_UNKNOWN: _ClassVar[PortOperState]
    PORT_OPER_UP: _ClassVar[PortOperState]
    PORT_OPER_DOWN: _ClassVar[PortOperState]

class EpOpType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EP_OP_UNSPECIFIED: _ClassVar[EpOpType]
    EP_OP_EV_PROBE: _ClassVar[EpOpType]
    EP_OP_PORT_STATUS_UPDATE: _ClassVar[EpOpType]
PROFILE_INIT: ProfileState
PROFILE_OFFLINE: ProfileState
PROFILE_ONLINE: ProfileState
EV_STATE_UNSPECIFIED: EvState
EV_GOOD: EvState
EV_ASSUMED_BAD: EvState
EV_DENIED: EvState
EV_UNKNOWN: EvState
EV_FMT_UNSPECIFIED: EvFmtMode
EV_FMT_STEV: EvFmtMode
EV_FMT_SRV6: EvFmtMode
EV_FMT_UDP: EvFmtMode
EV_MODE_UNSPECIFIED: EvMode
EV_MODE_AUTO: EvMode
EV_MODE_EXP: EvMode
EV_MODE_GEN: EvMode
EV_OP_UNSPECIFIED: EvOpType
REPLACE_EV: EvOpType
MODIFY_EV_STATE: EvOpType
QUERY_EV_STATE: EvOpType
QUERY_EV_ARRAY: EvOpType
PORT_ADMIN_UNSPECIFIED: PortAdminState
PORT_ADMIN_ENABLED: PortAdminState
PORT_ADMIN_DISABLED: PortAdminState
PORT_OPER_UNKNOWN: PortOperState
PORT_OPER_UP: PortOperState
PORT_OPER_DOWN: PortOperState
EP_OP_UNSPECIFIED: EpOpType
EP_OP_EV_PROBE: EpOpType
EP_OP_PORT_STATUS_UPDATE: EpOpType

class Ev(_message.Message):
    __slots__ = ("value", "port", "srv6_container")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SRV6_CONTAINER_FIELD_NUMBER: _ClassVar[int]
    value: int
    port: int
    srv6_container: bytes
    def __init__(self, value: _Optional[int] = ..., port: _Optional[int] = ..., srv6_container: _Optional[bytes] = ...) -> None: ...

class QueryVersionRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueryVersionResponse(_message.Message):
    __slots__ = ("current_version", "last_supported_version")
    CURRENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    current_version: str
    last_supported_version: str
    def __init__(self, current_version: _Optional[str] = ..., last_supported_version: _Optional[str] = ...) -> None: ...

class QueryDeviceRequest(_message.Message):
    __slots__ = ("host",)
    HOST_FIELD_NUMBER: _ClassVar[int]
    host: str
    def __init__(self, host: _Optional[str] = ...) -> None: ...

class DeviceAttr(_message.Message):
    __slots__ = ("protocol_version_mask", "ev_max_fmt_profiles", "ev_max_profiles", "ev_max_count", "ev_free_count", "ev_max_count_profile", "ev_count_align", "ev_max_width", "ev_fmt_modes", "ev_modes", "ev_op_max_entries", "cc_max_profiles", "cc_algorithms", "phy_port_mask", "capabilities")
    PROTOCOL_VERSION_MASK_FIELD_NUMBER: _ClassVar[int]
    EV_MAX_FMT_PROFILES_FIELD_NUMBER: _ClassVar[int]
    EV_MAX_PROFILES_FIELD_NUMBER: _ClassVar[int]
    EV_MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    EV_FREE_COUNT_FIELD_NUMBER: _ClassVar[int]
    EV_MAX_COUNT_PROFILE_FIELD_NUMBER: _ClassVar[int]
    EV_COUNT_ALIGN_FIELD_NUMBER: _ClassVar[int]
    EV_MAX_WIDTH_FIELD_NUMBER: _ClassVar[int]
    EV_FMT_MODES_FIELD_NUMBER: _ClassVar[int]
    EV_MODES_FIELD_NUMBER: _ClassVar[int]
    EV_OP_MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CC_MAX_PROFILES_FIELD_NUMBER: _ClassVar[int]
    CC_ALGORITHMS_FIELD_NUMBER: _ClassVar[int]
    PHY_PORT_MASK_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    protocol_version_mask: int
    ev_max_fmt_profiles: int
    ev_max_profiles: int
    ev_max_count: int
    ev_free_count: int
    ev_max_count_profile: int
    ev_count_align: int
    ev_max_width: int
    ev_fmt_modes: _containers.RepeatedScalarFieldContainer[EvFmtMode]
    ev_modes: _containers.RepeatedScalarFieldContainer[EvMode]
    ev_op_max_entries: int
    cc_max_profiles: int
    cc_algorithms: _containers.RepeatedScalarFieldContainer[str]
    phy_port_mask: int
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, protocol_version_mask: _Optional[int] = ..., ev_max_fmt_profiles: _Optional[int] = ..., ev_max_profiles: _Optional[int] = ..., ev_max_count: _Optional[int] = ..., ev_free_count: _Optional[int] = ..., ev_max_count_profile: _Optional[int] = ..., ev_count_align: _Optional[int] = ..., ev_max_width: _Optional[int] = ..., ev_fmt_modes: _Optional[_Iterable[_Union[EvFmtMode, str]]] = ..., ev_modes: _Optional[_Iterable[_Union[EvMode, str]]] = ..., ev_op_max_entries: _Optional[int] = ..., cc_max_profiles: _Optional[int] = ..., cc_algorithms: _Optional[_Iterable[str]] = ..., phy_port_mask: _Optional[int] = ..., capabilities: _Optional[_Iterable[str]] = ...) -> None: ...

class QueryPortRequest(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class ModifyPortRequest(_message.Message):
    __slots__ = ("host", "port", "admin_state")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    admin_state: PortAdminState
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ..., admin_state: _Optional[_Union[PortAdminState, str]] = ...) -> None: ...

class PortAttr(_message.Message):
    __slots__ = ("host", "port", "admin_state", "oper_state", "gid", "mac", "plane")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    OPER_STATE_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    admin_state: PortAdminState
    oper_state: PortOperState
    gid: str
    mac: str
    plane: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ..., admin_state: _Optional[_Union[PortAdminState, str]] = ..., oper_state: _Optional[_Union[PortOperState, str]] = ..., gid: _Optional[str] = ..., mac: _Optional[str] = ..., plane: _Optional[int] = ...) -> None: ...

class FieldWidths(_message.Message):
    __slots__ = ("widths",)
    WIDTHS_FIELD_NUMBER: _ClassVar[int]
    widths: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, widths: _Optional[_Iterable[int]] = ...) -> None: ...

class EvFmtProfile(_message.Message):
    __slots__ = ("id", "state", "mode", "field_widths")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FIELD_WIDTHS_FIELD_NUMBER: _ClassVar[int]
    id: int
    state: ProfileState
    mode: EvFmtMode
    field_widths: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., mode: _Optional[_Union[EvFmtMode, str]] = ..., field_widths: _Optional[_Iterable[int]] = ...) -> None: ...

class ModifyEvFmtProfileRequest(_message.Message):
    __slots__ = ("profile_id", "state", "mode", "fields")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    state: ProfileState
    mode: EvFmtMode
    fields: FieldWidths
    def __init__(self, profile_id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., mode: _Optional[_Union[EvFmtMode, str]] = ..., fields: _Optional[_Union[FieldWidths, _Mapping]] = ...) -> None: ...

class QueryEvFmtProfileRequest(_message.Message):
    __slots__ = ("profile_id",)
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    def __init__(self, profile_id: _Optional[int] = ...) -> None: ...

class EvField(_message.Message):
    __slots__ = ("width", "init_val", "min_val", "max_val", "mask")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    INIT_VAL_FIELD_NUMBER: _ClassVar[int]
    MIN_VAL_FIELD_NUMBER: _ClassVar[int]
    MAX_VAL_FIELD_NUMBER: _ClassVar[int]
    MASK_FIELD_NUMBER: _ClassVar[int]
    width: int
    init_val: int
    min_val: int
    max_val: int
    mask: int
    def __init__(self, width: _Optional[int] = ..., init_val: _Optional[int] = ..., min_val: _Optional[int] = ..., max_val: _Optional[int] = ..., mask: _Optional[int] = ...) -> None: ...

class EvFields(_message.Message):
    __slots__ = ("fields",)
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedCompositeFieldContainer[EvField]
    def __init__(self, fields: _Optional[_Iterable[_Union[EvField, _Mapping]]] = ...) -> None: ...

class EventMask(_message.Message):
    __slots__ = ("states",)
    STATES_FIELD_NUMBER: _ClassVar[int]
    states: _containers.RepeatedScalarFieldContainer[EvState]
    def __init__(self, states: _Optional[_Iterable[_Union[EvState, str]]] = ...) -> None: ...

class EvOpEntry(_message.Message):
    __slots__ = ("ev", "ev_new", "state", "all_copies")
    EV_FIELD_NUMBER: _ClassVar[int]
    EV_NEW_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALL_COPIES_FIELD_NUMBER: _ClassVar[int]
    ev: Ev
    ev_new: Ev
    state: EvState
    all_copies: bool
    def __init__(self, ev: _Optional[_Union[Ev, _Mapping]] = ..., ev_new: _Optional[_Union[Ev, _Mapping]] = ..., state: _Optional[_Union[EvState, str]] = ..., all_copies: _Optional[bool] = ...) -> None: ...

class EvOp(_message.Message):
    __slots__ = ("op", "entries")
    OP_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    op: EvOpType
    entries: _containers.RepeatedCompositeFieldContainer[EvOpEntry]
    def __init__(self, op: _Optional[_Union[EvOpType, str]] = ..., entries: _Optional[_Iterable[_Union[EvOpEntry, _Mapping]]] = ...) -> None: ...

class EvProfile(_message.Message):
    __slots__ = ("id", "state", "mode", "fmt_profile_id", "ev_count", "ev_min_active", "event_states", "fields", "evs", "denied", "fmt_mode", "lb_policy")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FMT_PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_COUNT_FIELD_NUMBER: _ClassVar[int]
    EV_MIN_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    EVENT_STATES_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    EVS_FIELD_NUMBER: _ClassVar[int]
    DENIED_FIELD_NUMBER: _ClassVar[int]
    FMT_MODE_FIELD_NUMBER: _ClassVar[int]
    LB_POLICY_FIELD_NUMBER: _ClassVar[int]
    id: int
    state: ProfileState
    mode: EvMode
    fmt_profile_id: int
    ev_count: int
    ev_min_active: int
    event_states: _containers.RepeatedScalarFieldContainer[EvState]
    fields: _containers.RepeatedCompositeFieldContainer[EvField]
    evs: _containers.RepeatedCompositeFieldContainer[Ev]
    denied: _containers.RepeatedCompositeFieldContainer[Ev]
    fmt_mode: EvFmtMode
    lb_policy: str
    def __init__(self, id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., mode: _Optional[_Union[EvMode, str]] = ..., fmt_profile_id: _Optional[int] = ..., ev_count: _Optional[int] = ..., ev_min_active: _Optional[int] = ..., event_states: _Optional[_Iterable[_Union[EvState, str]]] = ..., fields: _Optional[_Iterable[_Union[EvField, _Mapping]]] = ..., evs: _Optional[_Iterable[_Union[Ev, _Mapping]]] = ..., denied: _Optional[_Iterable[_Union[Ev, _Mapping]]] = ..., fmt_mode: _Optional[_Union[EvFmtMode, str]] = ..., lb_policy: _Optional[str] = ...) -> None: ...

class ModifyEvProfileRequest(_message.Message):
    __slots__ = ("profile_id", "state", "mode", "fmt_profile_id", "ev_count", "ev_min_active", "event_mask", "fields", "ev_op", "lb_policy")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FMT_PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_COUNT_FIELD_NUMBER: _ClassVar[int]
    EV_MIN_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    EVENT_MASK_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    EV_OP_FIELD_NUMBER: _ClassVar[int]
    LB_POLICY_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    state: ProfileState
    mode: EvMode
    fmt_profile_id: int
    ev_count: int
    ev_min_active: int
    event_mask: EventMask
    fields: EvFields
    ev_op: EvOp
    lb_policy: str
    def __init__(self, profile_id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., mode: _Optional[_Union[EvMode, str]] = ..., fmt_profile_id: _Optional[int] = ..., ev_count: _Optional[int] = ..., ev_min_active: _Optional[int] = ..., event_mask: _Optional[_Union[EventMask, _Mapping]] = ..., fields: _Optional[_Union[EvFields, _Mapping]] = ..., ev_op: _Optional[_Union[EvOp, _Mapping]] = ..., lb_policy: _Optional[str] = ...) -> None: ...

class ModifyEvProfileResponse(_message.Message):
    __slots__ = ("profile",)
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    profile: EvProfile
    def __init__(self, profile: _Optional[_Union[EvProfile, _Mapping]] = ...) -> None: ...

class QueryEvProfileRequest(_message.Message):
    __slots__ = ("profile_id", "ev_op")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_OP_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    ev_op: EvOp
    def __init__(self, profile_id: _Optional[int] = ..., ev_op: _Optional[_Union[EvOp, _Mapping]] = ...) -> None: ...

class QueryEvProfileResponse(_message.Message):
    __slots__ = ("profile", "results")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    profile: EvProfile
    results: _containers.RepeatedCompositeFieldContainer[EvOpEntry]
    def __init__(self, profile: _Optional[_Union[EvProfile, _Mapping]] = ..., results: _Optional[_Iterable[_Union[EvOpEntry, _Mapping]]] = ...) -> None: ...

class NsccConfig(_message.Message):
    __slots__ = ("disable_qa", "adjust_bytes_threshold", "adjust_period_threshold_ns", "base_rtt_ns", "eta", "fi", "fi_scale", "gamma", "max_md_jump", "max_cwnd", "qa_gate", "qa_threshold_ns", "target_delay_ns", "alpha", "mtu", "unmarked_last_hop")
    DISABLE_QA_FIELD_NUMBER: _ClassVar[int]
    ADJUST_BYTES_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    ADJUST_PERIOD_THRESHOLD_NS_FIELD_NUMBER: _ClassVar[int]
    BASE_RTT_NS_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    FI_FIELD_NUMBER: _ClassVar[int]
    FI_SCALE_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    MAX_MD_JUMP_FIELD_NUMBER: _ClassVar[int]
    MAX_CWND_FIELD_NUMBER: _ClassVar[int]
    QA_GATE_FIELD_NUMBER: _ClassVar[int]
    QA_THRESHOLD_NS_FIELD_NUMBER: _ClassVar[int]
    TARGET_DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    UNMARKED_LAST_HOP_FIELD_NUMBER: _ClassVar[int]
    disable_qa: bool
    adjust_bytes_threshold: int
    adjust_period_threshold_ns: int
    base_rtt_ns: int
    eta: float
    fi: float
    fi_scale: float
    gamma: float
    max_md_jump: float
    max_cwnd: int
    qa_gate: int
    qa_threshold_ns: int
    target_delay_ns: int
    alpha: float
    mtu: int
    unmarked_last_hop: bool
    def __init__(self, disable_qa: _Optional[bool] = ..., adjust_bytes_threshold: _Optional[int] = ..., adjust_period_threshold_ns: _Optional[int] = ..., base_rtt_ns: _Optional[int] = ..., eta: _Optional[float] = ..., fi: _Optional[float] = ..., fi_scale: _Optional[float] = ..., gamma: _Optional[float] = ..., max_md_jump: _Optional[float] = ..., max_cwnd: _Optional[int] = ..., qa_gate: _Optional[int] = ..., qa_threshold_ns: _Optional[int] = ..., target_delay_ns: _Optional[int] = ..., alpha: _Optional[float] = ..., mtu: _Optional[int] = ..., unmarked_last_hop: _Optional[bool] = ...) -> None: ...

class CcProfile(_message.Message):
    __slots__ = ("id", "state", "algorithm", "nscc")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    NSCC_FIELD_NUMBER: _ClassVar[int]
    id: int
    state: ProfileState
    algorithm: str
    nscc: NsccConfig
    def __init__(self, id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., algorithm: _Optional[str] = ..., nscc: _Optional[_Union[NsccConfig, _Mapping]] = ...) -> None: ...

class ModifyCcProfileRequest(_message.Message):
    __slots__ = ("profile_id", "state", "algorithm", "nscc")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    NSCC_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    state: ProfileState
    algorithm: str
    nscc: NsccConfig
    def __init__(self, profile_id: _Optional[int] = ..., state: _Optional[_Union[ProfileState, str]] = ..., algorithm: _Optional[str] = ..., nscc: _Optional[_Union[NsccConfig, _Mapping]] = ...) -> None: ...

class QueryCcProfileRequest(_message.Message):
    __slots__ = ("profile_id",)
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    def __init__(self, profile_id: _Optional[int] = ...) -> None: ...

class WatchEvEventsRequest(_message.Message):
    __slots__ = ("profile_ids", "queue_depth")
    PROFILE_IDS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    profile_ids: _containers.RepeatedScalarFieldContainer[int]
    queue_depth: int
    def __init__(self, profile_ids: _Optional[_Iterable[int]] = ..., queue_depth: _Optional[int] = ...) -> None: ...

class EvEvent(_message.Message):
    __slots__ = ("profile_id", "ev", "state", "drop_count", "host", "qpn", "seq")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DROP_COUNT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    QPN_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    ev: Ev
    state: EvState
    drop_count: int
    host: str
    qpn: int
    seq: int
    def __init__(self, profile_id: _Optional[int] = ..., ev: _Optional[_Union[Ev, _Mapping]] = ..., state: _Optional[_Union[EvState, str]] = ..., drop_count: _Optional[int] = ..., host: _Optional[str] = ..., qpn: _Optional[int] = ..., seq: _Optional[int] = ...) -> None: ...

class EpRequest(_message.Message):
    __slots__ = ("req_id", "sgid", "dgid", "ev_fmt_mode", "req_ev", "port_status")
    REQ_ID_FIELD_NUMBER: _ClassVar[int]
    SGID_FIELD_NUMBER: _ClassVar[int]
    DGID_FIELD_NUMBER: _ClassVar[int]
    EV_FMT_MODE_FIELD_NUMBER: _ClassVar[int]
    REQ_EV_FIELD_NUMBER: _ClassVar[int]
    PORT_STATUS_FIELD_NUMBER: _ClassVar[int]
    req_id: int
    sgid: str
    dgid: str
    ev_fmt_mode: EvFmtMode
    req_ev: Ev
    port_status: int
    def __init__(self, req_id: _Optional[int] = ..., sgid: _Optional[str] = ..., dgid: _Optional[str] = ..., ev_fmt_mode: _Optional[_Union[EvFmtMode, str]] = ..., req_ev: _Optional[_Union[Ev, _Mapping]] = ..., port_status: _Optional[int] = ...) -> None: ...

class EpBatchRequest(_message.Message):
    __slots__ = ("req_tc", "op_type", "requests", "rsp_timeout_ns")
    REQ_TC_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RSP_TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    req_tc: int
    op_type: EpOpType
    requests: _containers.RepeatedCompositeFieldContainer[EpRequest]
    rsp_timeout_ns: int
    def __init__(self, req_tc: _Optional[int] = ..., op_type: _Optional[_Union[EpOpType, str]] = ..., requests: _Optional[_Iterable[_Union[EpRequest, _Mapping]]] = ..., rsp_timeout_ns: _Optional[int] = ...) -> None: ...

class EpResponse(_message.Message):
    __slots__ = ("req_id", "port", "rtt_ns", "adj_svc_time")
    REQ_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RTT_NS_FIELD_NUMBER: _ClassVar[int]
    ADJ_SVC_TIME_FIELD_NUMBER: _ClassVar[int]
    req_id: int
    port: int
    rtt_ns: int
    adj_svc_time: bool
    def __init__(self, req_id: _Optional[int] = ..., port: _Optional[int] = ..., rtt_ns: _Optional[int] = ..., adj_svc_time: _Optional[bool] = ...) -> None: ...

class EpBatchResponse(_message.Message):
    __slots__ = ("responses", "timed_out", "unanswered")
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    UNANSWERED_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[EpResponse]
    timed_out: bool
    unanswered: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, responses: _Optional[_Iterable[_Union[EpResponse, _Mapping]]] = ..., timed_out: _Optional[bool] = ..., unanswered: _Optional[_Iterable[int]] = ...) -> None: ...

class AgentPort(_message.Message):
    __slots__ = ("port", "gid", "mac", "up")
    PORT_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    port: int
    gid: str
    mac: str
    up: bool
    def __init__(self, port: _Optional[int] = ..., gid: _Optional[str] = ..., mac: _Optional[str] = ..., up: _Optional[bool] = ...) -> None: ...

class RegisterAgentRequest(_message.Message):
    __slots__ = ("host", "ports", "capabilities", "version")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    host: str
    ports: _containers.RepeatedCompositeFieldContainer[AgentPort]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    version: str
    def __init__(self, host: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[AgentPort, _Mapping]]] = ..., capabilities: _Optional[_Iterable[str]] = ..., version: _Optional[str] = ...) -> None: ...

class ProfileSnapshot(_message.Message):
    __slots__ = ("generation", "fmt_profiles", "ev_profiles", "cc_profiles")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    FMT_PROFILES_FIELD_NUMBER: _ClassVar[int]
    EV_PROFILES_FIELD_NUMBER: _ClassVar[int]
    CC_PROFILES_FIELD_NUMBER: _ClassVar[int]
    generation: int
    fmt_profiles: _containers.RepeatedCompositeFieldContainer[EvFmtProfile]
    ev_profiles: _containers.RepeatedCompositeFieldContainer[EvProfile]
    cc_profiles: _containers.RepeatedCompositeFieldContainer[CcProfile]
    def __init__(self, generation: _Optional[int] = ..., fmt_profiles: _Optional[_Iterable[_Union[EvFmtProfile, _Mapping]]] = ..., ev_profiles: _Optional[_Iterable[_Union[EvProfile, _Mapping]]] = ..., cc_profiles: _Optional[_Iterable[_Union[CcProfile, _Mapping]]] = ...) -> None: ...

class RegisterAgentResponse(_message.Message):
    __slots__ = ("agent_id", "snapshot")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    snapshot: ProfileSnapshot
    def __init__(self, agent_id: _Optional[str] = ..., snapshot: _Optional[_Union[ProfileSnapshot, _Mapping]] = ...) -> None: ...

class GetProfilesRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class UnregisterAgentRequest(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class UnregisterAgentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EvStateReport(_message.Message):
    __slots__ = ("profile_id", "ev", "state", "qpn")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    QPN_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    ev: Ev
    state: EvState
    qpn: int
    def __init__(self, profile_id: _Optional[int] = ..., ev: _Optional[_Union[Ev, _Mapping]] = ..., state: _Optional[_Union[EvState, str]] = ..., qpn: _Optional[int] = ...) -> None: ...

class ReportEvStateRequest(_message.Message):
    __slots__ = ("agent_id", "reports")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    reports: _containers.RepeatedCompositeFieldContainer[EvStateReport]
    def __init__(self, agent_id: _Optional[str] = ..., reports: _Optional[_Iterable[_Union[EvStateReport, _Mapping]]] = ...) -> None: ...

class ReportEvStateResponse(_message.Message):
    __slots__ = ("accepted",)
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    def __init__(self, accepted: _Optional[int] = ...) -> None: ...

class AgentAttach(_message.Message):
    __slots__ = ("agent_id",)
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class EpResult(_message.Message):
    __slots__ = ("corr_id", "response")
    CORR_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    corr_id: int
    response: EpResponse
    def __init__(self, corr_id: _Optional[int] = ..., response: _Optional[_Union[EpResponse, _Mapping]] = ...) -> None: ...

class PortOperReport(_message.Message):
    __slots__ = ("port", "up")
    PORT_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    port: int
    up: bool
    def __init__(self, port: _Optional[int] = ..., up: _Optional[bool] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("attach", "ep_result", "ev_state", "port_oper")
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    EP_RESULT_FIELD_NUMBER: _ClassVar[int]
    EV_STATE_FIELD_NUMBER: _ClassVar[int]
    PORT_OPER_FIELD_NUMBER: _ClassVar[int]
    attach: AgentAttach
    ep_result: EpResult
    ev_state: EvStateReport
    port_oper: PortOperReport
    def __init__(self, attach: _Optional[_Union[AgentAttach, _Mapping]] = ..., ep_result: _Optional[_Union[EpResult, _Mapping]] = ..., ev_state: _Optional[_Union[EvStateReport, _Mapping]] = ..., port_oper: _Optional[_Union[PortOperReport, _Mapping]] = ...) -> None: ...

class ProfileRemoved(_message.Message):
    __slots__ = ("kind", "profile_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    kind: str
    profile_id: int
    def __init__(self, kind: _Optional[str] = ..., profile_id: _Optional[int] = ...) -> None: ...

class EvStateUpdate(_message.Message):
    __slots__ = ("profile_id", "ev", "state")
    PROFILE_ID_FIELD_NUMBER: _ClassVar[int]
    EV_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    profile_id: int
    ev: Ev
    state: EvState
    def __init__(self, profile_id: _Optional[int] = ..., ev: _Optional[_Union[Ev, _Mapping]] = ..., state: _Optional[_Union[EvState, str]] = ...) -> None: ...

class EpCommand(_message.Message):
    __slots__ = ("corr_id", "op_type", "req_tc", "request", "timeout_ns")
    CORR_ID_FIELD_NUMBER: _ClassVar[int]
    OP_TYPE_FIELD_NUMBER: _ClassVar[int]
    REQ_TC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_NS_FIELD_NUMBER: _ClassVar[int]
    corr_id: int
    op_type: EpOpType
    req_tc: int
    request: EpRequest
    timeout_ns: int
    def __init__(self, corr_id: _Optional[int] = ..., op_type: _Optional[_Union[EpOpType, str]] = ..., req_tc: _Optional[int] = ..., request: _Optional[_Union[EpRequest, _Mapping]] = ..., timeout_ns: _Optional[int] = ...) -> None: ...

class PortAdminCommand(_message.Message):
    __slots__ = ("port", "admin_state")
    PORT_FIELD_NUMBER: _ClassVar[int]
    ADMIN_STATE_FIELD_NUMBER: _ClassVar[int]
    port: int
    admin_state: PortAdminState
    def __init__(self, port: _Optional[int] = ..., admin_state: _Optional[_Union[PortAdminState, str]] = ...) -> None: ...

class ControllerMessage(_message.Message):
    __slots__ = ("generation", "snapshot", "ev_profile", "cc_profile", "fmt_profile", "removed", "ev_state", "ep", "port_admin")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    EV_PROFILE_FIELD_NUMBER: _ClassVar[int]
    CC_PROFILE_FIELD_NUMBER: _ClassVar[int]
    FMT_PROFILE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    EV_STATE_FIELD_NUMBER: _ClassVar[int]
    EP_FIELD_NUMBER: _ClassVar[int]
    PORT_ADMIN_FIELD_NUMBER: _ClassVar[int]
    generation: int
    snapshot: ProfileSnapshot
    ev_profile: EvProfile
    cc_profile: CcProfile
    fmt_profile: EvFmtProfile
    removed: ProfileRemoved
    ev_state: EvStateUpdate
    ep: EpCommand
    port_admin: PortAdminCommand
    def __init__(self, generation: _Optional[int] = ..., snapshot: _Optional[_Union[ProfileSnapshot, _Mapping]] = ..., ev_profile: _Optional[_Union[EvProfile, _Mapping]] = ..., cc_profile: _Optional[_Union[CcProfile, _Mapping]] = ..., fmt_profile: _Optional[_Union[EvFmtProfile, _Mapping]] = ..., removed: _Optional[_Union[ProfileRemoved, _Mapping]] = ..., ev_state: _Optional[_Union[EvStateUpdate, _Mapping]] = ..., ep: _Optional[_Union[EpCommand, _Mapping]] = ..., port_admin: _Optional[_Union[PortAdminCommand, _Mapping]] = ...) -> None: ...

class StepBarrierRequest(_message.Message):
    __slots__ = ("session", "rank", "step")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    session: str
    rank: int
    step: int
    def __init__(self, session: _Optional[str] = ..., rank: _Optional[int] = ..., step: _Optional[int] = ...) -> None: ...

class StepBarrierResponse(_message.Message):
    __slots__ = ("step", "released_s")
    STEP_FIELD_NUMBER: _ClassVar[int]
    RELEASED_S_FIELD_NUMBER: _ClassVar[int]
    step: int
    released_s: float
    def __init__(self, step: _Optional[int] = ..., released_s: _Optional[float] = ...) -> None: ...

class PortView(_message.Message):
    __slots__ = ("port", "peer", "gid", "mac")
    PORT_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    MAC_FIELD_NUMBER: _ClassVar[int]
    port: int
    peer: str
    gid: str
    mac: str
    def __init__(self, port: _Optional[int] = ..., peer: _Optional[str] = ..., gid: _Optional[str] = ..., mac: _Optional[str] = ...) -> None: ...

class NodeView(_message.Message):
    __slots__ = ("name", "kind", "plane", "tier", "usid", "locator", "ports", "agent_registered")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PLANE_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    USID_FIELD_NUMBER: _ClassVar[int]
    LOCATOR_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    AGENT_REGISTERED_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    plane: int
    tier: int
    usid: int
    locator: str
    ports: _containers.RepeatedCompositeFieldContainer[PortView]
    agent_registered: bool
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., plane: _Optional[int] = ..., tier: _Optional[int] = ..., usid: _Optional[int] = ..., locator: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[PortView, _Mapping]]] = ..., agent_registered: _Optional[bool] = ...) -> None: ...

class LinkView(_message.Message):
    __slots__ = ("id", "a", "b", "rate_bps", "delay_ns", "queue_packets", "queue_bytes", "loss", "up")
    ID_FIELD_NUMBER: _ClassVar[int]
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    RATE_BPS_FIELD_NUMBER: _ClassVar[int]
    DELAY_NS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_PACKETS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    id: int
    a: str
    b: str
    rate_bps: float
    delay_ns: int
    queue_packets: int
    queue_bytes: int
    loss: float
    up: bool
    def __init__(self, id: _Optional[int] = ..., a: _Optional[str] = ..., b: _Optional[str] = ..., rate_bps: _Optional[float] = ..., delay_ns: _Optional[int] = ..., queue_packets: _Optional[int] = ..., queue_bytes: _Optional[int] = ..., loss: _Optional[float] = ..., up: _Optional[bool] = ...) -> None: ...

class TopologyView(_message.Message):
    __slots__ = ("name", "kind", "planes", "path_mode", "mtu", "base_rtt_ns", "nodes", "links")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PLANES_FIELD_NUMBER: _ClassVar[int]
    PATH_MODE_FIELD_NUMBER: _ClassVar[int]
    MTU_FIELD_NUMBER: _ClassVar[int]
    BASE_RTT_NS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    planes: int
    path_mode: str
    mtu: int
    base_rtt_ns: int
    nodes: _containers.RepeatedCompositeFieldContainer[NodeView]
    links: _containers.RepeatedCompositeFieldContainer[LinkView]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., planes: _Optional[int] = ..., path_mode: _Optional[str] = ..., mtu: _Optional[int] = ..., base_rtt_ns: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeView, _Mapping]]] = ..., links: _Optional[_Iterable[_Union[LinkView, _Mapping]]] = ...) -> None: ...

class GetTopologyRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetLinkStateRequest(_message.Message):
    __slots__ = ("link", "up")
    LINK_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    link: str
    up: bool
    def __init__(self, link: _Optional[str] = ..., up: _Optional[bool] = ...) -> None: ...

class Circuit(_message.Message):
    __slots__ = ("src", "dst")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    src: str
    dst: str
    def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ...) -> None: ...

class ReconfigureCircuitsRequest(_message.Message):
    __slots__ = ("circuits",)
    CIRCUITS_FIELD_NUMBER: _ClassVar[int]
    circuits: _containers.RepeatedCompositeFieldContainer[Circuit]
    def __init__(self, circuits: _Optional[_Iterable[_Union[Circuit, _Mapping]]] = ...) -> None: ...

class CrossConnect(_message.Message):
    __slots__ = ("in_port", "out_port")
    IN_PORT_FIELD_NUMBER: _ClassVar[int]
    OUT_PORT_FIELD_NUMBER: _ClassVar[int]
    in_port: int
    out_port: int
    def __init__(self, in_port: _Optional[int] = ..., out_port: _Optional[int] = ...) -> None: ...

class CircuitState(_message.Message):
    __slots__ = ("generation", "circuits", "cross_connects")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CIRCUITS_FIELD_NUMBER: _ClassVar[int]
    CROSS_CONNECTS_FIELD_NUMBER: _ClassVar[int]
    generation: int
    circuits: _containers.RepeatedCompositeFieldContainer[Circuit]
    cross_connects: _containers.RepeatedCompositeFieldContainer[CrossConnect]
    def __init__(self, generation: _Optional[int] = ..., circuits: _Optional[_Iterable[_Union[Circuit, _Mapping]]] = ..., cross_connects: _Optional[_Iterable[_Union[CrossConnect, _Mapping]]] = ...) -> None: ...

class GetCircuitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatisticsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AgentView(_message.Message):
    __slots__ = ("agent_id", "host", "attached", "ev_reports", "ep_results")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    ATTACHED_FIELD_NUMBER: _ClassVar[int]
    EV_REPORTS_FIELD_NUMBER: _ClassVar[int]
    EP_RESULTS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    host: str
    attached: bool
    ev_reports: int
    ep_results: int
    def __init__(self, agent_id: _Optional[str] = ..., host: _Optional[str] = ..., attached: _Optional[bool] = ..., ev_reports: _Optional[int] = ..., ep_results: _Optional[int] = ...) -> None: ...

class Statistics(_message.Message):
    __slots__ = ("counters", "agents")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    counters: _containers.ScalarMap[str, int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentView]
    def __init__(self, counters: _Optional[_Mapping[str, int]] = ..., agents: _Optional[_Iterable[_Union[AgentView, _Mapping]]] = ...) -> None: ...

class GetSwitchStatsRequest(_message.Message):
    __slots__ = ("switches", "detail")
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedScalarFieldContainer[str]
    detail: bool
    def __init__(self, switches: _Optional[_Iterable[str]] = ..., detail: _Optional[bool] = ...) -> None: ...

class SwitchStats(_message.Message):
    __slots__ = ("name", "kind", "egress_bytes", "drops", "trims", "ecn_marks", "has_timing", "timing", "detail", "error")
    class EgressBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    EGRESS_BYTES_FIELD_NUMBER: _ClassVar[int]
    DROPS_FIELD_NUMBER: _ClassVar[int]
    TRIMS_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKS_FIELD_NUMBER: _ClassVar[int]
    HAS_TIMING_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: str
    egress_bytes: _containers.ScalarMap[int, int]
    drops: int
    trims: int
    ecn_marks: int
    has_timing: bool
    timing: _switch_admin_pb2.Timing
    detail: _switch_admin_pb2.GetPortsResponse
    error: str
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[str] = ..., egress_bytes: _Optional[_Mapping[int, int]] = ..., drops: _Optional[int] = ..., trims: _Optional[int] = ..., ecn_marks: _Optional[int] = ..., has_timing: _Optional[bool] = ..., timing: _Optional[_Union[_switch_admin_pb2.Timing, _Mapping]] = ..., detail: _Optional[_Union[_switch_admin_pb2.GetPortsResponse, _Mapping]] = ..., error: _Optional[str] = ...) -> None: ...

class GetSwitchStatsResponse(_message.Message):
    __slots__ = ("switches",)
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedCompositeFieldContainer[SwitchStats]
    def __init__(self, switches: _Optional[_Iterable[_Union[SwitchStats, _Mapping]]] = ...) -> None: ...

class ReadCountersRequest(_message.Message):
    __slots__ = ("switch", "counter", "indexes")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    COUNTER_FIELD_NUMBER: _ClassVar[int]
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    switch: str
    counter: str
    indexes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, switch: _Optional[str] = ..., counter: _Optional[str] = ..., indexes: _Optional[_Iterable[int]] = ...) -> None: ...

class CounterCell(_message.Message):
    __slots__ = ("index", "packets", "bytes")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    index: int
    packets: int
    bytes: int
    def __init__(self, index: _Optional[int] = ..., packets: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class ReadCountersResponse(_message.Message):
    __slots__ = ("cells",)
    CELLS_FIELD_NUMBER: _ClassVar[int]
    cells: _containers.RepeatedCompositeFieldContainer[CounterCell]
    def __init__(self, cells: _Optional[_Iterable[_Union[CounterCell, _Mapping]]] = ...) -> None: ...

class SwitchCaptureRequest(_message.Message):
    __slots__ = ("switch", "port", "path", "direction", "snaplen")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    SNAPLEN_FIELD_NUMBER: _ClassVar[int]
    switch: str
    port: int
    path: str
    direction: _switch_admin_pb2.CaptureDirection
    snaplen: int
    def __init__(self, switch: _Optional[str] = ..., port: _Optional[int] = ..., path: _Optional[str] = ..., direction: _Optional[_Union[_switch_admin_pb2.CaptureDirection, str]] = ..., snaplen: _Optional[int] = ...) -> None: ...

class CircuitSet(_message.Message):
    __slots__ = ("circuits",)
    CIRCUITS_FIELD_NUMBER: _ClassVar[int]
    circuits: _containers.RepeatedCompositeFieldContainer[Circuit]
    def __init__(self, circuits: _Optional[_Iterable[_Union[Circuit, _Mapping]]] = ...) -> None: ...

class StartCollectiveRequest(_message.Message):
    __slots__ = ("session", "ranks", "intervals", "step_interval", "alpha_r_s", "barrier_timeout_s", "early")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    STEP_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ALPHA_R_S_FIELD_NUMBER: _ClassVar[int]
    BARRIER_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    EARLY_FIELD_NUMBER: _ClassVar[int]
    session: str
    ranks: _containers.RepeatedScalarFieldContainer[str]
    intervals: _containers.RepeatedCompositeFieldContainer[CircuitSet]
    step_interval: _containers.RepeatedScalarFieldContainer[int]
    alpha_r_s: float
    barrier_timeout_s: float
    early: _containers.RepeatedCompositeFieldContainer[EarlyReconfiguration]
    def __init__(self, session: _Optional[str] = ..., ranks: _Optional[_Iterable[str]] = ..., intervals: _Optional[_Iterable[_Union[CircuitSet, _Mapping]]] = ..., step_interval: _Optional[_Iterable[int]] = ..., alpha_r_s: _Optional[float] = ..., barrier_timeout_s: _Optional[float] = ..., early: _Optional[_Iterable[_Union[EarlyReconfiguration, _Mapping]]] = ...) -> None: ...

class EarlyReconfiguration(_message.Message):
    __slots__ = ("step", "ranks")
    STEP_FIELD_NUMBER: _ClassVar[int]
    RANKS_FIELD_NUMBER: _ClassVar[int]
    step: int
    ranks: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, step: _Optional[int] = ..., ranks: _Optional[_Iterable[int]] = ...) -> None: ...

class StepRecord(_message.Message):
    __slots__ = ("step", "interval", "first_arrival_s", "last_arrival_s", "released_s", "reconfigured", "dark_start_s", "dark_end_s", "readback", "early")
    STEP_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    FIRST_ARRIVAL_S_FIELD_NUMBER: _ClassVar[int]
    LAST_ARRIVAL_S_FIELD_NUMBER: _ClassVar[int]
    RELEASED_S_FIELD_NUMBER: _ClassVar[int]
    RECONFIGURED_FIELD_NUMBER: _ClassVar[int]
    DARK_START_S_FIELD_NUMBER: _ClassVar[int]
    DARK_END_S_FIELD_NUMBER: _ClassVar[int]
    READBACK_FIELD_NUMBER: _ClassVar[int]
    EARLY_FIELD_NUMBER: _ClassVar[int]
    step: int
    interval: int
    first_arrival_s: float
    last_arrival_s: float
    released_s: float
    reconfigured: bool
    dark_start_s: float
    dark_end_s: float
    readback: _containers.RepeatedCompositeFieldContainer[CrossConnect]
    early: bool
    def __init__(self, step: _Optional[int] = ..., interval: _Optional[int] = ..., first_arrival_s: _Optional[float] = ..., last_arrival_s: _Optional[float] = ..., released_s: _Optional[float] = ..., reconfigured: _Optional[bool] = ..., dark_start_s: _Optional[float] = ..., dark_end_s: _Optional[float] = ..., readback: _Optional[_Iterable[_Union[CrossConnect, _Mapping]]] = ..., early: _Optional[bool] = ...) -> None: ...

class CollectiveState(_message.Message):
    __slots__ = ("session", "steps", "reconfigurations", "records", "done", "error")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    RECONFIGURATIONS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    session: str
    steps: int
    reconfigurations: int
    records: _containers.RepeatedCompositeFieldContainer[StepRecord]
    done: bool
    error: str
    def __init__(self, session: _Optional[str] = ..., steps: _Optional[int] = ..., reconfigurations: _Optional[int] = ..., records: _Optional[_Iterable[_Union[StepRecord, _Mapping]]] = ..., done: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class GetCollectiveRequest(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: str
    def __init__(self, session: _Optional[str] = ...) -> None: ...

"""Which core events become qlog records, and how (never one per successful completion)."""

from __future__ import annotations

from typing import Any

from hosts.transport import (
    AsyncEvent,
    Completion,
    EndpointResponse,
    EndpointTimeout,
    EvStateChanged,
    LogRecord,
    WcStatus,
)
from hosts.transport.lognames import (
    ASYNC_EVENT,
    COMPLETION_ERROR,
    ENDPOINT_RESPONSE,
    ENDPOINT_TIMEOUT,
    EV_STATE_CHANGED,
)

QlogEntry = tuple[int | None, str, dict[str, Any]]


def qlog_record(ev: object) -> QlogEntry | None:
    """(qpn or None for the agent file, event name, data) for a core event, or None."""
    if isinstance(ev, LogRecord):
        return ev.qpn, ev.name, ev.data
    if isinstance(ev, EvStateChanged):
        return ev.qpn, EV_STATE_CHANGED, {
            "profile_id": ev.profile_id, "ev": ev.ev, "port": ev.port,
            "old": ev.old.name, "new": ev.new.name, "reason": ev.reason,
        }
    if isinstance(ev, Completion):
        if ev.status == WcStatus.SUCCESS:
            return None
        return ev.qpn, COMPLETION_ERROR, {
            "cq": ev.cq, "wr_id": ev.wr_id, "status": ev.status.value, "opcode": ev.opcode.value,
        }
    if isinstance(ev, AsyncEvent):
        return ev.qpn, ASYNC_EVENT, {
            "kind": ev.kind.value, "port": ev.port, "detail": ev.detail,
        }
    if isinstance(ev, EndpointResponse):
        return None, ENDPOINT_RESPONSE, {
            "req_id": ev.req_id, "op": int(ev.op), "peer_gid": ev.peer_gid.hex(), "port": ev.port,
            "ev": ev.ev, "rtt": ev.rtt, "service_time": ev.service_time,
            "peer_port_status_mask": ev.peer_port_status_mask,
        }
    if isinstance(ev, EndpointTimeout):
        return None, ENDPOINT_TIMEOUT, {
            "req_id": ev.req_id, "op": int(ev.op), "peer_gid": ev.peer_gid.hex(), "port": ev.port,
            "ev": ev.ev,
        }
    return None

"""Names of the structured log events (qlog ``name`` fields), defined once.

The transport core emits ``LogRecord``s under the first group; the host agent writes these
and its own events (the second group) to its qlog files (hosts/agent/qlog.py). Names follow
qlog's ``category:event`` form; the agent's own events are MRC-specific, under ``mrc:``.
docs/transport.md lists each with its data.
"""

from __future__ import annotations

# transport core (hosts/transport), LogRecord.name
QP_STATE = "qp:state"
ACK_TIMEOUT = "recovery:ack_timeout"
PACKETS_LOST = "recovery:packets_lost"
RX_ERROR = "transport:rx_error"
PACKET_SENT = "transport:packet_sent"
METRICS_UPDATED = "recovery:metrics_updated"
MPR_UPDATED = "transport:mpr_updated"

# host agent (hosts/agent)
EV_STATE_CHANGED = "mrc:ev_state_changed"
COMPLETION_ERROR = "mrc:completion_error"
ASYNC_EVENT = "mrc:async_event"
ENDPOINT_RESPONSE = "mrc:endpoint_response"
ENDPOINT_TIMEOUT = "mrc:endpoint_timeout"
PORT_STATUS = "mrc:port_status"
PORT_ADMIN = "mrc:port_admin"
METRICS_SAMPLED = "mrc:metrics_sampled"
QP_METRICS = "mrc:qp_metrics"
AGENT_ERROR = "mrc:agent_error"
BACKPRESSURE = "mrc:backpressure"

"""The agents' qlog files follow the qlog main schema's JSON-SEQ form (draft-ietf-quic-qlog-
main-schema: QlogFileSeq, TraceSeq, Event) so qvis and other qlog tools load them.

Checked on the raw bytes, independently of read_qlog: RFC 7464 framing (RS, one JSON text,
LF per record), the required fields and their types, and the ``mrc:`` namespace."""

from __future__ import annotations

import json
from pathlib import Path

from hosts.agent.qlog import QlogWriter, event_name

VANTAGE_TYPES = {"client", "server", "network", "unknown"}


def check_json_seq_qlog(path: Path) -> list[dict[str, object]]:
    raw = path.read_bytes()
    assert raw.startswith(b"\x1e") and raw.endswith(b"\n")
    records = [json.loads(r) for r in raw.split(b"\x1e")[1:]]
    header, events = records[0], records[1:]
    # QlogFileSeq
    assert header["qlog_format"] == "JSON-SEQ"
    assert isinstance(header["qlog_version"], str)
    trace = header["trace"]
    assert isinstance(trace, dict) and "events" not in trace  # events follow as records
    vp = trace["vantage_point"]
    assert vp["type"] in VANTAGE_TYPES
    common = trace["common_fields"]
    assert common["time_format"] in ("relative", "absolute", "delta")
    assert isinstance(common["reference_time"], float)
    # Event
    for ev in events:
        assert isinstance(ev["time"], int | float) and ev["time"] >= 0
        assert isinstance(ev["name"], str) and ev["name"].startswith("mrc:")
        _, _, kind = ev["name"].partition(":")
        assert kind and ":" not in kind
        assert isinstance(ev["data"], dict)
    return events


def test_agent_and_qp_files_are_main_schema_json_seq(tmp_path: Path) -> None:
    w = QlogWriter(tmp_path, "h1", t0=10.0)
    w.event(4, "mrc:qp_state_changed", {"old": "RTS", "new": "ERR"}, 10.5)
    w.event(4, "recovery:ack_timeout", {"una": 17, "retries": 2}, 11.0)  # a core record
    w.event(None, "mrc:metrics_sampled", {"rx_drops": {"malformed": 0}}, 12.0)
    w.close()
    qp = check_json_seq_qlog(tmp_path / "h1-qp4.sqlog")
    assert [e["name"] for e in qp] == ["mrc:qp_state_changed", "mrc:recovery_ack_timeout"]
    assert [e["time"] for e in qp] == [500.0, 1000.0]
    agent = check_json_seq_qlog(tmp_path / "h1-agent.sqlog")
    assert agent == [{"time": 2000.0, "name": "mrc:metrics_sampled",
                      "data": {"rx_drops": {"malformed": 0}}}]


def test_event_names_land_in_the_mrc_namespace() -> None:
    assert event_name("mrc:port_status") == "mrc:port_status"
    assert event_name("qp:state") == "mrc:qp_state"
    assert event_name("transport:rx_error") == "mrc:transport_rx_error"

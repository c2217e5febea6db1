"""Agent configuration parsing, qlog files and rtnetlink message decoding (no root needed)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from common.classes import DEFAULT_CLASSES, TrafficClass
from common.evbits import usid_container
from hosts.agent.config import ConfigError, load_config, parse_config
from hosts.agent.linkmon import IFF_LOWER_UP, IFF_UP, RTM_DELLINK, RTM_NEWLINK, parse_link_messages
from hosts.agent.qlog import QlogWriter, read_qlog
from hosts.wire import EvMode


def _base() -> dict[str, Any]:
    return {
        "name": "h1",
        "ports": [
            {"ifname": "h1p0", "mac": "02:00:00:00:01:00", "gid": "fd00::1",
             "neighbor_mac": "02:00:00:00:ff:00"},
            {"ifname": "h1p1", "mac": "02:00:00:00:01:01", "gid": "fd00:1::1",
             "neighbor_mac": "02:00:00:00:ff:01"},
        ],
    }


def test_minimal_config_gets_documented_defaults() -> None:
    cfg = parse_config(_base())
    assert cfg.name == "h1"
    assert [p.ifname for p in cfg.ports] == ["h1p0", "h1p1"]
    assert cfg.ports[0].mac == bytes([2, 0, 0, 0, 1, 0])
    assert cfg.ports[1].gid == bytes.fromhex("fd000001" + "00" * 11 + "01")
    assert cfg.ev_mode == EvMode.ECMP
    assert cfg.mtu == 4096
    assert cfg.classes is DEFAULT_CLASSES
    assert cfg.gid_port(cfg.ports[1].gid) == 1
    assert cfg.gid_port(b"\x00" * 16) is None


def test_full_config_from_file(tmp_path: Path) -> None:
    d = _base()
    d.update(
        ev_mode="srv6", mtu=2048, qlog_dir=str(tmp_path / "q"), metrics_interval=0.5,
        classes={"TRIMMABLE": 12},
        srv6_templates={"fd00:2::1": {"block": "0xfc000000",
                                      "slots": [{"base": 256, "ev_shift": 0, "ev_width": 4},
                                                {"base": 0x200}]}},
        apps=[{"target": "pkg.mod:fn", "args": {"x": 1}}],
    )
    path = tmp_path / "a.json"
    path.write_text(json.dumps(d))
    cfg = load_config(path)
    assert cfg.ev_mode == EvMode.SRV6
    assert cfg.classes.dscp[TrafficClass.TRIMMABLE] == 12
    assert cfg.classes.dscp[TrafficClass.CONTROL] == DEFAULT_CLASSES.dscp[TrafficClass.CONTROL]
    tmpl = cfg.srv6_templates[bytes.fromhex("fd000002" + "00" * 11 + "01")]
    # EV 0x5 lands in the low 4 bits of the first uSID; second uSID fixed.
    assert usid_container(tmpl, 0x5)[:8] == bytes.fromhex("fc000000" "0105" "0200")
    assert cfg.apps[0].target == "pkg.mod:fn" and cfg.apps[0].args == {"x": 1}


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.pop("ports"), "ports"),
        (lambda d: d["ports"][0].pop("gid"), "ports[0]"),
        (lambda d: d["ports"][0].update(mac="zz"), "ports[0].mac"),
        (lambda d: d["ports"][1].update(gid="fd00::1"), "own gid"),
        (lambda d: d.update(ev_mode="bogus"), "ev_mode"),
        (lambda d: d.update(mtu=100000), "mtu"),
        (lambda d: d.update(classes={"CONTROL": 10}), "distinct"),
        (lambda d: d.update(classes={"NOPE": 10}), "classes"),
        (lambda d: d.update(apps=[{"target": "nocolon"}]), "apps[0]"),
        (lambda d: d.update(ports=[d["ports"][0]] * 33), "32"),
    ],
)
def test_bad_config_names_the_field(mutate: Any, needle: str) -> None:
    d = _base()
    mutate(d)
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        parse_config(d)


def test_unreadable_config_file_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError):
        load_config(bad)
    with pytest.raises(ConfigError):
        load_config(tmp_path / "missing.json")


def test_qlog_files_per_qp_roundtrip(tmp_path: Path) -> None:
    w = QlogWriter(tmp_path, "h1", t0=100.0)
    w.event(7, "mrc:ev_state_changed", {"ev": 3, "old": "GOOD", "new": "SKIP"}, 100.25)
    w.event(None, "mrc:metrics_sampled", {"x": b"\x01\x02"}, 101.0)
    w.event(7, "mrc:async_event", {"kind": TrafficClass.CONTROL}, 102.0)
    w.close()
    header, events = read_qlog(tmp_path / "h1-qp7.sqlog")
    assert header["trace"]["common_fields"]["qpn"] == 7
    assert [e["time"] for e in events] == [250.0, 2000.0]
    assert events[0]["data"] == {"ev": 3, "old": "GOOD", "new": "SKIP"}
    assert events[1]["data"]["kind"] == "CONTROL"
    header, events = read_qlog(tmp_path / "h1-agent.sqlog")
    assert header["trace"]["common_fields"]["qpn"] is None
    assert events == [{"time": 1000.0, "name": "mrc:metrics_sampled", "data": {"x": "0102"}}]


def test_a_destroyed_qps_qlog_file_is_closed_and_a_late_event_appends(tmp_path: Path) -> None:
    w = QlogWriter(tmp_path, "h1", t0=0.0)
    w.event(7, "mrc:async_event", {"n": 1}, 1.0)
    w.close_qp(7)
    assert 7 not in w._files  # the descriptor is released
    w.event(7, "mrc:async_event", {"n": 2}, 2.0)  # reopened for appending, not truncated
    w.close()
    header, events = read_qlog(tmp_path / "h1-qp7.sqlog")
    assert header["trace"]["common_fields"]["qpn"] == 7
    assert [e["data"]["n"] for e in events] == [1, 2]


def _nl_link(mtype: int, flags: int, name: str) -> bytes:
    raw = name.encode() + b"\0"
    attr = struct.pack("=HH", 4 + len(raw), 3) + raw
    attr += b"\0" * ((4 - len(attr) % 4) % 4)
    other = struct.pack("=HHI", 8, 4, 1500)  # IFLA_MTU, ignored
    body = struct.pack("=BxHiII", 0, 1, 5, flags, 0) + other + attr
    return struct.pack("=IHHII", 16 + len(body), mtype, 0, 0, 0) + body


def test_netlink_link_messages_decode_usable_state() -> None:
    msg = (
        _nl_link(RTM_NEWLINK, IFF_UP | IFF_LOWER_UP, "h1p0")
        + _nl_link(RTM_NEWLINK, IFF_UP, "h1p1")  # admin up, no carrier
        + _nl_link(RTM_DELLINK, IFF_UP | IFF_LOWER_UP, "h1p2")
    )
    assert parse_link_messages(msg) == [("h1p0", True), ("h1p1", False), ("h1p2", False)]


def test_netlink_garbage_is_skipped_not_raised() -> None:
    good = _nl_link(RTM_NEWLINK, IFF_UP | IFF_LOWER_UP, "x")
    assert parse_link_messages(b"") == []
    assert parse_link_messages(b"\xff" * 7) == []
    assert parse_link_messages(good[:-3]) == []  # truncated message
    bad_len = struct.pack("=IHHII", 4, RTM_NEWLINK, 0, 0, 0)
    assert parse_link_messages(bad_len + good) == []


def test_qlog_summary_counts_events_and_keeps_last_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hosts.agent.qlog import main, summarize

    w = QlogWriter(tmp_path, "h9", t0=0.0)
    w.event(5, "mrc:qp_metrics", {"tx_data": 1}, 1.0)
    w.event(5, "mrc:ev_state_changed", {"ev": 1}, 1.5)
    w.event(5, "mrc:qp_metrics", {"tx_data": 7}, 3.0)
    w.close()
    s = summarize(tmp_path / "h9-qp5.sqlog")
    assert s["events"] == {"mrc:qp_metrics": 2, "mrc:ev_state_changed": 1}
    assert s["span_ms"] == 2000.0 and s["last_metrics"] == {"tx_data": 7} and s["qpn"] == 5
    assert main([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["host"] == "h9"
    (tmp_path / "bad.sqlog").write_text("\x1e{\"qlog_format\": \"JSON-SEQ\", \"qlog_version\": \"0.1\"}\n")
    assert main([str(tmp_path / "bad.sqlog")]) == 1


def test_core_knobs_reach_the_transport_core() -> None:
    from dataclasses import fields

    from hosts.agent.config import CORE_KNOBS
    from hosts.agent.corecfg import build_core
    from hosts.transport import HostConfig

    assert set(CORE_KNOBS) <= {f.name for f in fields(HostConfig)}
    d = {**_base(), "core": {"ack_coalesce": "16", "ack_delay": 2e-4, "ev_probe_interval": 0.05,
                             "probe_after": None, "endpoint_retries": 5}}
    cfg = parse_config(d)
    assert cfg.core == {"ack_coalesce": 16, "ack_delay": 2e-4, "ev_probe_interval": 0.05,
                        "probe_after": None, "endpoint_retries": 5}
    core_cfg = build_core(cfg).config
    assert (core_cfg.ack_coalesce, core_cfg.ack_delay, core_cfg.ev_probe_interval) == (16, 2e-4, 0.05)
    assert core_cfg.probe_after is None and core_cfg.endpoint_retries == 5
    untouched = build_core(parse_config(_base())).config
    assert untouched.ack_coalesce == HostConfig(ports=[]).ack_coalesce


@pytest.mark.parametrize("core, needle", [
    ({"ack_coalese": 4}, "unknown knob 'ack_coalese'"),
    ({"ack_coalesce": 0}, "config.core.ack_coalesce: 1..64"),
    ({"ack_delay": "soon"}, "config.core.ack_delay: not a number"),
    ({"ack_delay": float("nan")}, "config.core.ack_delay"),
    ({"ev_probe_interval": None}, "may not be null"),
    ({"rx_penalty": True}, "not a number"),
    ([1, 2], "config.core: must be an object"),
])
def test_bad_core_knob_names_the_field(core: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        parse_config({**_base(), "core": core})

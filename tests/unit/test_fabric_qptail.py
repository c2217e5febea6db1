"""The live view's per-QP congestion-control line (mrcnet/fabric/qptail.py) from qlog files
written the way the agents write them, records appended between polls, one half written."""

from __future__ import annotations

import json
from pathlib import Path

from mrcnet.fabric.qptail import QpTail


def _line(name: str, **data: object) -> str:
    return "\x1e" + json.dumps({"time": 1.0, "name": name, "data": data}) + "\n"


def test_the_newest_sample_per_qp_and_the_summary(tmp_path: Path) -> None:
    header = "\x1e" + json.dumps({"qlog_format": "JSON-SEQ", "qlog_version": "0.4"}) + "\n"
    a = tmp_path / "h0-qp16.sqlog"
    b = tmp_path / "h1-qp17.sqlog"
    (tmp_path / "h0-agent.sqlog").write_text(header + _line("mrc:metrics_sampled"))
    a.write_text(header + _line("mrc:recovery_metrics_updated", cwnd=4096, smoothed_rtt=0.002,
                                ecn=1, penalty=0)
                 + _line("mrc:qp_state", new="RTS")
                 + _line("mrc:recovery_metrics_updated", cwnd=8192, smoothed_rtt=0.004, ecn=3,
                         penalty=0))
    full = _line("mrc:recovery_metrics_updated", cwnd=16384, smoothed_rtt=0.006, ecn=0, penalty=9)
    b.write_text(header + full[:20])  # being written
    tail = QpTail(tmp_path)
    tail.poll()
    assert tail.latest == {("h0", 16): {"cwnd": 8192, "smoothed_rtt": 0.004, "ecn": 3,
                                        "penalty": 0}}
    with open(b, "a") as f:
        f.write(full[20:])
    tail.poll()
    assert tail.latest[("h1", 17)]["cwnd"] == 16384
    s = tail.summary()
    assert s == {"qps": 2, "cwnd_min": 8192.0, "cwnd_mean": 12288.0, "cwnd_max": 16384.0,
                 "srtt_mean": 0.005, "ecn": 3.0, "penalty_max": 9.0}
    assert QpTail(tmp_path / "none").summary() == {}

"""The latest congestion-control sample of every QP of a run, read from the agents' qlog files.

Each agent writes the core's ``recovery:metrics_updated`` records (``mrc:recovery_metrics_updated``
in qlog: the QP's NSCC window, RTT, ECN count, penalty; hosts/transport/requester.py) to
``qlog/HOST-qpN.sqlog`` (JSON-SEQ, hosts/agent/qlog.py) and flushes them with
every metrics sample (0.5 s on a fabric). ``QpTail.poll`` reads what was appended since the
last call (complete records only) and keeps the newest sample per (host, QP); ``summary`` gives
the live view's line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hosts.agent.qlog import RS, SUFFIX, event_name
from hosts.transport.lognames import METRICS_UPDATED

NAME = event_name(METRICS_UPDATED)


@dataclass
class QpTail:
    qlog_dir: Path
    latest: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    _offsets: dict[Path, int] = field(default_factory=dict)

    def poll(self) -> None:
        for path in sorted(self.qlog_dir.glob(f"*-qp*{SUFFIX}")):
            host, _, rest = path.name.partition("-qp")
            try:
                qpn = int(rest.split(".", 1)[0])
                size = path.stat().st_size
            except (ValueError, OSError):
                continue
            start = self._offsets.get(path, 0)
            if size <= start:
                continue
            with open(path, "rb") as f:
                f.seek(start)
                chunk = f.read(size - start)
            end = chunk.rfind(b"\n") + 1  # a line being written is read next time
            self._offsets[path] = start + end
            for line in chunk[:end].splitlines():
                if NAME.encode() not in line:
                    continue
                try:
                    rec = json.loads(line.lstrip(RS.encode()))
                except ValueError:
                    continue
                if rec.get("name") == NAME:
                    self.latest[(host, qpn)] = rec.get("data", {})

    def summary(self) -> dict[str, float]:
        """Over the QPs with samples: count, cwnd min/mean/max (bytes), mean smoothed RTT (s),
        ECN-marked SACKs and the largest penalty."""
        recs = list(self.latest.values())
        if not recs:
            return {}
        cwnd = [float(r.get("cwnd", 0)) for r in recs]
        rtts = [float(r["smoothed_rtt"]) for r in recs if r.get("smoothed_rtt")]
        return {
            "qps": len(recs),
            "cwnd_min": min(cwnd), "cwnd_mean": sum(cwnd) / len(cwnd), "cwnd_max": max(cwnd),
            "srtt_mean": sum(rtts) / len(rtts) if rtts else 0.0,
            "ecn": sum(float(r.get("ecn", 0)) for r in recs),
            "penalty_max": max(float(r.get("penalty", 0)) for r in recs),
        }

"""``cc.png``: one QP's congestion control over time, from its qlog.

The samples are the core's ``recovery:metrics_updated`` records (``mrc:recovery_metrics_updated``
in the qlog, every ``cc_log_interval``: 10 ms of the run's clock in fabric runs) when the QP
has any, else the agent's periodic ``mrc:qp_metrics`` records (their ``cc`` part, every 0.5 s
of wall time): a window that moves within an RTT needs the former.

Three rows: the NSCC window (``cwnd``, with ``max_wnd``), the RTT the controller reacts to
(its last sample and the averaged queueing delay, against the target delay), and the share
of acknowledgements that carried an ECN mark in each sample interval. The QP is the one the
run names (``RunOptions.cc_qp``, ``--cc-qp HOST:QPN``), else the NSCC writer QP with the most
samples; QPs with the fixed window have no such record and get no plot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hosts.agent.qlog import event_name
from hosts.transport.lognames import METRICS_UPDATED, QP_METRICS
from mrcnet.fabric.plotkit import Run

CC_SAMPLE = event_name(METRICS_UPDATED)  # the core's congestion-control samples in a qlog


class CcPlotError(ValueError):
    """A QP named for the plot that the run does not have."""


@dataclass
class CcSeries:
    host: str
    qpn: int
    t: list[float] = field(default_factory=list)  # seconds since the run's t = 0
    cwnd: list[float] = field(default_factory=list)  # bytes
    max_wnd: list[float] = field(default_factory=list)
    rtt: list[float | None] = field(default_factory=list)  # seconds
    avg_delay: list[float] = field(default_factory=list)
    target_delay: float = 0.0
    ecn_share: list[float | None] = field(default_factory=list)  # of the interval's SACKs

    @property
    def label(self) -> str:
        return f"{self.host} QP {self.qpn}"


def parse_qp(text: str) -> tuple[str, int]:
    """'h0:3' -> ('h0', 3); CcPlotError otherwise."""
    host, _, qpn = text.partition(":")
    if not host or not qpn.isdigit():
        raise CcPlotError(f"--cc-qp {text!r}: expected HOST:QPN, e.g. h0:1")
    return host, int(qpn)


def series(run_dir: Path, host: str, qpn: int, wall_t0: float) -> CcSeries:
    """The QP's NSCC samples (empty when it has none: no qlog, or the fixed window)."""
    from hosts.agent.qlog import read_qlog

    out = CcSeries(host, qpn)
    path = run_dir / "qlog" / f"{host}-qp{qpn}.sqlog"
    try:
        header, events = read_qlog(path)
    except (OSError, ValueError):
        return out
    ref = float(header["trace"]["common_fields"]["reference_time"]) / 1000.0
    fine = [(ev["time"], ev.get("data")) for ev in events if ev.get("name") == CC_SAMPLE]
    if not any(isinstance(d, dict) and "target_delay" in d for _, d in fine):
        fine = [(ev["time"], ev.get("data", {}).get("cc")) for ev in events
                if ev.get("name") == QP_METRICS]
    last: tuple[int, int] | None = None
    for ms, raw in fine:
        if not isinstance(raw, dict) or "target_delay" not in raw:
            continue
        cc: dict[str, Any] = raw
        out.t.append(ref + float(ms) / 1000.0 - wall_t0)
        out.cwnd.append(float(cc["cwnd"]))
        out.max_wnd.append(float(cc.get("max_wnd", cc["cwnd"])))
        rtt = cc.get("rtt")
        out.rtt.append(None if rtt is None else float(rtt))
        out.avg_delay.append(float(cc.get("avg_delay", 0.0)))
        out.target_delay = float(cc["target_delay"])
        now = (int(cc.get("sacks", 0)), int(cc.get("ecn", 0)))
        if last is None or now[0] <= last[0]:
            out.ecn_share.append(None)
        else:
            out.ecn_share.append((now[1] - last[1]) / (now[0] - last[0]))
        last = now
    return out


def writer_qps(run_dir: Path) -> list[tuple[str, int]]:
    """(host, qpn) of every workload writer QP, in the order of the result files."""
    out = []
    for path in sorted((run_dir / "jobs").glob("*/*-writer.result.json")):
        try:
            out.append((path.parent.name, int(json.loads(path.read_text())["qpn"])))
        except (OSError, ValueError, KeyError):
            continue
    return out


def chosen(run_dir: Path, wall_t0: float, wanted: str | None) -> CcSeries | None:
    """The named QP's series (CcPlotError when the run has no NSCC samples of it), else the
    NSCC writer QP with the most samples, else None."""
    if wanted:
        host, qpn = parse_qp(wanted)
        found = series(run_dir, host, qpn, wall_t0)
        if not found.t:
            raise CcPlotError(f"--cc-qp {wanted}: no NSCC samples of that QP in "
                              f"{run_dir / 'qlog'}")
        return found
    best: CcSeries | None = None
    for host, qpn in writer_qps(run_dir):
        found = series(run_dir, host, qpn, wall_t0)
        if found.t and (best is None or len(found.t) > len(best.t)):
            best = found
    return best


def panels(s: CcSeries) -> list[tuple[str, str, Any]]:
    """The three rows, as mrcnet/fabric/overview.py draws them."""
    def window(ax: Any, _run: Run) -> None:
        ax.step(s.t, [w / 1024 for w in s.cwnd], where="post", label="cwnd")
        ax.step(s.t, [w / 1024 for w in s.max_wnd], where="post", linestyle=":",
                label="max_wnd")
        ax.set_ylim(bottom=0)

    def delay(ax: Any, _run: Run) -> None:
        pts = [(t, r * 1e3) for t, r in zip(s.t, s.rtt) if r is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", markersize=3,
                    label="RTT (last sample)")
        ax.plot(s.t, [d * 1e3 for d in s.avg_delay], label="queueing delay (average)")
        ax.axhline(s.target_delay * 1e3, color="grey", linestyle="--", label="target delay")
        ax.set_ylim(bottom=0)

    def ecn(ax: Any, _run: Run) -> None:
        pts = [(t, e) for t, e in zip(s.t, s.ecn_share) if e is not None]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="post",
                label="ECN-marked SACKs")
        ax.set_ylim(0, 1.05)

    return [(f"NSCC window, {s.label}", "KiB", window),
            (f"RTT and queueing delay, {s.label}", "ms", delay),
            (f"ECN marks, {s.label}", "share of SACKs", ecn)]

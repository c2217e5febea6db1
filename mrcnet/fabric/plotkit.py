"""What every run plot shares: the workloads' windows, failure spans, the QPs' qlog series.

``windows`` keeps only the time the workloads ran (and link events happened): intervals
closer than ``MERGE_GAP`` seconds are one window, each padded by ``PAD``; a session that sat
at the CLI's prompt for a minute between two workloads gets two windows, not a minute of
flat lines. ``Run`` carries one run's data to the figure writers (mrcnet/fabric/overview.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts.transport.counters import RTX_COUNTERS
from mrcnet.fabric.liveview import Sample

MERGE_GAP = 2.0  # seconds of the run's clock
PAD = 0.3


@dataclass
class Run:
    run_dir: Path
    samples: list[Sample]
    link_events: list[dict[str, Any]]
    ev_events: list[dict[str, Any]]
    planes: int
    tdf: float
    wall_t0: float | None
    windows: list[tuple[float, float]]
    cc_qp: str | None = None  # the QP of cc.png (HOST:QPN; None: mrcnet/fabric/ccplot.py picks)

    @property
    def virtual(self) -> bool:
        return self.tdf != 1.0

    @property
    def xlabel(self) -> str:
        return f"virtual time (s, TDF {self.tdf:g})" if self.virtual else "time (s)"

    @property
    def end(self) -> float:
        return self.samples[-1].t


def windows(workloads: list[tuple[float, float]] | None, link_events: list[dict[str, Any]],
            first: float, last: float) -> list[tuple[float, float]]:
    """The plotted windows (module docstring); the whole sampled span without workloads."""
    spans = [(a, b) for a, b in (workloads or []) if b >= a]
    if not spans:
        return [(first, last)]
    spans += [(float(e["t"]), float(e["t"])) for e in link_events]
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a - out[-1][1] <= MERGE_GAP:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(max(first, a - PAD), min(last, b + PAD)) for a, b in out
            if min(last, b + PAD) > max(first, a - PAD)] or [(first, last)]


def failure_spans(link_events: list[dict[str, Any]], end: float
                  ) -> list[tuple[str, str, float, float]]:
    """(kind, label, start, stop) of every down period; a link still down ends at ``end``.
    Kind: ``link`` (A-B) or ``host port`` (HOST:N)."""
    down: dict[str, float] = {}
    spans = []
    for e in sorted(link_events, key=lambda e: e["t"]):
        label = str(e["link"])
        if not e["up"]:
            down.setdefault(label, e["t"])
        elif label in down:
            spans.append((_kind(label), label, down.pop(label), e["t"]))
    spans += [(_kind(label), label, t0, max(end, t0)) for label, t0 in down.items()]
    return sorted(spans, key=lambda s: s[2])


def _kind(label: str) -> str:
    return "host port" if ":" in label else "link"


SPAN_COLORS = {"link": "tab:red", "host port": "tab:purple"}


def shade(ax: Any, link_events: list[dict[str, Any]], end: float, names: bool = True,
          legend: bool = True) -> None:
    """Shade the failures (one legend entry per kind), each named at the top."""
    seen: set[str] = set()
    lo, hi = ax.get_xlim()
    for kind, label, start, stop in failure_spans(link_events, end):
        ax.axvspan(start, stop, color=SPAN_COLORS[kind], alpha=0.15, lw=0,
                   label=None if kind in seen or not legend else f"{kind} down")
        if names and lo <= start <= hi:
            ax.annotate(f"{label} down", (start, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -3), textcoords="offset points", fontsize=7, va="top",
                        color=SPAN_COLORS[kind],
                        bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 1})
        seen.add(kind)
    ax.set_xlim(lo, hi)


def finish(ax: Any, link_events: list[dict[str, Any]], end: float, ylabel: str,
           title: str, xlabel: str = "time (s)", legend: bool = True) -> None:
    """Shade the failures, label, legend outside the axes."""
    shade(ax, link_events, end)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  fontsize=8)


def save(fig: Any, path: Path, dpi: int = 100) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return path


def transitions(ev_events: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """Times at which a (host, QP, EV) went ASSUMED_BAD, and went back to GOOD from it."""
    state: dict[tuple[Any, ...], str] = {}
    bad: list[float] = []
    good: list[float] = []
    for e in sorted(ev_events, key=lambda e: e["t"]):
        key = (e["host"], e["qpn"], e["ev"], e["port"])
        prev = state.get(key, "GOOD")
        if e["state"] == "ASSUMED_BAD" and prev != "ASSUMED_BAD":
            bad.append(e["t"])
        elif e["state"] == "GOOD" and prev == "ASSUMED_BAD":
            good.append(e["t"])
        state[key] = e["state"]
    return bad, good


def _writer_metrics(run_dir: Path, wall_t0: float
                    ) -> Iterator[tuple[float, tuple[str, int], str, dict[str, Any]]]:
    """(seconds since ``wall_t0``, (host, qpn), QP class, data) of every ``mrc:qp_metrics``
    record of the workloads' writer QPs."""
    from hosts.agent.qlog import read_qlog

    for res_path in sorted((run_dir / "jobs").glob("*/*-writer.result.json")):
        job_path = res_path.with_name(res_path.name.replace(".result.json", ".job.json"))
        try:
            res, job = json.loads(res_path.read_text()), json.loads(job_path.read_text())
            key = (res_path.parent.name, int(res["qpn"]))
            header, events = read_qlog(run_dir / "qlog" / f"{key[0]}-qp{key[1]}.sqlog")
        except (OSError, ValueError, KeyError):
            continue
        ref = float(header["trace"]["common_fields"]["reference_time"]) / 1000.0
        qp_class = str(job.get("qp_type", "MRC"))
        for ev in events:
            if ev["name"] == "mrc:qp_metrics":
                yield ref + float(ev["time"]) / 1000.0 - wall_t0, key, qp_class, ev["data"]


def _cumulative(points: list[tuple[float, tuple[str, int], int]]) -> list[tuple[float, int]]:
    """Sum over QPs of each QP's latest count, at every sample time."""
    per_qp: dict[tuple[str, int], int] = {}
    series = []
    for t, key, n in sorted(points):
        per_qp[key] = n
        series.append((round(t, 3), sum(per_qp.values())))
    return series


def retransmission_series(run_dir: Path, wall_t0: float) -> dict[str, list[tuple[float, int]]]:
    """Per QP class: (seconds since ``wall_t0``, packets retransmitted so far by the writer
    QPs of that class), from the QPs' qlog ``mrc:qp_metrics`` samples (``tx_rtx``)."""
    points: dict[str, list[tuple[float, tuple[str, int], int]]] = {}
    for t, key, qp_class, data in _writer_metrics(run_dir, wall_t0):
        if "tx_rtx" in data:
            points.setdefault(qp_class, []).append((t, key, int(data["tx_rtx"])))
    return {qp_class: _cumulative(pts) for qp_class, pts in points.items()}


def retransmissions_by_trigger(run_dir: Path, wall_t0: float
                               ) -> dict[str, list[tuple[float, int]]]:
    """Per trigger (``nack``, ``sack_gap``, ``probe``, ... of hosts/transport/counters.py):
    packets retransmitted so far by every writer QP, from the same qlog samples; triggers
    that never fired are left out."""
    points: dict[str, list[tuple[float, tuple[str, int], int]]] = {}
    for t, key, _cls, data in _writer_metrics(run_dir, wall_t0):
        for name in RTX_COUNTERS:
            if name in data:
                points.setdefault(name, []).append((t, key, int(data[name])))
    out = {}
    for name, pts in points.items():
        series = _cumulative(pts)
        if series and series[-1][1] > 0:
            out[name.removeprefix("rtx_")] = series
    return out


def busiest_port(samples: list[Sample], span: tuple[float, float] | None = None
                 ) -> str | None:
    """The ``switch:port`` whose egress queue was deepest at any sample (within ``span``)."""
    best, name = 0, None
    for s in samples:
        if span is not None and not span[0] <= s.t <= span[1]:
            continue
        for key, depth in s.port_depth.items():
            if depth > best:
                best, name = depth, key
    return name


def binned(t: list[float], values: list[float], bins: int = 300,
           agg: str = "mean") -> tuple[list[float], list[float]]:
    """At most ``bins`` points over the span of ``t``: the mean (or max) of the values in each
    bin, so that dense samples (every 0.5 wall seconds under time dilation) read as a line."""
    if len(t) <= bins:
        return t, values
    lo, width = t[0], (t[-1] - t[0]) / bins or 1.0
    out_t: list[float] = []
    out_v: list[float] = []
    acc: list[float] = []
    edge = lo + width
    for x, v in zip(t, values):
        if x >= edge and acc:
            out_t.append(edge - width / 2)
            out_v.append(max(acc) if agg == "max" else sum(acc) / len(acc))
            acc = []
            edge = lo + width * (int((x - lo) / width) + 1)
        acc.append(v)
    if acc:
        out_t.append(edge - width / 2)
        out_v.append(max(acc) if agg == "max" else sum(acc) / len(acc))
    return out_t, out_v

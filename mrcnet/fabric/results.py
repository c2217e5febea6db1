"""Results of a run: ``results.json`` and PNG plots in the run folder, and a summary table.

Files (``results/runs/<run-id>/``):

- ``results.json``: options, start-up timings (wall seconds), the run's clock (``tdf``,
  ``time``: "wall" or "virtual"), ``faithful`` and ``fidelity`` (the least faithful
  workload's figures, mrcnet/fabric/fidelity.py) with any ``warnings``, workload summaries
  (verified bytes, QP errors, retransmissions, goodput against the configured capacity,
  per-flow rows, fidelity), link events (seconds since the stats clock start), EV events,
  switch counter samples, convergence lines of the controller log; every time except the
  start-up timings is on the run's clock (virtual seconds under time dilation);
- ``goodput.png``: delivered throughput per plane over time;
- ``ev_states.png``: EVs (over all QPs) currently ASSUMED_BAD over time, and the cumulative
  number of transitions to ASSUMED_BAD and of recoveries from it;
- ``retransmissions.png``: one panel per QP class (MRC, RC): packets retransmitted so far,
  summed over the writer QPs of that class, from their qlog ``mrc:qp_metrics`` samples;

every plot shades each link's (or host port's) down time as a span, one legend entry per
kind of failure, legends outside the axes;
- logs: ``controller.log``, ``switches/*.log``, ``agents/*.log``, qlog files under ``qlog/``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from mrcnet.fabric.liveview import Sample


def convergence_lines(run_dir: Path) -> list[str]:
    log = run_dir / "controller.log"
    if not log.exists():
        return []
    return [ln for ln in log.read_text(errors="replace").splitlines()
            if ln.startswith("convergence ")]


def write_json(run_dir: Path, data: dict[str, Any]) -> Path:
    path = run_dir / "results.json"
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    return path


def plot(run_dir: Path, samples: list[Sample], link_events: list[dict[str, Any]],
         ev_events: list[dict[str, Any]], planes: int, tdf: float = 1.0,
         wall_t0: float | None = None) -> list[Path]:
    """Write the PNG plots; returns their paths (none without samples). Axes are on the
    run's clock and say "virtual" under time dilation (``tdf`` > 1); ``wall_t0`` is the
    unix time of t = 0 (it places the qlog samples of the retransmission plot)."""
    if not samples:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    end = samples[-1].t
    t = [s.t for s in samples]
    virtual = tdf != 1.0
    xlabel = f"virtual time (s, TDF {tdf:g})" if virtual else "time (s)"
    per_s = "Mb per virtual s" if virtual else "Mb/s"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # matplotlib's layout notes never reach the console
        fig, ax = plt.subplots(figsize=(9, 4))
        for p in range(planes):
            ax.plot(t, [s.plane_bps[p] / 1e6 for s in samples], label=f"plane {p}")
        _finish(ax, link_events, end, f"delivered to hosts ({per_s})", "Throughput per plane",
                xlabel)
        out.append(_save(fig, run_dir / "goodput.png"))

        fig, ax = plt.subplots(figsize=(9, 4))
        ax.step(t, [s.ev_bad for s in samples], where="post", label="EVs ASSUMED_BAD now")
        bad, recovered = transitions(ev_events)
        for times, style, label in ((bad, "r--", "went ASSUMED_BAD (total)"),
                                    (recovered, "g--", "recovered to GOOD (total)")):
            if times:
                ax.plot(times, range(1, len(times) + 1), style, label=label)
        _finish(ax, link_events, end, "EVs (all QPs)", "EV states", xlabel)
        out.append(_save(fig, run_dir / "ev_states.png"))

        series = retransmission_series(run_dir, wall_t0) if wall_t0 is not None else {}
        if series:
            fig, axes = plt.subplots(len(series), 1, figsize=(9, 2.2 + 1.8 * len(series)),
                                     sharex=True, squeeze=False)
            for ax, (qp_class, points) in zip(axes[:, 0], sorted(series.items())):
                ax.step([p[0] for p in points], [p[1] for p in points], where="post",
                        label=f"{qp_class} QPs")
                _finish(ax, link_events, end, "packets retransmitted",
                        f"Retransmissions, {qp_class} QPs", xlabel)
            out.append(_save(fig, run_dir / "retransmissions.png"))
    return out


def retransmission_series(run_dir: Path, wall_t0: float) -> dict[str, list[tuple[float, int]]]:
    """Per QP class: (seconds since ``wall_t0``, packets retransmitted so far by the writer
    QPs of that class), from the QPs' qlog ``mrc:qp_metrics`` samples (``tx_rtx``)."""
    from hosts.agent.qlog import read_qlog

    latest: dict[str, dict[tuple[str, int], int]] = {}
    points: dict[str, list[tuple[float, tuple[str, int], int]]] = {}
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
            if ev["name"] == "mrc:qp_metrics" and "tx_rtx" in ev["data"]:
                t = ref + float(ev["time"]) / 1000.0 - wall_t0
                points.setdefault(qp_class, []).append((t, key, int(ev["data"]["tx_rtx"])))
    out: dict[str, list[tuple[float, int]]] = {}
    for qp_class, pts in points.items():
        per_qp = latest.setdefault(qp_class, {})
        series = []
        for t, key, rtx in sorted(pts):
            per_qp[key] = rtx
            series.append((round(t, 3), sum(per_qp.values())))
        out[qp_class] = series
    return out


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


_SPAN_COLORS = {"link": "tab:red", "host port": "tab:purple"}


def _finish(ax: Any, link_events: list[dict[str, Any]], end: float, ylabel: str,
            title: str, xlabel: str = "time (s)") -> None:
    """Shade the failures (one legend entry per kind), label, legend outside the axes."""
    seen: set[str] = set()
    for kind, label, start, stop in failure_spans(link_events, end):
        ax.axvspan(start, stop, color=_SPAN_COLORS[kind], alpha=0.15, lw=0,
                   label=None if kind in seen else f"{kind} down")
        ax.annotate(label, (start, 1.0), xycoords=("data", "axes fraction"), fontsize=7,
                    va="top", rotation=90, color=_SPAN_COLORS[kind])
        seen.add(kind)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                  fontsize=8)


def _save(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=100, bbox_inches="tight")
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


def summary_table(workloads: list[dict[str, Any]], virtual: bool = False) -> str:
    """One row per workload; ``virtual``: the times are virtual seconds (time dilation)."""
    rows = [("workload", "qp", "flows", "verified", "MiB", "QP errors", "rtx pkts",
             "virtual s" if virtual else "s", "of capacity", "faithful")]
    for w in workloads:
        fraction = w.get("goodput_fraction")
        fid = w.get("fidelity")
        rows.append((w["workload"], w["qp_type"], str(w["flows"]),
                     f"{w['verified_flows']}/{w['flows']}", f"{w['verified_bytes'] / 2**20:.1f}",
                     str(w["qp_errors"]), str(w["retransmitted_packets"]),
                     f"{w['seconds']:.2f}", "-" if fraction is None else f"{fraction:.0%}",
                     "-" if not fid else ("yes" if fid["faithful"] else "NO")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

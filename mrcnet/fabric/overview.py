"""A run's figures: ``overview.png`` (goodput per plane, EV states, retransmissions by
trigger, the queue at the busiest switch port, one row each, for a paper) and the single
plots ``goodput.png``, ``ev_states.png``, ``retransmissions.png`` and, with NSCC, ``cc.png``
(one QP's window, delay and ECN marks: mrcnet/fabric/ccplot.py).

Every figure shows the workloads' windows only (mrcnet/fabric/plotkit.py ``windows``): one
column per window, widths in proportion to their durations, sharing the y axis per row; link
and host-port failures are shaded in every panel and named in the top row.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mrcnet.fabric.plotkit import (
    Run,
    binned,
    busiest_port,
    retransmission_series,
    retransmissions_by_trigger,
    save,
    shade,
    transitions,
)

Panel = Callable[[Any, Run], None]


def _grid(run: Run, rows: int, height: float) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    spans = run.windows
    total = sum(b - a for a, b in spans) or 1.0
    ratios = [max(0.15, (b - a) / total) for a, b in spans]
    fig, axes = plt.subplots(rows, len(spans), figsize=(10, height), squeeze=False,
                             sharey="row", gridspec_kw={"width_ratios": ratios,
                                                        "wspace": 0.06, "hspace": 0.45})
    return fig, axes


def _draw(run: Run, panels: list[tuple[str, str, Panel]], path: Path, height: float,
          dpi: int = 100) -> Path:
    """One row per panel (title, y label, drawer), one column per window."""
    fig, axes = _grid(run, len(panels), height)
    for r, (title, ylabel, draw) in enumerate(panels):
        for c, (a, b) in enumerate(run.windows):
            ax = axes[r][c]
            draw(ax, run)
            ax.set_xlim(a, b)
            shade(ax, run.link_events, run.end, names=r == 0, legend=c == 0)
            ax.grid(alpha=0.3)
            if c == 0:
                ax.set_ylabel(ylabel)
                ax.set_title(title, loc="left", fontsize=10)
            else:
                ax.tick_params(labelleft=False)
            if r == len(panels) - 1:
                ax.set_xlabel(run.xlabel if len(run.windows) == 1 else f"{a:.0f}-{b:.0f} s")
        handles, labels = axes[r][0].get_legend_handles_labels()
        if handles:
            axes[r][-1].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                               borderaxespad=0.0, fontsize=8)
    if len(run.windows) > 1:
        fig.supxlabel(run.xlabel + ", workload windows only", fontsize=9)
    return save(fig, path, dpi)


def goodput(ax: Any, run: Run) -> None:
    t = [s.t for s in run.samples]
    unit = 1e9 if max((max(s.plane_bps, default=0) for s in run.samples), default=0) > 5e9 \
        else 1e6
    for p in range(run.planes):
        ax.plot(*binned(t, [s.plane_bps[p] / unit if p < len(s.plane_bps) else 0
                            for s in run.samples]), label=f"plane {p}")
    ax.set_ylim(bottom=0)


def ev_states(ax: Any, run: Run) -> None:
    ax.step([s.t for s in run.samples], [s.ev_bad for s in run.samples], where="post",
            label="EVs ASSUMED_BAD now")
    bad, recovered = transitions(run.ev_events)
    for times, style, label in ((bad, "r--", "went ASSUMED_BAD (total)"),
                                (recovered, "g--", "recovered to GOOD (total)")):
        if times:
            ax.plot(times, range(1, len(times) + 1), style, label=label)
    ax.set_ylim(bottom=0)


def _rtx_by_trigger(run: Run) -> dict[str, list[tuple[float, int]]]:
    cached = getattr(run, "_rtx_trigger", None)
    if cached is None:
        cached = (retransmissions_by_trigger(run.run_dir, run.wall_t0)
                  if run.wall_t0 is not None else {})
        run._rtx_trigger = cached  # type: ignore[attr-defined]
    return cached


def rtx_triggers(ax: Any, run: Run) -> None:
    series = _rtx_by_trigger(run)
    for name, points in sorted(series.items(), key=lambda kv: -kv[1][-1][1]):
        ax.step([p[0] for p in points], [p[1] for p in points], where="post",
                label=name.replace("_", " "))
    if not series:
        ax.text(0.5, 0.5, "no retransmissions", transform=ax.transAxes, ha="center",
                va="center", color="grey")
    ax.set_ylim(bottom=0)


def queue(ax: Any, run: Run) -> None:
    port = getattr(run, "_busiest", None)
    if port is None:
        ax.text(0.5, 0.5, "no queue sampled", transform=ax.transAxes, ha="center",
                va="center", color="grey")
        return
    t, depth = binned([s.t for s in run.samples],
                      [s.port_depth.get(port, 0) / 1024 for s in run.samples], agg="max")
    ax.fill_between(t, depth, step="mid", color="tab:orange", alpha=0.35, lw=0)
    ax.step(t, depth, where="mid", color="tab:orange", lw=1, label=f"{port} egress (max)")
    ax.set_ylim(bottom=0)


def _class_panel(qp_class: str, points: list[tuple[float, int]]) -> Panel:
    def draw(ax: Any, _run: Run) -> None:
        ax.step([p[0] for p in points], [p[1] for p in points], where="post",
                label=f"{qp_class} QPs")
        ax.set_ylim(bottom=0)
    return draw


def _cc_plot(run: Run) -> Path | None:
    """cc.png of the chosen QP (mrcnet/fabric/ccplot.py); none without NSCC samples."""
    import sys

    from mrcnet.fabric import ccplot

    if run.wall_t0 is None:
        return None
    try:
        chosen = ccplot.chosen(run.run_dir, run.wall_t0, run.cc_qp)
    except ccplot.CcPlotError as exc:  # a QP the run does not have: said, not fatal
        print(f"[mrcnet] cc.png: {exc}", file=sys.stderr)
        return None
    if chosen is None:
        return None
    return _draw(run, ccplot.panels(chosen), run.run_dir / "cc.png", 7.5)


def write_all(run: Run) -> list[Path]:
    out = []
    busiest = None
    for a, b in run.windows:
        busiest = busiest or busiest_port(run.samples, (a, b))
    run._busiest = busiest  # type: ignore[attr-defined]
    big = max((max(s.plane_bps, default=0) for s in run.samples), default=0) > 5e9
    per_s = ("Gb" if big else "Mb") + (" per virtual s" if run.virtual else "/s")
    rate_row = ("Goodput per plane (delivered to hosts)", per_s, goodput)
    ev_row = ("EV states (all QPs)", "EVs", ev_states)
    out.append(_draw(run, [
        rate_row, ev_row,
        ("Retransmissions by trigger (writer QPs, cumulative)", "packets", rtx_triggers),
        (f"Queue at the busiest switch port{f' ({busiest})' if busiest else ''}", "KiB",
         queue),
    ], run.run_dir / "overview.png", 10.5, dpi=150))
    out.append(_draw(run, [("Throughput per plane", f"delivered to hosts ({per_s})",
                            goodput)], run.run_dir / "goodput.png", 3.6))
    out.append(_draw(run, [ev_row], run.run_dir / "ev_states.png", 3.6))
    cc = _cc_plot(run)
    if cc is not None:
        out.append(cc)
    series = retransmission_series(run.run_dir, run.wall_t0) if run.wall_t0 is not None else {}
    if series:
        panels: list[tuple[str, str, Panel]] = [
            (f"Retransmissions, {qp_class} QPs", "packets retransmitted",
             _class_panel(qp_class, points)) for qp_class, points in sorted(series.items())]
        out.append(_draw(run, panels, run.run_dir / "retransmissions.png",
                         1.6 + 2.0 * len(panels)))
    return out

"""The plots of `mrcnet sim sweep`: for every swept option with a numeric value (size,
window, rate, delay, cp-delay, limit), FCT p50/p99/p100 and goodput against it, and the worst
stall where the grid has failures; one line per combination of the other swept options.
PNG files beside sweep.json, written with matplotlib's Agg backend as the project's other
plots are."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from mrcnet.sim.grid import BY_FIELD

MAX_SERIES = 12  # more lines than this are drawn, but only these get a legend entry


def _panels(rows: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """(row key, title, scale to the plotted unit)."""
    panels = [("fct_p50_s", "FCT p50 (ms)", 1e3), ("fct_p99_s", "FCT p99 (ms)", 1e3),
              ("fct_p100_s", "FCT p100 (ms)", 1e3), ("goodput_bps", "goodput (Gb/s)", 1e-9)]
    if any(r["params"]["fail"] for r in rows):
        panels.append(("worst_stall_s", "worst stall (ms)", 1e3))
    return panels


def plot(out: Path, rows: list[dict[str, Any]], swept: list[str], topology: str) -> list[Path]:
    """One PNG per numeric swept option (none when no run succeeded); their paths."""
    ok = [r for r in rows if not r["error"]]
    numeric = [f for f in swept if BY_FIELD[f].numeric is not None]
    if not ok or not numeric:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    panels = _panels(ok)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # layout notes never reach the console
        for field in numeric:
            opt = BY_FIELD[field]
            assert opt.numeric is not None
            others = [f for f in swept if f != field]
            series: dict[str, list[tuple[float, dict[str, Any]]]] = {}
            for r in ok:
                label = ", ".join(f"{BY_FIELD[f].flag.lstrip('-')} {r['swept'][f]}"
                                  for f in others) or topology
                series.setdefault(label, []).append((opt.numeric(r["params"][field]), r))
            xs = [x for pts in series.values() for x, _r in pts]
            log_x = min(xs) > 0 and max(xs) >= 10 * min(xs)
            fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4.2),
                                     squeeze=False, layout="constrained")
            colours = plt.get_cmap("tab10")
            for ax, (key, title, scale) in zip(axes[0], panels, strict=True):
                for n, (label, pts) in enumerate(series.items()):
                    pts.sort(key=lambda p: p[0])
                    got = [(x, r[key] * scale) for x, r in pts if r[key] is not None]
                    if got:  # a series keeps its colour in every panel
                        ax.plot([x for x, _y in got], [y for _x, y in got], marker="o", ms=3,
                                color=colours(n % 10), label=label)
                ax.set_title(title, fontsize=10)
                ax.set_xlabel(f"{opt.flag.lstrip('-')}" + (f" ({opt.unit})" if opt.unit else ""))
                if log_x:
                    ax.set_xscale("log")
                ax.set_ylim(bottom=0)
                ax.grid(alpha=0.3)
            if len(series) > 1:  # the first panel has every series (FCT p50)
                handles, labels = axes[0][0].get_legend_handles_labels()
                fig.legend(handles[:MAX_SERIES], labels[:MAX_SERIES], loc="outside lower center",
                           ncol=min(4, len(labels)), fontsize=8)
            fig.suptitle(f"mrcnet sim sweep on {topology}: against {opt.flag.lstrip('-')}")
            path = out / f"sweep_{opt.flag.lstrip('-')}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            files.append(path)
    return files

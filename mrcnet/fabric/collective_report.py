"""Results of collective runs: the JSON summary, a Gantt timeline and measured-vs-model bars.

Times are the run clock's (virtual seconds when the run is time-dilated; the plots say so).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mrcnet.fabric.collectives import Calibration, Outcome
from mrcnet.fabric.fidelity import combined


def summary(outcomes: Sequence[Outcome], calibration: Calibration | None,
            spec: dict[str, Any]) -> dict[str, Any]:
    """One object named as ``mrcnet harvest --json`` names things."""
    out: dict[str, Any] = dict(spec)
    if calibration is not None:
        out.update({k: v for k, v in calibration.to_json().items() if k != "samples"})
        out["calibration"] = calibration.to_json()
    out["schedules"] = {}
    for o in outcomes:
        out["schedules"][o.plan.schedule] = {
            "measured_s": o.measured_s,
            "model_s": o.model_s,
            "ratio": o.measured_s / o.model_s if o.model_s > 0 else None,
            "reconfigurations": o.reconfigurations,
            "verified": o.verified,
            "faithful": o.faithful,
        }
    out["faithful"] = combined([o.faithful for o in outcomes])
    out["verified"] = combined([o.verified for o in outcomes])
    out["tdf"] = outcomes[0].fidelity["tdf"] if outcomes and outcomes[0].fidelity else None
    if outcomes:
        best = min(o.model_s for o in outcomes)
        # schedules the model cannot tell apart (e.g. Harvest choosing every step) all count
        tied = [o.plan.schedule for o in outcomes if o.model_s <= best * (1 + 1e-9)]
        measured = min(outcomes, key=lambda o: o.measured_s).plan.schedule
        out["fastest"] = {"model": tied, "measured": measured, "agree": measured in tied}
    return out


def table(outcomes: Sequence[Outcome]) -> str:
    lines = [f"{'schedule':<14} {'measured s':>11} {'model s':>10} {'ratio':>6} "
             f"{'reconf':>6} {'verified':>8} {'faithful':>8}"]
    for o in outcomes:
        ratio = o.measured_s / o.model_s if o.model_s > 0 else float("nan")
        lines.append(f"{o.plan.schedule:<14} {o.measured_s:>11.4f} {o.model_s:>10.4f} "
                     f"{ratio:>6.3f} {o.reconfigurations:>6} {o.verified!s:>8} "
                     f"{o.faithful!s:>8}")
    return "\n".join(lines)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_timeline(outcomes: Sequence[Outcome], path: Path, time_label: str = "s") -> Path:
    """Gantt chart: one row per schedule, a bar per step (colour = topology interval), dark
    periods hatched; the model's total drawn as a marker."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.8 * len(outcomes)))
    cmap = plt.get_cmap("tab10")
    for row, o in enumerate(outcomes):
        t0 = o.started
        for rec in o.records[:-1]:
            step = rec["step"]
            m = o.steps[step - 1]
            start = rec["released_s"] - t0
            ax.barh(row, m.step_s, left=start, color=cmap(m.interval % 10), edgecolor="white")
            if rec["reconfigured"]:
                ax.barh(row, rec["dark_end_s"] - rec["dark_start_s"],
                        left=rec["dark_start_s"] - t0, color="none", edgecolor="black",
                        hatch="////", linewidth=0.5)
        ax.plot([o.model_s], [row], marker="|", markersize=22, color="black")
    ax.set_yticks(range(len(outcomes)), [o.plan.schedule for o in outcomes])
    ax.set_xlabel(f"time since the first barrier ({time_label}); hatched: OCS dark; "
                  "| : model total")
    ax.set_title("collective steps per schedule (colour = topology interval)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_bars(outcomes: Sequence[Outcome], path: Path, time_label: str = "s") -> Path:
    """Measured and model completion time per schedule."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    names = [o.plan.schedule for o in outcomes]
    xs = range(len(outcomes))
    ax.bar([x - 0.2 for x in xs], [o.measured_s for o in outcomes], 0.4, label="measured")
    ax.bar([x + 0.2 for x in xs], [o.model_s for o in outcomes], 0.4, label="model")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel(f"completion time ({time_label})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_sweep(points: Sequence[dict[str, Any]], path: Path, time_label: str = "s") -> Path:
    """Completion time of each schedule over alpha_r: model as lines, measured as markers."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [p["alpha_r_s"] for p in points]
    for i, name in enumerate(("static", "every-step", "harvest")):
        color = f"C{i}"
        ax.plot(xs, [p["schedules"][name]["model_s"] for p in points], color=color,
                linestyle="-" if name != "harvest" else "--", label=f"{name} (model)")
        ax.plot(xs, [p["schedules"][name]["measured_s"] for p in points], color=color,
                marker="o", linestyle="none", label=f"{name} (measured)")
    ax.set_xscale("symlog", linthresh=max(min(x for x in xs if x > 0), 1e-6)
                  if any(x > 0 for x in xs) else 1e-6)
    ax.set_xlabel(f"reconfiguration delay alpha_r ({time_label})")
    ax.set_ylabel(f"completion time ({time_label})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

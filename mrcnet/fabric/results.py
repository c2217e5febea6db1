"""Results of a run: ``results.json`` and PNG plots in the run folder, and a summary table.

Files (``results/runs/<run-id>/``):

- ``results.json``: options, start-up timings (wall seconds), the run's clock (``tdf``,
  ``time``: "wall" or "virtual"), ``faithful`` and ``fidelity`` (the least faithful
  workload's figures, mrcnet/fabric/fidelity.py) with any ``warnings``, workload summaries
  (verified bytes, QP errors, retransmissions, goodput against the configured capacity,
  per-flow rows, fidelity), link events (seconds since the stats clock start), EV events,
  switch counter samples, convergence lines of the controller log; every time except the
  start-up timings is on the run's clock (virtual seconds under time dilation);
- ``goodput.png``: delivered throughput per plane over time, failures (red) and restorations
  (green) marked;
- ``ev_states.png``: EVs (over all QPs) currently ASSUMED_BAD over time, and the cumulative
  number of transitions to ASSUMED_BAD and of recoveries from it;
- logs: ``controller.log``, ``switches/*.log``, ``agents/*.log``, qlog files under ``qlog/``.
"""

from __future__ import annotations

import json
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
         ev_events: list[dict[str, Any]], planes: int, tdf: float = 1.0) -> list[Path]:
    """Write the PNG plots; returns their paths (none without samples). Axes are on the
    run's clock and say "virtual" under time dilation (``tdf`` > 1)."""
    if not samples:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    t = [s.t for s in samples]
    virtual = tdf != 1.0
    xlabel = f"virtual time (s, TDF {tdf:g})" if virtual else "time (s)"
    per_s = "Mb per virtual s" if virtual else "Mb/s"
    fig, ax = plt.subplots(figsize=(8, 4))
    for p in range(planes):
        ax.plot(t, [s.plane_bps[p] / 1e6 for s in samples], label=f"plane {p}")
    _mark(ax, link_events)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"delivered to hosts ({per_s})")
    ax.set_title("Throughput per plane")
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = run_dir / "goodput.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    out.append(path)

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.step(t, [s.ev_bad for s in samples], where="post", label="EVs ASSUMED_BAD now")
    bad, recovered = transitions(ev_events)
    for times, style, label in ((bad, "r--", "went ASSUMED_BAD (total)"),
                                (recovered, "g--", "recovered to GOOD (total)")):
        if times:
            ax.plot(times, range(1, len(times) + 1), style, label=label)
    _mark(ax, link_events)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("EVs (all QPs)")
    ax.set_title("EV states")
    ax.legend(loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = run_dir / "ev_states.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    out.append(path)
    return out


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


def _mark(ax: Any, link_events: list[dict[str, Any]]) -> None:
    for e in link_events:
        ax.axvline(e["t"], color="green" if e["up"] else "red", linestyle=":",
                   label=f"{e['link']} {'up' if e['up'] else 'down'}")


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

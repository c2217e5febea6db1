"""Results of a run: ``results.json`` and PNG plots in the run folder, and a summary table.

Files (``results/runs/<run-id>/``):

- ``results.json``: options, start-up timings (wall seconds), the run's clock (``tdf``,
  ``time``: "wall" or "virtual"), ``faithful`` and ``fidelity`` (the least faithful
  workload's figures, mrcnet/fabric/fidelity.py) with any ``warnings``, workload summaries
  (verified bytes, QP errors, retransmissions, goodput against the configured capacity,
  per-flow rows, fidelity), link events (seconds since the stats clock start), EV events,
  switch counter samples, convergence lines of the controller log; every time except the
  start-up timings is on the run's clock (virtual seconds under time dilation);
- ``overview.png``: the run in one figure (mrcnet/fabric/overview.py): goodput per plane,
  EV states, retransmissions by trigger, the queue at the busiest switch port;
- ``goodput.png``: delivered throughput per plane over time;
- ``ev_states.png``: EVs (over all QPs) currently ASSUMED_BAD over time, and the cumulative
  number of transitions to ASSUMED_BAD and of recoveries from it;
- ``retransmissions.png``: one panel per QP class (MRC, RC): packets retransmitted so far,
  summed over the writer QPs of that class, from their qlog ``mrc:qp_metrics`` samples;
- ``cc.png`` (runs with NSCC): one QP's window, RTT and queueing delay against the target,
  and the share of ECN-marked acknowledgements over time (``--cc-qp``, mrcnet/fabric/ccplot.py);

every plot shows the workloads' windows only (one column each when idle time separates
them), shades each link's (or host port's) down time as a span, one legend entry per kind of
failure, legends outside the axes;
- logs: ``controller.log``, ``switches/*.log``, ``agents/*.log``, qlog files under ``qlog/``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from mrcnet.fabric.liveview import Sample
from mrcnet.fabric.plotkit import failure_spans, retransmission_series, transitions
from mrcnet.fabric.plotkit import finish as _finish

__all__ = ["_finish", "failure_spans", "plot", "retransmission_series", "summary_table",
           "transitions", "write_json"]


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
         wall_t0: float | None = None,
         workloads: list[tuple[float, float]] | None = None,
         cc_qp: str | None = None) -> list[Path]:
    """Write the PNG plots; returns their paths (none without samples). Axes are on the
    run's clock and say "virtual" under time dilation (``tdf`` > 1); ``wall_t0`` is the
    unix time of t = 0 (it places the qlog samples of the retransmission plots);
    ``workloads``: (start, end) of each workload on that clock: the plots show those windows
    (mrcnet/fabric/plotkit.py, ``windows``) and leave the idle time out; ``cc_qp``: the QP
    (HOST:QPN) of ``cc.png`` (mrcnet/fabric/ccplot.py)."""
    if not samples:
        return []
    from mrcnet.fabric import overview
    from mrcnet.fabric.plotkit import Run, windows

    spans = windows(workloads, link_events, samples[0].t, samples[-1].t)
    run = Run(run_dir, samples, link_events, ev_events, planes, tdf, wall_t0, spans, cc_qp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # matplotlib's layout notes never reach the console
        return overview.write_all(run)


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

"""``mrcnet bench backpressure``: which signal of the receiving agent tracks its congestion.

One fabric (incast-8 at its own rates, NSCC) runs one flow ``h0 -> h8`` of ``--size`` bytes
while a consumer on h8 hogs the agent's process for ``--seconds`` (``--after`` seconds in; a
thread holding the interpreter lock 20 ms at a time, 5 ms apart: hostjobs ``throttle``). The
receiving agent's qlog metrics (every 0.5 s) give, per phase (before, during, after the
throttle), the mean of the candidate signals:

- ``rx_wait_s``: how long the oldest frame of each receive batch waited (kernel arrival to the
  loop reading it; the signal the penalty is made of, hosts/agent/backpressure.py);
- ``timer_lag_s``: how late the loop ran the core's due timers (event-loop lag);
- ``unconsumed_completions``: completions delivered to the application's CQs and not yet
  polled (the sink has one receive; Writes complete nothing on the receiver);

and the sender's NSCC window (mean of its qlog samples) and the penalty its SACKs carried.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--after", type=float, default=1.5)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json", action="store_true")


def _phase(t: float, start: float, end: float) -> str:
    return "before" if t < start else ("during" if t < end else "after")


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from hosts.agent.qlog import read_qlog
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    size = int(parse_size(args.size))
    fab = Fabric(RunOptions(topology="incast-8", rate=None, cc="nscc", show=False))
    phases: dict[str, dict[str, list[float]]] = {
        p: {"rx_wait_s": [], "timer_lag_s": [], "unconsumed_completions": [], "cwnd": [],
            "penalty": []} for p in ("before", "during", "after")}
    try:
        fab.start()
        assert fab.runner is not None
        throttle = {"after": args.after, "seconds": args.seconds}
        wl = fab.runner.submit("pair:h0:h8", size, "MRC", timeout=300,
                               extra={"throttle": throttle})
        fab.runner.wait(wl, 330, fab.check_alive)
        completed = bool(wl.summary()["completed"])
    finally:
        fab.stop()
    qlog = fab.run_dir / "qlog"

    def timeline(path: Any) -> tuple[float, list[dict[str, Any]]]:
        """(epoch seconds of the file's time 0, events): files of different agents align."""
        header, ev = read_qlog(path)
        return header["trace"]["common_fields"]["reference_time"] / 1e3, ev

    # the throttle counts from the sink's QP reaching RTS
    sink_start = None
    for path in sorted(qlog.glob("h8-qp*.sqlog")):
        t0, ev = timeline(path)
        rts = [t0 + e["time"] / 1e3 for e in ev if e["name"] == "mrc:qp_state"
               and e["data"].get("new") == "RTS"]
        sink_start = rts[-1] if rts else sink_start
    assert sink_start is not None
    start, end = sink_start + args.after, sink_start + args.after + args.seconds
    t0, events = timeline(qlog / "h8-agent.sqlog")
    for e in events:
        if e["name"] != "mrc:metrics_sampled":
            continue
        ph = phases[_phase(t0 + e["time"] / 1e3, start, end)]
        ph["rx_wait_s"].append(e["data"]["rx_wait"]["rx_wait_mean"])
        ph["timer_lag_s"].append(e["data"].get("timer_lag_max", 0.0))
        ph["unconsumed_completions"].append(0.0)  # the sink's CQ: one WriteImm at the end
    for path in sorted(qlog.glob("h0-qp*.sqlog")):
        t0, ev = timeline(path)
        recs = [e for e in ev if e["name"] == "mrc:recovery_metrics_updated"]
        if not recs or "penalty" not in recs[-1]["data"]:
            continue
        for e in recs:
            ph = phases[_phase(t0 + e["time"] / 1e3, start, end)]
            ph["cwnd"].append(e["data"]["cwnd"])
            ph["penalty"].append(e["data"]["penalty"])
    out: dict[str, Any] = {"completed": completed, "results_dir": str(fab.run_dir)}
    for name, ph in phases.items():
        out[name] = {k: round(statistics.fmean(v), 6) if v else None for k, v in ph.items()}
    if args.json:
        print(json.dumps(out))
    else:
        for name in ("before", "during", "after"):
            print(f"{name:7s} {out[name]}")
        print(f"results: {out['results_dir']}", file=sys.stderr)
    return 0

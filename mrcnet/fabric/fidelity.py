"""Was a run faithful? The lag of every switch and agent, the CPU of every process, a verdict.

The emulation is only the configured network while every process keeps up with its schedule.
Each switch and agent loop keeps a lag meter (common/lag.py); a ``Mark`` records, at one
moment, every switch's meter (admin service ``GetTiming``) and the CPU time every process of
the run has used (``/proc/PID/stat``). The agents' meters come with their jobs' results
(hostjobs: a snapshot when each transfer started and ended). ``assess`` turns two marks and
those snapshots into the figures of the interval:

- per process: ``lag_fraction`` (the fraction of virtual time it was behind schedule),
  ``busy_fraction`` (its loop not waiting in the OS), ``max_lag_s``, ``cpu_cores``;
- ``faithful``: every process was behind schedule at most ``FAITHFUL_LAG_FRACTION`` of the
  time; ``max_lag_fraction`` and ``slowest`` name the worst one;
- ``suggested_tdf`` (unfaithful runs): a time-dilation factor that should keep every process
  on time, from a first-order CPU model: the CPU a faithful run needs is the CPU used scaled
  by (configured capacity / achieved goodput) when the workload's capacity is known; the
  factor brings it under ``CPU_TARGET`` of the machine's cores and every loop under
  ``CPU_TARGET`` of its core, and is at least 1.5 x the current one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from common.lag import FAITHFUL_LAG_FRACTION, window
from common.vclock import RunClock

CPU_TARGET = 0.8
"""Fraction of the cores (and of one core per event loop) a faithful run may keep busy."""
MIN_STEP = 1.5
_NICE = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def nice_tdf(x: float) -> float:
    """The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 15, ... that is >= ``x``."""
    if x <= 1.0:
        return 1.0
    scale = 1.0
    while True:
        for n in _NICE:
            if n * scale >= x - 1e-9:
                return n * scale
        scale *= 10.0


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14, 15)


def machine_cores() -> int:
    return len(os.sched_getaffinity(0))


@dataclass
class Mark:
    """One moment of a run: every switch's lag meter and every process's CPU time."""

    t: float  # the run's clock
    wall: float  # time.monotonic()
    switches: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> snapshot
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds
    unmeasured: dict[str, str] = field(default_factory=dict)  # switch -> why no snapshot


SwitchTimings = Callable[[], Mapping[str, "dict[str, Any] | str"]]
"""Every switch's lag-meter snapshot now, or why there is none (no meter, unreadable)."""


def controller_timings(stats: Callable[[], Any]) -> SwitchTimings:
    """Switch timings from the controller's GetSwitchStats (``stats()`` returns it): the
    switches' drivers read the lag meters, whatever the switches' kind."""
    from common.lag_proto import timing_snapshot

    def timings() -> dict[str, dict[str, Any] | str]:
        out: dict[str, dict[str, Any] | str] = {}
        for sw in stats().switches:
            if sw.error:
                out[sw.name] = f"unreadable: {sw.error}"
            elif not sw.has_timing:
                out[sw.name] = f"{sw.kind} switches keep no lag meter"
            else:
                out[sw.name] = timing_snapshot(sw.timing)
        return out

    return timings


class FidelityMonitor:
    """Takes ``Mark``s of a running fabric (thread-safe; ``close()`` idempotent)."""

    def __init__(self, clock: RunClock, timings: SwitchTimings,
                 pids: Callable[[], dict[str, int]]) -> None:
        """``timings()``: every switch's lag-meter snapshot or the reason it has none;
        ``pids()``: process name -> pid now."""
        self.clock = clock
        self.timings = timings
        self.pids = pids

    def mark(self) -> Mark:
        m = Mark(self.clock.now(), time.monotonic())
        try:
            timings = self.timings()
        except Exception as exc:  # the controller did not answer: nothing was measured
            timings = {"*": f"switch timings unreadable: {exc}"}
        for name, snap in timings.items():
            if isinstance(snap, str):
                m.unmeasured[name] = snap
            else:
                m.switches[name] = snap
        for name, pid in self.pids().items():
            cpu = cpu_seconds(pid)
            if cpu is not None:
                m.cpu[name] = cpu
        own = os.times()
        m.cpu["orchestrator"] = own.user + own.system
        return m

    def close(self) -> None:
        """Nothing to release (the controller client is the orchestrator's)."""


AgentWindow: TypeAlias = "tuple[Any, Any] | str"
"""A host's (start, end) lag snapshots, or why it has none (then the verdict stays open)."""


def agent_windows(results: list[tuple[str, dict[str, Any]]]) -> dict[str, AgentWindow]:
    """Per host, the (earliest start, latest end) lag snapshots of its jobs' results, from
    (host, job result) pairs; a host none of whose results carries them maps to the reason."""
    out: dict[str, tuple[Any, Any] | str] = {}
    for host, res in results:
        timing = res.get("timing")
        if not isinstance(timing, dict) or "start" not in timing or "end" not in timing:
            out.setdefault(host, "its job results carry no lag-meter snapshots")
            continue
        start, end = timing["start"], timing["end"]
        prev = out.get(host)
        if isinstance(prev, tuple):
            s0, e0 = prev
            start = start if start["t"] < s0["t"] else s0
            end = end if end["t"] > e0["t"] else e0
        out[host] = (start, end)
    return out


def assess(tdf: float, first: Mark, last: Mark, agents: Mapping[str, AgentWindow],
           goodput_fraction: float | None = None, cores: int | None = None) -> dict[str, Any]:
    """The fidelity figures of the interval between two marks (see the module docstring)."""
    cores = cores or machine_cores()
    wall = max(1e-9, last.wall - first.wall)
    procs: dict[str, dict[str, Any]] = {}
    for name, snap in last.switches.items():
        w = window(first.switches.get(name), snap)
        procs[name] = {"kind": "switch", **_figures(w)}
    unmeasured = {**first.unmeasured, **last.unmeasured}
    for host, span in agents.items():
        if isinstance(span, str):
            unmeasured[f"agent-{host}"] = span
            continue
        start, end = span
        procs[f"agent-{host}"] = {"kind": "agent", **_figures(window(start, end))}
    total_cpu = 0.0
    for name, cpu in last.cpu.items():
        used = (cpu - first.cpu.get(name, cpu)) / wall
        total_cpu += used
        entry = procs.setdefault(name, {"kind": "controller" if name == "controller"
                                        else "orchestrator" if name == "orchestrator"
                                        else "process"})
        entry["cpu_cores"] = round(used, 3)
    metered = {n: p for n, p in procs.items() if "lag_fraction" in p}
    slowest = max(metered, key=lambda n: (metered[n]["lag_fraction"],
                                          metered[n]["busy_fraction"]), default=None)
    worst = metered[slowest]["lag_fraction"] if slowest is not None else 0.0
    # a process that was not measured leaves the verdict open, whatever the others did
    faithful: bool | None = worst <= FAITHFUL_LAG_FRACTION
    if faithful and (unmeasured or slowest is None):
        faithful = None
    out: dict[str, Any] = {
        "tdf": tdf,
        "faithful": faithful,
        "max_lag_fraction": round(worst, 4),
        "slowest": slowest,
        "limit": FAITHFUL_LAG_FRACTION,
        "tolerance_s": max((float(p.get("tolerance_s", 0.0)) for p in procs.values()),
                           default=0.0),
        "window_s": round(last.t - first.t, 6),
        "cpu_cores_used": round(total_cpu, 3),
        "cores": cores,
        "goodput_fraction": None if goodput_fraction is None else round(goodput_fraction, 4),
        "suggested_tdf": None,
        "processes": procs,
        "unmeasured": unmeasured,
    }
    if faithful is None:
        out["reason"] = ("no process was measured" if slowest is None else
                         "not every process was measured: " + "; ".join(
                             f"{n}: {why}" for n, why in sorted(unmeasured.items())))
    if faithful is False:
        busiest = max((p["busy_fraction"] for p in metered.values()), default=0.0)
        out["suggested_tdf"] = suggest_tdf(tdf, total_cpu, busiest, cores, goodput_fraction)
    return out


def suggest_tdf(tdf: float, cpu_cores: float, busiest_loop: float, cores: int,
                goodput_fraction: float | None) -> float:
    """A factor that should keep an unfaithful run on time (see the module docstring)."""
    demand = 1.0 / max(0.05, goodput_fraction) if goodput_fraction else 1.0
    need = demand * max(cpu_cores / (cores * CPU_TARGET), busiest_loop / CPU_TARGET)
    return nice_tdf(tdf * max(MIN_STEP, need))


def _figures(w: dict[str, Any]) -> dict[str, Any]:
    return {"lag_fraction": round(w["lag_fraction"], 4),
            "busy_fraction": round(w["busy_fraction"], 4), "tolerance_s": w["tolerance_s"],
            "max_lag_s": w["max_lag_s"], "late": w["late"], "events": w["events"]}


def combined(verdicts: Sequence[bool | None]) -> bool | None:
    """Several runs' verdict: false when one was false, true only when every run was measured
    true, otherwise (a run without evidence, or no run at all) None."""
    if any(v is False for v in verdicts):
        return False
    return True if verdicts and all(v is True for v in verdicts) else None


def verdict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``{"faithful", "max_lag_fraction"}`` of a workload summary (``Workload.summary()``):
    ``None`` (no evidence) when the run had no fidelity monitor (BMv2) or not every process
    was measured."""
    report = summary.get("fidelity") or {}
    value = report.get("faithful")
    return {"faithful": None if value is None else bool(value),
            "max_lag_fraction": report.get("max_lag_fraction")}


def warning(report: Mapping[str, Any]) -> str | None:
    """One line for the user when the run was not faithful (None when it was)."""
    if report.get("faithful", True):
        return None
    if report.get("faithful") is None:
        return f"fidelity unknown: {report.get('reason', 'not measured')}"
    name = report.get("slowest")
    proc = report["processes"].get(name, {}) if name else {}
    lag_ms = float(proc.get("max_lag_s", 0.0)) * 1e3
    return (f"not faithful: {name} was behind schedule {report['max_lag_fraction']:.0%} of the "
            f"time (max lag {lag_ms:.1f} virtual ms; limit {report['limit']:.0%}); the run "
            f"used {report['cpu_cores_used']:.1f} of {report['cores']} cores at TDF "
            f"{report['tdf']:g}: try --tdf {report['suggested_tdf']:g} (or --tdf auto)")

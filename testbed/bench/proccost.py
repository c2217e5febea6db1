"""What a set of processes cost over an interval: CPU time, wake-ups and system calls.

Read from the kernel, never from the processes themselves:
- CPU: utime + stime of every thread (``/proc/PID/stat``), in seconds, and the system part
  (stime: the kernel's work for the process: its system calls, and the frames it delivers
  through a veth to the peer's socket or ring in its own context);
- wake-ups: voluntary context switches summed over the process's threads
  (``/proc/PID/task/*/status``): each is one sleep in a wait (select, epoll, a lock) that
  ended in a wake-up, the unit a loop that handles one packet per wait pays per packet;
- involuntary context switches: the scheduler took the CPU away (the machine was busy);
- system calls: ``perf stat -e raw_syscalls:sys_enter -p PID`` per process, when perf and
  the tracepoint are available (``None`` otherwise, with the reason in ``syscalls_why``).

``ProcessCost.start`` snapshots the counters and attaches perf; ``finish`` detaches and gives
the differences. A process that exits meanwhile keeps the figures of its last snapshot.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
PERF_EVENT = "raw_syscalls:sys_enter"


@dataclass(frozen=True)
class Counters:
    cpu_s: float
    system_s: float
    wakeups: int
    preempted: int


def read_counters(pid: int) -> Counters:
    """CPU seconds and context switches of every thread of ``pid``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime stime (all threads)
    system = int(fields[12]) / TICK
    vol = invol = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text(encoding="ascii")
        except OSError:  # the thread ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol += int(line.split()[1])
    return Counters(cpu, system, vol, invol)


def path_processes(fab: Any, src: str, dst: str) -> dict[str, int]:
    """The processes a QP ``src`` -> ``dst`` of a running fabric crosses, by name -> pid: the
    two agents and every switch."""
    procs = {f"agent {src}": fab.agents[src].pid, f"agent {dst}": fab.agents[dst].pid}
    for name, sw in sorted(fab.mn.switches.items()):
        if sw.pid is not None:
            procs[f"switch {name}"] = sw.pid
    return procs


def perf_syscalls_available() -> str:
    """'' when ``perf stat`` can count system calls here, else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed (Debian: linux-perf)"
    try:
        probe = subprocess.run(["perf", "stat", "-x,", "-e", PERF_EVENT, "true"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf failed: {exc}"
    if probe.returncode != 0 or "not supported" in probe.stderr or "<not" in probe.stderr:
        return f"perf cannot count {PERF_EVENT}: {probe.stderr.strip()[:200]}"
    return ""


def _parse_perf(text: str) -> int | None:
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[2] == PERF_EVENT and parts[0].strip().isdigit():
            return int(parts[0])
    return None


@dataclass
class ProcessCost:
    """Counters of named processes between ``start`` and ``finish``."""

    pids: Mapping[str, int]
    count_syscalls: bool = True
    syscalls_why: str = ""
    _before: dict[str, Counters] = field(default_factory=dict)
    _last: dict[str, Counters] = field(default_factory=dict)
    _perf: dict[str, subprocess.Popen[str]] = field(default_factory=dict)

    def start(self) -> None:
        if self.count_syscalls:
            self.syscalls_why = perf_syscalls_available()
        for name, pid in self.pids.items():
            self._before[name] = self._last[name] = read_counters(pid)
            if self.count_syscalls and not self.syscalls_why:
                self._perf[name] = subprocess.Popen(
                    ["perf", "stat", "-x,", "-e", PERF_EVENT, "-p", str(pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def finish(self) -> dict[str, dict[str, float | int | None]]:
        """Per process: ``cpu_s``, ``system_s``, ``wakeups``, ``preempted``, ``syscalls`` over
        the interval."""
        out: dict[str, dict[str, float | int | None]] = {}
        for name, pid in self.pids.items():
            try:
                self._last[name] = read_counters(pid)
            except OSError:
                pass  # exited: its last snapshot stands
            a, b = self._before[name], self._last[name]
            out[name] = {"cpu_s": b.cpu_s - a.cpu_s, "system_s": b.system_s - a.system_s,
                         "wakeups": b.wakeups - a.wakeups,
                         "preempted": b.preempted - a.preempted, "syscalls": None}
        for name, proc in self._perf.items():
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            out[name]["syscalls"] = _parse_perf(err)
        self._perf.clear()
        return out

    def close(self) -> None:
        """Stop any perf still attached (idempotent; for error paths)."""
        for proc in self._perf.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self._perf.clear()

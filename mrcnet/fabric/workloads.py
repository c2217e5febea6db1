"""Workloads: sets of bulk Writes between hosts, verified byte for byte.

``all-to-all``: every ordered host pair; ``permutation``: each host writes to exactly one other
and receives from exactly one (a random derangement with a fixed seed); ``shift:K``: host i
writes to host i+K (declaration order; shift:2 on clos topologies crosses the spines with no
incast); ``pair:A:B``: one flow. Every flow is a writer job on the source and a sink job on the destination (run by
mrcnet/fabric/hostjobs.py inside the agents). A flow is verified when the sink's SHA-256
equals the hash the orchestrator computes itself from the pattern the writer sends, so
``verified_bytes`` counts only data that arrived exactly.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hosts.agent.apps import pattern
from hosts.transport.counters import RTX_COUNTERS, add_counts
from mrcnet.fabric.hostjobs import write_json

WORKLOADS = ("all-to-all", "permutation", "shift:K", "pair:SRC:DST")


class WorkloadError(ValueError):
    """Unknown workload name or hosts."""


def flows_for(name: str, hosts: list[str], seed: int = 1) -> list[tuple[str, str]]:
    if name == "all-to-all":
        return [(a, b) for a in hosts for b in hosts if a != b]
    if name == "permutation":
        if len(hosts) < 2:
            raise WorkloadError("a permutation needs at least 2 hosts")
        rng = random.Random(seed)
        while True:
            perm = hosts[:]
            rng.shuffle(perm)
            if all(a != b for a, b in zip(hosts, perm)):
                return list(zip(hosts, perm))
    if name.startswith("shift:"):
        k = name.partition(":")[2]
        if not k.isdecimal() or int(k) % len(hosts) == 0:
            raise WorkloadError(f"{name!r}: expected shift:K with K not a multiple of "
                                f"{len(hosts)} (host i writes to host i+K)")
        n = len(hosts)
        return [(hosts[i], hosts[(i + int(k)) % n]) for i in range(n)]
    if name.startswith("pair:"):
        parts = name.split(":")
        if len(parts) != 3 or parts[1] not in hosts or parts[2] not in hosts or parts[1] == parts[2]:
            raise WorkloadError(f"{name!r}: expected pair:SRC:DST with two different hosts of "
                                f"{', '.join(hosts)}")
        return [(parts[1], parts[2])]
    raise WorkloadError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


def flow_timing(progress: list[list[float]]) -> tuple[float | None, float | None]:
    """(longest stall, completion time) of a writer from its ``progress`` list of (unix time,
    bytes acknowledged): the stall is the longest time without new bytes acknowledged (from
    the first post to the first completion, or between two completions), the completion
    time from the first post to the last completion. None without progress."""
    if len(progress) < 2:
        return None, None
    times = [float(t) for t, _b in progress]
    stall = max(b - a for a, b in itertools.pairwise(times))
    return stall, times[-1] - times[0]


@dataclass
class Flow:
    id: str
    src: str
    dst: str
    size: int
    seed: int
    writer: dict[str, Any] = field(default_factory=dict)
    sink: dict[str, Any] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        want = hashlib.sha256(pattern(self.size, self.seed)).hexdigest()
        return bool(self.sink.get("sha256")) and self.sink["sha256"] == want

    @property
    def qp_errors(self) -> int:
        return sum(1 for r in (self.writer, self.sink) if r.get("qp_state") == "ERR")

    def row(self) -> dict[str, Any]:
        """The flow's line of the results: verification, timing, retransmissions by trigger."""
        stall, fct = flow_timing(self.writer.get("progress", []))
        stats = self.writer.get("qp_stats", {})
        return {"id": self.id, "src": self.src, "dst": self.dst, "bytes": self.size,
                "verified": self.verified, "seconds": self.writer.get("seconds"),
                "longest_stall_s": stall, "fct_s": fct,
                "writer_qp": self.writer.get("qp_state"), "sink_qp": self.sink.get("qp_state"),
                "tx_rtx": stats.get("tx_rtx"),
                "rtx": {k: stats[k] for k in RTX_COUNTERS if stats.get(k)}}


@dataclass
class Workload:
    name: str
    qp_type: str
    flows: list[Flow]
    started: float
    finished: float | None = None

    def summary(self) -> dict[str, Any]:
        done = [f for f in self.flows if f.writer and f.sink]
        verified = [f for f in self.flows if f.verified]
        rtx = sum(int(f.writer.get("qp_stats", {}).get("tx_rtx", 0)) for f in self.flows)
        errors = [e for f in self.flows for e in f.writer.get("errors", []) + f.sink.get("errors", [])]
        return {
            "workload": self.name,
            "qp_type": self.qp_type,
            "flows": len(self.flows),
            "completed": len(done) == len(self.flows) and len(verified) == len(self.flows)
            and not errors,
            "verified_flows": len(verified),
            "verified_bytes": sum(f.size for f in verified),
            "qp_errors": sum(f.qp_errors for f in self.flows),
            "errors": errors[:20],
            "retransmitted_packets": rtx,
            "seconds": (self.finished or time.monotonic()) - self.started,
            "mechanisms": self.mechanisms(),
            "per_flow": [f.row() for f in self.flows],
        }

    def mechanisms(self) -> dict[str, int]:
        """Event counters (docs/transport.md, "Counters") summed over every writer and sink
        QP of the workload."""
        total: dict[str, int] = {}
        for f in self.flows:
            for r in (f.writer, f.sink):
                add_counts(total, r.get("qp_stats", {}))
        return dict(sorted(total.items()))


class WorkloadRunner:
    """Submits jobs to the hosts' job directories and collects their results."""

    def __init__(self, run_dir: Path, hosts: list[str], ev_profile: int) -> None:
        self.run_dir = run_dir
        self.hosts = hosts
        self.ev_profile = ev_profile
        self.count = 0

    def jobs_dir(self, host: str) -> Path:
        return self.run_dir / "jobs" / host

    def submit(self, name: str, size: int, qp_type: str = "MRC", seed: int = 1,
               timeout: float = 120.0, extra: dict[str, Any] | None = None) -> Workload:
        pairs = flows_for(name, self.hosts, seed)
        self.count += 1
        wl = Workload(name, qp_type, [], time.monotonic())
        oob = self.run_dir / "oob"
        for i, (src, dst) in enumerate(pairs):
            fid = f"w{self.count}f{i}-{src}-{dst}"
            flow = Flow(fid, src, dst, size, seed * 1000 + self.count * 100 + i)
            common = {"size": size, "seed": flow.seed, "qp_type": qp_type, "oob_dir": str(oob),
                      "timeout": timeout, "ev_profile": self.ev_profile, **(extra or {})}
            for role, host, me, peer in (("sink", dst, "s", "w"), ("writer", src, "w", "s")):
                d = self.jobs_dir(host)
                d.mkdir(parents=True, exist_ok=True)
                write_json(d / f"{fid}-{role}.job.json", {
                    **common, "id": fid, "role": role, "name": f"{fid}-{me}",
                    "peer": f"{fid}-{peer}"})
            wl.flows.append(flow)
        return wl

    def poll(self, wl: Workload) -> bool:
        """Read the results that appeared; True when every flow has both results."""
        for f in wl.flows:
            for role, host in (("writer", f.src), ("sink", f.dst)):
                if getattr(f, role):
                    continue
                path = self.jobs_dir(host) / f"{f.id}-{role}.result.json"
                if path.exists():
                    setattr(f, role, json.loads(path.read_text()))
        done = all(f.writer and f.sink for f in wl.flows)
        if done and wl.finished is None:
            wl.finished = time.monotonic()
        return done

    def wait(self, wl: Workload, timeout: float, alive: Any = None) -> bool:
        """Poll until done or ``timeout``; ``alive()`` (optional) raising aborts early."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.poll(wl):
                return True
            if alive is not None:
                alive()
            time.sleep(0.05)
        return self.poll(wl)

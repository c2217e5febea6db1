"""Workloads: sets of bulk Writes between hosts, verified byte for byte.

``all-to-all``: every ordered host pair; ``permutation``: each host writes to exactly one other
and receives from exactly one (a random derangement with a fixed seed); ``shift:K``: host i
writes to host i+K (declaration order; shift:2 on clos topologies crosses the spines with no
incast); ``pair:A:B``: one flow; ``incast:DST``: every other host writes to DST. Every flow
is a writer job on the source and a sink job on the destination (run by
mrcnet/fabric/hostjobs.py inside the agents). A flow is verified when the sink's SHA-256
equals the hash the orchestrator computes itself from the pattern the writer sends, so
``verified_bytes`` counts only data that arrived exactly.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hosts.agent.apps import pattern
from mrcnet.fabric.hostjobs import write_json

WORKLOADS = ("all-to-all", "permutation", "shift:K", "pair:SRC:DST", "incast:DST")


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
        if not k.isdigit() or int(k) % len(hosts) == 0:
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
    if name.startswith("incast:"):
        dst = name.partition(":")[2]
        if dst not in hosts or len(hosts) < 2:
            raise WorkloadError(f"{name!r}: expected incast:DST with DST one of "
                                f"{', '.join(hosts)}")
        return [(h, dst) for h in hosts if h != dst]
    raise WorkloadError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


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


@dataclass
class Workload:
    name: str
    qp_type: str
    flows: list[Flow]
    started: float
    finished: float | None = None
    cc_profile: int = 0

    def summary(self) -> dict[str, Any]:
        done = [f for f in self.flows if f.writer and f.sink]
        verified = [f for f in self.flows if f.verified]
        rtx = sum(int(f.writer.get("qp_stats", {}).get("tx_rtx", 0)) for f in self.flows)
        errors = [e for f in self.flows for e in f.writer.get("errors", []) + f.sink.get("errors", [])]
        return {
            "workload": self.name,
            "qp_type": self.qp_type,
            "cc_profile": self.cc_profile,
            "flows": len(self.flows),
            "completed": len(done) == len(self.flows) and len(verified) == len(self.flows)
            and not errors,
            "verified_flows": len(verified),
            "verified_bytes": sum(f.size for f in verified),
            "qp_errors": sum(f.qp_errors for f in self.flows),
            "errors": errors[:20],
            "retransmitted_packets": rtx,
            "seconds": (self.finished or time.monotonic()) - self.started,
            "per_flow": [
                {"id": f.id, "src": f.src, "dst": f.dst, "bytes": f.size,
                 "verified": f.verified, "seconds": f.writer.get("seconds"),
                 "writer_qp": f.writer.get("qp_state"), "sink_qp": f.sink.get("qp_state"),
                 "tx_rtx": f.writer.get("qp_stats", {}).get("tx_rtx"),
                 "tx_data": f.writer.get("qp_stats", {}).get("tx_data"),
                 "timeouts": f.writer.get("qp_stats", {}).get("timeouts", 0),
                 "cc": f.writer.get("cc")}
                for f in self.flows
            ],
        }


class WorkloadRunner:
    """Submits jobs to the hosts' job directories and collects their results."""

    def __init__(self, run_dir: Path, hosts: list[str], ev_profile: int,
                 cc_profile: int = 0) -> None:
        self.run_dir = run_dir
        self.hosts = hosts
        self.ev_profile = ev_profile
        self.cc_profile = cc_profile  # the QPs' CC profile (0: none, the fixed window)
        self.ack_timeout: int | None = None  # the QPs' ACK timeout exponent (None: the job's)
        self.count = 0

    def jobs_dir(self, host: str) -> Path:
        return self.run_dir / "jobs" / host

    def submit(self, name: str, size: int, qp_type: str = "MRC", seed: int = 1,
               timeout: float = 120.0, extra: dict[str, Any] | None = None,
               cc_profile: int | None = None) -> Workload:
        pairs = flows_for(name, self.hosts, seed)
        cc = self.cc_profile if cc_profile is None else cc_profile
        self.count += 1
        wl = Workload(name, qp_type, [], time.monotonic(), cc_profile=cc)
        oob = self.run_dir / "oob"
        for i, (src, dst) in enumerate(pairs):
            fid = f"w{self.count}f{i}-{src}-{dst}"
            flow = Flow(fid, src, dst, size, seed * 1000 + self.count * 100 + i)
            common = {"size": size, "seed": flow.seed, "qp_type": qp_type, "oob_dir": str(oob),
                      "timeout": timeout, "ev_profile": self.ev_profile, "cc_profile": cc,
                      **({"ack_timeout": self.ack_timeout} if self.ack_timeout else {}),
                      **(extra or {})}
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

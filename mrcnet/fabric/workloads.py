"""Workloads: sets of bulk Writes between hosts, verified byte for byte.

``all-to-all``: every ordered host pair; ``permutation``: each host writes to exactly one other
and receives from exactly one (a random derangement with a fixed seed); ``shift:K``: host i
writes to host i+K (declaration order; shift:2 on clos topologies crosses the spines with no
incast); ``pair:A:B``: one flow; ``incast:DST``: every other host writes to DST. Every flow
is a writer job on the source and a sink job on the destination (run by
mrcnet/fabric/hostjobs.py inside the agents). A flow is verified when the sink's SHA-256
equals the hash the orchestrator computes itself from the pattern the writer sends, so
``verified_bytes`` counts only data that arrived exactly.

Times are the run's clock (common/vclock.py; virtual seconds under time dilation). A
workload's summary has its ``seconds`` (submitted -> all results in), per-flow FCTs (the
writers' ``seconds``), ``goodput_bps`` (verified bytes over the span from the first Write to
the last completion, from the writers' progress stamps), ``capacity_bps`` (the workload's
maximum concurrent flow over the topology's links, mrcnet/fabric/capacity.py) and their
ratio ``goodput_fraction``, and, with a fidelity monitor, ``fidelity``: whether every switch
and agent kept up during the workload (mrcnet/fabric/fidelity.py).
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.vclock import RunClock
from hosts.bulk import pattern_digest, write_json
from hosts.transport.counters import RTX_COUNTERS, add_counts
from mrcnet.fabric.fidelity import FidelityMonitor, Mark, agent_windows, assess
from topologies.model import Topology

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
    if name.startswith("incast:"):
        dst = name.partition(":")[2]
        if dst not in hosts or len(hosts) < 2:
            raise WorkloadError(f"{name!r}: expected incast:DST with DST one of "
                                f"{', '.join(hosts)}")
        return [(h, dst) for h in hosts if h != dst]
    raise WorkloadError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


def flow_timing(progress: list[list[float]]) -> tuple[float | None, float | None]:
    """(longest completion gap, completion time) of a writer from its ``progress`` list of
    (unix time, bytes acknowledged): the gap is the longest time without a WR completing
    (from the first post to the first completion, or between two), as coarse as the WRs; a
    flow's stall is the transport's ``una_stall_max_us``. The completion time runs from the
    first post to the last completion. None without progress."""
    if len(progress) < 2:
        return None, None
    times = [float(t) for t, _b in progress]
    stall = max(b - a for a, b in itertools.pairwise(times))
    return stall, times[-1] - times[0]


def counter_totals(per_host: dict[str, dict[str, int]]) -> dict[str, int]:
    """Host counters summed over hosts (a run's ``mechanisms``), sorted by name."""
    out: dict[str, int] = {}
    for stats in per_host.values():
        for key, value in stats.items():
            out[key] = out.get(key, 0) + int(value)
    return dict(sorted(out.items()))


def round_seed(seed: int, round_no: int) -> int:
    """The seed of a scenario's round ``round_no`` (1, 2, ...): its pairs and data differ."""
    return seed + round_no


@dataclass
class Flow:
    id: str
    src: str
    dst: str
    size: int
    seed: int
    writer: dict[str, Any] = field(default_factory=dict)
    sink: dict[str, Any] = field(default_factory=dict)
    # SHA-256 of the data the writer sends: computed once from ``pattern(size, seed)`` unless
    # the writer sent other data (the simulator, mrcnet/sim/workload.py, says which)
    want_sha256: str = ""

    @property
    def verified(self) -> bool:
        if not self.sink.get("sha256"):
            return False
        if not self.want_sha256:
            self.want_sha256 = pattern_digest(self.size, self.seed)
        return bool(self.sink["sha256"] == self.want_sha256)

    @property
    def qp_errors(self) -> int:
        return sum(1 for r in (self.writer, self.sink) if r.get("qp_state") == "ERR")

    def row(self) -> dict[str, Any]:
        """The flow's line of the results: verification, timing, retransmissions by trigger."""
        gap, fct = flow_timing(self.writer.get("progress", []))
        stats = self.writer.get("qp_stats", {})
        stood = stats.get("una_stall_max_us")
        stall = stood / 1e6 if stood is not None else gap
        return {"id": self.id, "src": self.src, "dst": self.dst, "bytes": self.size,
                "verified": self.verified, "seconds": self.writer.get("seconds"),
                "longest_stall_s": stall, "completion_gap_s": gap, "fct_s": fct,
                "writer_qp": self.writer.get("qp_state"), "sink_qp": self.sink.get("qp_state"),
                "tx_rtx": stats.get("tx_rtx"), "tx_data": stats.get("tx_data"),
                "timeouts": stats.get("timeouts", 0),
                "rtx": {k: stats[k] for k in RTX_COUNTERS if stats.get(k)},
                "cc": self.writer.get("cc")}


@dataclass
class Workload:
    name: str
    qp_type: str
    flows: list[Flow]
    started: float  # the run's clock
    finished: float | None = None
    clock: Callable[[], float] = time.monotonic
    capacity_bps: float | None = None
    mark: Mark | None = None  # fidelity mark at submission
    fidelity: dict[str, Any] | None = None
    cc_profile: int = 0

    def goodput(self) -> tuple[float, float]:
        """(verified bytes x 8 / span, span): span from the first Write to the last
        completion over all writers (their progress stamps); (0, 0) without progress."""
        progress = [f.writer.get("progress") or [] for f in self.flows if f.verified]
        stamps = [p for p in progress if p]
        if not stamps:
            return 0.0, 0.0
        span = max(p[-1][0] for p in stamps) - min(p[0][0] for p in stamps)
        nbytes = sum(f.size for f in self.flows if f.verified)
        return (nbytes * 8 / span if span > 0 else 0.0), span

    def summary(self) -> dict[str, Any]:
        done = [f for f in self.flows if f.writer and f.sink]
        verified = [f for f in self.flows if f.verified]
        rtx = sum(int(f.writer.get("qp_stats", {}).get("tx_rtx", 0)) for f in self.flows)
        errors = [e for f in self.flows for e in f.writer.get("errors", []) + f.sink.get("errors", [])]
        goodput, span = self.goodput()
        fraction = (round(goodput / self.capacity_bps, 4)
                    if self.capacity_bps and len(verified) == len(self.flows) else None)
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
            "seconds": (self.finished or self.clock()) - self.started,
            "started": self.started,  # the run's clock (the plots' workload windows)
            "goodput_bps": round(goodput),
            "makespan_s": span,
            "capacity_bps": self.capacity_bps,
            "goodput_fraction": fraction,
            "fidelity": self.fidelity,
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


def workload_flows(pairs: list[tuple[str, str]], size: int, seed: int, count: int
                   ) -> list[Flow]:
    """The flows of a runner's workload number ``count`` (1, 2, ...): their ids and the seeds
    of their data."""
    return [Flow(f"w{count}f{i}-{src}-{dst}", src, dst, size, seed * 1000 + count * 100 + i)
            for i, (src, dst) in enumerate(pairs)]


class WorkloadRunner:
    """Submits jobs to the hosts' job directories and collects their results. A round's
    writers start at one instant (the start gate, hosts/bulk/gate.py), as in the simulator.

    ``clock``: the run's (default TDF 1); ``topo`` (optional) gives each workload its
    configured capacity; ``monitor`` (optional) its fidelity figures; ``cc_profile`` the
    QPs' CC profile (0: none, the fixed window)."""

    def __init__(self, run_dir: Path, hosts: list[str], ev_profile: int,
                 clock: RunClock | None = None, topo: Topology | None = None,
                 monitor: FidelityMonitor | None = None, cc_profile: int = 0) -> None:
        self.run_dir = run_dir
        self.hosts = hosts
        self.ev_profile = ev_profile
        self.clock = clock or RunClock(1.0)
        self.topo = topo
        self.monitor = monitor
        self.cc_profile = cc_profile
        self.ack_timeout: int | None = None  # the QPs' ACK timeout exponent (None: the job's)
        self.count = 0
        # called with (host, qpn) of every QP a finished workload's jobs release
        # (mrcnet/fabric/hostjobs.py), e.g. EvTracker.retire
        self.on_qp_released: Callable[[str, int], None] | None = None

    def jobs_dir(self, host: str) -> Path:
        return self.run_dir / "jobs" / host

    def submit(self, name: str, size: int, qp_type: str = "MRC", seed: int = 1,
               timeout: float = 120.0, extra: dict[str, Any] | None = None,
               cc_profile: int | None = None) -> Workload:
        pairs = flows_for(name, self.hosts, seed)
        cc = self.cc_profile if cc_profile is None else cc_profile
        self.count += 1
        capacity = None
        if self.topo is not None:
            from mrcnet.fabric.capacity import CapacityError, workload_capacity

            try:
                capacity = workload_capacity(self.topo, pairs)
            except CapacityError:
                capacity = None
        mark = self.monitor.mark() if self.monitor is not None else None
        wl = Workload(name, qp_type, [], self.clock.now(), clock=self.clock.now,
                      capacity_bps=capacity, mark=mark, cc_profile=cc)
        oob = self.run_dir / "oob"
        for flow in workload_flows(pairs, size, seed, self.count):
            src, dst, fid = flow.src, flow.dst, flow.id
            common = {"size": size, "seed": flow.seed, "qp_type": qp_type, "oob_dir": str(oob),
                      "timeout": timeout, "ev_profile": self.ev_profile, "cc_profile": cc,
                      **({"ack_timeout": self.ack_timeout} if self.ack_timeout else {}),
                      **(extra or {})}
            gate = {"start_group": f"w{self.count}-start", "start_count": len(pairs)}
            for role, host, me, peer in (("sink", dst, "s", "w"), ("writer", src, "w", "s")):
                d = self.jobs_dir(host)
                d.mkdir(parents=True, exist_ok=True)
                write_json(d / f"{fid}-{role}.job.json", {
                    **common, "id": fid, "role": role, "name": f"{fid}-{me}",
                    "peer": f"{fid}-{peer}", **(gate if role == "writer" else {})})
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
            wl.finished = self.clock.now()
            self._assess(wl)
            self._released(wl)
        return done

    def _released(self, wl: Workload) -> None:
        """The jobs release their QPs once their results are written: say so."""
        if self.on_qp_released is None:
            return
        for f in wl.flows:
            for host, result in ((f.src, f.writer), (f.dst, f.sink)):
                qpn = result.get("qpn") if result else None
                if isinstance(qpn, int):
                    self.on_qp_released(host, qpn)

    def _assess(self, wl: Workload) -> None:
        if self.monitor is None or wl.mark is None:
            return
        end = self.monitor.mark()
        jobs = [(f.src, f.writer) for f in wl.flows] + [(f.dst, f.sink) for f in wl.flows]
        fraction = wl.summary()["goodput_fraction"]
        wl.fidelity = assess(self.clock.tdf, wl.mark, end, agent_windows(jobs), fraction)

    def wait(self, wl: Workload, timeout: float, alive: Any = None) -> bool:
        """Poll until done or ``timeout`` (seconds of the run's clock); ``alive()``
        (optional) raising aborts early."""
        deadline = time.monotonic() + self.clock.to_wall(timeout)
        while time.monotonic() < deadline:
            if self.poll(wl):
                return True
            if alive is not None:
                alive()
            time.sleep(0.05)
        return self.poll(wl)

"""Bulk transfers on the simulated fabric, as the emulation's job app runs them
(mrcnet/fabric/hostjobs.py): per flow a sink on the destination and a writer on the source,
with the job's QP attributes (``qp_attr``), work requests (``WritePlan``: 256 KiB Writes, 8
outstanding, the last a WriteImm), QP transitions (``hosts.api.init_qp``/``connect_qp``) and
result fields (``qp_report``, ``sink_errors``), so ``mrcnet.fabric.workloads.Workload`` sums
them into the same summary as an emulated run's. The jobs react to the core's completions
instead of waiting on a completion queue in a thread of their own.

Differences, all outside the transport: connections are set up out of band at time 0 (the
emulation exchanges QP numbers through files, so its flows start a few milliseconds apart);
the writer data are windows of one pattern stream (``pattern(size + STRIDE * (n - 1), seed)``,
flow i from byte ``STRIDE * i``) rather than one pattern per flow, so 1,024 writers hold 5 MiB
between them instead of 4 GiB; every sink buffer is real and checked (SHA-256) when its
WriteImm arrives. Like the emulation's jobs, a writer releases its QP when it is done and a
sink once its writer is done.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hosts.api import RemoteQp, connect_qp, init_qp
from hosts.apps import pattern
from hosts.transport import Access, QpType
from hosts.transport.types import Completion, QpAttr, QpAttrMask, RecvWR, WcStatus
from hosts.transport.types import Event as CoreEvent
from mrcnet.fabric.hostjobs import WritePlan, qp_attr, qp_report, sink_errors
from mrcnet.fabric.workloads import Flow
from mrcnet.sim.hostnode import SimHost

STRIDE = 1021  # bytes between two writers' windows of the pattern stream (prime: no MTU multiple)
ACCESS = Access.LOCAL_WRITE | Access.REMOTE_WRITE  # the jobs' memory regions


class CoreQp:
    """A QP of a simulated host's core as ``init_qp``/``connect_qp`` take it."""

    def __init__(self, host: SimHost, qpn: int) -> None:
        self.host = host
        self.qpn = qpn

    def modify(self, attr: QpAttr, mask: QpAttrMask) -> None:
        self.host.core.modify_qp(self.qpn, attr, mask, self.host.sched.now)

    def query(self) -> QpAttr:
        return self.host.core.query_qp(self.qpn)


class Dispatch:
    """A host's event handler: completions go to the job that owns the QP."""

    def __init__(self) -> None:
        self.jobs: dict[int, Callable[[Completion], None]] = {}

    def __call__(self, ev: CoreEvent) -> None:
        if isinstance(ev, Completion):
            job = self.jobs.get(ev.qpn)
            if job is not None:
                job(ev)


def _dispatch(host: SimHost) -> Dispatch:
    if not isinstance(host.handler, Dispatch):
        host.handler = Dispatch()
    return host.handler


@dataclass
class FlowJobs:
    """One flow's writer and sink; ``flow.writer``/``flow.sink`` get their results."""

    flow: Flow
    plan: WritePlan
    src: SimHost
    dst: SimHost
    data: memoryview
    wqp: int = 0
    sqp: int = 0
    t0: float = 0.0  # when both ends were connected (the jobs' clock start)
    posted: int = 0
    done: int = 0
    acked: int = 0
    errors: list[str] = field(default_factory=list)
    progress: list[tuple[float, int]] = field(default_factory=list)
    wcs: list[Completion] = field(default_factory=list)
    _sink_buf: bytearray = field(default_factory=bytearray, repr=False)
    _mrs: dict[str, Any] = field(default_factory=dict, repr=False)

    def start(self, job: dict[str, Any]) -> None:
        """Create, connect and start both ends now (sink first, as the emulation's jobs)."""
        attr = qp_attr(job)
        qp_type = QpType(str(job["qp_type"]))
        now = self.src.sched.now
        self._sink_buf = bytearray(self.plan.size)
        s_mr = self.dst.core.register_mr(self._sink_buf, ACCESS)
        w_mr = self.src.core.register_mr(self.data, ACCESS)
        self._mrs = {"w": w_mr, "s": s_mr}
        self.sqp = self.dst.core.create_qp(qp_type, 0, 0)
        self.wqp = self.src.core.create_qp(qp_type, 0, 0)
        init_qp(CoreQp(self.dst, self.sqp), attr)
        for i in range(self.plan.receives):
            self.dst.core.post_recv(self.sqp, RecvWR(wr_id=i + 1))
        init_qp(CoreQp(self.src, self.wqp), attr)
        connect_qp(CoreQp(self.dst, self.sqp), RemoteQp(self.wqp, _gids(self.src)), attr)
        connect_qp(CoreQp(self.src, self.wqp), RemoteQp(self.sqp, _gids(self.dst)), attr)
        _dispatch(self.src).jobs[self.wqp] = self._on_writer
        _dispatch(self.dst).jobs[self.sqp] = self._on_sink
        self.t0 = now
        self.progress = [(now, 0)]
        self._post()
        self.src.pump()
        self.dst.pump()

    def _post(self) -> None:
        plan, mr, peer = self.plan, self._mrs["w"], self._mrs["s"]
        now = self.src.sched.now
        while self.posted < plan.count and self.posted - self.done < plan.depth:
            self.src.core.post_send(self.wqp, plan.wr(self.posted, mr.addr, mr.lkey, peer.addr,
                                                      peer.rkey), now)
            self.posted += 1

    def _on_writer(self, wc: Completion) -> None:
        if self.flow.writer:
            return
        self.done += 1
        if wc.status != WcStatus.SUCCESS:
            self.errors.append(f"wr {wc.wr_id}: {wc.status.value}")
        else:
            self.acked += self.plan.length(wc.wr_id)
            self.progress.append((self.src.sched.now, self.acked))
        if self.errors or self.done == self.plan.count:
            self._writer_result()
        else:
            self._post()

    def _writer_result(self, timed_out: str = "") -> None:
        ok = self.done == self.plan.count and not self.errors
        errors = self.errors + ([timed_out] if timed_out and not self.errors else [])
        self.flow.writer = {
            "bytes": self.plan.size if ok else 0, "seconds": self.src.sched.now - self.t0,
            "errors": errors, "completed_wrs": self.done,
            "progress": [list(p) for p in self.progress],
            **qp_report(self.src.core, self.wqp)}
        del _dispatch(self.src).jobs[self.wqp]
        self.src.core.destroy_qp(self.wqp)  # the writer releases at once
        self._release_sink()

    def _on_sink(self, wc: Completion) -> None:
        if self.flow.sink:
            return
        self.wcs.append(wc)
        if wc.status != WcStatus.SUCCESS or len(self.wcs) == self.plan.receives:
            self._sink_result()

    def _sink_result(self) -> None:
        bad = [wc for wc in self.wcs if wc.status != WcStatus.SUCCESS]
        errors = sink_errors(self.plan, [(wc.wr_id, wc.imm) for wc in self.wcs],
                             bad[0] if bad else None)
        digest = hashlib.sha256(self._sink_buf).hexdigest() if not errors else ""
        self.flow.sink = {
            "bytes": self.plan.size if not errors else 0,
            "seconds": self.dst.sched.now - self.t0,
            "imm_completions": len(self.wcs), "sha256": digest, "errors": errors,
            **qp_report(self.dst.core, self.sqp)}
        self._release_sink()

    def _release_sink(self) -> None:
        """The sink keeps its QP until its writer is done (it may still have to acknowledge
        a retransmission), then releases it and its buffer."""
        if not (self.flow.writer and self.flow.sink) or not self._sink_buf:
            return
        jobs = _dispatch(self.dst).jobs
        jobs.pop(self.sqp, None)
        self.dst.core.destroy_qp(self.sqp)
        self.dst.core.deregister_mr(self._mrs["s"])
        self.src.core.deregister_mr(self._mrs["w"])
        self._sink_buf = bytearray()

    def finish(self, limit: float) -> None:
        """The results of ends still running when the run gave up at ``limit``."""
        if not self.flow.sink:
            errors = [f"timed out after {limit:g} s with {len(self.wcs)}/"
                      f"{self.plan.receives} WriteImm completions"]
            self.flow.sink = {"bytes": 0, "seconds": limit - self.t0,
                              "imm_completions": len(self.wcs), "sha256": "", "errors": errors,
                              **qp_report(self.dst.core, self.sqp)}
        if not self.flow.writer:
            self._writer_result(f"timed out after {limit:g} s with {self.done}/"
                                f"{self.plan.count} WRs done")


def _gids(host: SimHost) -> tuple[bytes, ...]:
    return tuple(bytes(p.gid) for p in host.core.config.ports)


def start_flows(hosts: dict[str, SimHost], flows: list[Flow], job: dict[str, Any],
                seed: int) -> list[FlowJobs]:
    """Start every flow now with the job parameters ``job`` (size, qp_type, profiles, ACK
    timeout, chunk, depth, wimm: what the emulation's runner writes into its job files)."""
    plan = WritePlan.of(job)
    stream = pattern(plan.size + STRIDE * max(0, len(flows) - 1), seed)
    view = memoryview(stream)
    out = []
    for i, flow in enumerate(flows):
        data = view[STRIDE * i:STRIDE * i + plan.size]
        flow.want_sha256 = hashlib.sha256(data).hexdigest()
        jobs = FlowJobs(flow, plan, hosts[flow.src], hosts[flow.dst], data)
        jobs.start({**job, "seed": flow.seed})
        out.append(jobs)
    return out

"""Bulk transfers on the simulated fabric, as the emulation's job app runs them
(mrcnet/fabric/hostjobs.py): per flow a sink on the destination and a writer on the source,
with the job's QP attributes (``qp_attr``) and transfer (``Transfer``: 256 KiB Writes, 8
outstanding, the last a WriteImm), the QP transitions of hosts.api (``init_qp``,
``connect_qp``) and the bulk library's work requests, completion accounting and checks
(hosts/bulk: ``work_request``, ``WriteOutcome``, ``arrival_errors``, ``digest``), so the
result fields are the jobs' and ``mrcnet.fabric.workloads.Workload`` sums them into the
summary of an emulated run. The jobs react to the core's completions instead of waiting on a
completion queue in a thread of their own.

Differences, all outside the transport: connections are set up out of band at time 0 (the
emulation exchanges QP numbers through files, so its flows start a few milliseconds apart);
the writer data are windows of one pattern stream (``pattern(size + STRIDE * (n - 1), seed)``,
flow i from byte ``STRIDE * i``) rather than one pattern per flow, so 1,024 writers hold 5 MiB
between them instead of 4 GiB; every sink buffer is real and hashed when its last WriteImm
arrives. Like the emulation's jobs, a writer releases its QP when it is done and a sink once
its writer is done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hosts import bulk
from hosts.api import RemoteQp, connect_qp, init_qp
from hosts.transport import Access, QpType
from hosts.transport.memory import MemoryRegion
from hosts.transport.types import Completion, QpAttr, QpAttrMask, RecvWR, WcStatus
from hosts.transport.types import Event as CoreEvent
from mrcnet.fabric.hostjobs import Transfer, qp_attr, qp_report
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
    plan: Transfer
    src: SimHost
    dst: SimHost
    data: memoryview
    wqp: int = 0
    sqp: int = 0
    t0: float = 0.0  # when both ends were connected (the jobs' clock start)
    posted: int = 0
    out: bulk.WriteOutcome = field(default_factory=lambda: bulk.WriteOutcome(0))
    wcs: list[Completion] = field(default_factory=list)  # the sink's receive completions
    _sink_buf: bytearray = field(default_factory=bytearray, repr=False)
    _w_mr: MemoryRegion | None = field(default=None, repr=False)
    _s_mr: MemoryRegion | None = field(default=None, repr=False)
    _peer: bulk.PeerInfo | None = field(default=None, repr=False)

    def start(self, job: dict[str, Any]) -> None:
        """Create and connect both ends now, the sink first (its receives posted at INIT, as
        the bulk library's Endpoint does), then the writer posts."""
        attr = qp_attr(job)
        qp_type = QpType(str(job["qp_type"]))
        now = self.src.sched.now
        self._sink_buf = bytearray(self.plan.size)
        self._s_mr = s_mr = self.dst.core.register_mr(self._sink_buf, ACCESS)
        self._w_mr = self.src.core.register_mr(self.data, ACCESS)
        self.sqp = self.dst.core.create_qp(qp_type, 0, 0)
        self.wqp = self.src.core.create_qp(qp_type, 0, 0)
        init_qp(CoreQp(self.dst, self.sqp), attr)
        for i in range(len(self.plan.expected)):
            self.dst.core.post_recv(self.sqp, RecvWR(wr_id=i + 1))
        init_qp(CoreQp(self.src, self.wqp), attr)
        self._peer = bulk.PeerInfo(self.sqp, _gids(self.dst), s_mr.addr, s_mr.rkey,
                                   s_mr.length)
        connect_qp(CoreQp(self.dst, self.sqp), RemoteQp(self.wqp, _gids(self.src)), attr)
        connect_qp(CoreQp(self.src, self.wqp), self._peer.remote_qp, attr)
        _dispatch(self.src).jobs[self.wqp] = self._on_writer
        _dispatch(self.dst).jobs[self.sqp] = self._on_sink
        self.t0 = now
        self.out = bulk.WriteOutcome(self.plan.count, progress=[(now, 0)])
        self._post()
        self.src.pump()
        self.dst.pump()

    def _post(self) -> None:
        plan, mr, peer, out = self.plan, self._w_mr, self._peer, self.out
        assert mr is not None and peer is not None
        now = self.src.sched.now
        while self.posted < plan.count and self.posted - len(out.completions) < plan.depth:
            self.src.core.post_send(self.wqp, bulk.work_request(
                self.posted, plan.count, plan.size, plan.chunk, plan.imm, mr.addr, mr.lkey,
                peer), now)
            self.posted += 1

    def _on_writer(self, wc: Completion) -> None:
        if self.flow.writer:
            return
        out, plan = self.out, self.plan
        out.record(wc, plan.size, plan.chunk, self.src.sched.now)
        if out.errors or len(out.completions) == plan.count:
            self._writer_result()
        else:
            self._post()

    def _writer_result(self, timed_out: str = "") -> None:
        out = self.out
        if timed_out and not out.errors:
            out.errors.append(timed_out)
            out.timed_out = True
        out.seconds = self.src.sched.now - self.t0
        self.flow.writer = {
            "bytes": self.plan.size if out.ok else 0, "seconds": out.seconds,
            "errors": out.errors, "completed_wrs": len(out.completions),
            "progress": [list(p) for p in out.progress],
            **qp_report(self.src.core, self.wqp)}
        del _dispatch(self.src).jobs[self.wqp]
        self.src.core.destroy_qp(self.wqp)  # the writer releases at once
        self._release_sink()

    def _on_sink(self, wc: Completion) -> None:
        if self.flow.sink:
            return
        self.wcs.append(wc)
        if wc.status != WcStatus.SUCCESS or len(self.wcs) == len(self.plan.expected):
            self._sink_result()

    def _sink_result(self, errors: list[str] | None = None) -> None:
        errors = errors or bulk.arrival_errors(self.wcs, self.plan.expected)
        self.flow.sink = {
            "bytes": self.plan.size if not errors else 0,
            "seconds": self.dst.sched.now - self.t0,
            "imm_completions": len(self.wcs),
            "sha256": bulk.digest(self._sink_buf) if not errors else "", "errors": errors,
            **qp_report(self.dst.core, self.sqp)}
        self._release_sink()

    def _release_sink(self) -> None:
        """The sink keeps its QP until its writer is done (it may still have to acknowledge
        a retransmission), then releases it and its buffer."""
        if not (self.flow.writer and self.flow.sink) or self._s_mr is None:
            return
        _dispatch(self.dst).jobs.pop(self.sqp, None)
        self.dst.core.destroy_qp(self.sqp)
        self.dst.core.deregister_mr(self._s_mr)
        if self._w_mr is not None:
            self.src.core.deregister_mr(self._w_mr)
        self._s_mr = self._w_mr = None
        self._sink_buf = bytearray()

    def finish(self, limit: float) -> None:
        """The results of ends still running when the run gave up at ``limit``."""
        if not self.flow.sink:
            self._sink_result([f"timed out after {limit:g} s with {len(self.wcs)}/"
                               f"{len(self.plan.expected)} WriteImm completions"])
        if not self.flow.writer:
            self._writer_result(f"timed out after {limit:g} s with "
                                f"{len(self.out.completions)}/{self.plan.count} WRs done")


def _gids(host: SimHost) -> tuple[bytes, ...]:
    return tuple(bytes(p.gid) for p in host.core.config.ports)


def start_flows(hosts: dict[str, SimHost], flows: list[Flow], job: dict[str, Any],
                seed: int) -> list[FlowJobs]:
    """Start every flow now with the job parameters ``job`` (size, qp_type, profiles, ACK
    timeout, chunk, depth, wimm: what the emulation's runner writes into its job files)."""
    plan = Transfer.of(job)
    stream = bulk.pattern(plan.size + STRIDE * max(0, len(flows) - 1), seed)
    view = memoryview(stream)
    out = []
    for i, flow in enumerate(flows):
        data = view[STRIDE * i:STRIDE * i + plan.size]
        flow.want_sha256 = bulk.digest(data)
        jobs = FlowJobs(flow, plan, hosts[flow.src], hosts[flow.dst], data)
        jobs.start({**job, "seed": flow.seed})
        out.append(jobs)
    return out

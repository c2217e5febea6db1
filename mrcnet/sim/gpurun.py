"""One GPU's part of a collective on the simulated clock: the emulation's runner
(hosts/collective/runner.py ``CollectiveRunner``), driven by events instead of a thread.

The buffers, inputs, Writes (``step_writes``), reduction (``apply_arrivals``) and check
(``verify``, against ``expected_sum``) are the runner's own; what differs is how it waits.
The emulated runner blocks at the controller's barrier and on its completion queue; here

- set-up registers the two buffers with the simulated host's real transport core, creates one
  MRC QP per peer with the collective job's attributes (mrcnet/fabric/collective_job.py
  ``collective_attr``), posts one receive per step a peer sends in, and installs the router
  tables of every step (hosts/collective/routes.py ``router_tables``); the QP numbers and
  buffer addresses are exchanged in a dict (the emulation's out-of-band files);
- on the release of step i: the router switches to step i's routes, the Writes are posted
  (through the core, as mrcnet/sim/workload.py posts the bulk jobs'), and the host is pumped;
- on completions (the host's events): the own Writes acknowledged and the peers' WriteImm of
  step i arrived -> the reduction, then arrival at barrier i + 1.

Reductions take no simulated time (the emulation measures theirs as CPU seconds, reported as
``reduce_cpu_s``; here that is 0).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, cast

from common.collective_plan import RunPlan
from hosts.api import Context, QpAttr, RemoteQp, connect_qp, init_qp
from hosts.collective.routes import router_tables
from hosts.collective.runner import (
    CollectiveRunner,
    Exchange,
    StepBarrier,
    StepTiming,
    _bytes,
)
from hosts.transport import QpType
from hosts.transport.types import Completion, RecvWR, WcOpcode, WcStatus
from hosts.transport.types import Event as CoreEvent
from mrcnet.sim.hostnode import SimHost
from mrcnet.sim.workload import ACCESS, CoreQp

Arrive = Callable[[int, int], None]  # (rank, step): the controller's barrier


class SimGpuRunner(CollectiveRunner):
    """Rank ``rank`` of ``plan`` on simulated host ``host``; ``arrive`` is the session's
    barrier. ``error`` says why this GPU stopped (empty: it did not)."""

    def __init__(self, host: SimHost, plan: RunPlan, rank: int, arrive: Arrive, seed: int,
                 attr: QpAttr) -> None:
        # The runner's context, barrier and exchange are the blocking ones of an agent
        # process; this class replaces every method that would use them.
        super().__init__(cast(Context, None), plan, rank, cast(StepBarrier, None),
                         cast(Exchange, None), host.router, seed=seed, clock=host.sched.clock,
                         attr=attr)
        self.host = host
        self.arrive = arrive
        self.error = ""
        self.qpn_peer: dict[int, int] = {}  # QPN -> peer rank
        self._pending = 0
        self._waiting = 0
        self._timing: StepTiming | None = None

    # -- set-up -----------------------------------------------------------------------
    def publish(self, board: dict[int, dict[str, Any]]) -> None:
        """Buffers, QPs, receives and routes; this GPU's details into ``board``."""
        core = self.host.core
        self.mr_data = core.register_mr(_bytes(self.data), ACCESS)  # type: ignore[assignment]
        self.mr_staging = core.register_mr(_bytes(self.staging), ACCESS)  # type: ignore[assignment]
        if self.router is not None:
            for step, table in router_tables(self.plan, self.rank).items():
                self.router.install(step, table)
        for peer in self.peers:
            qpn = core.create_qp(QpType.MRC, 0, 0)
            init_qp(CoreQp(self.host, qpn), self.attr)
            self.qps[peer] = qpn
            self.qpn_peer[qpn] = peer
        for i, st in enumerate(self.plan.algorithm.steps, start=1):
            for src in st.receives_from(self.rank):
                core.post_recv(self.qps[src], RecvWR(wr_id=i))
        board[self.rank] = {
            "gids": tuple(bytes(p.gid) for p in core.config.ports),
            "qpns": {peer: qpn for peer, qpn in self.qps.items()},
            "data": [self.mr_data.addr, self.mr_data.rkey],
            "staging": [self.mr_staging.addr, self.mr_staging.rkey]}
        self.host.handler = self._on_event

    def connect(self, board: dict[int, dict[str, Any]]) -> None:
        """Connect every QP to its peer's, from the peers' published details."""
        for peer in self.peers:
            info = board[peer]
            self._remote[peer] = info
            connect_qp(CoreQp(self.host, self.qps[peer]),
                       RemoteQp(int(info["qpns"][self.rank]), info["gids"]), self.attr)

    # -- steps ------------------------------------------------------------------------
    def release(self, step: int, released_s: float) -> None:
        """The controller released ``step`` (the last barrier: the run is over)."""
        if self.error:
            return
        steps = self.plan.algorithm.steps
        if step > len(steps):
            self.result.sha256 = hashlib.sha256(_bytes(self.data)).hexdigest()
            return
        if self.router is not None:
            self.router.select(step)
        timing = self._timing = StepTiming(step, released_s, self.host.sched.now)
        st = steps[step - 1]
        dst = st.sends[self.rank]
        writes = self.step_writes(step)
        now = self.host.sched.now
        for wr in writes:
            assert dst is not None
            self.host.core.post_send(self.qps[dst], wr, now)
            timing.bytes_sent += wr.length
        self._pending = len(writes)
        self._waiting = len(st.receives_from(self.rank))
        if not self._pending and not self._waiting:
            self._finish(timing)
            return
        self.host.pump()

    def _on_event(self, ev: CoreEvent) -> None:
        if not isinstance(ev, Completion) or ev.qpn not in self.qpn_peer or self.error:
            return
        timing = self._timing
        step = timing.step if timing is not None else 0
        if ev.status != WcStatus.SUCCESS:
            self.error = (f"rank {self.rank} step {step}: completion {ev.status.value} on the "
                          f"QP to rank {self.qpn_peer[ev.qpn]}")
            return
        if timing is None:
            self.error = f"rank {self.rank}: a completion before the first step"
            return
        now = self.host.sched.now
        if ev.opcode == WcOpcode.RECV_RDMA_WITH_IMM:
            if ev.imm != step:
                self.error = f"rank {self.rank} step {step}: WriteImm of step {ev.imm} arrived"
                return
            self._waiting -= 1
            if not self._waiting:
                timing.received_s = now
        else:
            self._pending -= 1
            if not self._pending:
                timing.sent_s = now
        if not self._pending and not self._waiting:
            self._finish(timing)

    def _finish(self, timing: StepTiming) -> None:
        self.apply_arrivals(timing.step, timing)
        timing.done_s = self.host.sched.now
        self.result.steps.append(timing)
        self._timing = None
        self.arrive(self.rank, timing.step + 1)

    # -- report -----------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The GPU's result as the emulation's collective job reports it (the fields the
        run's outcome reads: router counters, per-peer QP counters)."""
        out = self.result.to_json()
        router = self.router
        out["router"] = ({k: getattr(router.counters, k) for k in router.counters.__slots__}
                         if router is not None else {})
        out["qp_stats"] = {str(peer): dict(self.host.core.qp_stats(qpn))
                           for peer, qpn in self.qps.items()}
        out["errors"] = [self.error] if self.error else []
        return out

"""One GPU's part of a collective: real buffers, MRC Writes, WriteImm arrival, numpy reduction.

Set-up (before the first barrier): one RC-style MRC QP per peer the rank exchanges with in any
step, two registered buffers (``data``: the rank's vector, written in place by all-gather
steps; ``staging``: where reduce-scatter blocks land before they are added), one posted
receive per step in which a peer sends to this rank, and the QP/MR details published out of
band (``Exchange``) and the peers' read back.

Step i (1-based): wait at the barrier for step i (the controller releases it once every GPU
arrived and the OCS serves step i's topology), switch the router to step i's routes, write
every block of ``blocks[rank]`` to the peer (reduce-scatter and all-to-all: into its staging
area; all-gather: into its data buffer at the block's offset), the last Write a WriteImm
carrying the step number; then wait for the own Writes' completions and the peer's WriteImm,
and add the received blocks (reduce-scatter) or copy them over the own (all-to-all: only now,
as this rank may have been sending from the same positions). A final barrier (step s + 1) reports the end.

Blocks are contiguous ranges of ``size / n`` bytes (block b at offset b x block size).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from common.collective_plan import RunPlan
from hosts.agent.router import CircuitRouter
from hosts.api import (
    Access,
    Context,
    QpAttr,
    QpInitAttr,
    QpType,
    RecvWR,
    RemoteQp,
    RetryAttr,
    SendWR,
    WcOpcode,
    WcStatus,
    WrOpcode,
    connect_qp,
    init_qp,
)
from hosts.collective.routes import router_tables


class CollectiveRunError(RuntimeError):
    """The collective could not complete on this GPU (the message says at which step)."""


class StepBarrier(Protocol):
    def wait(self, step: int, timeout: float) -> float:
        """Block until ``step`` is released; return the release time (run clock)."""
        ...


class Exchange(Protocol):
    def publish(self, info: dict[str, Any]) -> None: ...
    def fetch(self, rank: int, timeout: float) -> dict[str, Any]: ...


def _bytes(array: np.ndarray) -> memoryview:
    """The array's memory as bytes (registered with the agent, hashed)."""
    return memoryview(array.data).cast("B")


def make_input(seed: int, rank: int, dtype: str, count: int) -> np.ndarray:
    """Rank ``rank``'s input vector: a pure function of (seed, rank, dtype, count), so anyone
    can recompute every input (and their sum) independently."""
    rng = np.random.Generator(np.random.PCG64([seed, rank]))
    if dtype == "int32":
        return rng.integers(-(1 << 31), 1 << 31, size=count, dtype=np.int32)
    return rng.standard_normal(count, dtype=np.float32)


def expected_sum(seed: int, n: int, dtype: str, count: int) -> np.ndarray:
    """Sum of all ranks' inputs, one input at a time (int32 wraps as numpy's does)."""
    acc: np.ndarray = np.zeros(count, dtype=np.float64 if dtype == "float32" else np.int32)
    for r in range(n):
        np.add(acc, make_input(seed, r, dtype, count), out=acc, casting="unsafe")
    return acc


@dataclass
class StepTiming:
    step: int
    released_s: float  # release time the barrier returned (run clock)
    resumed_s: float  # when this GPU saw the release
    sent_s: float | None = None  # own Writes acknowledged
    received_s: float | None = None  # peer's WriteImm arrived
    done_s: float = 0.0  # reduction finished
    bytes_sent: int = 0
    bytes_received: int = 0


@dataclass
class RunResult:
    rank: int
    steps: list[StepTiming] = field(default_factory=list)
    sha256: str = ""
    verified: bool | None = None
    max_abs_error: float = 0.0
    reduce_s: float = 0.0  # CPU time spent in reductions
    qp_stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "sha256": self.sha256,
            "verified": self.verified,
            "max_abs_error": self.max_abs_error,
            "reduce_s": self.reduce_s,
            "steps": [vars(s) for s in self.steps],
            "qp_stats": self.qp_stats,
        }


class CollectiveRunner:
    """Runs ``plan`` as rank ``rank`` over the agent behind ``ctx``."""

    def __init__(
        self, ctx: Context, plan: RunPlan, rank: int, barrier: StepBarrier,
        exchange: Exchange, router: CircuitRouter | None, seed: int = 1,
        clock: Callable[[], float] = time.monotonic, timeout: float = 120.0,
        attr: QpAttr | None = None,
    ) -> None:
        self.ctx = ctx
        self.plan = plan
        self.rank = rank
        self.barrier = barrier
        self.exchange = exchange
        self.router = router
        self.seed = seed
        self.clock = clock
        self.timeout = timeout
        self.attr = attr or QpAttr(mpr=64, mpr_dest=64, timeout=14,
                                   retry=RetryAttr(linear_cnt=7, exp_cnt=25))
        n = plan.n
        self.count = plan.size_bytes // 4
        self.block_items = self.count // n
        self.data = make_input(seed, rank, plan.dtype, self.count)
        self.staging = np.zeros_like(self.data)
        self.peers = sorted({v for st in plan.algorithm.steps for v in
                             (st.sends[rank], *st.receives_from(rank)) if v is not None})
        self.result = RunResult(rank)
        self.qps: dict[int, Any] = {}
        self._remote: dict[int, dict[str, Any]] = {}

    # -- set-up -----------------------------------------------------------------------
    def setup(self) -> None:
        ctx = self.ctx
        self.cq = ctx.create_cq(1 << 16)
        self.mr_data = ctx.reg_mr(_bytes(self.data),
                                  Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        self.mr_staging = ctx.reg_mr(_bytes(self.staging),
                                     Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        if self.router is not None:
            for step, table in router_tables(self.plan, self.rank).items():
                self.router.install(step, table)
        gids = [ctx.query_port(i).gid.hex() for i in range(ctx.query_device().phys_port_cnt)]
        qpns = {}
        for peer in self.peers:
            qp = ctx.create_qp(QpInitAttr(send_cq=self.cq, recv_cq=self.cq,
                                          qp_type=QpType.MRC))
            init_qp(qp, self.attr)
            self.qps[peer] = qp
            qpns[str(peer)] = qp.qpn
        for i, st in enumerate(self.plan.algorithm.steps, start=1):
            for src in st.receives_from(self.rank):
                self.qps[src].post_recv(RecvWR(wr_id=i))
        self.exchange.publish({
            "rank": self.rank, "gids": gids, "qpns": qpns,
            "data": [self.mr_data.addr, self.mr_data.rkey],
            "staging": [self.mr_staging.addr, self.mr_staging.rkey],
        })
        for peer in self.peers:
            info = self.exchange.fetch(peer, self.timeout)
            self._remote[peer] = info
            remote = RemoteQp(int(info["qpns"][str(self.rank)]),
                              tuple(bytes.fromhex(g) for g in info["gids"]))
            connect_qp(self.qps[peer], remote, self.attr)

    def close(self) -> None:
        """Release the QPs, the CQ and the registrations (idempotent). After the final
        barrier nothing needs them: every GPU arrived there only once all its Writes were
        acknowledged. A QP left behind would keep probing the EVs it holds bad through the
        next run's circuits, and every QP costs the agent's loop on each iteration."""
        for qp in self.qps.values():
            qp.destroy()
        if hasattr(self, "cq") and not self.cq.destroyed:
            self.cq.destroy()
            self.cq.destroyed = True
        for name in ("mr_data", "mr_staging"):
            mr = getattr(self, name, None)
            if mr is not None:
                mr.dereg()
                setattr(self, name, None)

    # -- steps ------------------------------------------------------------------------
    def run(self) -> RunResult:
        steps = self.plan.algorithm.steps
        for i in range(1, len(steps) + 1):
            released = self.barrier.wait(i, self.timeout)
            if self.router is not None:
                self.router.select(i)
            timing = StepTiming(i, released, self.clock())
            self._step(i, timing)
            self.result.steps.append(timing)
        self.barrier.wait(len(steps) + 1, self.timeout)
        self.result.sha256 = hashlib.sha256(_bytes(self.data)).hexdigest()
        return self.result

    def _step(self, i: int, timing: StepTiming) -> None:
        st = self.plan.algorithm.steps[i - 1]
        me = self.rank
        dst = st.sends[me]
        sources = st.receives_from(me)
        pending_sends = 0
        if dst is not None:
            qp = self.qps[dst]
            for wr in self.step_writes(i):
                qp.post_send(wr)
                pending_sends += 1
                timing.bytes_sent += wr.length
        waiting_recv = len(sources)
        deadline = time.monotonic() + self.timeout
        while pending_sends or waiting_recv:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CollectiveRunError(
                    f"rank {me} step {i}: timed out with {pending_sends} Writes unacknowledged "
                    f"and {waiting_recv} arrivals missing; QP to {dst}: {self._stats(dst)}")
            for wc in self.cq.wait(1, min(left, 1.0)):
                if wc.status != WcStatus.SUCCESS:
                    raise CollectiveRunError(f"rank {me} step {i}: completion {wc.status.value} "
                                             f"on QP {wc.qpn}")
                if wc.opcode == WcOpcode.RECV_RDMA_WITH_IMM:
                    if wc.imm != i:
                        raise CollectiveRunError(f"rank {me} step {i}: WriteImm of step "
                                                 f"{wc.imm} arrived")
                    waiting_recv -= 1
                    if not waiting_recv:
                        timing.received_s = self.clock()
                else:
                    pending_sends -= 1
                    if not pending_sends:
                        timing.sent_s = self.clock()
        t0 = time.process_time()
        self.apply_arrivals(i, timing)
        self.result.reduce_s += time.process_time() - t0
        timing.done_s = self.clock()

    def step_writes(self, i: int) -> list[SendWR]:
        """This rank's Writes of step ``i`` to its peer, in posting order: one per block of
        ``blocks[rank]`` (reduce-scatter and all-to-all into the peer's staging area,
        all-gather into its data buffer), the last a WriteImm carrying the step number. Needs
        ``mr_data`` and the peer's published addresses (``_remote``)."""
        st = self.plan.algorithm.steps[i - 1]
        dst = st.sends[self.rank]
        blocks = st.blocks[self.rank]
        if dst is None or not blocks:
            return []
        block = self.block_items * 4
        addr, rkey = self._remote[dst]["data" if st.kind == "all-gather" else "staging"]
        return [SendWR(
            wr_id=i << 16 | k,
            opcode=WrOpcode.WRITE_WITH_IMM if k == len(blocks) - 1 else WrOpcode.WRITE,
            local_addr=self.mr_data.addr + b * block, length=block, lkey=self.mr_data.lkey,
            remote_addr=int(addr) + b * block, rkey=int(rkey),
            imm=i if k == len(blocks) - 1 else 0) for k, b in enumerate(blocks)]

    def apply_arrivals(self, i: int, timing: StepTiming) -> None:
        """Step ``i``'s received blocks, once the own Writes are acknowledged and the peers'
        WriteImm arrived: added to the own (reduce-scatter) or copied over them (all-to-all:
        only now, as this rank may have been sending from the same positions)."""
        st = self.plan.algorithm.steps[i - 1]
        sources = st.receives_from(self.rank)
        items = self.block_items
        block = items * 4
        if st.kind == "reduce-scatter":
            for src in sources:
                for b in st.blocks[src]:
                    lo = b * items
                    self.data[lo:lo + items] += self.staging[lo:lo + items]
                    timing.bytes_received += block
        elif st.kind == "all-to-all":  # own Writes are acknowledged: the positions are free
            for src in sources:
                for b in st.blocks[src]:
                    lo = b * items
                    self.data[lo:lo + items] = self.staging[lo:lo + items]
                    timing.bytes_received += block
        else:
            for src in sources:
                timing.bytes_received += block * len(st.blocks[src])

    def _stats(self, peer: int | None) -> dict[str, Any]:
        """The transport's counters of the QP to ``peer`` (for error messages)."""
        if peer is None:
            return {}
        core: Any = self.ctx.agent.core
        try:
            return dict(self.ctx.agent.call(core.qp_stats, self.qps[peer].qpn))
        except Exception as exc:  # the diagnosis must not hide the error
            return {"error": repr(exc)}

    # -- checks -----------------------------------------------------------------------
    def verify(self) -> bool:
        """Compare the blocks this rank must hold with the sum of every input, recomputed
        here (int32 exactly; float32 within the error of a different summation order)."""
        plan = self.plan
        want = expected_sum(self.seed, plan.n, plan.dtype, self.count)
        items = self.block_items
        if plan.phase == "reduce-scatter":
            owned = self._owned_after_reduce_scatter()
            mask = np.zeros(self.count, dtype=bool)
            for b in owned:
                mask[b * items:(b + 1) * items] = True
        elif plan.phase == "all-gather":
            return self._verify_all_gather()
        elif plan.phase == "all-to-all":
            return self._verify_all_to_all()
        else:
            mask = np.ones(self.count, dtype=bool)
        got = self.data[mask]
        ref = want[mask]
        if plan.dtype == "int32":
            ok = bool(np.array_equal(got, ref.astype(np.int32)))
            self.result.max_abs_error = 0.0 if ok else float(
                np.max(np.abs(got.astype(np.int64) - ref.astype(np.int64))))
        else:
            err = np.abs(got.astype(np.float64) - ref)
            self.result.max_abs_error = float(err.max()) if len(err) else 0.0
            ok = bool(np.all(err <= 1e-4 * (1.0 + np.abs(ref))))
        self.result.verified = ok
        return ok

    def _owned_after_reduce_scatter(self) -> list[int]:
        owned = set(range(self.plan.n))
        for st in self.plan.algorithm.steps:
            owned -= set(st.blocks[self.rank])
        return sorted(owned)

    def _verify_all_gather(self) -> bool:
        """All-gather alone: rank r starts with block r of its input; afterwards every rank
        holds block b of rank b's input."""
        items = self.block_items
        ok = True
        for b in range(self.plan.n):
            src = make_input(self.seed, b, self.plan.dtype, self.count)[b * items:(b + 1) * items]
            ok = ok and bool(np.array_equal(self.data[b * items:(b + 1) * items], src))
        self.result.verified = ok
        return ok

    def _verify_all_to_all(self) -> bool:
        """All-to-all: position j of this rank holds what rank (rank - j) mod n had at
        position j, its block for this rank (common/collectives.py)."""
        n, items = self.plan.n, self.block_items
        ok = True
        for j in range(n):
            origin = (self.rank - j) % n
            src = make_input(self.seed, origin, self.plan.dtype, self.count)
            ok = ok and bool(np.array_equal(self.data[j * items:(j + 1) * items],
                                            src[j * items:(j + 1) * items]))
        self.result.verified = ok
        return ok

"""Application API shaped like mrc.h (verbs naming and lifecycle), over a running host agent.

Mapping to mrc.h (C name -> Python):

=============================================  ==============================================
mrc_query_device / _ex, mrc_query_version      Context.query_device(), Context.query_version()
mrc_query_port                                 Context.query_port(port_num)
ibv_open_device / mrc_create_context           open_device(agent) -> Context; Context.close()
ibv_create_comp_channel                        Context.create_comp_channel()
mrc_create_cq / mrc_destroy_cq                 Context.create_cq(cqe, channel); CQ.destroy()
mrc_poll_cq                                    CQ.poll(num_entries)
mrc_req_notify_cq                              CQ.req_notify()
ibv_get_cq_event / ibv_ack_cq_events           CompletionChannel.get_cq_event(timeout),
                                               CompletionChannel.ack_cq_events(cq, n)
ibv_reg_mr / ibv_dereg_mr                      Context.reg_mr(buf, access); MR.dereg()
mrc_create_qp / destroy / query / modify       Context.create_qp(QpInitAttr); QP.destroy(),
                                               QP.query(), QP.modify(attr, mask)
mrc_get_qpn                                    QP.qpn
mrc_post_send (Write, WriteImm only)           QP.post_send(wr | [wr, ...])
mrc_post_recv (WriteImm receive buffers)       QP.post_recv(wr | [wr, ...])
mrc_get_async_event / mrc_ack_async_event      Context.get_async_event(timeout),
                                               Context.ack_async_event(ev)
=============================================  ==============================================

Errors are exceptions instead of errno: ``QpError`` for QP misuse (bad transition, missing
attribute, QP not in RTS, SQ full), ``ValueError`` for bad buffers, ``ApiError`` for misuse of
the API objects (destroyed objects, CQ still in use). Calls are thread-safe; completions and
async events are delivered by the agent's loop thread, so an application waits on a
completion channel (or polls) like it would with verbs. Timeouts are seconds of the run's
clock (the agent's, common/vclock.py: virtual seconds under time dilation).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, IntFlag
from typing import Protocol, TypeVar

from hosts.agent.agent import Agent
from hosts.transport import (
    ALL_ACCESS,
    EXP_CNT_INFINITE,
    Access,
    AsyncEvent,
    AsyncEventKind,
    Completion,
    HostCore,
    MemoryRegion,
    QpAttr,
    QpAttrMask,
    QpError,
    QpHintFlag,
    QpState,
    QpType,
    RecvWR,
    RetryAttr,
    SendWR,
    WcOpcode,
    WcStatus,
    WrOpcode,
)

__all__ = [
    "ALL_ACCESS",
    "CQ",
    "EXP_CNT_INFINITE",
    "MR",
    "MRC_API_VERSION",
    "QP",
    "Access",
    "ApiError",
    "AsyncEvent",
    "AsyncEventKind",
    "Completion",
    "CompletionChannel",
    "Context",
    "DeviceAttr",
    "DeviceCap",
    "PortAttr",
    "PortState",
    "QpAttr",
    "QpAttrMask",
    "QpError",
    "QpHandle",
    "QpHint",
    "QpHintFlag",
    "QpInitAttr",
    "QpState",
    "QpType",
    "RecvWR",
    "RemoteQp",
    "RetryAttr",
    "SendWR",
    "WcOpcode",
    "WcStatus",
    "WrOpcode",
    "connect_qp",
    "init_qp",
    "open_device",
]

MRC_API_VERSION = "1.0"
T = TypeVar("T")


class ApiError(RuntimeError):
    """Misuse of an API object (destroyed, still referenced, wrong context)."""


class DeviceCap(IntFlag):
    """mrc_query_device capability flags."""

    TRIM_NACK = 1 << 0
    DYNAMIC_MPR = 1 << 1
    SVC_TIME = 1 << 2


class PortState(Enum):
    ACTIVE = "ACTIVE"
    DOWN = "DOWN"


@dataclass(frozen=True, slots=True)
class DeviceAttr:
    name: str
    api_version: str
    caps: DeviceCap
    phys_port_cnt: int
    max_qp: int
    max_qp_wr: int
    max_cq: int
    max_cqe: int
    max_mr_size: int
    path_mtu: int


@dataclass(frozen=True, slots=True)
class PortAttr:
    port_num: int  # 0-based: port i is plane i
    state: PortState
    gid: bytes
    mac: bytes
    ifname: str
    mtu: int
    plane: int


@dataclass(frozen=True, slots=True)
class QpInitAttr:
    """mrc_qp_init_attr: type, CQs and queue capacities."""

    send_cq: CQ
    recv_cq: CQ
    qp_type: QpType = QpType.MRC
    max_send_wr: int = 4096
    max_recv_wr: int = 4096


MAX_CQE = 1 << 20


class CompletionChannel:
    """A queue of CQs that produced a completion while armed (ibv_comp_channel)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._cond = threading.Condition()
        self._ready: deque[CQ] = deque()
        self._cqs = 0  # CQs using this channel
        self._fd = -1
        self.destroyed = False

    def _notify(self, cq: CQ) -> None:
        with self._cond:
            self._ready.append(cq)
            self._cond.notify_all()
            if self._fd >= 0:
                os.eventfd_write(self._fd, 1)

    def fileno(self) -> int:
        """A file descriptor that is readable while a CQ event is pending (the channel's fd in
        verbs), for applications that wait on several sources with select/epoll."""
        with self._cond:
            if self._fd < 0:
                self._fd = os.eventfd(len(self._ready), os.EFD_NONBLOCK | os.EFD_SEMAPHORE
                                      | os.EFD_CLOEXEC)
            return self._fd

    def get_cq_event(self, timeout: float | None = None) -> CQ | None:
        """Block until an armed CQ got a completion; None on timeout (seconds of the run's
        clock). Acknowledge with ack_cq_events and re-arm with CQ.req_notify before polling."""
        wall = None if timeout is None else _to_wall(self.ctx, timeout)
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._ready) or self.destroyed, wall):
                return None
            if not self._ready:
                return None
            cq = self._ready.popleft()
            if self._fd >= 0:
                try:
                    os.eventfd_read(self._fd)
                except BlockingIOError:
                    pass
            cq.events_delivered += 1
            return cq

    def ack_cq_events(self, cq: CQ, nevents: int) -> None:
        if nevents < 0 or nevents > cq.events_delivered - cq.events_acked:
            raise ApiError(f"ack_cq_events({nevents}): only "
                           f"{cq.events_delivered - cq.events_acked} unacknowledged")
        cq.events_acked += nevents

    def destroy(self) -> None:
        with self._cond:
            if self._cqs:
                raise ApiError("completion channel still used by a CQ")
            self.destroyed = True
            self._cond.notify_all()
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


class CQ:
    """A completion queue; the agent's loop thread appends, any thread polls."""

    def __init__(self, ctx: Context, cq_id: int, cqe: int, channel: CompletionChannel | None,
                 cq_context: object = None) -> None:
        self.ctx = ctx
        self.cq_id = cq_id
        self.cqe = cqe
        self.channel = channel
        self.cq_context = cq_context
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._entries: deque[Completion] = deque()
        self._armed = False
        self.overruns = 0  # completions lost because the CQ was full (also an async event)
        self.events_delivered = 0
        self.events_acked = 0
        self.qp_refs = 0
        self.destroyed = False

    def _push(self, wc: Completion) -> bool:
        """Called by the loop; False if the CQ overflowed."""
        notify = False
        with self._lock:
            if len(self._entries) >= self.cqe:
                self.overruns += 1
                return False
            self._entries.append(wc)
            if self._armed:
                self._armed = False
                notify = True
            self._cond.notify_all()
        if notify and self.channel is not None:
            self.channel._notify(self)
        return True

    def poll(self, num_entries: int = 1) -> list[Completion]:
        """Up to ``num_entries`` completions, oldest first (mrc_poll_cq); never blocks."""
        out: list[Completion] = []
        with self._lock:
            while self._entries and len(out) < num_entries:
                out.append(self._entries.popleft())
        return out

    def req_notify(self, solicited_only: bool = False) -> None:
        """Arm: the next completion puts this CQ on its channel (once)."""
        if self.channel is None:
            raise ApiError("req_notify on a CQ without a completion channel")
        with self._lock:
            self._armed = True

    def wait(self, num_entries: int, timeout: float) -> list[Completion]:
        """Convenience (not in mrc.h): block until ``num_entries`` completions are available or
        ``timeout`` (seconds of the run's clock) passes; returns what is there (poll
        semantics)."""
        deadline = time.monotonic() + _to_wall(self.ctx, timeout)
        with self._cond:
            self._cond.wait_for(lambda: len(self._entries) >= num_entries,
                                max(0.0, deadline - time.monotonic()))
        return self.poll(num_entries)

    def destroy(self) -> None:
        if self.qp_refs:
            raise ApiError(f"CQ {self.cq_id} is still used by {self.qp_refs} QP(s)")
        self.ctx._forget_cq(self)


class MR:
    """A registered memory region (ibv_mr): ``lkey``, ``rkey``, ``addr`` (virtual), ``length``."""

    def __init__(self, ctx: Context, region: MemoryRegion) -> None:
        self.ctx = ctx
        self.region = region
        self.lkey = region.lkey
        self.rkey = region.rkey
        self.addr = region.addr
        self.length = region.length

    def dereg(self) -> None:
        self.ctx._call(self.ctx._core.deregister_mr, self.region)


class QpHint:
    """A QP hint object (mrc_create_qp_hint / query / modify / destroy): a reusable set of
    optional features (QpHintFlag) that ``init_qp``/``connect_qp`` apply at INIT."""

    def __init__(self, ctx: Context, flags: QpHintFlag) -> None:
        self.ctx = ctx
        self._flags = flags
        self.destroyed = False

    def query(self) -> QpHintFlag:
        self._alive()
        return self._flags

    def modify(self, flags: QpHintFlag) -> None:
        """Change the flags; QPs already past INIT keep the hint they were given."""
        self._alive()
        self._flags = QpHintFlag(flags)

    def destroy(self) -> None:
        self.destroyed = True

    def _alive(self) -> None:
        if self.destroyed:
            raise ApiError("QP hint was destroyed")


class QP:
    """A queue pair: the application's handle on one connection of the core."""

    def __init__(self, ctx: Context, qpn: int, init: QpInitAttr) -> None:
        self.ctx = ctx
        self.qpn = qpn
        self.init_attr = init
        self.qp_type = init.qp_type
        self.destroyed = False

    def modify(self, attr: QpAttr, mask: QpAttrMask) -> None:
        """mrc_modify_qp; raises QpError on a bad transition or attribute (nothing applied)."""
        self._alive()
        self.ctx._call(self.ctx._core.modify_qp, self.qpn, attr, mask, self.ctx.agent.now())

    def query(self) -> QpAttr:
        self._alive()
        return self.ctx._call(self.ctx._core.query_qp, self.qpn)

    def post_send(self, wrs: SendWR | Iterable[SendWR]) -> None:
        """Post Write/WriteImm work requests in order. On an error, the WRs before the failing
        one are posted and the exception names the failing wr_id (like verbs' bad_wr)."""
        self._alive()
        batch = [wrs] if isinstance(wrs, SendWR) else list(wrs)
        self.ctx._call(self._post_send_locked, batch)

    def _post_send_locked(self, batch: list[SendWR]) -> None:
        core = self.ctx._core
        now = self.ctx.agent.now()
        for wr in batch:
            try:
                core.post_send(self.qpn, wr, now)
            except (QpError, ValueError) as exc:
                raise type(exc)(f"post_send wr_id={wr.wr_id}: {exc}") from exc

    def post_recv(self, wrs: RecvWR | Iterable[RecvWR]) -> None:
        self._alive()
        batch = [wrs] if isinstance(wrs, RecvWR) else list(wrs)
        self.ctx._call(self._post_recv_locked, batch)

    def _post_recv_locked(self, batch: list[RecvWR]) -> None:
        for wr in batch:
            try:
                self.ctx._core.post_recv(self.qpn, wr)
            except (QpError, ValueError) as exc:
                raise type(exc)(f"post_recv wr_id={wr.wr_id}: {exc}") from exc

    def destroy(self) -> None:
        if self.destroyed:
            return
        self.ctx._call(self._destroy_locked)
        self.destroyed = True
        self.init_attr.send_cq.qp_refs -= 1
        self.init_attr.recv_cq.qp_refs -= 1
        self.ctx._qps.pop(self.qpn, None)

    def _destroy_locked(self) -> None:
        self.ctx._core.destroy_qp(self.qpn)
        self.ctx.agent.forget_qp(self.qpn)

    def _alive(self) -> None:
        if self.destroyed:
            raise ApiError(f"QP {self.qpn} was destroyed")


class Context:
    """An open device: the application's view of one host agent (mrc context)."""

    _next_cq_id = 1
    _cq_id_lock = threading.Lock()

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        # The agent is typed against a protocol; the API needs the full HostCore surface
        # (a test stand-in offers the same methods).
        self._core: HostCore = agent.core  # type: ignore[assignment]
        self._cqs: dict[int, CQ] = {}
        self._qps: dict[int, QP] = {}
        self._async: deque[AsyncEvent] = deque()
        self._async_cond = threading.Condition()
        self.async_unacked = 0
        self.closed = False
        agent.add_handler(self._on_event)

    # -- agent events (loop thread) ------------------------------------------------------
    def _on_event(self, ev: object, now: float) -> None:
        if isinstance(ev, Completion):
            cq = self._cqs.get(ev.cq)
            if cq is not None and not cq._push(ev):
                self._post_async(AsyncEvent(AsyncEventKind.QP_FATAL, ev.qpn,
                                            detail=f"CQ {cq.cq_id} overrun"))
        elif isinstance(ev, AsyncEvent) and (ev.qpn is None or ev.qpn in self._qps):
            self._post_async(ev)

    def _post_async(self, ev: AsyncEvent) -> None:
        with self._async_cond:
            self._async.append(ev)
            self._async_cond.notify_all()

    def _call(self, fn: Callable[..., T], *args: object) -> T:
        if self.closed:
            raise ApiError("context is closed")
        result: T = self.agent.call(fn, *args)
        return result

    # -- queries -------------------------------------------------------------------------
    def query_version(self) -> str:
        return MRC_API_VERSION

    def query_device(self) -> DeviceAttr:
        cfg = self.agent.config
        return DeviceAttr(
            name=f"mrc_{cfg.name}",
            api_version=MRC_API_VERSION,
            caps=DeviceCap.TRIM_NACK | DeviceCap.DYNAMIC_MPR | DeviceCap.SVC_TIME,
            phys_port_cnt=len(cfg.ports),
            max_qp=1 << 16,
            max_qp_wr=1 << 16,
            max_cq=1 << 16,
            max_cqe=MAX_CQE,
            max_mr_size=1 << 40,
            path_mtu=cfg.mtu,
        )

    def query_port(self, port_num: int) -> PortAttr:
        cfg = self.agent.config
        if not 0 <= port_num < len(cfg.ports):
            raise ValueError(f"port {port_num} does not exist (ports 0..{len(cfg.ports) - 1})")
        p = cfg.ports[port_num]
        up = self.agent.port_up[port_num]
        return PortAttr(port_num=port_num, state=PortState.ACTIVE if up else PortState.DOWN,
                        gid=p.gid, mac=p.mac, ifname=p.ifname, mtu=cfg.mtu, plane=port_num)

    # -- resources -----------------------------------------------------------------------
    def create_comp_channel(self) -> CompletionChannel:
        return CompletionChannel(self)

    def create_cq(self, cqe: int, channel: CompletionChannel | None = None,
                  cq_context: object = None) -> CQ:
        if not 1 <= cqe <= MAX_CQE:
            raise ValueError(f"cqe must be 1..{MAX_CQE}, got {cqe}")
        if channel is not None and (channel.ctx is not self or channel.destroyed):
            raise ApiError("completion channel belongs to another context or was destroyed")
        with Context._cq_id_lock:
            cq_id = Context._next_cq_id
            Context._next_cq_id += 1
        cq = CQ(self, cq_id, cqe, channel, cq_context)
        with self.agent.lock:
            self._cqs[cq_id] = cq
        if channel is not None:
            channel._cqs += 1
        return cq

    def _forget_cq(self, cq: CQ) -> None:
        with self.agent.lock:
            self._cqs.pop(cq.cq_id, None)
        if cq.channel is not None and not cq.destroyed:
            cq.channel._cqs -= 1
        cq.destroyed = True

    def reg_mr(self, buf: bytearray | memoryview, access: int = ALL_ACCESS) -> MR:
        return MR(self, self._call(self._core.register_mr, buf, access))

    def create_qp_hint(self, flags: QpHintFlag = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH
                       | QpHintFlag.SVC_TIME) -> QpHint:
        return QpHint(self, QpHintFlag(flags))

    def create_qp(self, init: QpInitAttr) -> QP:
        for cq in (init.send_cq, init.recv_cq):
            if cq.ctx is not self or cq.destroyed:
                raise ApiError("QP CQs must be live CQs of this context")
        qpn = self._call(self._core.create_qp, init.qp_type, init.send_cq.cq_id,
                         init.recv_cq.cq_id, init.max_send_wr, init.max_recv_wr)
        qp = QP(self, qpn, init)
        self.agent.track_qp(qpn)
        init.send_cq.qp_refs += 1
        init.recv_cq.qp_refs += 1
        self._qps[qpn] = qp
        return qp

    # -- async events --------------------------------------------------------------------
    def get_async_event(self, timeout: float | None = None) -> AsyncEvent | None:
        """The next async event; None after ``timeout`` seconds of the run's clock."""
        wall = None if timeout is None else _to_wall(self, timeout)
        with self._async_cond:
            if not self._async_cond.wait_for(lambda: bool(self._async), wall):
                return None
            self.async_unacked += 1
            return self._async.popleft()

    def ack_async_event(self, ev: AsyncEvent) -> None:
        if self.async_unacked <= 0:
            raise ApiError("no unacknowledged async event")
        self.async_unacked -= 1

    def close(self) -> None:
        """Destroy remaining QPs and stop receiving events; idempotent."""
        if self.closed:
            return
        for qp in list(self._qps.values()):
            qp.destroy()
        self.agent.remove_handler(self._on_event)
        self.closed = True


def _to_wall(ctx: Context, timeout: float) -> float:
    """An application's timeout (seconds of the run's clock) as the wall seconds to wait."""
    run_clock = getattr(ctx.agent, "run_clock", None)  # a test stand-in may have none
    return timeout * run_clock.tdf if run_clock is not None else timeout


def open_device(agent: Agent) -> Context:
    """Open the MRC device of ``agent`` (library use: the agent runs in this process)."""
    return Context(agent)


@dataclass(frozen=True, slots=True)
class RemoteQp:
    """What the peer tells out of band to connect: its QPN and its GID on every plane."""

    qpn: int
    gids: tuple[bytes, ...]


INIT_MASK = QpAttrMask.STATE | QpAttrMask.HINT | QpAttrMask.EV_PROFILE | QpAttrMask.CC_PROFILE
RTR_MASK = (QpAttrMask.STATE | QpAttrMask.MPR_DEST | QpAttrMask.MAX_WIMM_DEST
            | QpAttrMask.DEST_QPN | QpAttrMask.DEST_GIDS | QpAttrMask.RQ_PSN
            | QpAttrMask.PATH_MTU)
RTS_MASK = (QpAttrMask.STATE | QpAttrMask.MPR | QpAttrMask.MAX_WIMM | QpAttrMask.RETRY
            | QpAttrMask.TIMEOUT | QpAttrMask.SQ_PSN)


def _step(base: QpAttr, state: QpState, remote: RemoteQp | None) -> QpAttr:
    return QpAttr(
        qp_state=state, qp_hint=base.qp_hint, ev_profile_id=base.ev_profile_id,
        cc_profile_id=base.cc_profile_id, mpr_dest=base.mpr_dest,
        max_wimm_dest=base.max_wimm_dest, mpr=base.mpr, max_wimm=base.max_wimm,
        retry=base.retry, timeout=base.timeout,
        dest_qpn=remote.qpn if remote else 0, dest_gids=remote.gids if remote else (),
        rq_psn=base.rq_psn, sq_psn=base.sq_psn, path_mtu=base.path_mtu,
    )


class QpHandle(Protocol):
    """What ``init_qp`` and ``connect_qp`` need of a QP: mrc_modify_qp and mrc_query_qp (an
    API ``QP``, or the simulator's handle on a core QP, mrcnet/sim/workload.py)."""

    def modify(self, attr: QpAttr, mask: QpAttrMask) -> None: ...

    def query(self) -> QpAttr: ...


def init_qp(qp: QpHandle, attr: QpAttr | None = None, hint: QpHint | None = None) -> None:
    """Convenience (not in mrc.h): RESET -> INIT with hint, EV and CC profile from ``attr``
    (the hint object's flags replace ``attr.qp_hint`` when given). Receives for WriteImm may
    be posted from INIT on, before the peer is known."""
    step = _step(attr if attr is not None else QpAttr(), QpState.INIT, None)
    if hint is not None:
        step.qp_hint = hint.query()
    qp.modify(step, INIT_MASK)


def connect_qp(qp: QpHandle, remote: RemoteQp, attr: QpAttr | None = None,
               hint: QpHint | None = None) -> None:
    """Convenience (not in mrc.h): (RESET ->) INIT -> RTR -> RTS with the attributes each
    transition needs (INIT: hint, EV and CC profile; RTR: mpr_dest, max_wimm_dest, peer QPN and
    GIDs, path MTU; RTS: mpr, max_wimm, retry, timeout), taken from ``attr`` (defaults:
    QpAttr()). The QP segments at min(path_mtu, the agent's mtu)."""
    base = attr if attr is not None else QpAttr()
    if qp.query().qp_state == QpState.RESET:
        init_qp(qp, base, hint)
    qp.modify(_step(base, QpState.RTR, remote), RTR_MASK)
    qp.modify(_step(base, QpState.RTS, remote), RTS_MASK)

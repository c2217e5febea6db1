"""Collective sessions on a photonic scale-up domain: the step barrier and the reconfigurations.

The orchestrator registers a session (GPUs in rank order, the circuits of every topology
interval, the interval of each step, alpha_r). The first interval's circuits are applied at
once. Every GPU then calls the barrier before each step (``StepBarrier``); when the last one
arrives, the controller

1. reconfigures the OCS if the step starts a new interval: the input ports whose circuit
   changes go dark (``FabricState.reconfigure(..., dark_s=alpha_r)``: written to the dark
   action, alpha_r waited out on the run clock, the new circuits written),
2. reads the cross-connects back from the switch (kept per step for the run's report),
3. releases the step to every GPU with the release time.

Barrier ``steps + 1`` marks the end. This is the "controller barrier" of docs/harvest.md:
the seed assumes shared memory inside a scale-up domain; here the GPUs are processes in
separate network namespaces, and the controller, which must apply the reconfiguration anyway,
is the natural rendezvous. Its cost (one unix-socket RPC round trip) is part of the calibrated
alpha.

Barrier "early" (``StartCollectiveRequest.early``): for a reconfiguring step that lists GPUs,
the reconfiguration starts as soon as those GPUs arrived, while the others may still send
(what an OCS scheduler overlaps with the tail of a step); packets that meet a port while it
is dark are dropped and counted by the OCS, and MRC recovers them. The orchestrator lists the
GPUs that need a changing circuit to finish the previous step
(controller/harvest/runplan.py ``early_ranks``). The step is released, as always, once every
GPU arrived and the reconfiguration is done.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from common.proto import mrc_ctl_pb2 as pb
from controller.errors import CtlError, ErrorKind, invalid, not_found
from controller.fabric import FabricState

MAX_SESSIONS = 64  # kept at once; finished ones give way to new ones, oldest first


@dataclass
class _Record:
    step: int
    interval: int
    arrivals: dict[int, float] = field(default_factory=dict)
    released: float | None = None
    reconfigured: bool = False
    dark_start: float = 0.0
    dark_end: float = 0.0
    readback: dict[int, int] = field(default_factory=dict)
    early: frozenset[int] | None = None  # ranks whose arrival starts the reconfiguration
    reconfig: str = ""  # "", "running", "done"
    started_early: bool = False  # it started before the last GPU arrived


@dataclass
class _Session:
    name: str
    ranks: tuple[str, ...]
    intervals: list[list[pb.Circuit]]
    step_interval: list[int]
    alpha_r: float
    timeout: float
    records: list[_Record]
    current: int = 0  # interval the OCS serves
    reconfigurations: int = 0
    error: str = ""
    cond: threading.Condition = field(default_factory=threading.Condition)

    @property
    def done(self) -> bool:
        return self.records[-1].released is not None


class Collectives:
    """All collective sessions of one controller (see the module docstring)."""

    def __init__(self, fabric: Callable[[], FabricState],
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[float], float] = lambda virtual: virtual,
                 readback: Callable[[], dict[int, int]] | None = None) -> None:
        self._fabric = fabric
        self.clock = clock
        self.wall = wall  # run-clock seconds -> wall seconds (for OS waits)
        self._readback = readback
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def start(self, req: pb.StartCollectiveRequest) -> pb.CollectiveState:
        name = req.session
        if not name or len(name) > 64:
            raise invalid("a collective session needs a name of 1..64 characters")
        ranks = tuple(req.ranks)
        if len(ranks) < 2 or len(set(ranks)) != len(ranks):
            raise invalid("a collective needs at least 2 distinct GPUs in rank order")
        fabric = self._fabric()
        topo = fabric.topo
        for gpu in ranks:
            if not topo.has_node(gpu) or topo.node(gpu).kind.value != "gpu":
                raise not_found(f"{gpu!r} is not a GPU of topology {topo.name}")
        intervals = [list(cs.circuits) for cs in req.intervals]
        steps = list(req.step_interval)
        if not intervals or not steps:
            raise invalid("a collective needs at least one interval and one step")
        if any(i >= len(intervals) for i in steps):
            raise invalid(f"step_interval names an interval beyond the {len(intervals)} given")
        if steps[0] != 0 or any(b not in (a, a + 1) for a, b in itertools.pairwise(steps)):
            raise invalid("steps must use the intervals in order, starting with interval 0")
        if not (req.alpha_r_s >= 0 and req.alpha_r_s < 60):
            raise invalid(f"alpha_r must be 0..60 s, got {req.alpha_r_s}")
        for k, circuits in enumerate(intervals):
            fabric.check_circuits(circuits, f"interval {k}")
        records = [_Record(i + 1, iv) for i, iv in enumerate(steps)]
        records.append(_Record(len(steps) + 1, steps[-1]))
        for entry in req.early:
            if not 2 <= entry.step <= len(steps) or steps[entry.step - 1] == steps[entry.step - 2]:
                raise invalid(f"early reconfiguration at step {entry.step}: not a step that "
                              "starts a new interval")
            if any(r >= len(ranks) for r in entry.ranks):
                raise invalid(f"early reconfiguration at step {entry.step}: a rank beyond the "
                              f"{len(ranks)} GPUs")
            if records[entry.step - 1].early is not None:
                raise invalid(f"early reconfiguration at step {entry.step} given twice")
            records[entry.step - 1].early = frozenset(entry.ranks)
        timeout = req.barrier_timeout_s if req.barrier_timeout_s > 0 else 600.0
        session = _Session(name, ranks, intervals, steps, req.alpha_r_s, timeout, records)
        with self._lock:
            if name in self._sessions:
                raise CtlError(ErrorKind.BUSY, f"collective session {name!r} exists")
            if len(self._sessions) >= MAX_SESSIONS:
                # finished sessions make room, oldest first (their state was read when they
                # ended); only live ones count against the limit
                for old in [k for k, v in self._sessions.items() if v.done or v.error]:
                    del self._sessions[old]
                    if len(self._sessions) < MAX_SESSIONS:
                        break
            if len(self._sessions) >= MAX_SESSIONS:
                raise CtlError(ErrorKind.BUSY, f"at most {MAX_SESSIONS} collective sessions "
                               "in progress")
            self._sessions[name] = session
        try:
            fabric.reconfigure(intervals[0])
        except BaseException:
            with self._lock:
                del self._sessions[name]
            raise
        return self._state(session)

    def _session(self, name: str) -> _Session:
        with self._lock:
            session = self._sessions.get(name)
        if session is None:
            raise not_found(f"no collective session {name!r}")
        return session

    def barrier(self, req: pb.StepBarrierRequest,
                deadline: float | None = None) -> pb.StepBarrierResponse:
        s = self._session(req.session)
        if not 0 <= req.rank < len(s.ranks):
            raise invalid(f"rank {req.rank} is not one of the session's {len(s.ranks)} GPUs")
        if not 1 <= req.step <= len(s.records):
            raise invalid(f"step {req.step} is not in 1..{len(s.records)}")
        rec = s.records[req.step - 1]
        with s.cond:
            if s.error:
                raise CtlError(ErrorKind.BUSY, f"session {s.name} failed: {s.error}")
            if req.rank in rec.arrivals:
                raise invalid(f"rank {req.rank} already arrived at step {req.step}")
            if req.step > 1 and s.records[req.step - 2].released is None:
                raise invalid(f"rank {req.rank} arrived at step {req.step} before step "
                              f"{req.step - 1} was released")
            rec.arrivals[req.rank] = self.clock()
            last = len(rec.arrivals) == len(s.ranks)
            early = (not last and rec.early is not None and not rec.reconfig
                     and rec.early <= rec.arrivals.keys())
        if early:
            try:
                self._reconfigure_once(s, rec)
            except CtlError as exc:
                self._fail(s, exc)
                raise
        if last:
            try:
                self._release(s, rec)
            except CtlError as exc:
                self._fail(s, exc)
                raise
        else:
            limit = time.monotonic() + self.wall(s.timeout)
            if deadline is not None:
                limit = min(limit, deadline)
            with s.cond:
                while rec.released is None and not s.error:
                    left = limit - time.monotonic()
                    if left <= 0:
                        missing = sorted(set(range(len(s.ranks))) - set(rec.arrivals))
                        s.error = (f"step {rec.step}: ranks {missing} did not arrive "
                                   f"within {s.timeout:g} s")
                        s.cond.notify_all()
                        break
                    s.cond.wait(min(left, 1.0))
                if s.error:
                    raise CtlError(ErrorKind.BUSY, f"session {s.name} failed: {s.error}")
        assert rec.released is not None
        return pb.StepBarrierResponse(step=rec.step, released_s=rec.released)

    @staticmethod
    def _fail(s: _Session, exc: CtlError) -> None:
        with s.cond:
            s.error = s.error or exc.message
            s.cond.notify_all()

    def _reconfigure_once(self, s: _Session, rec: _Record) -> None:
        """Apply the interval of ``rec``'s step unless it is applied or being applied (by
        the early trigger or by the release, whichever comes first); waits for one that
        another thread is applying."""
        with s.cond:
            if rec.reconfig == "running":
                limit = time.monotonic() + self.wall(s.timeout)
                while rec.reconfig == "running" and not s.error:
                    if time.monotonic() > limit:
                        raise CtlError(ErrorKind.BUSY, f"step {rec.step}: the reconfiguration "
                                       f"did not finish within {s.timeout:g} s")
                    s.cond.wait(1.0)
                if s.error:
                    raise CtlError(ErrorKind.BUSY, f"session {s.name} failed: {s.error}")
                return
            if rec.reconfig == "done" or rec.interval == s.current:
                return
            rec.reconfig = "running"
            rec.started_early = len(rec.arrivals) < len(s.ranks)
        try:
            fabric = self._fabric()
            rec.reconfigured = True
            rec.dark_start = self.clock()
            fabric.reconfigure(s.intervals[rec.interval], dark_s=s.alpha_r)
            rec.dark_end = self.clock()
        except BaseException as exc:
            with s.cond:  # waiters see the error together with the end of the attempt
                rec.reconfig = "done"
                s.error = s.error or f"step {rec.step}: reconfiguration failed: {exc}"
                s.cond.notify_all()
            raise
        with s.cond:
            rec.reconfig = "done"
            s.current = rec.interval
            s.reconfigurations += 1
            s.cond.notify_all()

    def _release(self, s: _Session, rec: _Record) -> None:
        if rec.step <= len(s.step_interval):
            self._reconfigure_once(s, rec)
        if self._readback is not None and rec.step <= len(s.step_interval):
            rec.readback = self._readback()
        with s.cond:
            rec.released = self.clock()
            s.cond.notify_all()

    def state(self, name: str) -> pb.CollectiveState:
        return self._state(self._session(name))

    @staticmethod
    def _state(s: _Session) -> pb.CollectiveState:
        out = pb.CollectiveState(session=s.name, steps=len(s.step_interval),
                                 reconfigurations=s.reconfigurations, done=s.done,
                                 error=s.error)
        for r in s.records:
            arrivals = sorted(r.arrivals.values())
            rec = out.records.add(
                step=r.step, interval=r.interval, reconfigured=r.reconfigured,
                first_arrival_s=arrivals[0] if arrivals else 0.0,
                last_arrival_s=arrivals[-1] if arrivals else 0.0,
                released_s=r.released or 0.0, dark_start_s=r.dark_start,
                dark_end_s=r.dark_end, early=r.started_early)
            rec.readback.extend(pb.CrossConnect(in_port=i, out_port=o)
                                for i, o in sorted(r.readback.items()))
        return out

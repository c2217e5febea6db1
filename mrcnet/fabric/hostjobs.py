"""Workload roles run inside a host agent process (an agent app: ``mrcnet.fabric.hostjobs:serve``).

The orchestrator starts every agent with this one app; it watches ``JOBS_DIR`` for job files
(``<id>.job.json``, written atomically) and runs each in its own thread with the agent's
device context, so workloads can be started on a running fabric (``mrcnet run``, the CLI's
``run``). Roles:

- ``sink``: registers ``size`` bytes, posts one receive, connects out of band
  (``OOB/<name>.json``, then ``OOB/<name>-ready.json`` once connected), waits for the
  writer's final WriteImm, then reports the SHA-256 of its buffer (the orchestrator compares
  it with an independent hash of the pattern). With ``throttle`` it also runs a CPU-hogging
  consumer for a while (host-side congestion).
- ``writer``: once its sink is ready, writes ``pattern(size, seed)`` into the sink's buffer
  in ``chunk``-byte WRs, ``depth`` outstanding, the last one a WriteImm.
- with ``"wimm": true`` every WR of the writer is a WriteImm (immediate = its index + 1, the
  last one DONE_IMM) and the sink pre-posts one receive per WR and checks that their
  completions come in send order with those immediates; ``max_wimm`` (QP attribute, both
  sides) bounds how many are in flight, so with ``depth`` above it the limit binds.
- ``host_stats``: the agent's ``HostCore.host_stats()`` (the host's mechanism counters) and
  ``open_qps``, the numbers of the QPs the agent holds.

Writer, sink, connection and verification are hosts/bulk's, as for the agent's apps and the
mechanism lab.

A writer and a sink release their QP, CQ and memory region once their result is written: a
QP left behind costs the agent's loop on every iteration (``HostCore.get_timer`` visits every
QP), so a fabric running round after round got slower with each round. The writer releases at
once and leaves ``OOB/<name>-done.json`` (hosts/bulk ``publish_done``); the sink keeps its
QP until that file appears (bounded by the job's timeout), so it can still acknowledge a
retransmission whose first ACK was lost.

Each job writes ``<id>.result.json``: bytes, seconds, errors, the QP's final state, its
counters (retransmissions) and its congestion controller's state (``cc``), and ``timing``:
the agent loop's lag-meter snapshots (common/lag.py) when the transfer started and ended; the
writer also lists ``progress`` = (Unix time, bytes whose Writes completed) at every
completion, i.e. acknowledged goodput over time. A job's ``cc_profile`` (default 0: none, the
fixed window) is the CC profile its QP binds to at INIT (the orchestrator's run profile 1 is
NSCC). Times are the run's clock (the agent's, common/vclock.py): ``seconds`` and ``timeout``
are virtual seconds under time dilation and ``progress`` stamps are ``RunClock.unix`` times.
Waiting for the peer's out-of-band file is a wall-clock guard.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hosts import bulk
from hosts.api import Context, QpAttr, QpType, RetryAttr
from hosts.bulk.gate import pass_gate

POLL_S = 0.02
GATE_TIMEOUT_S = 10.0  # wall seconds a writer waits for the rest of its round at the gate


def qp_attr(job: dict[str, Any]) -> QpAttr:
    """The attributes of a job's QP (both ends): its EV and CC profile, MPR, WriteImm limit,
    ACK timeout exponent and retry counts (the simulator's flows take the same)."""
    wimm = int(job.get("max_wimm", 16))
    return QpAttr(
        ev_profile_id=int(job.get("ev_profile", 0)),
        cc_profile_id=int(job.get("cc_profile", 0)),
        mpr=int(job.get("mpr", 8)), mpr_dest=int(job.get("mpr", 8)),
        max_wimm=wimm, max_wimm_dest=wimm,
        timeout=int(job.get("ack_timeout", 17)),
        retry=RetryAttr(linear_cnt=int(job.get("linear_cnt", 7)),
                        exp_cnt=int(job.get("exp_cnt", 25))),
    )


def qp_report(core: Any, qpn: int, call: Callable[..., Any] | None = None) -> dict[str, Any]:
    """A job result's QP part: state, counters, congestion control and RTT figures of QP
    ``qpn`` of ``core``, read through ``call(fn, *args)`` (the agent's loop; default: now)."""
    def direct(fn: Callable[..., Any], *args: object) -> Any:
        return fn(*args)

    run = call or direct
    try:
        stats = dict(run(core.qp_stats, qpn))
        state = run(core.query_qp, qpn).qp_state.name
        cc = dict(run(core.qp_cc_log, qpn))
        rtt = dict(run(core.qp_rtt_stats, qpn))
    except Exception as exc:  # the QP may be gone
        return {"qp_state": "UNKNOWN", "qp_error": repr(exc)}
    return {"qpn": qpn, "qp_state": state, "qp_stats": stats, "cc": cc, "rtt": rtt}


def _qp_report(ctx: Context, qpn: int) -> dict[str, Any]:
    return qp_report(ctx.agent.core, qpn, ctx.agent.call)


@dataclass(frozen=True)
class Transfer:
    """A job's transfer: ``size`` bytes in ``chunk``-byte Writes (default 256 KiB), ``depth``
    outstanding (default 8), the last one (with ``wimm``: every one) a WriteImm."""

    size: int
    chunk: int
    depth: int
    imm: bulk.Immediates

    @classmethod
    def of(cls, job: dict[str, Any]) -> Transfer:
        return cls(int(job["size"]), int(job.get("chunk", 256 << 10)),
                   int(job.get("depth", 8)),
                   bulk.Immediates(every=bool(job.get("wimm", False)), last=bulk.DONE_IMM))

    @property
    def count(self) -> int:
        return bulk.wr_count(self.size, self.chunk)

    @property
    def expected(self) -> list[int]:
        """The immediates the sink receives, in order (one receive posted for each)."""
        return self.imm.expected(self.count)


def _await_cc_profile(ctx: Context, profile_id: int, timeout: float) -> None:
    """Wait until the controller's CC profile reached this agent (the orchestrator brings
    it ONLINE once the base RTT is measured): a QP bound to a missing profile would silently
    get the fixed window."""
    core: Any = ctx.agent.core
    deadline = time.monotonic() + timeout
    while ctx.agent.call(core.cc_profile, profile_id) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"CC profile {profile_id} did not reach this agent within "
                               f"{timeout:.0f} s")
        time.sleep(POLL_S)


class _Throttle:
    """A consumer that hogs this process's CPU for a while (``{"after", "seconds", "burst",
    "gap"}`` in seconds): work in bursts of ``burst`` that hold the interpreter lock (a
    C-level sort, which never yields it), ``gap`` apart. The agent's loop shares the process,
    so frames wait in the socket meanwhile: host-side congestion, as a slow application on
    the receiving host makes it (the backpressure tests and docs/transport.md use it)."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.after = float(spec.get("after", 0.0))
        self.seconds = float(spec.get("seconds", 1.0))
        self.burst = float(spec.get("burst", 0.02))
        self.gap = float(spec.get("gap", 0.005))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="throttle", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self._stop.wait(self.after):
            return
        items = list(range(1 << 16, 0, -1))
        took = []
        for _ in range(5):  # the fastest of five: a sort the scheduler interrupted is no guide
            t0 = time.monotonic()
            sorted(items)
            took.append(time.monotonic() - t0)
        n = max(1, round(self.burst / max(1e-6, min(took)) * len(items)))
        work = list(range(n, 0, -1))  # sorted() of it holds the lock for about ``burst``
        end = time.monotonic() + self.seconds
        while time.monotonic() < end and not self._stop.is_set():
            sorted(work)
            self._stop.wait(self.gap)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)


Release = Callable[[], None]


def _nothing_to_release() -> None:
    pass


def run_job(ctx: Context, job: dict[str, Any]) -> tuple[dict[str, Any], Release]:
    """The job's result, and what releases its resources once the result is written."""
    if job["role"] == "collective":
        from mrcnet.fabric.collective_job import run_collective_job

        return run_collective_job(ctx, job), _nothing_to_release
    if job["role"] == "host_stats":
        core: Any = ctx.agent.core
        return {"host_stats": dict(ctx.agent.call(core.host_stats)),
                "open_qps": list(ctx.agent.call(core.qp_numbers))}, _nothing_to_release
    size = int(job["size"])
    timeout = float(job.get("timeout", 120))
    oob = Path(str(job["oob_dir"]))
    writer = job["role"] == "writer"
    plan = Transfer.of(job)
    buf = bulk.pattern(size, int(job["seed"])) if writer else bytearray(size)
    cc_profile = int(job.get("cc_profile", 0))
    if cc_profile:
        _await_cc_profile(ctx, cc_profile, timeout)
    ep = bulk.Endpoint(ctx, buf, qp_type=QpType(str(job["qp_type"])), attr=qp_attr(job),
                       cqe=int(job.get("cqe", 4096)),
                       receives=0 if writer else len(plan.expected))
    try:
        out = _transfer(ctx, job, ep, plan)
    except BaseException:
        if writer:
            bulk.publish_done(oob, str(job["name"]))
        ep.release()
        raise
    if writer:
        def release() -> None:
            bulk.publish_done(oob, str(job["name"]))
            ep.release()
    else:
        def release() -> None:  # a lost final ACK: the writer retransmits until answered
            bulk.await_done(oob, str(job["peer"]), timeout)
            ep.release()
    return out, release


def _transfer(ctx: Context, job: dict[str, Any], ep: bulk.Endpoint, plan: Transfer
              ) -> dict[str, Any]:
    size = int(job["size"])
    timeout = float(job.get("timeout", 120))
    writer = job["role"] == "writer"
    info = bulk.connect_by_files(ep, Path(str(job["oob_dir"])), str(job["name"]),
                                 str(job["peer"]), sink=not writer, attr=qp_attr(job),
                                 timeout=timeout, need=size if writer else 0)
    agent = ctx.agent
    timing_start = agent.timing()
    if not writer:
        hog = _Throttle(job["throttle"]) if job.get("throttle") else None
        try:
            got = bulk.await_writeimms(ep.cq, plan.expected, clock=agent.clock,
                                       timeout=timeout)
        finally:
            if hog is not None:
                hog.stop()
        return {"bytes": size if got.ok else 0, "seconds": got.seconds,
                "imm_completions": len(got.completions),
                "sha256": bulk.digest(ep.buf) if got.ok else "", "errors": got.errors,
                "timing": {"start": timing_start, "end": agent.timing()},
                **_qp_report(ctx, ep.qp.qpn)}
    gate = None
    if job.get("start_group"):  # the round's writers start at one instant
        gate = pass_gate(Path(str(job["oob_dir"])), str(job["start_group"]), str(job["name"]),
                         int(job["start_count"]), GATE_TIMEOUT_S)
    out = bulk.write_buffer(ep.qp, ep.cq, ep.mr, info, size, chunk=plan.chunk,
                            depth=plan.depth, imm=plan.imm, clock=agent.clock,
                            timeout=timeout)
    unix = agent.run_clock.unix
    return {"bytes": size if out.ok else 0, "seconds": out.seconds, "errors": out.errors,
            **({"start_gate": gate.to_json()} if gate is not None else {}),
            "completed_wrs": len(out.completions),
            "progress": [(round(unix(t), 6), acked) for t, acked in out.progress],
            "timing": {"start": timing_start, "end": agent.timing()},
            **_qp_report(ctx, ep.qp.qpn)}


def _run_and_report(ctx: Context, job: dict[str, Any], result: Path) -> None:
    release = _nothing_to_release
    try:
        out, release = run_job(ctx, job)
    except Exception as exc:
        out = {"bytes": 0, "errors": [f"{type(exc).__name__}: {exc}"],
               "trace": traceback.format_exc()}
    out["id"] = job.get("id")
    bulk.write_json(result, out)
    try:
        release()
    except Exception:  # the result is written; a failed release is the agent log's business
        traceback.print_exc()


def serve(ctx: Context, args: dict[str, Any]) -> int:
    """Run every job file that appears in ``args["jobs_dir"]`` until ``STOP`` appears there."""
    jobs_dir = Path(str(args["jobs_dir"]))
    jobs_dir.mkdir(parents=True, exist_ok=True)
    started: set[str] = set()
    seen = -1
    while not (jobs_dir / "STOP").exists():
        # The folder is listed only when its mtime moved (a job file was added): listing it
        # every POLL_S cost the agent's interpreter more with every round's files. The file
        # system's clock is coarse (files added in one tick share an mtime), so an mtime
        # counts as seen only once it is a second old.
        mtime = jobs_dir.stat().st_mtime_ns
        if mtime == seen:
            time.sleep(POLL_S)
            continue
        seen = mtime if time.time_ns() - mtime > 1_000_000_000 else -1
        for path in sorted(jobs_dir.glob("*.job.json")):
            if path.name in started:
                continue
            started.add(path.name)
            job = json.loads(path.read_text())
            result = path.with_name(path.name.replace(".job.json", ".result.json"))
            threading.Thread(target=_run_and_report, args=(ctx, job, result),
                             name=f"job-{job.get('id')}", daemon=True).start()
        time.sleep(POLL_S)
    return 0

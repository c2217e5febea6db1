"""The host agent: owns the NIC ports and drives the sans-I/O HostCore with real time.

One thread runs the loop and is the only one that touches the HostCore (it is not
thread-safe): applications call in from their own threads through ``Agent.call`` (hosts/api.py
does), which hands the call to the loop (a queue plus an eventfd wake-up) and waits for the
result, so new work goes out at once and the loop never waits for an application thread.

Loop iteration (``Agent.lock`` is held except during the wait):
1. wait in epoll for a NIC port, a link change or a wake-up, at most until the core's timer;
2. run the calls handed over by application threads;
3. drain every port until EAGAIN (bounded per iteration, so timers never starve), handing each
   frame to ``HostCore.receive`` (several ports: each round in (QP, PSN) order); after each
   batch, transmit what the core has to send (SACKs leave promptly and the window refills
   while packets keep arriving);
4. fire the core's timer if due, transmit, and dispatch core events: completions to their
   CQ, async events and EV changes to the handlers, log records to qlog;
5. every ``metrics_interval`` write sampled metrics records (never per data packet).

Time: ``clock`` gives the run's virtual time (common/vclock.py); the core, qlog and the
metrics see only that, and the epoll wait lasts ``(next deadline - now) x tdf`` wall seconds.
``self.lag`` (common/lag.py) records how late each due core timer (and metrics sample) ran,
how long each received batch had waited in its socket (the newest frame's kernel receive
timestamp) and how long the loop waited in epoll; ``timing()`` snapshots it on the loop
thread. Kernel receive timestamps (wall clock) are mapped onto the run's clock for the core
(``RxMeta.rx_time``) and the receive wait (backpressure), both in the run's seconds.
See docs/transport.md, "Agent and API".
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from common.coalesce import Coalescer
from common.lag import LagMeter
from common.vclock import RunClock
from hosts.agent.backpressure import RxWait
from hosts.agent.config import AgentConfig
from hosts.agent.events import qlog_record
from hosts.agent.framing import Framer
from hosts.agent.linkmon import LinkMonitor
from hosts.agent.nic import NicPort
from hosts.agent.qlog import QlogWriter
from hosts.agent.router import LOCAL, CircuitRouter
from hosts.transport import RxMeta, TxPacket
from hosts.transport.lognames import (
    AGENT_ERROR,
    BACKPRESSURE,
    METRICS_SAMPLED,
    PORT_ADMIN,
    PORT_STATUS,
    QP_METRICS,
)
from hosts.wire import MrcPacket

RX_BUDGET = 2048  # frames per loop iteration across all ports before timers run
TX_FRAME_MAX = 9216  # jumbo frames: veths carry MTU 9000
TX_BATCH = 64  # frames encoded before they go out, one sendmmsg per port (NicPort.send_batch)
TIMER_STALL_BACKOFF = 1e-3  # seconds to wait when the core's due timer did not move


class CoreApi(Protocol):
    """The part of hosts.transport.HostCore the agent drives (a test may pass a stand-in)."""

    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None: ...
    def port_status(self, port: int, up: bool, now: float) -> None: ...
    def packets_to_send(self, now: float, limit: int | None = None) -> list[TxPacket]: ...
    def get_timer(self) -> float | None: ...
    def handle_timer(self, now: float) -> None: ...
    def next_event(self) -> object | None: ...


EventHandler = Callable[[object, float], None]


class Agent:
    """NIC ports + event loop around one HostCore. ``start()`` runs the loop in a thread."""

    def __init__(
        self,
        config: AgentConfig,
        core: CoreApi | None = None,
        clock: Callable[[], float] | None = None,
        monitor_links: bool = True,
        ports: list[NicPort] | None = None,
        run_clock: RunClock | None = None,
        lag_tolerance: float | None = None,
        coalesce: float = 0.0,
    ) -> None:
        """``clock`` (default: ``run_clock.now``, else time.monotonic) gives ``now``;
        ``run_clock`` (default: TDF 1) converts waits to wall time and stamps qlog files;
        ``lag_tolerance``: virtual seconds of lag still on time (common/lag.py default);
        ``coalesce``: wake-up coalescing slack in virtual seconds (common/coalesce.py; 0:
        one wake-up per event)."""
        self.config = config
        self.run_clock = run_clock or RunClock(1.0)
        if clock is None:
            clock = run_clock.now if run_clock is not None else time.monotonic
        self.clock = clock
        self.t0 = clock()
        self.lag = LagMeter(self.t0, self.run_clock.tdf, lag_tolerance)
        self.coalescer = Coalescer(coalesce, self.run_clock.tdf)
        self.lag.slack = self.coalescer.slack
        if core is None:
            from hosts.agent.corecfg import build_core

            core = build_core(config)
        self.core: CoreApi = core
        self.lock = threading.RLock()
        self.framer = Framer(config)
        # The GPU's built-in router on circuit fabrics (hosts/agent/router.py), else None.
        self.router: CircuitRouter | None = (
            CircuitRouter(config.router.rank, config.router.gids, len(config.ports),
                          config.router.buckets) if config.router is not None else None)
        self._tx_bufs = [memoryview(bytearray(TX_FRAME_MAX)) for _ in range(TX_BATCH)]
        self._tx_lengths = [0] * TX_BATCH
        self.ports: list[NicPort] = []
        self.linkmon: LinkMonitor | None = None
        self.port_up: list[bool] = [True] * len(config.ports)  # usable: carrier and admin
        self.port_carrier: list[bool] = [True] * len(config.ports)
        self.port_admin: list[bool] = [True] * len(config.ports)
        self.port_hooks: list[Callable[[int, bool], None]] = []  # (port, carrier) changes
        self.qlog: QlogWriter | None = (
            QlogWriter(config.qlog_dir, config.name, self.t0, self.run_clock.unix(self.t0),
                       self.run_clock.tdf)
            if config.qlog_dir else None
        )
        self._handlers: list[EventHandler] = []
        self.tracked_qps: set[int] = set()
        self._wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._calls: deque[_Call] = deque()  # core calls from API threads, run by the loop
        self._loop_thread: threading.Thread | None = None
        self._next_metrics = self.t0 + config.metrics_interval
        self.loop_error: BaseException | None = None
        # how long received frames waited before the loop read them: the responder's
        # backpressure (CC_STATE penalty of every SACK this host sends)
        self.rx_wait = RxWait(config.backpressure_low, config.backpressure_high)
        self.timer_lag_max = 0.0  # how late a due core timer ran (loop lag), per window
        self.iterations = 0
        self.timer_stalls = 0  # handle_timer() left a due timer unchanged (core bug guard)
        self._timer_floor = 0.0
        self._timers_checked = self.t0  # when the loop last looked for due core timers
        try:
            if ports is not None:
                if len(ports) != len(config.ports):
                    raise ValueError("one NicPort per configured port")
                self.ports = list(ports)
            else:
                for p in config.ports:
                    self.ports.append(
                        NicPort(p.ifname, netns=config.netns, batch=config.rx_batch))
            if monitor_links:
                self.linkmon = LinkMonitor(config.netns)
                state = self.linkmon.dump(p.ifname for p in config.ports)
                self.port_carrier = [state.get(p.ifname, False) for p in config.ports]
                self.port_up = list(self.port_carrier)
        except BaseException:
            self.close()
            raise
        now = clock()
        with self.lock:
            for i, up in enumerate(self.port_up):
                if not up:
                    self.core.port_status(i, False, now)

    # -- integration points for the API layer -----------------------------------------
    def track_qp(self, qpn: int, tracked: bool = True) -> None:
        """Include (or stop including) QP ``qpn`` in the periodic ``mrc:qp_metrics`` records."""
        if tracked:
            self.tracked_qps.add(qpn)
        else:
            self.tracked_qps.discard(qpn)

    def forget_qp(self, qpn: int) -> None:
        """QP ``qpn`` was destroyed (call on the loop thread, e.g. through ``call``): no more
        metrics records, its qlog file closed (a fabric that runs round after round would
        otherwise keep one open file per QP it ever had)."""
        self.tracked_qps.discard(qpn)
        if self.qlog is not None:
            self.qlog.close_qp(qpn)

    def add_handler(self, handler: EventHandler) -> None:
        """Receive every core event (Completion, AsyncEvent, ...) on the loop thread."""
        self._handlers.append(handler)

    def remove_handler(self, handler: EventHandler) -> None:
        if handler in self._handlers:
            self._handlers.remove(handler)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the core from any thread and return its result (or raise).

        While the loop runs, the call is handed to the loop thread (a queue + the eventfd) and
        this thread waits for it: the loop never blocks on a lock held by a descheduled
        application thread. Before the loop runs (or on the loop thread) it runs directly.
        """
        loop = self._loop_thread
        if loop is None or loop is threading.current_thread():
            with self.lock:
                result = fn(*args)
                self._drain_events(self.clock())
            return result
        job = _Call(fn, args)
        self._calls.append(job)
        self.wake()
        while not job.done.wait(0.5):  # wall clock: a liveness check of the loop thread
            if self._loop_thread is None:
                raise RuntimeError("agent loop stopped")
        if job.error is not None:
            raise job.error
        return job.result

    def _run_calls(self) -> None:
        calls = self._calls
        while calls:
            job = calls.popleft()
            try:
                job.result = job.fn(*job.args)
            except Exception as exc:  # handed to the caller's thread
                job.error = exc
            job.done.set()

    def wake(self) -> None:
        if self._wake_fd < 0:
            return  # closed: stop() twice, or a wake-up racing the shutdown
        try:
            os.eventfd_write(self._wake_fd, 1)
        except BlockingIOError:
            pass  # counter saturated: the loop is awake anyway
        except OSError:
            pass  # closed during shutdown

    def now(self) -> float:
        return self.clock()

    @property
    def tdf(self) -> float:
        return self.run_clock.tdf

    def to_wall(self, virtual_seconds: float) -> float:
        """Wall seconds of an OS wait covering ``virtual_seconds`` of the run's clock."""
        return virtual_seconds * self.run_clock.tdf

    def timing(self) -> dict[str, Any]:
        """The lag meter's snapshot (common/lag.py), taken on the loop thread."""
        return self.call(lambda: self.lag.snapshot(self.clock()))  # type: ignore[no-any-return]

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """Run the loop in a daemon thread (library use)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self.run, name=f"agent-{self.config.name}",
                                        daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the loop to return (any thread, signal handlers included); no waiting."""
        self._stop.set()
        self.wake()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop and close everything; idempotent."""
        self._stop.set()
        self.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.close()

    def close(self) -> None:
        for port in self.ports:
            port.close()
        self.ports = []
        if self.linkmon is not None:
            self.linkmon.close()
            self.linkmon = None
        if self.qlog is not None:
            self.qlog.close()
        if self._wake_fd >= 0:
            os.close(self._wake_fd)
            self._wake_fd = -1

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        """The event loop; returns when stop() is called. Exceptions are kept in loop_error."""
        ep = select.epoll()
        self._loop_thread = threading.current_thread()
        try:
            for port in self.ports:
                ep.register(port.fileno(), select.EPOLLIN)
            ep.register(self._wake_fd, select.EPOLLIN)
            if self.linkmon is not None:
                ep.register(self.linkmon.fileno(), select.EPOLLIN)
            tdf = self.run_clock.tdf
            lag = self.lag
            # a moderated sleep (common/coalesce.py) watches these only: select, whose
            # timeout has microsecond resolution (epoll rounds up to milliseconds)
            ctl_fds = [self._wake_fd]
            if self.linkmon is not None:
                ctl_fds.append(self.linkmon.fileno())
            after_round = self.coalescer.after_round
            slack_wall = self.coalescer.slack * tdf
            worked = False
            while not self._stop.is_set():
                with self.lock:
                    waiting = self.clock()
                    moderated = after_round(waiting, worked)
                    if not moderated:
                        timeout = self._wait_timeout(waiting) * tdf  # wall seconds
                # Always poll (also with timeout 0): link changes and wake-ups are only seen here.
                if moderated:
                    select.select(ctl_fds, [], [], slack_wall)
                    ready = ep.poll(0)
                    lag.moderated += 1
                else:
                    ready = ep.poll(timeout)
                lag.wakeups += 1
                with self.lock:
                    now = self.clock()
                    lag.idle += now - waiting
                    worked = self._iteration(ready, now)
        except BaseException as exc:  # kept for the owner: the loop must not vanish silently
            self.loop_error = exc
            if self.qlog is not None:
                self.qlog.event(None, AGENT_ERROR, {"error": repr(exc)}, self.clock())
            raise
        finally:
            self._loop_thread = None
            ep.close()
            while self._calls:  # nobody will run them any more
                job = self._calls.popleft()
                job.error = RuntimeError("agent loop stopped")
                job.done.set()
            if self.qlog is not None:
                with self.lock:
                    self._sample_metrics(self.clock())  # final counters, always present


    def _wait_timeout(self, now: float) -> float:
        deadline = self._next_metrics
        timer = self.core.get_timer()
        if timer is not None:
            timer = max(timer, self._timer_floor)
            if timer < deadline:
                deadline = timer
        return max(0.0, deadline - now)

    def _iteration(self, ready: list[tuple[int, int]], now: float) -> bool:
        """One round of the loop; True when it handled frames, timers or calls."""
        self.iterations += 1
        worked = bool(self._calls)
        for fd, _mask in ready:
            if fd == self._wake_fd:
                try:
                    os.eventfd_read(self._wake_fd)
                except BlockingIOError:
                    pass
            elif self.linkmon is not None and fd == self.linkmon.fileno():
                self._link_changes(now)
        if self._calls:
            self._run_calls()
        if self._receive_all(now):
            worked = True
        if self.rx_wait.update():
            self._backpressure(now)
        now = self.clock()
        timer = self.core.get_timer()
        if timer is not None and timer <= now and now >= self._timer_floor:
            # A timer due before the previous check was set since (e.g. "probe the EV that
            # just went bad at once": 0.0): it is late only since that check.
            due = min(max(timer, self._timer_floor, self._timers_checked), now)
            self.lag.due(due, now)
            worked = True
            if now - due > self.timer_lag_max:
                self.timer_lag_max = now - due
            self.core.handle_timer(now)
            after = self.core.get_timer()
            if after is not None and after <= timer:
                # The core left the same due timer in place: do not spin on it.
                self.timer_stalls += 1
                self._timer_floor = now + TIMER_STALL_BACKOFF
        self._timers_checked = now
        self._transmit(now)
        self._drain_events(now)
        if now >= self._next_metrics:
            self.lag.due(self._next_metrics, now)
            self._sample_metrics(now)
        return worked

    def _receive_all(self, now: float) -> int:
        """Drain the ports (see the module docstring); return how many frames were read.

        With several ports, one batch is taken from each, decoded, and handed to the core
        ordered by (destination QP, PSN) -- a stable sort, PSNs compared relative to the
        first one seen for that QP so the 24-bit wrap is harmless. Everything in such a batch
        arrived "now" as far as the core can tell; handing over one port's whole batch before
        the other's would instead look like heavy reordering of sprayed traffic (and cost a
        SACK per packet)."""
        ports = self.ports
        decode = self.framer.decode
        receive = self.core.receive
        queued = self.lag.queued
        clock = self.clock
        wall = time.time
        waits = self.rx_wait
        inv = 1.0 / self.run_clock.tdf  # wall seconds -> the run's seconds
        budget = RX_BUDGET
        busy = True
        single = len(ports) == 1
        router = self.router
        counts = [0] * len(ports)
        while busy and budget > 0:
            busy = False
            if single:
                port = ports[0]
                n = port.recv_batch()
                if n == 0:
                    break
                now = clock()
                # kernel receive times (wall clock) onto the core's clock
                w = wall()
                offset = now - w * inv
                stamps = port.stamps
                if stamps[0] > 0.0:
                    waits.observe((w - stamps[0]) * inv, (w - stamps[n - 1]) * inv, n)
                    queued(w - stamps[n - 1], now)
                budget -= n
                busy = n == port.batch
                views = port.views
                lengths = port.lengths
                for i in (range(n) if router is None
                          else self._route_batch(router, views, lengths, n)):
                    st = stamps[i]
                    got = decode(views[i][: lengths[i]], 0, st * inv + offset if st > 0.0 else 0.0)
                    if got is not None:
                        receive(got[0], got[1], now)
            else:
                got_any = False
                for index, port in enumerate(ports):
                    n = port.recv_batch()
                    counts[index] = n
                    budget -= n
                    if n:
                        got_any = True
                    if n == port.batch:
                        busy = True
                if not got_any:
                    break
                now = clock()
                w = wall()
                offset = now - w * inv
                batch: list[tuple[int, int, int, MrcPacket, RxMeta]] = []
                first: dict[int, int] = {}
                seq = 0
                for index, port in enumerate(ports):
                    views = port.views
                    lengths = port.lengths
                    stamps = port.stamps
                    nrx = counts[index]
                    if nrx and stamps[0] > 0.0:
                        waits.observe((w - stamps[0]) * inv, (w - stamps[nrx - 1]) * inv, nrx)
                        queued(w - stamps[nrx - 1], now)
                    for i in (range(counts[index]) if router is None
                              else self._route_batch(router, views, lengths, counts[index])):
                        st = stamps[i]
                        got = decode(views[i][: lengths[i]], index,
                                     st * inv + offset if st > 0.0 else 0.0)
                        if got is None:
                            continue
                        bth = got[0].bth
                        qpn = bth.dest_qp
                        base = first.setdefault(qpn, bth.psn)
                        batch.append((qpn, ((bth.psn - base + 0x800000) & 0xFFFFFF), seq,
                                      got[0], got[1]))
                        seq += 1
                batch.sort(key=_order_key)
                for item in batch:
                    receive(item[3], item[4], now)
            now = self.clock()
            self._transmit(now)
        return RX_BUDGET - budget

    def _backpressure(self, now: float) -> None:
        """The penalty changed: every SACK of this host carries the new one from now on."""
        w = self.rx_wait
        apply = getattr(self.core, "set_host_backpressure", None)
        if callable(apply):
            apply(w.penalty, w.restore)
        if self.qlog is not None:
            self.qlog.event(None, BACKPRESSURE, {"penalty": w.penalty, "restore": w.restore,
                                                 "rx_wait": w.avg}, now)

    def _transmit(self, now: float) -> None:
        """Send what the core has, ``TX_BATCH`` frames at a time: each frame is encoded into
        its own preallocated buffer and each port's frames leave in one sendmmsg."""
        core = self.core
        encode = self.framer.encode_into
        ports = self.ports
        bufs = self._tx_bufs
        lengths = self._tx_lengths
        single = len(ports) == 1
        router = self.router if not single else None
        while True:
            pkts = core.packets_to_send(now, TX_BATCH)
            if not pkts:
                return
            if router is not None:
                routed: dict[int, tuple[list[memoryview], list[int]]] = {}
                for i, tx in enumerate(pkts):
                    out = router.tx_port(tx.dst_gid, tx.ev, tx.port)
                    size = encode(tx, bufs[i], out)
                    if size:
                        views, sizes = routed.setdefault(out, ([], []))
                        views.append(bufs[i])
                        sizes.append(size)
                for port, (views, sizes) in routed.items():
                    ports[port].send_batch(views, sizes)
            elif single:
                n = 0
                for tx in pkts:
                    size = encode(tx, bufs[n])
                    if size:
                        lengths[n] = size
                        n += 1
                if n:
                    ports[0].send_batch(bufs[:n], lengths)
            else:
                by_port: dict[int, tuple[list[memoryview], list[int]]] = {}
                for i, tx in enumerate(pkts):
                    size = encode(tx, bufs[i])
                    if size:
                        views, sizes = by_port.setdefault(tx.port, ([], []))
                        views.append(bufs[i])
                        sizes.append(size)
                for port, (views, sizes) in by_port.items():
                    ports[port].send_batch(views, sizes)
            if len(pkts) < TX_BATCH:
                return

    def _route_batch(self, router: CircuitRouter, views: list[memoryview], lengths: list[int],
                     count: int) -> list[int]:
        """Circuit fabrics: forward the batch's transit frames (straight from the receive
        buffers, before the port's next read reuses them); return the indices of the frames
        addressed to this GPU."""
        forward = router.forward_port
        local: list[int] = []
        out: dict[int, tuple[list[memoryview], list[int]]] = {}
        for i in range(count):
            view = views[i]
            size = lengths[i]
            port = forward(view, size)
            if port == LOCAL:
                local.append(i)
            elif port >= 0:
                fwd = out.get(port)
                if fwd is None:
                    fwd = out[port] = ([], [])
                fwd[0].append(view)
                fwd[1].append(size)
        for port, (frames, sizes) in out.items():
            self.ports[port].send_batch(frames, sizes)
        return local

    def _link_changes(self, now: float) -> None:
        assert self.linkmon is not None
        names = {p.ifname: i for i, p in enumerate(self.config.ports)}
        for name, up in self.linkmon.read():
            i = names.get(name)
            if i is None or self.port_carrier[i] == up:
                continue
            self.port_carrier[i] = up
            if self.qlog is not None:
                self.qlog.event(None, PORT_STATUS, {"port": i, "ifname": name, "up": up},
                                now)
            for hook in self.port_hooks:
                hook(i, up)
            self._update_port(i, now)

    def set_port_admin(self, port: int, enabled: bool) -> None:
        """Administrative state of a port (controller PortAdminCommand); loop thread only.
        A disabled port is reported down to the core whatever its carrier says."""
        if not 0 <= port < len(self.port_admin):
            raise ValueError(f"no port {port}")
        self.port_admin[port] = enabled
        now = self.clock()
        if self.qlog is not None:
            self.qlog.event(None, PORT_ADMIN, {"port": port, "enabled": enabled}, now)
        self._update_port(port, now)

    def _update_port(self, port: int, now: float) -> None:
        up = self.port_carrier[port] and self.port_admin[port]
        if up != self.port_up[port]:
            self.port_up[port] = up
            self.core.port_status(port, up, now)

    def _drain_events(self, now: float) -> None:
        next_event = self.core.next_event
        handlers = self._handlers
        qlog = self.qlog
        while True:
            ev = next_event()
            if ev is None:
                return
            for h in handlers:
                h(ev, now)
            if qlog is not None:
                rec = qlog_record(ev)
                if rec is not None:
                    qlog.event(rec[0], rec[1], rec[2], now)

    def _sample_metrics(self, now: float) -> None:
        self._next_metrics = now + self.config.metrics_interval
        for port in self.ports:
            port.read_kernel_stats()
        if self.qlog is None:
            return
        data: dict[str, Any] = {
            "ports": [
                {"ifname": p.ifname, "up": self.port_up[i], **_counters(p.counters)}
                for i, p in enumerate(self.ports)
            ],
            "rx_drops": _counters(self.framer.rx),
            "loop_iterations": self.iterations,
            "timer_stalls": self.timer_stalls,
            "lag": self.lag.snapshot(now),
            "timer_lag_max": self.timer_lag_max,
            "rx_wait": self.rx_wait.window(),
        }
        self.timer_lag_max = 0.0
        host_stats = getattr(self.core, "host_stats", None)
        stats = host_stats() if callable(host_stats) else getattr(self.core, "stats", None)
        if isinstance(stats, dict):
            data["core"] = dict(stats)
        self.qlog.event(None, METRICS_SAMPLED, data, now)
        qp_stats = getattr(self.core, "qp_stats", None)
        qp_rtt = getattr(self.core, "qp_rtt", None)
        qp_cc_log = getattr(self.core, "qp_cc_log", None)
        for qpn in sorted(self.tracked_qps):
            try:
                qdata: dict[str, Any] = dict(qp_stats(qpn)) if callable(qp_stats) else {}
                if callable(qp_rtt):
                    qdata["srtt"] = qp_rtt(qpn)
                if callable(qp_cc_log):
                    qdata["cc"] = qp_cc_log(qpn)
            except Exception:  # the QP went away between tracking and sampling
                continue
            self.qlog.event(qpn, QP_METRICS, qdata, now)
        self.qlog.flush()


def _order_key(item: tuple[int, int, int, MrcPacket, RxMeta]) -> tuple[int, int, int]:
    return item[0], item[1], item[2]


class _Call:
    """A core call handed from an API thread to the loop thread."""

    __slots__ = ("args", "done", "error", "fn", "result")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None


def _counters(obj: object) -> dict[str, int]:
    return {k: getattr(obj, k) for k in getattr(obj, "__slots__", ())}

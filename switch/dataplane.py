"""The data-plane loop of one switch process: sockets -> pipeline -> traffic manager -> sockets.

One thread runs ``Dataplane.run``. It waits in ``select`` with a timeout equal to the next
departure of the traffic manager (microsecond resolution; never spins when idle), reads frames
in batches from readable ports (from each port's receive ring, common/pktring.py, or with
``recvmmsg``), feeds them to the pipeline (or first to the ingress shaper of a shaped port),
enqueues what the pipeline returns, and sends the frames the emulated links deliver.
Control-plane threads (the admin gRPC service) never touch this state directly: they submit
a function with ``call`` which the loop executes between batches, so the loop needs no locks
and every admin read is a consistent snapshot.

Time: ``clock`` gives the run's virtual time (common/vclock.py); every time the traffic
manager and the pipeline see comes from it, and the one OS wait of the loop (select) lasts
``(next departure - now) x tdf`` wall seconds. The loop's lag meter (``self.lag``,
common/lag.py) records how late each due departure was serviced, how long each received
batch had waited (the kernel's receive timestamp of its newest frame: from its ring slot, or
common/rxstamp.py without a ring) and how long the loop waited in select; the admin service
reports it (GetTiming).
"""

from __future__ import annotations

import logging
import math
import os
import queue
import select
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from common.coalesce import Coalescer
from common.lag import LagMeter
from common.pktio import RxBuffers, send_batch
from common.pktring import RxRing
from common.rxstamp import RxStamp
from common.vclock import RunClock
from switch.pcap import PcapWriter
from switch.pipeline import Pipeline
from switch.ports import MAX_FRAME, LinkWatcher, Port, oper_up
from switch.traffic import DirectionStats, QueueStats, TrafficManager

log = logging.getLogger("switch.dataplane")

T = TypeVar("T")
RX_BATCH = 64  # frames read from one port before looking at the others
PortStatusHook = Callable[[int, bool], None]


_FD_SETSIZE = 1024


def _select_wait(fds: list[int], timeout: float | None) -> list[int]:
    """select(): microsecond timeouts, so departures are not rounded to milliseconds."""
    readable, _, _ = select.select(fds, [], [], timeout)
    return readable


def _waiter(fds: list[int]) -> Callable[[list[int], float | None], list[int]]:
    """The wait for ``fds``: select while every descriptor fits its set, else poll."""
    return _select_wait if max(fds) < _FD_SETSIZE else _poll_wait(fds)


def _poll_wait(fds: list[int]) -> Callable[[list[int], float | None], list[int]]:
    """poll() for processes with descriptors beyond select's limit (millisecond timeouts,
    rounded up; the ideal-time schedule keeps the average rate exact anyway)."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)

    def wait(_fds: list[int], timeout: float | None) -> list[int]:
        ms = None if timeout is None else math.ceil(timeout * 1000)
        return [fd for fd, _ev in poller.poll(ms)]

    return wait


@dataclass(slots=True)
class PortCounters:
    """Socket-level counters of a port. Frames written = egress link deliveries - tx_errors."""

    rx_packets: int = 0
    rx_bytes: int = 0
    tx_errors: int = 0  # frames the emulated link delivered but the socket refused
    tx_error_bytes: int = 0


def _count_sent(stats: DirectionStats, queue: QueueStats, packets: int, nbytes: int) -> None:
    """Frames that went straight onto an idle wire: transmitted by the port and queue."""
    queue.packets += packets
    queue.bytes += nbytes
    stats.packets += packets
    stats.bytes += nbytes


class Dataplane:
    """Owns the ports, the traffic manager and the captures; runs the forwarding loop."""

    def __init__(
        self,
        pipeline: Pipeline,
        tm: TrafficManager,
        ports: dict[int, Port],
        watcher: LinkWatcher | None = None,
        clock: Callable[[], float] | None = None,
        run_clock: RunClock | None = None,
        lag_tolerance: float | None = None,
        coalesce: float = 0.0,
    ) -> None:
        """``clock`` (default: ``run_clock.now``, else time.monotonic) gives ``now``;
        ``run_clock`` (default: TDF 1) converts waits to wall time and stamps captures;
        ``lag_tolerance``: virtual seconds of lag still on time (common/lag.py default);
        ``coalesce``: wake-up coalescing slack in virtual seconds (common/coalesce.py; 0:
        one wake-up per event)."""
        self.pipeline = pipeline
        self.tm = tm
        self.ports = ports
        self.watcher = watcher
        self.run_clock = run_clock or RunClock(1.0)
        self.clock = clock or (run_clock.now if run_clock is not None else time.monotonic)
        self.lag = LagMeter(self.clock(), self.run_clock.tdf, lag_tolerance)
        self.coalescer = Coalescer(coalesce, self.run_clock.tdf)
        self.lag.slack = self.coalescer.slack
        # Kernel receive timestamps per port: how long a batch waited to be read (a port
        # with a receive ring has them in the ring's slots, others ask the socket).
        self.rx_stamps: dict[int, RxStamp | RxRing] = {
            n: p.ring if p.ring is not None else RxStamp(p.fileno()) for n, p in ports.items()}
        self.counters = {n: PortCounters() for n in ports}
        self.carrier = {n: oper_up(p.ifname) for n, p in ports.items()}
        self.captures: dict[int, PcapWriter] = {}
        self.misc: dict[str, int] = {
            "no_such_port_drops": 0,
            "rx_errors": 0,
            "ports_gone": 0,
            "pipeline_errors": 0,
            "forwarding_errors": 0,
            "commands": 0,
        }
        self.port_status_hooks: list[PortStatusHook] = []
        self._by_ifindex = {p.ifindex: n for n, p in ports.items()}
        self._commands: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = (
            queue.SimpleQueue()
        )
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stopping = False
        self._running = False
        self._direct = threading.Lock()  # a direct call() and the loop's start exclude each other
        self._closed = False
        self._left: set[int] = set()  # ports whose interface is gone (no longer read)
        self._gone: set[int] = set()  # of those, the ones the loop has yet to drop
        self._rx = RxBuffers(RX_BATCH, MAX_FRAME)  # receive scratch, shared by all ports
        # each port's batch read: its ring, else one recvmmsg into the shared scratch
        self._receive: dict[int, Callable[[int], list[bytes]]] = {
            n: p.ring.recv_bytes if p.ring is not None else partial(self._rx.recv_bytes, p.sock)
            for n, p in ports.items()}
        for n in ports:
            self.pipeline.set_port_oper_status(n, self.oper(n))

    # -- state -------------------------------------------------------------------------

    def oper(self, port: int) -> bool:
        """A port forwards when its carrier is up and it is administratively up."""
        return self.carrier[port] and self.tm.admin_up(port)

    def _announce(self, port: int, before: bool) -> None:
        now_up = self.oper(port)
        if now_up == before:
            return
        log.info(
            "port %d (%s) is now %s", port, self.ports[port].ifname, "up" if now_up else "down"
        )
        self.pipeline.set_port_oper_status(port, now_up)
        for hook in self.port_status_hooks:
            try:
                hook(port, now_up)
            except Exception:
                log.exception("port status hook failed for port %d", port)

    def set_admin(self, port: int, up: bool) -> None:
        """Administrative up/down (call from the loop thread, e.g. through ``call``)."""
        before = self.oper(port)
        self.tm.set_admin(port, up, self.clock())
        self._announce(port, before)

    def _link_changes(self) -> None:
        assert self.watcher is not None
        changes = self.watcher.read()
        if any(index < 0 for index, _ in changes):
            # Lost notifications: re-read every port.
            changes = [(p.ifindex, oper_up(p.ifname)) for p in self.ports.values()]
        for index, running in changes:
            port = self._by_ifindex.get(index)
            if port is None or port in self._left:
                continue
            if not running and self._check_gone(port):  # deleted, not only down
                continue
            if self.carrier[port] == running:
                continue
            before = self.oper(port)
            self.carrier[port] = running
            self._announce(port, before)

    # -- control-plane access ------------------------------------------------------------

    def call(self, fn: Callable[[], T], timeout: float = 5.0) -> T:
        """Run ``fn`` in the data-plane thread and return its result (or raise its error)."""
        with self._direct:
            if not self._running:
                return fn()  # loop not running (start-up, shutdown, tests): no race
        fut: Future[object] = Future()
        self._commands.put((fn, fut))
        self.wake()
        return fut.result(timeout)  # type: ignore[return-value]

    def wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # already signalled

    @property
    def wakeup_fd(self) -> int:
        """Write end of the loop's wake pipe, for ``signal.set_wakeup_fd``: a signal taken by
        another thread (gRPC's) must still wake the loop, or its handler waits for select."""
        return self._wake_w

    def stop(self) -> None:
        """Ask the loop to return (safe from signal handlers and other threads)."""
        self._stopping = True
        self.wake()

    def _run_commands(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                fn, fut = self._commands.get_nowait()
            except queue.Empty:
                return
            self.misc["commands"] += 1
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except Exception as exc:
                fut.set_exception(exc)

    # -- captures ------------------------------------------------------------------------

    def start_capture(self, port: int, path: str, direction: str, snaplen: int) -> PcapWriter:
        if port not in self.ports:
            raise ValueError(f"no port {port}")
        self.stop_capture(port)
        writer = PcapWriter(path, snaplen or 65535, direction, self.run_clock.unix_ns)
        self.captures[port] = writer
        return writer

    def stop_capture(self, port: int) -> PcapWriter | None:
        writer = self.captures.pop(port, None)
        if writer is not None:
            writer.close()
        return writer

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        """Forward until ``stop()``; returns after closing nothing (see ``close``)."""
        ports = self.ports
        tm = self.tm
        clock = self.clock
        fd_port = {p.fileno(): (n, self._receive[n]) for n, p in ports.items()}
        read_fds = [*fd_port, self._wake_r]
        if self.watcher is not None:
            read_fds.append(self.watcher.fileno())
        watcher_fd = self.watcher.fileno() if self.watcher is not None else -1
        wake_fd = self._wake_r
        counters = self.counters
        captures = self.captures
        ingress_shaped = tm.ingress_shaped
        process = self._process
        failed = self._pipeline_failed
        pipeline = self.pipeline
        pipeline_lock = pipeline.lock
        qdepth = tm.qdepth
        egress_get = tm.egress.get
        misc = self.misc
        pending: dict[int, list[bytes]] = {n: [] for n in ports}  # fast-path frames per port
        pending_get = pending.get
        dirty: list[int] = []  # ports with pending frames, in first-use order
        tx: dict[int, list[bytes]] = {}  # frames the emulated links delivered, per port
        rx: list[tuple[int, bytes]] = []
        wait = _waiter(read_fds)
        ctl_fds = [fd for fd in read_fds if fd not in fd_port]
        wait_ctl = _waiter(ctl_fds)
        coalescer = self.coalescer
        after_round = coalescer.after_round
        slack_wall = coalescer.slack * self.run_clock.tdf
        worked = False  # the current round handled frames (read, released or sent)
        lag = self.lag
        lag_due = lag.due
        lag_queued = lag.queued
        stamps = {n: st for n, st in self.rx_stamps.items() if st.supported}
        stamp_get = stamps.get
        tdf = self.run_clock.tdf
        deadline: float | None = None  # the earliest departure when the loop last waited
        gone = self._gone  # ports to drop from the poll set (_check_gone)
        with self._direct:
            self._running = True
        log.info("data plane running on %d ports", len(ports))
        try:
            while not self._stopping:
                now = clock()
                if deadline is not None and now >= deadline:
                    lag_due(deadline, now)
                tm.service_into(now, tx, rx)
                if rx:
                    worked = True
                    for port, data in rx:
                        process(data, port, now)
                    rx.clear()
                    tm.service_into(now, tx, rx)  # unshaped egress of what was just processed
                for port, frames in tx.items():
                    if frames:
                        worked = True
                        self._send_port(port, frames)
                        frames.clear()
                deadline = tm.next_deadline()
                waiting = clock()
                moderated = after_round(waiting, worked)
                worked = False
                try:
                    if moderated:
                        # events come densely: sleep the slack (control descriptors only),
                        # then take whatever arrived or fell due meanwhile in one round
                        wait_ctl(ctl_fds, slack_wall)
                        readable = wait(read_fds, 0.0)
                        lag.moderated += 1
                    else:
                        if deadline is None:
                            timeout: float | None = None
                        else:
                            timeout = (deadline - waiting) * tdf  # wall seconds
                            if timeout < 0:
                                timeout = 0.0
                        readable = wait(read_fds, timeout)
                except InterruptedError:
                    continue
                lag.wakeups += 1
                now = clock()
                lag.idle += now - waiting
                if not readable:
                    continue
                for fd in readable:
                    entry = fd_port.get(fd)
                    if entry is None:
                        if fd == wake_fd:
                            self._run_commands()
                        elif fd == watcher_fd:
                            try:
                                self._link_changes()
                            except OSError:
                                log.exception("reading link changes failed")
                        continue
                    port, receive = entry
                    rx_failed = False
                    try:
                        frames = receive(RX_BATCH)  # the ring, or one recvmmsg for the batch
                    except OSError:
                        misc["rx_errors"] += 1
                        rx_failed, frames = True, []
                    if not frames:
                        # readable and nothing read: an error (a receive ring never reads
                        # the socket, so a pending one, e.g. ENETDOWN, kept it readable)
                        if rx_failed or self._socket_error(port):
                            self._check_gone(port)
                        continue
                    worked = True
                    if port in ingress_shaped:
                        self._receive_shaped(port, frames, now)
                        continue
                    rxs = stamp_get(port)
                    if rxs is not None:  # the batch's newest frame was due when it arrived
                        lag_queued(rxs.age(), now)
                    pc = counters[port]
                    pc.rx_packets += len(frames)
                    pc.rx_bytes += sum(map(len, frames))
                    cap = captures.get(port)
                    if cap is not None and cap.rx:
                        for data in frames:
                            cap.write(data)
                    # The hot path, inlined: pipeline (its lock taken once per batch; the
                    # batch generator yields each frame's copies before it runs the next
                    # frame, so each sees the queue depth the previous ones left), then onto
                    # an idle unshaped wire (counted as sent, the frame joins its port's send
                    # batch) or into the egress queue.
                    with pipeline_lock:
                        batch = pipeline.datapath_batch()(frames, port, now, qdepth, failed)
                        # A run of copies to the same idle unshaped (port, queue) is counted
                        # once at its end: the wire stays idle (nothing is queued there).
                        run_key = (-1, -1)
                        run_pend: list[bytes] = []
                        run_queue: QueueStats | None = None
                        run_stats: DirectionStats | None = None
                        run_n = run_bytes = 0
                        try:
                            for out, prio, frame, trimmed, marked in batch:
                                if run_queue is not None and (out, prio) == run_key:
                                    run_n += 1
                                    run_bytes += len(frame)
                                    run_pend.append(frame)
                                    if trimmed:
                                        run_queue.trims += 1
                                    if marked:
                                        run_queue.ecn_marks += 1
                                    continue
                                if run_queue is not None and run_stats is not None:
                                    _count_sent(run_stats, run_queue, run_n, run_bytes)
                                    run_queue = None
                                sh = egress_get(out)
                                if sh is None:
                                    misc["no_such_port_drops"] += 1
                                    continue
                                if (
                                    sh.direct
                                    and not sh.backlog
                                    and not sh.inflight
                                    and 0 <= prio < sh.nqueues
                                ):
                                    pend = pending_get(out)
                                    if pend is None:  # a shaper without a socket
                                        misc["no_such_port_drops"] += 1
                                        continue
                                    if not pend:
                                        dirty.append(out)
                                    pend.append(frame)
                                    run_key, run_pend = (out, prio), pend
                                    run_stats = sh.stats
                                    run_queue = run_stats.queues[prio]
                                    run_n, run_bytes = 1, len(frame)
                                    if trimmed:
                                        run_queue.trims += 1
                                    if marked:
                                        run_queue.ecn_marks += 1
                                else:
                                    sh.enqueue(frame, prio, now, trimmed, marked)
                        except Exception:  # a traffic-manager bug: this batch's rest is lost
                            log.exception("forwarding a batch from port %d failed", port)
                            misc["forwarding_errors"] += 1
                        finally:
                            if run_queue is not None and run_stats is not None:
                                _count_sent(run_stats, run_queue, run_n, run_bytes)
                if gone:  # ports whose interface vanished leave the poll set
                    while gone:
                        fd_port.pop(ports[gone.pop()].fileno(), None)
                    read_fds = [fd for fd in read_fds if fd in fd_port or fd in (
                        wake_fd, watcher_fd)]
                    wait = _waiter(read_fds)
                if dirty:
                    # One sendmmsg per port for what this round put on idle wires (before
                    # the next service(), as the frames queued meanwhile are behind them).
                    for out in dirty:
                        pend = pending[out]
                        self._send_port(out, pend)
                        pend.clear()
                    dirty.clear()
        finally:
            self._running = False
            self._run_commands()  # answer whoever is waiting
            log.info("data plane stopped")

    def _socket_error(self, port: int) -> bool:
        """Read (and so clear) the port socket's pending error; True, counted in
        ``rx_errors``, when there was one."""
        try:
            err = self.ports[port].sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError:
            err = -1
        if err:
            self.misc["rx_errors"] += 1
        return err != 0

    def _check_gone(self, port: int) -> bool:
        """After a receive error or a link-down message: is the port's interface gone
        (deleted with its veth peer, or with its namespace)? Then the port leaves the loop
        for good (a socket with a pending error stays readable: a spin), is down from now
        on, and ``ports_gone`` counts it once; an interface that is still there is left
        alone (the error is only counted, in ``rx_errors``)."""
        if port in self._left:
            return True
        p = self.ports[port]
        try:
            if socket.if_nametoindex(p.ifname) == p.ifindex:
                return False
        except OSError:
            pass
        self._left.add(port)
        self._gone.add(port)
        self.misc["ports_gone"] += 1
        log.warning("port %d (%s) is gone: no longer read", port, p.ifname)
        before = self.oper(port)
        self.carrier[port] = False
        self._announce(port, before)
        return True

    def _process(self, data: bytes, port: int, now: float) -> None:
        """Pipeline, then into the egress queue (frames delivered by an ingress shaper)."""
        egress = self.tm.egress
        try:
            egress_packets = self.pipeline.process(data, port, now, self.tm.qdepth)
        except Exception:
            self._pipeline_failed(port)
            return
        for eg in egress_packets:
            sh = egress.get(eg.port)
            if sh is None:
                self.misc["no_such_port_drops"] += 1
            else:
                sh.enqueue(eg.data, eg.priority, now, eg.trimmed, eg.ecn_marked)

    def _pipeline_failed(self, port: int) -> None:
        """A bug in the pipeline must cost one frame, never the switch: count, log rarely."""
        self.misc["pipeline_errors"] += 1
        n = self.misc["pipeline_errors"]
        if n & (n - 1) == 0:  # 1st, 2nd, 4th, 8th, ... occurrence
            log.exception("pipeline failed on a frame from port %d (%d so far)", port, n)

    def _receive_shaped(self, port: int, frames: list[bytes], now: float) -> None:
        """A batch read from a port whose ingress link is emulated: into its shaper."""
        rxs = self.rx_stamps.get(port)
        if rxs is not None and rxs.supported:
            self.lag.queued(rxs.age(), now)
        pc = self.counters[port]
        cap = self.captures.get(port)
        for data in frames:
            pc.rx_packets += 1
            pc.rx_bytes += len(data)
            if cap is not None and cap.rx:
                cap.write(data)
            self.tm.receive(port, data, now)

    def _capture_tx(self, port: int, data: bytes) -> None:
        cap = self.captures.get(port)
        if cap is not None and cap.tx:
            cap.write(data)

    def _send_port(self, port: int, frames: list[bytes]) -> None:
        """Hand a port's frames to its socket with one sendmmsg; a refused frame is counted
        (tx_errors), never retried: the emulated link already delivered it."""
        result = send_batch(self.ports[port].sock, frames, drop_errnos=None)
        if result.failed:
            ec = self.counters[port]
            ec.tx_errors += len(result.failed)
            ec.tx_error_bytes += sum(len(frames[i]) for i in result.failed)
        if self.captures:
            failed = set(result.failed)
            for i, data in enumerate(frames):
                if i not in failed:
                    self._capture_tx(port, data)

    def close(self) -> None:
        """Close captures, sockets and the wake pipe; idempotent."""
        if self._closed:
            return
        self._closed = True
        for port in list(self.captures):
            self.stop_capture(port)
        for p in self.ports.values():
            try:
                p.close()
            except OSError:
                pass
        if self.watcher is not None:
            self.watcher.close()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

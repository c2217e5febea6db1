"""Traffic manager of the embedded switch: strict-priority queues and emulated links.

Pure logic (no sockets, no threads, no wall clock): every call takes ``now`` from the caller,
so unit tests drive it with a fake clock and the data-plane loop drives it with
``time.monotonic()``.

Model of one direction of one port (``Shaper``):

- ``nqueues`` FIFO queues, served by strict priority (highest index first), each with a depth
  limit in packets and in bytes (0 = unlimited); a packet that does not fit is tail-dropped.
- An emulated wire with a rate in bit/s (0 = unlimited), a propagation delay and an optional
  random loss probability. A packet leaves its queue only when the wire is free (so queue
  occupancy reflects real time). Departure times are computed from *ideal* times: the wire
  becomes free at ``start + size * 8 / rate`` however late the caller polls, and a packet
  starts at ``max(wire_free_at, its arrival)``; strict priority is decided among the packets
  that had arrived at that start time. The average rate is therefore exact despite timer
  jitter; only the moment a packet is handed to the socket is late by the poll latency.
- The packet is delivered (handed to the caller) ``delay`` seconds after its last bit left.
  Delivery keeps wire order even if the delay is changed while packets are in flight.
- Administrative down: arriving packets are dropped, queued and in-flight packets are
  dropped (a cut cable loses what is on it); everything is counted.

Rates count the bytes of the Ethernet frame as handled by the switch (no preamble,
inter-frame gap or FCS) unless ``overhead`` bytes per packet are configured.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from common.classes import DEFAULT_CLASSES

MAX_QUEUES = 8
DEFAULT_QPKTS = 64  # v1model / BMv2 default queue depth in packets
NIC_PRIORITY = tuple(  # DSCP -> priority of its MRC class (0 for other codepoints)
    next((DEFAULT_CLASSES.priority[c] for c, d in DEFAULT_CLASSES.dscp.items() if d == dscp), 0)
    for dscp in range(64))

DropHook = Callable[[int, int, int], None]
"""on_drop(port, priority, nbytes): called for every drop of a queued or arriving frame. The
P4 programs do not count these (v1model programs never see a traffic-manager drop); the
switch reports them in its admin statistics (QueueStats.drops, DirectionStats.tail_drops)."""


@dataclass(frozen=True, slots=True)
class LinkConfig:
    """Parameters of one emulated link direction. Validated by ``check()``."""

    rate_bps: float = 0.0  # 0 = unlimited
    delay_s: float = 0.0
    loss: float = 0.0  # probability in [0, 1)
    qpkts: int = DEFAULT_QPKTS  # per-queue depth limit in packets (0 = unlimited)
    qbytes: int = 0  # per-queue depth limit in bytes (0 = unlimited)
    overhead: int = 0  # bytes added to every frame for rate purposes (e.g. 24 = IFG+preamble+FCS)
    up: bool = True  # administrative state
    # Ingress (host-to-switch) direction only: the host NIC's priority queues. A frame is
    # queued at the priority of its DSCP's MRC class (common/classes.py), so a host's
    # acknowledgements do not wait behind its own (or, on a GPU, forwarded) data.
    nic_prio: bool = False

    def check(self) -> LinkConfig:
        if not self.rate_bps >= 0:
            raise ValueError(f"rate must be >= 0 bit/s, got {self.rate_bps}")
        if not self.delay_s >= 0:
            raise ValueError(f"delay must be >= 0 s, got {self.delay_s}")
        if not 0 <= self.loss < 1:
            raise ValueError(f"loss must be in [0, 1), got {self.loss}")
        if self.qpkts < 0 or self.qbytes < 0 or self.overhead < 0:
            raise ValueError("queue limits and overhead must be >= 0")
        return self

    @property
    def unshaped(self) -> bool:
        """True when this direction needs no queueing at all (no rate, delay or loss)."""
        return self.rate_bps == 0 and self.delay_s == 0 and self.loss == 0 and self.up

    def updated(self, **changes: object) -> LinkConfig:
        """A copy with ``changes`` applied (unknown names raise ValueError) and validated."""
        names = {f.name for f in fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise ValueError(f"unknown link parameter(s): {', '.join(sorted(unknown))}")
        return replace(self, **changes).check()  # type: ignore[arg-type]


def parse_link_spec(spec: str, base: LinkConfig | None = None) -> LinkConfig:
    """'rate=1e9,delay=10e-6,loss=0,qpkts=64,qbytes=0,overhead=0,up=1' -> LinkConfig."""
    conv: dict[str, Callable[[str], object]] = {
        "rate": float,
        "delay": float,
        "loss": float,
        "qpkts": int,
        "qbytes": int,
        "overhead": int,
        "up": lambda v: v.lower() not in ("0", "false", "down", "no"),
        "nicprio": lambda v: v.lower() not in ("0", "false", "no"),
    }
    names = {"rate": "rate_bps", "delay": "delay_s", "nicprio": "nic_prio"}
    changes: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in conv:
            raise ValueError(f"bad link parameter {item!r} (known: {', '.join(conv)})")
        try:
            changes[names.get(key, key)] = conv[key](value.strip())
        except ValueError as exc:
            raise ValueError(f"bad value in {item!r}: {exc}") from None
    return (base or LinkConfig()).updated(**changes)


WAIT_BUCKET_S = 50e-6  # width of one bucket of the queueing-delay histogram
WAIT_BUCKETS = 4096  # 0 .. 205 ms; the last bucket also holds everything longer
_PER_BUCKET = 1.0 / WAIT_BUCKET_S


@dataclass(slots=True)
class QueueStats:
    """Counters of one queue. ``packets``/``bytes`` are transmitted ones; ``wait_hist[i]``
    counts the transmitted packets that waited ``[i, i+1) x WAIT_BUCKET_S`` in the queue
    (arrival to the start of their transmission)."""

    packets: int = 0
    bytes: int = 0
    drops: int = 0  # tail drops (queue full)
    trims: int = 0  # trimmed packets enqueued here
    ecn_marks: int = 0  # CE-marked packets enqueued here
    max_depth_pkts: int = 0
    max_depth_bytes: int = 0
    wait_hist: dict[int, int] = field(default_factory=dict)  # bucket -> packets (sparse)


@dataclass(slots=True)
class DirectionStats:
    """Counters of one link direction of a port."""

    packets: int = 0  # delivered to the far end of the emulated link
    bytes: int = 0
    tail_drops: int = 0
    down_drops: int = 0  # dropped because the link was administratively down
    loss_drops: int = 0  # lost on the wire (random loss)
    queues: list[QueueStats] = field(default_factory=list)

    @property
    def drops(self) -> int:
        return self.tail_drops + self.down_drops + self.loss_drops


class Shaper:
    """Strict-priority queues in front of an emulated wire (one direction of one port)."""

    __slots__ = (
        "_active",
        "_bit_time",
        "_delay",
        "_loss",
        "_on_wire",
        "_overhead",
        "_qbytes_lim",
        "_qpkts_lim",
        "_rng",
        "backlog",
        "busy",
        "config",
        "direct",
        "inflight",
        "nqueues",
        "on_drop",
        "port",
        "qbytes",
        "queues",
        "stats",
        "wire_free_at",
    )

    def __init__(
        self,
        port: int,
        config: LinkConfig,
        nqueues: int = MAX_QUEUES,
        rng: random.Random | None = None,
        on_drop: DropHook | None = None,
        active: dict[int, Shaper] | None = None,
    ) -> None:
        """``active``: the owner's set of busy shapers (port -> shaper); the shaper joins it
        when a frame is queued while it was idle, the owner takes it out once idle again."""
        if not 1 <= nqueues <= MAX_QUEUES:
            raise ValueError(f"1..{MAX_QUEUES} queues per port, got {nqueues}")
        self.port = port
        self.nqueues = nqueues
        self.queues: list[deque[tuple[float, bytes]]] = [deque() for _ in range(nqueues)]
        self.qbytes = [0] * nqueues
        self.backlog = 0  # packets queued over all queues
        self.busy = 0  # bit p set: queue p is not empty (the scheduler looks at these only)
        self.inflight: deque[tuple[float, bytes]] = deque()  # (deliver_at, frame), wire order
        self._on_wire: tuple[float, bytes] | None = None  # inflight entry of the last frame sent
        self.wire_free_at = 0.0
        self.stats = DirectionStats(queues=[QueueStats() for _ in range(nqueues)])
        self._rng = rng or random.Random()
        self.on_drop = on_drop
        self._active = active
        self.config = LinkConfig()
        self.direct = True
        self._bit_time = 0.0
        self._delay = 0.0
        self._loss = 0.0
        self._overhead = 0
        self._qpkts_lim = 0
        self._qbytes_lim = 0
        self.configure(config, now=0.0)

    # -- configuration -------------------------------------------------------------------

    def configure(self, config: LinkConfig, now: float) -> None:
        """Apply new link parameters; going down flushes queues and wire (counted drops)."""
        config.check()
        was_up = self.config.up
        if was_up and self.backlog:
            self._transmit(now)  # what left under the old parameters has left
        old_bit_time = self._bit_time
        self.config = config
        self._bit_time = 8.0 / config.rate_bps if config.rate_bps > 0 else 0.0
        self._delay = config.delay_s
        self._loss = config.loss
        self._overhead = config.overhead
        self._qpkts_lim = config.qpkts or (1 << 62)
        self._qbytes_lim = config.qbytes or (1 << 62)
        self.direct = config.unshaped
        if was_up and not config.up:
            self._flush()
        if not was_up and config.up:
            self.wire_free_at = now
        if (
            was_up
            and config.up
            and self.wire_free_at > now
            and old_bit_time > 0
            and self._bit_time != old_bit_time
        ):
            self._rescale_frame_on_wire(now, old_bit_time)

    def _rescale_frame_on_wire(self, now: float, old_bit_time: float) -> None:
        """A rate change mid-frame: the bits not yet sent go at the new rate."""
        remaining = (self.wire_free_at - now) * self._bit_time / old_bit_time
        self.wire_free_at = now + remaining
        entry = self._on_wire
        inflight = self.inflight
        if entry is not None and inflight and inflight[-1] is entry:
            deliver = self.wire_free_at + self._delay
            if len(inflight) > 1 and inflight[-2][0] > deliver:
                deliver = inflight[-2][0]  # a wire never reorders
            self._on_wire = inflight[-1] = (deliver, entry[1])

    def _flush(self) -> None:
        st = self.stats
        for prio, q in enumerate(self.queues):
            for _arrival, data in q:
                st.down_drops += 1
                if self.on_drop is not None:
                    self.on_drop(self.port, prio, len(data))
            q.clear()
            self.qbytes[prio] = 0
        self.backlog = 0
        self.busy = 0
        st.down_drops += len(self.inflight)
        self.inflight.clear()

    # -- data path -----------------------------------------------------------------------

    def depth(self, priority: int) -> tuple[int, int]:
        """(packets, bytes) waiting in queue ``priority`` now (the packet on the wire excluded)."""
        if 0 <= priority < self.nqueues:
            return len(self.queues[priority]), self.qbytes[priority]
        return 0, 0

    def enqueue(
        self, data: bytes, priority: int, now: float, trimmed: bool = False, ecn: bool = False
    ) -> bool:
        """Queue a frame at ``priority``; False if it was dropped (down, no such queue, full)."""
        if not self.config.up:
            self.stats.down_drops += 1
            if self.on_drop is not None:
                self.on_drop(self.port, priority, len(data))
            return False
        if not 0 <= priority < self.nqueues:
            # v1model: a priority beyond the configured queues drops the packet.
            self.stats.tail_drops += 1
            if self.on_drop is not None:
                self.on_drop(self.port, priority, len(data))
            return False
        q = self.queues[priority]
        qs = self.stats.queues[priority]
        size = len(data)
        nbytes = self.qbytes[priority] + size
        if len(q) >= self._qpkts_lim or nbytes > self._qbytes_lim:
            qs.drops += 1
            self.stats.tail_drops += 1
            if self.on_drop is not None:
                self.on_drop(self.port, priority, size)
            return False
        if self._active is not None and not self.backlog and not self.inflight:
            self._active[self.port] = self
        q.append((now, data))
        self.qbytes[priority] = nbytes
        self.backlog += 1
        self.busy |= 1 << priority
        if trimmed:
            qs.trims += 1
        if ecn:
            qs.ecn_marks += 1
        if self.wire_free_at <= now:
            # The wire is idle: the packet leaves the queue now, not at the next poll, so the
            # depth the next packet sees is the real one.
            self._transmit(now)
        n = len(q)
        if n > qs.max_depth_pkts:
            qs.max_depth_pkts = n
        nbytes = self.qbytes[priority]
        if nbytes > qs.max_depth_bytes:
            qs.max_depth_bytes = nbytes
        return True

    def _transmit(self, now: float) -> None:
        """Move packets from the queues onto the wire while the wire is free at ``now``."""
        queues = self.queues
        while self.backlog and self.wire_free_at <= now:
            t = self.wire_free_at
            chosen = -1
            earliest = now
            rest = self.busy  # non-empty queues, highest priority first
            while rest:
                prio = rest.bit_length() - 1
                rest ^= 1 << prio
                arrival = queues[prio][0][0]
                if arrival <= t:
                    chosen = prio
                    break
                if arrival < earliest:
                    earliest = arrival
            if chosen < 0:
                # The wire idled: nothing had arrived when it became free. The first packet
                # to arrive afterwards starts at its arrival; priority among ties.
                t = earliest
                rest = self.busy
                while rest:
                    prio = rest.bit_length() - 1
                    rest ^= 1 << prio
                    if queues[prio][0][0] <= t:
                        chosen = prio
                        break
            q = queues[chosen]
            arrival, data = q.popleft()
            if not q:
                self.busy &= ~(1 << chosen)
            size = len(data)
            self.qbytes[chosen] -= size
            self.backlog -= 1
            qs = self.stats.queues[chosen]
            qs.packets += 1
            qs.bytes += size
            bucket = int((t - arrival) * _PER_BUCKET)
            if bucket >= WAIT_BUCKETS:
                bucket = WAIT_BUCKETS - 1
            hist = qs.wait_hist
            hist[bucket] = hist.get(bucket, 0) + 1
            self.wire_free_at = end = t + (size + self._overhead) * self._bit_time
            if self._loss and self._rng.random() < self._loss:
                self.stats.loss_drops += 1
                self._on_wire = None
                continue
            deliver = end + self._delay
            if self.inflight and self.inflight[-1][0] > deliver:
                deliver = self.inflight[-1][0]  # a wire never reorders
            self._on_wire = entry = (deliver, data)
            self.inflight.append(entry)

    def service(self, now: float, out: list[bytes]) -> None:
        """Advance to ``now``: start transmissions and append delivered frames to ``out``."""
        if self.backlog:
            self._transmit(now)
        inflight = self.inflight
        st = self.stats
        while inflight and inflight[0][0] <= now:
            data = inflight.popleft()[1]
            st.packets += 1
            st.bytes += len(data)
            out.append(data)

    def next_deadline(self) -> float | None:
        """The earliest time ``service`` has something to do (None: idle)."""
        t: float | None = self.inflight[0][0] if self.inflight else None
        if self.backlog:
            start = self.wire_free_at
            # All queued packets arrived in the past, so the next start is wire_free_at or
            # (if the wire is already free) now: report wire_free_at, the caller clamps.
            if t is None or start < t:
                t = start
        return t


class TrafficManager:
    """All ports of a switch: egress shapers (8 priorities) and optional ingress shapers.

    Ingress shaping emulates the host-to-switch direction of a link at the switch side: a
    frame received on a port whose ingress link is shaped is delayed/rate-limited before it
    reaches the pipeline. Unshaped ingress (the default) bypasses the shaper entirely.
    """

    def __init__(
        self,
        rng: random.Random | None = None,
        on_drop: DropHook | None = None,
    ) -> None:
        self._rng = rng or random.Random()
        self.on_drop = on_drop
        self.egress: dict[int, Shaper] = {}
        # the egress shapers with frames queued or on the wire: service and next_deadline
        # look at these only (a spine of a large fabric has many ports, few busy at once)
        self.busy_egress: dict[int, Shaper] = {}
        self.ingress: dict[int, Shaper] = {}
        self.busy_ingress: dict[int, Shaper] = {}  # the same for the shaped ingress links
        self.ingress_shaped: set[int] = set()
        self.qdepth = self._make_qdepth()

    def add_port(
        self,
        port: int,
        egress: LinkConfig | None = None,
        ingress: LinkConfig | None = None,
        nqueues: int = MAX_QUEUES,
    ) -> None:
        if port in self.egress:
            raise ValueError(f"port {port} already exists")
        self.egress[port] = Shaper(port, egress or LinkConfig(), nqueues, self._rng, self.on_drop,
                                   self.busy_egress)
        self.ingress[port] = Shaper(port, ingress or LinkConfig(), MAX_QUEUES, self._rng, None,
                                    self.busy_ingress)
        self._update_ingress(port)

    def _update_ingress(self, port: int) -> None:
        sh = self.ingress[port]
        if sh.config.unshaped and not sh.backlog and not sh.inflight:
            self.ingress_shaped.discard(port)
        else:
            self.ingress_shaped.add(port)

    def _port(self, table: dict[int, Shaper], port: int) -> Shaper:
        try:
            return table[port]
        except KeyError:
            raise ValueError(f"no port {port} (ports: {sorted(table)})") from None

    def configure(
        self, port: int, now: float, ingress: bool = False, **changes: object
    ) -> LinkConfig:
        """Change link parameters of one direction of ``port``; returns the new config."""
        sh = self._port(self.ingress if ingress else self.egress, port)
        cfg = sh.config.updated(**changes)
        sh.configure(cfg, now)
        if ingress:
            self._update_ingress(port)
        return cfg

    def set_admin(self, port: int, up: bool, now: float) -> None:
        """Administrative state of both directions of ``port``."""
        for table in (self.egress, self.ingress):
            sh = self._port(table, port)
            sh.configure(replace(sh.config, up=up), now)
        self._update_ingress(port)

    def admin_up(self, port: int) -> bool:
        return self._port(self.egress, port).config.up

    def _make_qdepth(self) -> Callable[[int, int], tuple[int, int]]:
        egress_get = self.egress.get
        empty = (0, 0)

        def qdepth(port: int, priority: int) -> tuple[int, int]:
            """(packets, bytes) queued now on (egress port, priority), for the pipeline."""
            sh = egress_get(port)
            if sh is None or not 0 <= priority < sh.nqueues:
                return empty
            return len(sh.queues[priority]), sh.qbytes[priority]

        return qdepth

    def enqueue(
        self,
        port: int,
        priority: int,
        data: bytes,
        now: float,
        trimmed: bool = False,
        ecn: bool = False,
    ) -> bool:
        sh = self.egress.get(port)
        if sh is None:
            return False
        return sh.enqueue(data, priority, now, trimmed, ecn)

    def receive(self, port: int, data: bytes, now: float) -> bool:
        """Queue a received frame in the ingress shaper of ``port`` (only if shaped); with
        ``nic_prio`` at the priority of its DSCP (IPv6 traffic class), else at 0."""
        sh = self.ingress[port]
        if sh.config.nic_prio and len(data) > 15 and data[12] == 0x86 and data[13] == 0xDD:
            return sh.enqueue(data, NIC_PRIORITY[((data[14] & 0x0F) << 2) | (data[15] >> 6)], now)
        return sh.enqueue(data, 0, now)

    def service(self, now: float, tx: list[tuple[int, bytes]], rx: list[tuple[int, bytes]]) -> None:
        """Deliver due frames: egress ones to ``tx`` (port, frame) to send on the port,
        ingress ones to ``rx`` (port, frame) for the pipeline."""
        per_port: dict[int, list[bytes]] = {}
        self.service_into(now, per_port, rx)
        for port, frames in per_port.items():
            tx.extend((port, d) for d in frames)

    def service_into(
        self, now: float, tx: dict[int, list[bytes]], rx: list[tuple[int, bytes]]
    ) -> None:
        """``service`` for the data-plane loop: egress frames go to ``tx[port]``, each port's
        list ready for one batched send (no (port, frame) tuple per frame)."""
        busy = self.busy_egress
        if busy:
            for port, sh in list(busy.items()):
                out = tx.get(port)
                if out is None:
                    out = tx[port] = []
                sh.service(now, out)
                if not sh.backlog and not sh.inflight:
                    del busy[port]
        if self.busy_ingress:
            self._service_ingress(now, rx)

    def _service_ingress(self, now: float, rx: list[tuple[int, bytes]]) -> None:
        buf: list[bytes] = []
        busy = self.busy_ingress
        for port, sh in list(busy.items()):
            sh.service(now, buf)
            if buf:
                rx.extend((port, d) for d in buf)
                buf.clear()
            if not sh.backlog and not sh.inflight:
                del busy[port]
                self._update_ingress(port)

    def next_deadline(self) -> float | None:
        """Earliest time anything is due (None when all links are idle)."""
        best: float | None = None
        for sh in self.busy_egress.values():
            t = sh.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        for sh in self.busy_ingress.values():
            t = sh.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        return best

"""Deterministic in-memory network for HostCores: a fake clock and links that delay, jitter
(reorder), drop, duplicate, trim and ECN-mark packets, chosen at random (seeded) or by a
predicate per packet. Used by the unit tests and usable as a small discrete-event simulator.

Plane p of every host is wired to plane p of every other host through one switch-less link
per direction; a plane can be cut (``plane_up``) to emulate a failed link. Every packet carries
its arrival time (``RxMeta.rx_time``); ``host_delay`` holds a host's packets that long before
it processes them (a host slow to handle what it receives).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from common.classes import TrafficClass
from hosts.transport.core import HostCore
from hosts.transport.profiles import EvProfile, EvProfileMode
from hosts.transport.types import (
    Event,
    QpAttr,
    QpAttrMask,
    QpHintFlag,
    QpState,
    QpType,
    RetryAttr,
    RxMeta,
    TxPacket,
)
from hosts.wire import WRITE_OPCODES, MrcPacket, decode_packet, encode_packet, packet_len

# verdicts of a per-packet predicate
PASS, DROP, TRIM, DUP, MARK = "pass", "drop", "trim", "dup", "mark"

Verdict = Callable[[int, TxPacket], str]  # (source host index, packet) -> verdict


@dataclass
class LinkModel:
    """Per-direction link behaviour. Probabilities apply to data packets only unless
    ``control_too``; ``rate`` in bytes/s (0: infinite) serialises packets per plane."""

    delay: float = 5e-6
    jitter: float = 0.0  # per-packet random extra delay (reorders even within one path)
    path_skew: float = 0.0  # per-path (src, port, EV) fixed extra delay: FIFO per path
    loss: float = 0.0
    dup: float = 0.0
    trim: float = 0.0
    ce: float = 0.0
    rate: float = 0.0
    control_too: bool = False
    lasthop_trim: bool = False
    seed: int = 7


@dataclass(order=True)
class _Arrival:
    time: float
    seq: int
    dst: int = field(compare=False)
    pkt: MrcPacket = field(compare=False)
    meta: RxMeta = field(compare=False)


class Network:
    def __init__(self, hosts: list[HostCore], model: LinkModel | None = None) -> None:
        self.hosts = hosts
        self.model = model or LinkModel()
        self.now = 0.0
        self.rng = random.Random(self.model.seed)
        self.verdict: Verdict | None = None
        self.plane_up: dict[int, bool] = {}
        # per host index: time between a packet's arrival at the host (RxMeta.rx_time) and
        # its processing (a host that is slow to handle what it receives)
        self.host_delay: dict[int, float] = {}
        self.events: list[list[Event]] = [[] for _ in hosts]
        self.sent: list[tuple[float, int, TxPacket]] = []
        self.delivered: list[tuple[float, int, MrcPacket, RxMeta]] = []
        self.record = False
        self.wire = False  # encode/decode every packet with hosts.wire
        self.stats: dict[str, int] = {}
        self._heap: list[_Arrival] = []
        self._seq = 0
        self._busy: dict[tuple[int, int, bool], float] = {}
        self._skew: dict[tuple[int, int, int], float] = {}
        self._gid: dict[bytes, tuple[int, int]] = {}
        for h, host in enumerate(hosts):
            for p, port in enumerate(host.config.ports):
                self._gid[bytes(port.gid)] = (h, p)

    def _count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    # -- moving packets -------------------------------------------------------------------
    def _transmit(self, src: int, tx: TxPacket) -> None:
        m = self.model
        if self.record:
            self.sent.append((self.now, src, tx))
        target = self._gid.get(bytes(tx.dst_gid))
        if target is None:
            self._count("no_route")
            return
        if not self.plane_up.get(tx.port, True):
            self._count("plane_down")
            return
        data = tx.tclass in (TrafficClass.TRIMMABLE, TrafficClass.TRIMMABLE_RETX)
        verdict = PASS
        if self.verdict is not None:
            verdict = self.verdict(src, tx)
        if verdict == PASS and (data or m.control_too):
            r = self.rng.random()
            if r < m.loss:
                verdict = DROP
            elif r < m.loss + m.trim and data:
                verdict = TRIM
            elif r < m.loss + m.trim + m.dup:
                verdict = DUP
            elif r < m.loss + m.trim + m.dup + m.ce and data:
                verdict = MARK
        if verdict == DROP:
            self._count("dropped")
            return
        pkt = tx.pkt
        if self.wire:  # through the real codec: what arrives is what the bytes say
            buf = bytearray(packet_len(pkt))
            end = encode_packet(pkt, buf)
            pkt = decode_packet(buf, 0, end)
        classes = self.hosts[src].config.classes
        dscp = classes.dscp[tx.tclass]
        size = len(pkt.payload) + 90
        if verdict == TRIM:
            self._count("trimmed")
            pkt = MrcPacket(
                pkt.bth, pkt.meth, pkt.tseth, pkt.reth, pkt.immdt, payload=b"", trimmed=True
            )
            cls = TrafficClass.TRIMMED_LASTHOP if m.lasthop_trim else TrafficClass.TRIMMED
            dscp = classes.dscp[cls]
            size = 90
        h, _p = target
        start = self.now
        if m.rate > 0:
            key = (src, tx.port, tx.tclass == TrafficClass.CONTROL)  # control: own lane
            start = max(self.now, self._busy.get(key, 0.0)) + size / m.rate
            self._busy[key] = start
        copies = 2 if verdict == DUP else 1
        if verdict == DUP:
            self._count("duplicated")
        base = start + m.delay
        if m.path_skew:
            key3 = (src, tx.port, tx.ev)
            skew = self._skew.get(key3)
            if skew is None:
                skew = self._skew[key3] = self.rng.random() * m.path_skew
            base += skew
        for _ in range(copies):
            t = base + (self.rng.random() * m.jitter if m.jitter else 0.0)
            meta = RxMeta(
                port=tx.port,
                src_gid=self.hosts[src].config.ports[tx.port].gid,
                dst_gid=tx.dst_gid,
                ev=tx.ev,
                dscp=dscp,
                ce=verdict == MARK,
                length=size,
                rx_time=t,
            )
            self._seq += 1
            held = self.host_delay.get(h, 0.0)
            heapq.heappush(self._heap, _Arrival(t + held, self._seq, h, pkt, meta))

    def flush_tx(self) -> int:
        n = 0
        for i, host in enumerate(self.hosts):
            for tx in host.packets_to_send(self.now):
                self._transmit(i, tx)
                n += 1
        return n

    def _drain_events(self) -> None:
        for i, host in enumerate(self.hosts):
            ev = host.next_event()
            while ev is not None:
                self.events[i].append(ev)
                ev = host.next_event()

    def step(self) -> bool:
        """Advance to the next arrival or timer; False when nothing is left to do."""
        self.flush_tx()
        self._drain_events()
        t_arr = self._heap[0].time if self._heap else None
        t_tmr: float | None = None
        for host in self.hosts:
            t = host.get_timer()
            if t is not None and (t_tmr is None or t < t_tmr):
                t_tmr = t
        if t_arr is None and t_tmr is None:
            return False
        if t_tmr is not None and (t_arr is None or t_tmr < t_arr):
            self.now = max(self.now, t_tmr)
            for host in self.hosts:
                t = host.get_timer()
                if t is not None and t <= self.now:
                    host.handle_timer(self.now)
                    after = host.get_timer()
                    if after is not None and after <= self.now:
                        raise AssertionError(f"timer did not move past {self.now} ({after})")
        else:
            assert t_arr is not None
            self.now = max(self.now, t_arr)
            while self._heap and self._heap[0].time <= self.now:
                a = heapq.heappop(self._heap)
                if self.record:
                    self.delivered.append((self.now, a.dst, a.pkt, a.meta))
                self.hosts[a.dst].receive(a.pkt, a.meta, self.now)
        self._drain_events()
        return True

    def run(
        self, until: Callable[[], bool], max_time: float = 10.0, max_steps: int = 10**7
    ) -> bool:
        """Step until ``until()`` holds (True) or time/steps run out or nothing is left (False)."""
        steps = 0
        while not until():
            if self.now > max_time or steps >= max_steps:
                return False
            if not self.step():
                return until()
            steps += 1
        return True


# -- set-up helpers (connection setup is out of band) ---------------------------------------
def default_profile(profile_id: int = 1, planes: int = 1, per_plane: int = 16) -> EvProfile:
    return EvProfile(profile_id, EvProfileMode.GEN, planes=planes, per_plane=per_plane)


@dataclass
class QpOptions:
    qp_type: QpType = QpType.MRC
    mpr: int = 8
    max_wimm: int = 16
    timeout: int = 10  # 1.024 us * 2**10 = 1.05 ms
    retry: RetryAttr = field(default_factory=lambda: RetryAttr(7, 6))
    hint: QpHintFlag = QpHintFlag.TRIM_NACK | QpHintFlag.TSETH
    profile_id: int = 1
    cc_profile_id: int = 0  # none installed: the fixed window
    start_psn: int = 0  # first PSN in both directions (exchanged out of band)


def connect(
    a: HostCore, b: HostCore, opts: QpOptions | None = None, cq: int = 0
) -> tuple[int, int]:
    """Create a connected QP pair a<->b in RTS (PSNs and attributes exchanged out of band)."""
    o = opts or QpOptions()
    qa = a.create_qp(o.qp_type, cq, cq)
    qb = b.create_qp(o.qp_type, cq, cq)
    gids_a = tuple(p.gid for p in a.config.ports)
    gids_b = tuple(p.gid for p in b.config.ports)
    M = QpAttrMask
    for host, qpn, peer_qpn, peer_gids in ((a, qa, qb, gids_b), (b, qb, qa, gids_a)):
        attr = QpAttr(
            qp_state=QpState.INIT,
            qp_hint=o.hint,
            ev_profile_id=o.profile_id,
            cc_profile_id=o.cc_profile_id,
        )
        host.modify_qp(qpn, attr, M.STATE | M.HINT | M.EV_PROFILE | M.CC_PROFILE)
        attr.qp_state = QpState.RTR
        attr.mpr_dest = o.mpr
        attr.max_wimm_dest = o.max_wimm
        attr.dest_qpn = peer_qpn
        attr.dest_gids = peer_gids
        attr.rq_psn = o.start_psn
        host.modify_qp(
            qpn,
            attr,
            M.STATE | M.MPR_DEST | M.MAX_WIMM_DEST | M.DEST_QPN | M.DEST_GIDS | M.RQ_PSN,
        )
        attr.qp_state = QpState.RTS
        attr.mpr = o.mpr
        attr.max_wimm = o.max_wimm
        attr.timeout = o.timeout
        attr.retry = o.retry
        attr.sq_psn = o.start_psn
        host.modify_qp(qpn, attr, M.STATE | M.MPR | M.MAX_WIMM | M.RETRY | M.TIMEOUT | M.SQ_PSN)
    return qa, qb


def is_data(tx: TxPacket) -> bool:
    return tx.pkt.bth.opcode in WRITE_OPCODES

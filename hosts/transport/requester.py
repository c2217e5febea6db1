"""Requester half of a QP: segmentation, spraying, MPR window, SACK/NACK processing, loss
recovery (fast-loss detector, reliability probes, ACK timeout with linear then exponential
backoff, optional per-packet timers) and send completions in posting order.

Per-PSN state lives in rings indexed by ``psn & mask`` (the ring is at least as large as the
MPR window); the SACK scoreboard and the retransmit set are Python ints used as bitmaps whose
bit i stands for PSN ``una + i``. In RC mode the same code does go-back-N from cumulative
ACK/NAK and never reads SACK bitmaps.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from hosts.transport.cc import NackFeedback, SackFeedback
from hosts.transport.loss import LossDetector, ReorderThreshold
from hosts.transport.ops import (
    OP_PROBE,
    OP_WRITE_FIRST,
    OP_WRITE_LAST,
    OP_WRITE_LAST_IMM,
    OP_WRITE_MIDDLE,
    OP_WRITE_ONLY,
    OP_WRITE_ONLY_IMM,
    TC_CONTROL,
    TC_DATA,
    TC_RETX,
    require_fields,
)
from hosts.transport.psn import (
    PSN_MASK,
    TS_PER_SECOND,
    ack_timeout,
    ts16,
    unwrap_psn,
)
from hosts.transport.types import (
    EXP_CNT_INFINITE,
    Completion,
    EvState,
    QpHintFlag,
    QpState,
    QpType,
    SendWR,
    TxPacket,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from hosts.wire import (
    Bth,
    ImmDt,
    Meth,
    MrcPacket,
    NackReason,
    Peth,
    Reth,
    SackVerdict,
    Tseth,
)

if TYPE_CHECKING:
    from hosts.transport.qp import Qp

_new = object.__new__


def _check_fields(cls: type, names: str) -> None:
    require_fields(cls, names, "requester._build")


_check_fields(Bth, "opcode se m pad tver pkey fecn becn dest_qp ack_req rtx tsh psn")
_check_fields(Meth, "rqmsn msn")
_check_fields(Reth, "va rkey dma_len")
_check_fields(Tseth, "tx_timestamp tsr ftype")
_check_fields(
    MrcPacket,
    "bth meth tseth reth immdt aeth seth cc_state neth peth erth eeth payload trimmed",
)
_check_fields(TxPacket, "pkt port dst_gid ev tclass ecn_capable")

_FLAG_INFLIGHT = 1  # bytes counted in bytes_in_flight
_FLAG_TRIMMED = 2  # a TRIMMED NACK was seen for this PSN (a later timeout is not the EV's fault)

RC_NAK_SEQ = 0x60  # AETH syndrome: NAK, PSN sequence error


class Wqe:
    """A posted send work request and where its packets sit in PSN space."""

    __slots__ = (
        "first_psn",
        "imm",
        "is_imm",
        "last_psn",
        "length",
        "msn",
        "npkts",
        "remote_addr",
        "rkey",
        "rqmsn",
        "signaled",
        "started",
        "view",
        "wr_id",
    )

    def __init__(self, wr: SendWR, view: memoryview, mtu: int, msn: int, rqmsn: int) -> None:
        self.wr_id = wr.wr_id
        self.view = view
        self.length = wr.length
        self.remote_addr = wr.remote_addr
        self.rkey = wr.rkey
        self.imm = wr.imm & 0xFFFFFFFF
        self.is_imm = wr.opcode == WrOpcode.WRITE_WITH_IMM
        self.signaled = wr.signaled
        self.npkts = max(1, -(-wr.length // mtu))
        self.msn = msn
        self.rqmsn = rqmsn
        self.first_psn = -1
        self.last_psn = -1
        self.started = False


class Requester:
    def __init__(self, qp: Qp, sq_psn: int, mpr_psns: int, max_wimm: int, now: float) -> None:
        self.qp = qp
        self.rc = qp.qp_type == QpType.RC
        self.mtu = qp.mtu
        self.una = sq_psn  # oldest PSN not yet acknowledged
        self.next_psn = sq_psn
        self.mpr_psns = mpr_psns  # own limit (RTS attr)
        self.peer_mpr_psns = mpr_psns  # Dynamic MPR from SACKs (<= own)
        self.window = mpr_psns
        self.max_wimm = max_wimm
        self.sacked = 0
        self.lost = 0
        size = 1
        while size < mpr_psns + 1:
            size <<= 1
        self.mask = size - 1
        self.r_wqe: list[Wqe | None] = [None] * size
        self.r_time = [0.0] * size
        self.r_seq = [0] * size  # global transmit sequence of the PSN's last copy
        self.r_pseq = [0] * size  # per-plane transmit sequence of the PSN's last copy
        self.r_ev = [-1] * size
        self.r_cnt = [0] * size
        self.r_size = [0] * size
        self.r_flags = [0] * size
        self.txseq = 0  # transmissions so far (= tx_data counter)
        self.n_rtx = 0
        # Loss detection runs per plane: each plane is its own network with its own queues,
        # so transmission order predicts arrival order only within a plane.
        nplanes = len(qp.cfg.ports)
        self.pseq = [0] * nplanes
        # per plane, in transmission order: (plane seq, psn, time, global seq)
        self.orders: list[deque[tuple[int, int, float, int]]] = [deque() for _ in range(nplanes)]
        factory = qp.cfg.loss_factory
        self.detectors: list[LossDetector] = [
            factory(qp.qpn)
            if factory is not None
            else ReorderThreshold(qp.cfg.reorder_threshold, max(1, mpr_psns // 2))
            for _ in range(nplanes)
        ]
        self._maxs = [-1] * nplanes
        # across planes: time order (RACK-like): lost once a packet sent at least
        # reo_mult x srtt later was delivered (catches a silently dead plane)
        self.gorder: deque[tuple[float, int, int]] = deque()  # (time, psn, global seq)
        self.max_acked_t = float("-inf")
        self.reo_mult = 1.0
        # per EV: inferred losses since the last delivery of a packet sent on it
        self.ev_loss: list[int] = [0] * (len(qp.ev.ports) if qp.ev is not None else 0)
        self.unsent: deque[Wqe] = deque()
        self.outstanding: deque[Wqe] = deque()  # started, not completed
        self.msn = 0
        self.rqmsn = 0
        self.wimm_inflight = 0
        self.inflight = 0
        self.retries = 0  # consecutive ACK timeouts without progress
        self.last_progress = now
        self.last_feedback = now
        self.probe_pending = False
        self.last_now = now
        self.probe_id = 0
        self.probe_time = 0.0
        self.rcvd_bytes_wire = 0
        self.srtt: float | None = None
        self.min_rtt: float | None = None
        hint = qp.hint
        self.use_ts = bool(hint & QpHintFlag.TSETH)
        self.dyn_mpr = bool(hint & QpHintFlag.DYNAMIC_MPR)
        self.timeout_s = float("inf")
        self.linear_cnt = 0
        self.exp_cnt = 0
        self.probe_after = float("inf")
        self.per_packet = qp.cfg.per_packet_timeout
        # reflected timestamps within this many ticks of a copy's own belong to that copy
        self.copy_tolerance = int(2 * qp.cfg.ack_delay * TS_PER_SECOND) + 1
        self.configure_timers()

    def configure_timers(self) -> None:
        a = self.qp.attr
        self.timeout_s = ack_timeout(a.timeout)
        self.linear_cnt = a.retry.linear_cnt
        self.exp_cnt = a.retry.exp_cnt
        cfg = self.qp.cfg.probe_after
        self.probe_after = cfg if cfg is not None else self.timeout_s / 4

    # -- posting ------------------------------------------------------------------------
    def queued(self) -> int:
        return len(self.unsent) + len(self.outstanding)

    def post(self, wr: SendWR, view: memoryview, now: float) -> None:
        rq = -1
        if wr.opcode == WrOpcode.WRITE_WITH_IMM:
            rq = self.rqmsn
            self.rqmsn += 1
        w = Wqe(wr, view, self.mtu, self.msn, rq if rq >= 0 else self.rqmsn)
        self.msn += 1
        self.unsent.append(w)

    def has_output(self) -> bool:
        if self.lost:
            return True
        if not self.unsent:
            return False
        return self.next_psn - self.una + 1 < self.window

    # -- transmit -----------------------------------------------------------------------
    def poll(self, now: float, out: list[TxPacket], budget: int) -> int:
        n = 0
        cc = self.qp.cc
        mtu = self.mtu
        while self.lost and n < budget:
            lost = self.lost
            low = lost & -lost
            rel = low.bit_length() - 1
            if rel + 1 >= self.window:
                break  # beyond a shrunken Dynamic MPR window: wait
            psn = self.una + rel
            slot = psn & self.mask
            if not cc.can_send(self.inflight, self.r_size[slot]):
                return n
            idx = self._pick(slot, True)
            if idx < 0:
                return n
            tx = self._build(psn, slot, now, True, idx)
            self.lost = lost ^ low
            out.append(tx)
            n += 1
        unsent = self.unsent
        while unsent and n < budget:
            psn = self.next_psn
            if psn - self.una + 1 >= self.window:
                self.qp.count("tx_window_blocked")
                break
            w = unsent[0]
            if not w.started:
                if w.is_imm and self.wimm_inflight >= self.max_wimm:
                    self.qp.count("tx_wimm_blocked")
                    break
                size = min(mtu, w.length)
            else:
                size = min(mtu, w.length - (psn - w.first_psn) * mtu)
            if not cc.can_send(self.inflight, size):
                break
            idx = self._pick(slot_of := psn & self.mask, False)
            if idx < 0:
                break  # no usable plane at all
            if not w.started:
                w.started = True
                w.first_psn = psn
                w.last_psn = psn + w.npkts - 1
                self.outstanding.append(w)
                if w.is_imm:
                    self.wimm_inflight += 1
            slot = slot_of
            self.r_wqe[slot] = w
            self.r_size[slot] = size
            self.r_cnt[slot] = 0
            self.r_flags[slot] = 0
            self.r_ev[slot] = -1
            if self.una == psn and not self.lost:
                self.last_progress = now
                self.last_feedback = now
            tx = self._build(psn, slot, now, False, idx)
            self.next_psn = psn + 1
            if psn == w.last_psn:
                unsent.popleft()
            out.append(tx)
            n += 1
        return n

    def _pick(self, slot: int, rtx: bool) -> int:
        ev = self.qp.ev
        assert ev is not None
        if self.rc or not rtx:
            return ev.pick()
        return ev.pick(self.r_ev[slot])  # never the EV the lost copy used

    def _build(self, psn: int, slot: int, now: float, rtx: bool, idx: int) -> TxPacket:
        qp = self.qp
        ev = qp.ev
        assert ev is not None
        w = self.r_wqe[slot]
        assert w is not None
        k = psn - w.first_psn
        off = k * self.mtu
        size = self.r_size[slot]
        npkts = w.npkts
        last = k == npkts - 1
        if npkts == 1:
            op = OP_WRITE_ONLY_IMM if w.is_imm else OP_WRITE_ONLY
        elif k == 0:
            op = OP_WRITE_FIRST
        elif last:
            op = OP_WRITE_LAST_IMM if w.is_imm else OP_WRITE_LAST
        else:
            op = OP_WRITE_MIDDLE
        ack_req = last or rtx or psn - self.una + 2 >= self.window
        # The per-packet objects are built with object.__new__ and slot stores: no __init__
        # frame per object (about 0.5 us each in CPython 3.11); _check_fields (at import)
        # guarantees these stores cover every field of each class.
        bth = _new(Bth)
        bth.opcode = op
        bth.se = False
        bth.m = False
        bth.pad = 0
        bth.tver = 0
        bth.pkey = 0xFFFF
        bth.fecn = False
        bth.becn = False
        bth.dest_qp = qp.dest_qpn
        bth.ack_req = ack_req
        bth.rtx = rtx
        bth.tsh = False
        bth.psn = psn & PSN_MASK
        meth = _new(Meth)
        meth.rqmsn = w.rqmsn & 0xFFFF
        meth.msn = w.msn & 0xFFFF
        reth = _new(Reth)
        reth.va = w.remote_addr + off
        reth.rkey = w.rkey
        reth.dma_len = w.length
        pkt = _new(MrcPacket)
        pkt.bth = bth
        pkt.meth = meth
        if self.use_ts:
            tseth = _new(Tseth)
            tseth.tx_timestamp = int(now * TS_PER_SECOND) & 0xFFFF
            tseth.tsr = False
            tseth.ftype = 0
            pkt.tseth = tseth
        else:
            pkt.tseth = None
        pkt.reth = reth
        pkt.immdt = ImmDt(w.imm) if last and w.is_imm else None
        pkt.aeth = pkt.seth = pkt.cc_state = pkt.neth = pkt.peth = pkt.erth = pkt.eeth = None
        pkt.payload = w.view[off : off + size]
        pkt.trimmed = False
        seq = self.txseq
        self.txseq = seq + 1
        port = ev.ports[idx]
        ps = self.pseq[port]
        self.pseq[port] = ps + 1
        self.r_time[slot] = now
        self.r_seq[slot] = seq
        self.r_pseq[slot] = ps
        self.r_ev[slot] = idx
        flags = self.r_flags[slot]
        if not flags & _FLAG_INFLIGHT:
            self.inflight += size
            self.r_flags[slot] = flags | _FLAG_INFLIGHT
        self.orders[port].append((ps, psn, now, seq))
        self.gorder.append((now, psn, seq))
        if rtx:
            self.r_cnt[slot] += 1
            self.n_rtx += 1
            tclass = TC_RETX
        else:
            tclass = TC_DATA
        if qp.cfg.log_packets:
            qp.log(now, "transport:packet_sent", psn=psn, ev=ev.evs[idx], port=port, rtx=rtx)
        tx = _new(TxPacket)
        tx.pkt = pkt
        tx.port = port
        tx.dst_gid = qp.dest_gids[port]
        tx.ev = ev.evs[idx]
        tx.tclass = tclass
        tx.ecn_capable = True
        return tx

    # -- acknowledgements ---------------------------------------------------------------
    def on_sack(self, pkt: MrcPacket, meta: object, now: float) -> None:
        self.last_now = now
        qp = self.qp
        s = pkt.seth
        c = pkt.cc_state
        assert s is not None and c is not None
        if self.rc:
            qp.count("rx_unexpected_sack")
            return
        una = self.una
        cack = unwrap_psn(s.cack_psn, una - 1)
        if cack >= self.next_psn or cack < una - 1 - self.mask:
            qp.count("rx_bad_sack")
            return
        qp.count("rx_sack")
        trig = cack + s.ack_psn_offset
        rb = c.rcvd_bytes
        rb_units = (rb - self.rcvd_bytes_wire) & PSN_MASK
        stale = rb_units >= 1 << 23  # older than a SACK already processed (reordered)
        dup_answer = (
            not s.pr
            and rb_units == 0
            and (trig < una or (trig < self.next_psn and (self.sacked >> (trig - una)) & 1))
        )
        self.last_feedback = now
        self.probe_pending = False
        span = self.next_psn - una
        d = cack + 1 - una
        bm = s.bitmap
        rel = cack + s.sack_offset - una
        bm = bm << rel if rel >= 0 else bm >> -rel
        cum = (1 << d) - 1 if d > 0 else 0
        newly = (cum | bm) & ((1 << span) - 1) & ~self.sacked
        acked_bytes = 0
        if newly:
            acked_bytes = self._ack_bits(newly)
            self.sacked |= newly
            self.lost &= ~newly
            if self.use_ts and una <= trig < self.next_psn and (newly >> (trig - una)) & 1:
                slot = trig & self.mask
                if self.r_cnt[slot]:
                    # Karn's ambiguity resolved by the reflected timestamp: if it is (up to
                    # the service time) the one of the last copy, that copy arrived
                    lag = (c.tx_timestamp - ts16(self.r_time[slot])) & 0xFFFF
                    if lag <= self.copy_tolerance and qp.ev is not None:
                        plane = qp.ev.ports[self.r_ev[slot]]
                        self.detectors[plane].on_acked(self.r_pseq[slot])
                        if self.r_time[slot] > self.max_acked_t:
                            self.max_acked_t = self.r_time[slot]
        elif dup_answer:
            # a SACK that answers a duplicate arrival and tells nothing new: a retransmission
            # was not needed
            qp.count("spurious_rtx")
            for det in self.detectors:
                det.on_spurious()
            self.reo_mult = min(self.reo_mult * 2, 16.0)
        if d > 0:
            self._advance(d, now)
        # feedback on the EV that triggered this SACK
        ev = qp.ev
        assert ev is not None
        idx = ev.index.get(s.entropy, -1)
        m = s.m
        if idx >= 0:
            if m == SackVerdict.SKIP_ONCE:
                ev.set_state(idx, EvState.SKIP, "sack_skip_once")
            elif m == SackVerdict.ALWAYS_SKIP:
                ev.set_state(idx, EvState.ASSUMED_BAD, "sack_always_skip")
            elif s.pr and ev.states[idx] == EvState.ASSUMED_BAD:
                ev.set_state(idx, EvState.GOOD, "probe_ok")
        if self.dyn_mpr and s.mpr:
            self.peer_mpr_psns = s.mpr * 128
            self.window = min(self.mpr_psns, self.peer_mpr_psns)
        # congestion-control feedback
        delta = 0
        if not stale:
            delta = rb_units * 256
            self.rcvd_bytes_wire = rb
        rtt: float | None = None
        svc = 0.0
        if (
            una <= trig < self.next_psn
            and (newly >> (trig - una)) & 1
            and self.r_cnt[trig & self.mask] == 0
        ):
            # RTT from our own send time of the trigger (only when this SACK is the first to
            # acknowledge it; exact, no 8.4 ms TSETH wrap); the
            # reflected timestamp minus the one we sent is the responder's service time
            sent = self.r_time[trig & self.mask]
            rtt = now - sent
            if self.use_ts:
                svc = ((c.tx_timestamp - ts16(sent)) & 0xFFFF) / TS_PER_SECOND
                if svc > rtt:
                    svc = 0.0  # not a service time (no SVC_TIME, or a bogus reflection)
                rtt -= svc
            self._rtt_sample(rtt)
        qp.cc.on_sack(
            SackFeedback(
                now,
                s.entropy,
                m == SackVerdict.SKIP_ONCE,
                acked_bytes,
                delta,
                rtt,
                svc,
                c.ooo_count,
                c.rcv_cwnd_pen,
                c.restore,
                self.inflight,
            )
        )
        if s.pr and self.probe_time > 0:
            self._probe_inference(cack + s.sack_offset)
        self._detect()
        if self.lost or (self.unsent and d > 0):
            qp.host.mark_ready(qp)

    def _rtt_sample(self, rtt: float) -> None:
        if self.min_rtt is None or rtt < self.min_rtt:
            self.min_rtt = rtt
        self.srtt = rtt if self.srtt is None else 0.875 * self.srtt + 0.125 * rtt

    def _ack_bits(self, newly: int) -> int:
        """Account for newly acknowledged PSNs (bit i = una + i); returns their bytes."""
        base = self.una
        mask = self.mask
        r_flags = self.r_flags
        r_size = self.r_size
        r_pseq = self.r_pseq
        r_ev = self.r_ev
        r_cnt = self.r_cnt
        ev = self.qp.ev
        assert ev is not None
        ports = ev.ports
        maxs = self._maxs
        r_time = self.r_time
        max_t = float("-inf")
        ev_loss = self.ev_loss
        if len(ev_loss) != len(ports):
            ev_loss.extend([0] * (len(ports) - len(ev_loss)))
        acked = 0
        inflight = self.inflight
        x = newly
        while x:
            low = x & -x
            x ^= low
            slot = (base + low.bit_length() - 1) & mask
            size = r_size[slot]
            acked += size
            f = r_flags[slot]
            if f & _FLAG_INFLIGHT:
                inflight -= size
                r_flags[slot] = f & ~_FLAG_INFLIGHT
            if not r_cnt[slot]:  # Karn: which copy of a retransmitted PSN arrived is unknown
                e = r_ev[slot]
                plane = ports[e]
                ps = r_pseq[slot]
                if ps > maxs[plane]:
                    maxs[plane] = ps
                t = r_time[slot]
                if t > max_t:
                    max_t = t
                ev_loss[e] = 0
        self.inflight = inflight
        if max_t > self.max_acked_t:
            self.max_acked_t = max_t
        for plane, m in enumerate(maxs):
            if m >= 0:
                self.detectors[plane].on_acked(m)
                maxs[plane] = -1
        return acked

    def _advance(self, d: int, now: float) -> None:
        """The cumulative ACK moved ``d`` PSNs: slide bitmaps, complete finished WQEs."""
        self.sacked >>= d
        self.lost >>= d
        self.una += d
        self.retries = 0
        self.last_progress = now
        una = self.una
        outstanding = self.outstanding
        qp = self.qp
        while outstanding and outstanding[0].last_psn < una:
            w = outstanding[0]
            if w.last_psn >= self.next_psn:  # not fully sent yet
                break
            outstanding.popleft()
            if w.is_imm:
                self.wimm_inflight -= 1
            if w.signaled:
                qp.emit(
                    Completion(
                        qp.send_cq,
                        qp.qpn,
                        w.wr_id,
                        WcStatus.SUCCESS,
                        WcOpcode.RDMA_WRITE,
                        w.length,
                    )
                )
        for order in self.orders:
            while order and order[0][1] < una:
                order.popleft()
        gorder = self.gorder
        while gorder and gorder[0][1] < una:
            gorder.popleft()

    def _mark_lost(self, psn: int) -> bool:
        rel = psn - self.una
        if rel < 0 or psn >= self.next_psn:
            return False
        bit = 1 << rel
        if self.sacked & bit or self.lost & bit:
            return False
        self.lost |= bit
        slot = psn & self.mask
        f = self.r_flags[slot]
        if f & _FLAG_INFLIGHT:
            self.inflight -= self.r_size[slot]
            self.r_flags[slot] = f & ~_FLAG_INFLIGHT
        return True

    def _detect(self) -> None:
        """Fast-loss detection: per plane, walk the transmit-order queue from the oldest."""
        una = self.una
        mask = self.mask
        r_seq = self.r_seq
        found = 0
        for order, det in zip(self.orders, self.detectors):
            while order:
                ps, psn, _t, seq = order[0]
                if psn < una or r_seq[psn & mask] != seq or (self.sacked >> (psn - una)) & 1:
                    order.popleft()
                    continue
                if det.is_lost(ps):
                    order.popleft()
                    if self._inferred_loss(psn):
                        found += 1
                    continue
                break
        if found:
            self.qp.count("loss_fast", found)
            self._log_lost("fast", found)
        if self.srtt is None:
            return
        limit = self.max_acked_t - self.srtt * self.reo_mult
        gorder = self.gorder
        found = 0
        while gorder:
            t, psn, seq = gorder[0]
            if psn < una or r_seq[psn & mask] != seq or (self.sacked >> (psn - una)) & 1:
                gorder.popleft()
                continue
            if t <= limit:
                gorder.popleft()
                if self._inferred_loss(psn):
                    found += 1
                continue
            break
        if found:
            self.qp.count("loss_time", found)
            self._log_lost("time", found)

    def _inferred_loss(self, psn: int) -> bool:
        """Mark a PSN lost that vanished (no NACK); an EV that loses 3 packets in a row with
        none delivered in between is assumed bad (a silently dead path or plane)."""
        if not self._mark_lost(psn):
            return False
        if self.rc:
            return True
        idx = self.r_ev[psn & self.mask]
        ev_loss = self.ev_loss
        if 0 <= idx < len(ev_loss):
            ev_loss[idx] += 1
            if ev_loss[idx] >= 3:
                ev_loss[idx] = 0
                ev = self.qp.ev
                assert ev is not None
                ev.set_state(idx, EvState.ASSUMED_BAD, "repeated_loss")
        return True

    def _log_lost(self, trigger: str, count: int) -> None:
        """qlog-like record of a loss detection (one per detection batch, not per packet)."""
        self.qp.log(
            self.last_now, "recovery:packets_lost", trigger=trigger, count=count, una=self.una
        )

    def _probe_inference(self, base: int) -> None:
        """A probe answer shows the responder's state after everything sent before the probe
        (minus a reordering guard): clear bits of its window for such PSNs are losses."""
        guard = self.srtt or 0.0
        limit = self.probe_time - guard
        end = min(base + 64, self.next_psn)
        found = 0
        for psn in range(self.una, end):
            rel = psn - self.una
            if (self.sacked >> rel) & 1 or (self.lost >> rel) & 1:
                continue
            if self.r_time[psn & self.mask] <= limit and self._inferred_loss(psn):
                found += 1
        self.probe_time = 0.0
        if found:
            self.qp.count("loss_probe", found)
            self._log_lost("probe", found)

    def on_nack(self, pkt: MrcPacket, meta: object, now: float) -> None:
        qp = self.qp
        n = pkt.neth
        assert n is not None
        psn = unwrap_psn(n.nack_psn, self.una)
        reason = n.reason
        qp.count(f"rx_nack_{reason:#x}")
        self.last_feedback = now
        if reason == NackReason.UNEXP_EVENT:
            qp.fail(now, WcStatus.REM_ACCESS_ERR, f"peer NACK UNEXP_EVENT at PSN {psn}")
            return
        if not self.una <= psn < self.next_psn:
            qp.count("rx_nack_stale")
            return
        rel = psn - self.una
        if (self.sacked >> rel) & 1:
            return
        slot = psn & self.mask
        if self._budget_exhausted(self.r_cnt[slot]):
            qp.fail(now, WcStatus.RETRY_EXC_ERR, f"PSN {psn} NACKed {self.r_cnt[slot]} times")
            return
        ev = qp.ev
        assert ev is not None
        if reason == NackReason.TRIMMED:
            self.r_flags[slot] |= _FLAG_TRIMMED
            idx = ev.index.get(n.entropy, -1)
            if idx >= 0 and not self.rc:
                ev.set_state(idx, EvState.SKIP, "nack_trimmed")
        elif reason == NackReason.TRIMMED_LASTHOP:
            self.r_flags[slot] |= _FLAG_TRIMMED
        self._mark_lost(psn)
        qp.cc.on_nack(NackFeedback(now, n.entropy, reason, self.r_size[slot], self.inflight))
        qp.host.mark_ready(qp)

    def on_ack(self, pkt: MrcPacket, meta: object, now: float) -> None:
        """RC baseline: cumulative ACK (BTH PSN = last in-order PSN) or NAK sequence error
        (BTH PSN = the PSN the responder expects): go back N from there."""
        qp = self.qp
        a = pkt.aeth
        assert a is not None
        psn = unwrap_psn(pkt.bth.psn, self.una)
        self.last_feedback = now
        self.probe_pending = False
        if a.syndrome & 0x60 == RC_NAK_SEQ:
            qp.count("rx_nak_seq")
            expected = psn
            if expected > self.una and expected <= self.next_psn:
                d = expected - self.una
                self._ack_bits(((1 << d) - 1) & ~self.sacked)
                self._advance(d, now)
            if self.una == expected:
                self._go_back(now)
            return
        qp.count("rx_ack")
        d = psn + 1 - self.una
        if d <= 0 or psn >= self.next_psn:
            return
        self._ack_bits((1 << d) - 1)
        self._advance(d, now)
        if self.unsent:
            qp.host.mark_ready(qp)

    def _go_back(self, now: float) -> None:
        span = self.next_psn - self.una
        if span <= 0:
            return
        for psn in range(self.una, self.next_psn):
            self._mark_lost(psn)
        self.qp.count("rc_go_back")
        self.qp.host.mark_ready(self.qp)

    # -- timers -------------------------------------------------------------------------
    def _budget_exhausted(self, tries: int) -> bool:
        if self.exp_cnt >= EXP_CNT_INFINITE:
            return False
        return tries >= self.linear_cnt + self.exp_cnt + 1

    def _interval(self) -> float:
        k = self.retries
        if k <= self.linear_cnt:
            return self.timeout_s
        return self.timeout_s * (1 << min(k - self.linear_cnt, 30))

    def next_timer(self) -> float | None:
        if self.una >= self.next_psn:
            return None
        t = self.last_progress + self._interval()
        if not self.probe_pending and not self.rc:
            tp = self.last_feedback + self.probe_after
            if tp < t:
                t = tp
        if self.per_packet is not None:
            for order in self.orders:
                if order:
                    tpp = order[0][2] + self.per_packet
                    if tpp < t:
                        t = tpp
        return t

    def handle_timer(self, now: float) -> None:
        self.last_now = now
        qp = self.qp
        if self.una >= self.next_psn:
            return
        if self.per_packet is not None:
            self._per_packet_expired(now)
        if now >= self.last_progress + self._interval():
            self._ack_timeout(now)
            if qp.state == QpState.ERR:
                return
        if (
            not self.rc
            and not self.probe_pending
            and now >= self.last_feedback + self.probe_after
            and self.una < self.next_psn
        ):
            self._send_probe(now)

    def _ack_timeout(self, now: float) -> None:
        qp = self.qp
        self.retries += 1
        qp.count("timeouts")
        if self.exp_cnt < EXP_CNT_INFINITE and self.retries > self.linear_cnt + self.exp_cnt:
            qp.fail(
                now,
                WcStatus.RETRY_EXC_ERR,
                f"local ACK timeout: {self.retries - 1} retries exhausted at PSN {self.una}",
            )
            return
        qp.log(now, "recovery:ack_timeout", una=self.una, retries=self.retries)
        ev = qp.ev
        assert ev is not None
        # everything whose last copy is at least one timeout old is presumed lost, and the
        # EVs those copies took (unless they were trimmed) are assumed bad
        stale = now - self.timeout_s
        r_time = self.r_time
        r_flags = self.r_flags
        r_ev = self.r_ev
        mask = self.mask
        bad: set[int] = set()
        for psn in range(self.una, self.next_psn):
            slot = psn & mask
            if (
                r_time[slot] <= stale
                and self._mark_lost(psn)
                and not r_flags[slot] & _FLAG_TRIMMED
                and r_ev[slot] >= 0
            ):
                bad.add(r_ev[slot])
        if not self.rc:
            for idx in sorted(bad):
                ev.set_state(idx, EvState.ASSUMED_BAD, "ack_timeout")
        qp.cc.on_timeout(now, self.inflight)
        self.last_progress = now
        qp.host.mark_ready(qp)

    def _per_packet_expired(self, now: float) -> None:
        assert self.per_packet is not None
        limit = now - self.per_packet
        una = self.una
        found = 0
        for order in self.orders:
            while order and order[0][2] <= limit:
                _ps, psn, _t, seq = order.popleft()
                if psn < una or self.r_seq[psn & self.mask] != seq:
                    continue
                if self._inferred_loss(psn):
                    found += 1
        if found:
            self.qp.count("loss_per_packet_timer", found)
            self._log_lost("per_packet_timer", found)
            self.qp.host.mark_ready(self.qp)

    def _send_probe(self, now: float) -> None:
        qp = self.qp
        ev = qp.ev
        assert ev is not None
        idx = ev.pick()
        if idx < 0:
            self.last_feedback = now  # no usable plane: try again one probe interval later
            return
        self.probe_id = (self.probe_id + 1) & 0xFFFF
        port = ev.ports[idx]
        ts = ts16(now)
        pkt = MrcPacket(
            Bth(opcode=OP_PROBE, dest_qp=qp.dest_qpn, psn=self.probe_id),
            peth=Peth(self.probe_id, ts),
        )
        qp.ctrl.append(TxPacket(pkt, port, qp.dest_gids[port], ev.evs[idx], TC_CONTROL, False))
        self.probe_pending = True
        self.probe_time = now
        qp.count("tx_probe")
        qp.host.mark_ready(qp)

    # -- failures -----------------------------------------------------------------------
    def requeue_ports(self, ports: set[int], now: float) -> None:
        """Packets in flight on EVs of planes that went away are retransmitted elsewhere."""
        self.last_now = now
        ev = self.qp.ev
        assert ev is not None
        found = 0
        for psn in range(self.una, self.next_psn):
            idx = self.r_ev[psn & self.mask]
            if idx >= 0 and ev.ports[idx] in ports and self._mark_lost(psn):
                found += 1
        if found:
            self.qp.count("loss_plane_down", found)
            self._log_lost("plane_down", found)

    def flush(self) -> list[Wqe]:
        """Everything not completed, in posting order (the QP is going to ERR)."""
        out = list(self.outstanding) + [w for w in self.unsent if not w.started]
        self.outstanding.clear()
        self.unsent.clear()
        self.lost = 0
        self.una = self.next_psn
        return out

    @property
    def bytes_in_flight(self) -> int:
        return self.inflight

    def rtt_estimate(self) -> float | None:
        return self.srtt


__all__ = ["TS_PER_SECOND", "Requester", "Wqe"]

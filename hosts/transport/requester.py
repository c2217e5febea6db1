"""Requester half of a QP: segmentation, spraying, the MPR window, SACK/NACK/ACK processing
and send completions in posting order.

Loss recovery (the scoreboard of PSNs in flight, RTT, loss detectors, probes, ACK timeout and
per-packet timers) is ``Recovery`` (recovery.py): the requester tells it what it sent and what
each SACK/NACK/ACK acknowledged, and retransmits what it marks lost, oldest first, before new
data. In RC mode the same code does go-back-N from cumulative ACK/NAK and never reads SACK
bitmaps.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from hosts.transport.cc import CongestionControl, NackFeedback, SackFeedback
from hosts.transport.counters import nack_reason_name
from hosts.transport.ev import EvManager
from hosts.transport.lognames import METRICS_UPDATED, MPR_UPDATED, PACKET_SENT
from hosts.transport.ops import (
    OP_WRITE_FIRST,
    OP_WRITE_LAST,
    OP_WRITE_LAST_IMM,
    OP_WRITE_MIDDLE,
    OP_WRITE_ONLY,
    OP_WRITE_ONLY_IMM,
    TC_DATA,
    TC_RETX,
    require_fields,
)
from hosts.transport.psn import PSN_MASK, TS_PER_SECOND, unwrap_psn
from hosts.transport.recovery import FLAG_TRIMMED, Recovery, RecoveryQp
from hosts.transport.spray import PathSignal
from hosts.transport.types import (
    Completion,
    Event,
    EvState,
    HostConfig,
    QpHintFlag,
    RetryAttr,
    RxMeta,
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
    Reth,
    SackVerdict,
    Tseth,
)

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

RC_NAK_SEQ = 0x60  # AETH syndrome: NAK, PSN sequence error


class RequesterQp(RecoveryQp, Protocol):
    """What the requester needs from its QP (recovery's needs plus delivering completions)."""

    def emit(self, event: Event) -> None: ...


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
    def __init__(
        self,
        qp: RequesterQp,
        ev: EvManager,
        cc: CongestionControl,
        cfg: HostConfig,
        *,
        qpn: int,
        send_cq: int,
        rc: bool,
        mtu: int,
        hint: QpHintFlag,
        dest_qpn: int,
        dest_gids: tuple[bytes, ...],
        sq_psn: int,
        mpr_psns: int,
        max_wimm: int,
        timeout: int,
        retry: RetryAttr,
        now: float,
    ) -> None:
        self.qp = qp
        self.ev = ev
        self.cc = cc
        self.qpn = qpn
        self.send_cq = send_cq
        self.rc = rc
        self.mtu = mtu
        self.dest_qpn = dest_qpn
        self.dest_gids = dest_gids
        self.log_packets = cfg.log_packets
        self.cc_log_interval = cfg.cc_log_interval
        self.next_cc_log = 0.0
        self.recovery = Recovery(
            qp,
            ev,
            cc,
            cfg,
            qpn=qpn,
            rc=rc,
            dest_qpn=dest_qpn,
            dest_gids=dest_gids,
            sq_psn=sq_psn,
            mpr_psns=mpr_psns,
            timeout=timeout,
            retry=retry,
            now=now,
        )
        self.mask = self.recovery.mask
        self.r_wqe: list[Wqe | None] = [None] * (self.mask + 1)
        self.mpr_psns = mpr_psns  # own limit (RTS attr)
        self.peer_mpr_psns = mpr_psns  # Dynamic MPR from SACKs (<= own)
        self.window = mpr_psns
        self.max_wimm = max_wimm
        self.unsent: deque[Wqe] = deque()
        self.outstanding: deque[Wqe] = deque()  # started, not completed
        self.msn = 0
        self.rqmsn = 0
        self.wimm_inflight = 0
        self.wimm_inflight_max = 0
        self.wimm_blocked = False  # the current WriteImm waits for max_wimm (a stall)
        self.span_peak = 0  # largest PSN span in flight since the window last changed
        self.rcvd_bytes_wire = 0
        self.use_ts = bool(hint & QpHintFlag.TSETH)
        self.dyn_mpr = bool(hint & QpHintFlag.DYNAMIC_MPR)

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
        rec = self.recovery
        if rec.lost:
            return True
        if not self.unsent:
            return False
        return rec.next_psn - rec.una + 1 < self.window

    # -- transmit -----------------------------------------------------------------------
    def poll(self, now: float, out: list[TxPacket], budget: int) -> int:
        n = 0
        cc = self.cc
        mtu = self.mtu
        rec = self.recovery
        while rec.lost and n < budget:
            lost = rec.lost
            low = lost & -lost
            rel = low.bit_length() - 1
            if rel + 1 >= self.window:
                break  # beyond a shrunken Dynamic MPR window: wait
            psn = rec.una + rel
            slot = psn & self.mask
            if not cc.can_send(bytes_in_flight=rec.inflight, size=rec.r_size[slot]):
                return n
            idx = self._pick(slot, True)
            if idx < 0:
                return n
            tx = self._build(psn, slot, now, True, idx, 0)
            rec.lost = lost ^ low
            out.append(tx)
            n += 1
        unsent = self.unsent
        while unsent and n < budget:
            psn = rec.next_psn
            if psn - rec.una + 1 >= self.window:
                self.qp.count("tx_window_blocked")
                break
            w = unsent[0]
            if not w.started:
                if w.is_imm and self.wimm_inflight >= self.max_wimm:
                    self.qp.count("tx_wimm_blocked")
                    if not self.wimm_blocked:
                        self.wimm_blocked = True
                        self.qp.count("wimm_stalls")
                    break
                size = min(mtu, w.length)
            else:
                size = min(mtu, w.length - (psn - w.first_psn) * mtu)
            if not cc.can_send(bytes_in_flight=rec.inflight, size=size):
                break
            idx = self._pick(slot := psn & self.mask, False)
            if idx < 0:
                break  # no usable plane at all
            if not w.started:
                w.started = True
                w.first_psn = psn
                w.last_psn = psn + w.npkts - 1
                self.outstanding.append(w)
                if w.is_imm:
                    self.wimm_blocked = False
                    self.wimm_inflight += 1
                    if self.wimm_inflight > self.wimm_inflight_max:
                        self.wimm_inflight_max = self.wimm_inflight
            self.r_wqe[slot] = w
            tx = self._build(psn, slot, now, False, idx, size)
            if psn == w.last_psn:
                unsent.popleft()
            if psn - rec.una >= self.span_peak:
                self.span_peak = psn - rec.una + 1
            out.append(tx)
            n += 1
        return n

    def _pick(self, slot: int, rtx: bool) -> int:
        if self.rc or not rtx:
            return self.ev.pick()
        rec = self.recovery
        avoid = rec.r_ev[slot]  # never the EV the lost copy used
        # lost again, or the oldest PSN (the one the cumulative ACK waits for) vanished (not
        # trimmed: its path may be dead, not just busy): the EV that delivered last, if any
        if rec.r_cnt[slot] or (slot == rec.una & rec.mask
                               and not rec.r_flags[slot] & FLAG_TRIMMED):
            idx = rec.proven_ev(avoid)
            if idx >= 0:
                return idx
        return self.ev.pick(avoid)

    def _build(self, psn: int, slot: int, now: float, rtx: bool, idx: int, size: int) -> TxPacket:
        """The packet of ``psn`` (``size``: payload bytes of a new PSN; a retransmission
        has the size recorded when the PSN was first sent)."""
        ev = self.ev
        rec = self.recovery
        w = self.r_wqe[slot]
        assert w is not None
        if rtx:
            size = rec.r_size[slot]
        k = psn - w.first_psn
        off = k * self.mtu
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
        ack_req = last or rtx or psn - rec.una + 2 >= self.window
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
        bth.dest_qp = self.dest_qpn
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
        port = rec.on_sent(psn, idx, size, now, rtx)
        if self.log_packets:
            self.qp.log(now, PACKET_SENT, psn=psn, ev=ev.evs[idx], port=port, rtx=rtx)
        tx = _new(TxPacket)
        tx.pkt = pkt
        tx.port = port
        tx.dst_gid = self.dest_gids[port]
        tx.ev = ev.evs[idx]
        tx.tclass = TC_RETX if rtx else TC_DATA
        tx.ecn_capable = True
        return tx

    # -- acknowledgements ---------------------------------------------------------------
    def on_sack(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        qp = self.qp
        s = pkt.seth
        c = pkt.cc_state
        assert s is not None and c is not None
        if self.rc:
            qp.count("rx_unexpected_sack")
            return
        rec = self.recovery
        una = rec.una
        next_psn = rec.next_psn
        cack = unwrap_psn(s.cack_psn, una - 1)
        if cack >= next_psn or cack < una - 1 - self.mask:
            qp.count("rx_bad_sack")
            return
        qp.count("rx_sack")
        trig = cack + s.ack_psn_offset
        rb = c.rcvd_bytes
        rb_units = (rb - self.rcvd_bytes_wire) & PSN_MASK
        stale = rb_units >= 1 << 23  # older than a SACK already processed (reordered)
        sacked = rec.sacked
        dup_answer = (
            not s.pr
            and rb_units == 0
            and (trig < una or (trig < next_psn and bool((sacked >> (trig - una)) & 1)))
        )
        span = next_psn - una
        d = cack + 1 - una
        bm = s.bitmap
        rel = cack + s.sack_offset - una
        bm = bm << rel if rel >= 0 else bm >> -rel
        cum = (1 << d) - 1 if d > 0 else 0
        newly = (cum | bm) & ((1 << span) - 1) & ~sacked
        arrived = meta.rx_time  # the NIC's receive time: our own queueing is not the path's
        if not 0.0 < arrived <= now:
            arrived = now
        acked_bytes, rtt, svc = rec.on_sack(
            newly, trig, c.tx_timestamp, dup_answer, self.use_ts, now, arrived
        )
        if d > 0:
            self._advance(d, now)
        # feedback on the EV that triggered this SACK, and to the spraying policy on the EVs
        # of everything it acknowledged: only the trigger can be marked (a CE arrival is
        # answered at once, so the packets coalesced before it arrived unmarked)
        ev = self.ev
        idx = ev.index.get(s.entropy, -1)
        m = s.m
        delivered = rec.delivered
        if idx >= 0:
            if m == SackVerdict.SKIP_ONCE or m == SackVerdict.ALWAYS_SKIP:
                ev.signal(idx, PathSignal.ECN, now)
                if delivered and idx in delivered:
                    delivered.remove(idx)
            if m == SackVerdict.SKIP_ONCE:
                ev.set_state(idx, EvState.SKIP, "sack_skip_once")
            elif m == SackVerdict.ALWAYS_SKIP:
                ev.set_state(idx, EvState.ASSUMED_BAD, "sack_always_skip")
            elif s.pr and ev.states[idx] == EvState.ASSUMED_BAD:
                ev.set_state(idx, EvState.GOOD, "probe_ok")
        if delivered:
            ev.delivered(delivered, now)
            delivered.clear()
        if self.dyn_mpr and s.mpr and s.mpr * 128 != self.peer_mpr_psns:
            self._peer_mpr(s.mpr * 128, now)
        # congestion-control feedback
        delta = 0
        if not stale:
            delta = rb_units * 256
            self.rcvd_bytes_wire = rb
        self.cc.on_sack(
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
                rec.inflight,
            )
        )
        if self.cc_log_interval is not None and now >= self.next_cc_log:
            self.next_cc_log = now + self.cc_log_interval
            self._log_metrics(now, rtt, svc, m == SackVerdict.SKIP_ONCE)
        rec.detect_losses(now, cack + s.sack_offset if s.pr else None, c.tx_timestamp)
        if rec.lost or (self.unsent and d > 0):
            qp.mark_ready()

    def _log_metrics(self, now: float, rtt: float | None, svc: float, ecn: bool) -> None:
        """A qlog-style sample of the window and what this SACK told (rtt: the network RTT,
        service_time: the responder's share; both from this SACK, absent without a sample)."""
        rec = self.recovery
        data: dict[str, object] = dict(self.cc.get_log_data())
        data["bytes_in_flight"] = rec.inflight
        data["smoothed_rtt"] = rec.rtt.srtt
        data["min_rtt"] = rec.rtt.min_rtt
        data["ecn_sack"] = ecn
        if rtt is not None:
            data["latest_rtt"] = rtt
            data["sample_service_time"] = svc
        self.qp.log(now, METRICS_UPDATED, **data)

    def _peer_mpr(self, psns: int, now: float) -> None:
        """Dynamic MPR: the responder advertised a new MPR; the window follows (never above
        our own MPR), and a shrink pauses new transmissions until the window allows them."""
        self.peer_mpr_psns = psns
        window = min(self.mpr_psns, psns)
        if window == self.window:
            return
        qp = self.qp
        qp.count("mpr_window_changes")
        qp.log(now, MPR_UPDATED, side="requester", old=self.window, new=window,
               peak=self.span_peak)
        self.window = window
        self.span_peak = 0
        qp.mark_ready()

    def add_stats(self, out: dict[str, int]) -> None:
        """The requester's gauges for ``HostCore.qp_stats``."""
        out["mpr_window"] = self.window
        out["mpr_window_peak"] = self.span_peak
        if self.wimm_inflight_max:
            out["wimm_inflight_max"] = self.wimm_inflight_max

    def _advance(self, d: int, now: float) -> None:
        """The cumulative ACK moved ``d`` PSNs: complete the WQEs it finished."""
        rec = self.recovery
        rec.on_cumulative_ack(d, now)
        una = rec.una
        next_psn = rec.next_psn
        outstanding = self.outstanding
        qp = self.qp
        while outstanding and outstanding[0].last_psn < una:
            w = outstanding[0]
            if w.last_psn >= next_psn:  # not fully sent yet
                break
            outstanding.popleft()
            if w.is_imm:
                self.wimm_inflight -= 1
            if w.signaled:
                qp.emit(
                    Completion(
                        self.send_cq,
                        self.qpn,
                        w.wr_id,
                        WcStatus.SUCCESS,
                        WcOpcode.RDMA_WRITE,
                        w.length,
                    )
                )

    def on_nack(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        qp = self.qp
        rec = self.recovery
        n = pkt.neth
        assert n is not None
        psn = unwrap_psn(n.nack_psn, rec.una)
        reason = n.reason
        qp.count("rx_nack_" + nack_reason_name(reason))
        rec.on_feedback(now, answers_probe=False)
        if reason == NackReason.UNEXP_EVENT:
            qp.fail(now, WcStatus.REM_ACCESS_ERR, f"peer NACK UNEXP_EVENT at PSN {psn}")
            return
        if not rec.una <= psn < rec.next_psn:
            qp.count("rx_nack_stale")
            return
        if (rec.sacked >> (psn - rec.una)) & 1:
            return
        tries = rec.transmissions(psn)
        if rec.retry_budget_exhausted(tries):
            qp.fail(now, WcStatus.RETRY_EXC_ERR, f"PSN {psn} NACKed {tries} times")
            return
        trimmed = reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP)
        if reason == NackReason.TRIMMED:
            idx = self.ev.index.get(n.entropy, -1)
            if idx >= 0 and not self.rc:
                self.ev.signal(idx, PathSignal.NACK, now)
                self.ev.set_state(idx, EvState.SKIP, "nack_trimmed")
        size = rec.on_nack(psn, trimmed=trimmed)
        self.cc.on_nack(NackFeedback(now, n.entropy, reason, size, rec.inflight))
        qp.mark_ready()

    def on_ack(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        """RC baseline: cumulative ACK (BTH PSN = last in-order PSN) or NAK sequence error
        (BTH PSN = the PSN the responder expects): go back N from there."""
        qp = self.qp
        rec = self.recovery
        a = pkt.aeth
        assert a is not None
        psn = unwrap_psn(pkt.bth.psn, rec.una)
        rec.on_feedback(now, answers_probe=True)
        if rec.delivered:
            rec.delivered.clear()  # RC: one EV, nothing to recycle
        if a.syndrome & 0x60 == RC_NAK_SEQ:
            qp.count("rx_nak_seq")
            expected = psn
            if expected > rec.una and expected <= rec.next_psn:
                d = expected - rec.una
                rec.on_acked(((1 << d) - 1) & ~rec.sacked)
                self._advance(d, now)
            if rec.una == expected:
                rec.go_back()
            return
        qp.count("rx_ack")
        d = psn + 1 - rec.una
        if d <= 0 or psn >= rec.next_psn:
            return
        rec.on_acked((1 << d) - 1)
        self._advance(d, now)
        if self.unsent:
            qp.mark_ready()

    # -- failures -----------------------------------------------------------------------
    def flush(self) -> list[Wqe]:
        """Everything not completed, in posting order (the QP is going to ERR)."""
        out = list(self.outstanding) + [w for w in self.unsent if not w.started]
        self.outstanding.clear()
        self.unsent.clear()
        self.recovery.flush()
        return out


__all__ = ["TS_PER_SECOND", "Requester", "RequesterQp", "Wqe"]

"""Responder half of a QP: PSN tracking bitmap, out-of-order placement with R_Key and bounds
checks, WriteImm receive consumption and in-order completion, SACK/NACK generation.

Tracking state: ``cack`` is the last PSN received with everything before it; ``rbits`` bit i
means PSN ``cack + 1 + i`` was received. Packets are accepted in ``[cack + 1, limit)`` where
``limit`` is the highest ``cack + MPR`` ever advertised (so a Dynamic MPR shrink never turns
packets already in flight into errors). ``unrep`` marks received PSNs no SACK has reported yet.

SACK policy: coalesce in-order arrivals (every ``ack_coalesce`` packets or ``ack_delay`` after
the first unacknowledged one), but answer at once on a gap (a packet beyond cack+1 or any
while holes exist), a duplicate, the AckReq bit, ECN-CE (m=SKIP_ONCE) and a probe (pr=1).
The 64-bit bitmap starts at cack+1 (the oldest gaps) unless every received PSN there was
already reported, in which case it starts at the oldest unreported PSN, so every arrival is
reported at least once.

Receive resources (``rxres.py``): with limits set, an out-of-order packet (beyond cack+1)
takes one bitmap entry and its payload bytes of packet buffer, of the QP's and of the host's
``RxPool``, until the cumulative ACK passes it; one that would exceed a limit is dropped and
NACKed (NO_BITMAP, NO_PKT_BUFFER). Without limits the per-packet path only tests a flag.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from hosts.transport.counters import nack_reason_name
from hosts.transport.lognames import MPR_UPDATED
from hosts.transport.memory import MemoryTable
from hosts.transport.ops import IMM_LAST_OPS, OP_SACK, require_fields
from hosts.transport.psn import (
    MASK64,
    PSN_MASK,
    TS_MASK,
    TS_PER_SECOND,
    trailing_ones,
    unwrap16,
)
from hosts.transport.rxres import RxPool, limit
from hosts.transport.types import (
    AsyncEvent,
    AsyncEventKind,
    Completion,
    Event,
    HostConfig,
    QpHintFlag,
    RecvWR,
    RxMeta,
    WcOpcode,
    WcStatus,
)
from hosts.wire import Aeth, Bth, CcState, MrcPacket, NackReason, Neth, Opcode, SackVerdict, Seth

_new = object.__new__
require_fields(Bth, "opcode se m pad tver pkey fecn becn dest_qp ack_req rtx tsh psn", "Responder._sack")
require_fields(
    Seth,
    "m pr ack_psn_offset entropy src_id dst_id cack_psn cc_type cc_flags mpr sack_offset bitmap",
    "Responder._sack",
)
require_fields(CcState, "tx_timestamp ooo_count restore rcv_cwnd_pen rcvd_bytes", "Responder._sack")
require_fields(
    MrcPacket,
    "bth meth tseth reth immdt aeth seth cc_state neth peth erth eeth payload trimmed",
    "Responder._sack",
)

RC_ACK = 0x1F  # AETH syndrome: ACK (credit field unused)
RC_NAK_SEQ = 0x60


class ResponderQp(Protocol):
    """What the responder needs from its QP."""

    recvq: deque[RecvWR]  # posted receives, consumed in order by WriteImm messages

    def count(self, name: str, n: int = 1) -> None: ...

    def log(self, now: float, name: str, **data: object) -> None: ...

    def emit(self, event: Event) -> None: ...

    def fail(self, now: float, status: WcStatus, detail: str, *, first_status: bool = True) -> None:
        ...

    def send_ctrl(self, pkt: MrcPacket, port: int) -> None: ...


class Responder:
    def __init__(
        self,
        qp: ResponderQp,
        memory: MemoryTable,
        cfg: HostConfig,
        *,
        qpn: int,
        recv_cq: int,
        rc: bool,
        hint: QpHintFlag,
        dest_qpn: int,
        dscp_trimmed: int,
        dscp_trimmed_lasthop: int,
        rq_psn: int,
        mpr_psns: int,
        max_wimm_dest: int,
        pool: RxPool | None = None,
    ) -> None:
        self.qp = qp
        self.memory = memory
        self.qpn = qpn
        self.recv_cq = recv_cq
        self.rc = rc
        self.dest_qpn = dest_qpn
        self.dscp_trimmed = dscp_trimmed
        self.dscp_trimmed_lasthop = dscp_trimmed_lasthop
        self.cack = rq_psn - 1
        self.rbits = 0
        self.unrep = 0
        self.highest = self.cack  # highest PSN received
        # highest PSN that asked for an acknowledgement (AckReq): when it arrived ahead of
        # packets sprayed on slower paths, the packet that closes the last hole below it is
        # acknowledged at once, not after the coalescing delay (the message's completion)
        self.req_psn = self.cack
        self.mpr_psns = mpr_psns
        self.adv_mpr = mpr_psns  # currently advertised MPR (Dynamic MPR)
        self.limit = self.cack + mpr_psns
        self.max_wimm_dest = max_wimm_dest
        self.rq_done = 0  # WriteImm messages completed (absolute RQMSN of the next one)
        self.wimm_open_max = 0  # most WriteImm messages seen open at once (last packet in)
        self.imm: dict[int, tuple[int, int, int]] = {}  # last PSN -> (rqmsn, imm, byte_len)
        self.imm_min = -1
        self.rcvd_bytes = 0
        self.ooo = 0
        self.dyn_mpr = bool(hint & QpHintFlag.DYNAMIC_MPR)
        self.svc = bool(hint & QpHintFlag.SVC_TIME)
        self.trim_nack = bool(hint & QpHintFlag.TRIM_NACK)
        self.coalesce = max(1, cfg.ack_coalesce)
        self.ack_delay = cfg.ack_delay
        self.pending = 0
        self.ack_deadline: float | None = None
        # the packet the next coalesced SACK answers
        self.t_psn = self.cack
        self.t_ev = 0
        self.t_ts = 0
        self.t_time = 0.0
        self.t_port = 0
        self.rc_nak_sent = False
        self.n_rx_data = 0
        self.span_peak = 0  # largest tracking span (highest - cack) since the MPR policy read it
        self.penalty = cfg.rx_penalty & 0x7F  # host backpressure (CC_STATE rcv_cwnd_pen)
        self.restore = False
        # receive resources: out-of-order PSNs held and their payload bytes (this QP's and
        # the host's pool); the sizes ring (by PSN) exists only when a limit is set
        self.pool = pool if pool is not None else RxPool()
        self.bm_max = limit(cfg.rx_bitmap_qp)
        self.buf_max = limit(cfg.rx_buffer_qp)
        self.limited = cfg.rx_bitmap_qp > 0 or cfg.rx_buffer_qp > 0 or self.pool.limited
        self.held = 0
        self.held_bytes = 0
        self.held_max = 0  # peaks, for qp_stats
        self.held_bytes_max = 0
        size = 1
        while size < mpr_psns + 1:
            size <<= 1
        self.h_mask = size - 1
        self.h_size = [0] * size if self.limited and not rc else []

    # -- data ---------------------------------------------------------------------------
    def on_data(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        qp = self.qp
        bth = pkt.bth
        # when the packet reached the host (the NIC's timestamp): the service time runs from
        # there, so time spent queued in the host counts as the host's, not the network's
        arrived = meta.rx_time
        if not 0.0 < arrived <= now:
            arrived = now
        d = (bth.psn - self.cack - 1) & PSN_MASK  # unwrap against the next expected PSN
        psn = self.cack + 1 + (d - 0x1000000 if d >= 0x800000 else d)
        ts = pkt.tseth.tx_timestamp if pkt.tseth is not None else 0
        dscp = meta.dscp
        trimmed = pkt.trimmed or dscp == self.dscp_trimmed or dscp == self.dscp_trimmed_lasthop
        if self.rc:
            self._on_data_rc(pkt, meta, now, psn, ts, trimmed)
            return
        cack = self.cack
        if psn <= cack:
            qp.count("rx_dup")
            if trimmed:  # a trimmed copy of data already here: no NACK, but seen
                qp.count("rx_dup_trimmed")
            self._sack(now, psn, meta.ev, ts, arrived, meta.port, SackVerdict.NONE, False)
            return
        if psn >= self.limit:
            qp.count("rx_oor")
            self._nack(NackReason.PSN_OOR_WINDOW, psn, meta, ts)
            return
        rel = psn - cack - 1
        bit = 1 << rel
        if self.rbits & bit:
            qp.count("rx_dup")
            if trimmed:
                qp.count("rx_dup_trimmed")
            self.unrep |= bit
            self._sack(now, psn, meta.ev, ts, arrived, meta.port, SackVerdict.NONE, False)
            return
        if trimmed:
            qp.count("rx_trimmed")
            if self.trim_nack:
                reason = (
                    NackReason.TRIMMED_LASTHOP
                    if dscp == self.dscp_trimmed_lasthop
                    else NackReason.TRIMMED
                )
                self._nack(reason, psn, meta, ts)
            return
        if rel and self.limited:
            size = len(pkt.payload)
            if self._refuse(size, psn, meta, ts) or not self._place(pkt, meta, now, psn, ts):
                return
            self._hold(psn, size)
        elif not self._place(pkt, meta, now, psn, ts):
            return
        self.rbits |= bit
        self.unrep |= bit
        self.rcvd_bytes += len(pkt.payload)
        self.n_rx_data += 1
        gap = psn > self.highest + 1  # a new hole opens below this packet
        if psn > self.highest:
            self.highest = psn
        if bth.ack_req and psn > self.req_psn:
            self.req_psn = psn
        closed = False
        if rel:
            self.ooo += 1
            if self.highest - cack > self.span_peak:
                self.span_peak = self.highest - cack
        else:
            t = trailing_ones(self.rbits)
            self.rbits >>= t
            self.unrep >>= t
            if t > 1:
                if self.limited:
                    self._release(cack + 2, cack + t + 1)
                closed = cack < self.req_psn <= cack + t
            self.cack = cack = cack + t
            if self.cack + self.adv_mpr > self.limit:
                self.limit = self.cack + self.adv_mpr
            if self.imm and self.imm_min <= cack:
                self._complete_imm(cack)
        if meta.ce:
            qp.count("rx_ce")
            self._sack(now, psn, meta.ev, ts, arrived, meta.port, SackVerdict.SKIP_ONCE, False)
        elif gap or bth.ack_req or closed:  # a new hole, or an asked-for PSN now complete
            self._sack(now, psn, meta.ev, ts, arrived, meta.port, SackVerdict.NONE, False)
        else:
            self.pending += 1
            self.t_psn = psn
            self.t_ev = meta.ev
            self.t_ts = ts
            self.t_port = meta.port
            self.t_time = arrived
            if self.pending >= self.coalesce:
                self._sack(now, psn, meta.ev, ts, arrived, meta.port, SackVerdict.NONE, False)
            elif self.ack_deadline is None:
                self.ack_deadline = now + self.ack_delay

    # -- receive resources ------------------------------------------------------------------
    def _refuse(self, size: int, psn: int, meta: RxMeta, ts: int) -> bool:
        """An out-of-order packet the receive resources cannot hold: count, NACK, True."""
        pool = self.pool
        if self.held >= self.bm_max or pool.bitmap_used >= pool.bitmap_limit:
            self.qp.count("rx_no_bitmap")
            self._nack(NackReason.NO_BITMAP, psn, meta, ts)
            return True
        if (self.held_bytes + size > self.buf_max
                or pool.buffer_used + size > pool.buffer_limit):
            self.qp.count("rx_no_pkt_buffer")
            self._nack(NackReason.NO_PKT_BUFFER, psn, meta, ts)
            return True
        return False

    def _hold(self, psn: int, size: int) -> None:
        """An out-of-order packet was placed: it holds an entry and ``size`` bytes."""
        pool = self.pool
        self.h_size[psn & self.h_mask] = size
        self.held += 1
        self.held_bytes += size
        pool.bitmap_used += 1
        pool.buffer_used += size
        if self.held > self.held_max:
            self.held_max = self.held
        if self.held_bytes > self.held_bytes_max:
            self.held_bytes_max = self.held_bytes

    def _release(self, first: int, end: int) -> None:
        """The cumulative ACK passed PSNs [first, end), all held out of order."""
        sizes = self.h_size
        mask = self.h_mask
        freed = 0
        psn = first
        while psn < end:
            freed += sizes[psn & mask]
            psn += 1
        n = end - first
        self.held -= n
        self.held_bytes -= freed
        self.pool.bitmap_used -= n
        self.pool.buffer_used -= freed

    def release_all(self) -> None:
        """Return everything this QP holds to the host's pool (its QP failed, was reset or
        destroyed); idempotent."""
        pool = self.pool
        pool.bitmap_used -= self.held
        pool.buffer_used -= self.held_bytes
        self.held = self.held_bytes = 0

    def _place(self, pkt: MrcPacket, meta: RxMeta, now: float, psn: int, ts: int) -> bool:
        """Checks and copy into registered memory; False (with NACK and maybe ERR) if refused."""
        qp = self.qp
        reth = pkt.reth
        if reth is None or pkt.meth is None:
            return self._fatal(now, psn, meta, ts, "data packet without RETH/METH")
        payload = pkt.payload
        size = len(payload)
        mr = self.memory.remote_write(reth.rkey, reth.va, size)
        if mr is None:
            qp.emit(
                AsyncEvent(
                    AsyncEventKind.REMOTE_ACCESS_ERROR,
                    self.qpn,
                    None,
                    f"bad remote write rkey={reth.rkey:#x} va={reth.va:#x} len={size}",
                )
            )
            return self._fatal(now, psn, meta, ts, "remote access error (rkey/bounds/access)")
        if pkt.bth.opcode in IMM_LAST_OPS:
            if pkt.immdt is None:
                return self._fatal(now, psn, meta, ts, "WriteImm without ImmDt")
            rq = unwrap16(pkt.meth.rqmsn, self.rq_done)
            if rq < self.rq_done or rq - self.rq_done >= self.max_wimm_dest:
                return self._fatal(now, psn, meta, ts, f"WriteImm RQMSN {rq} beyond max_wimm_dest")
            if rq - self.rq_done >= len(qp.recvq):
                qp.count("rx_no_recv")
                self._nack(NackReason.NO_RESOURCE, psn, meta, ts)
                return False
            self.imm[psn] = (rq, pkt.immdt.imm, reth.dma_len)
            if rq - self.rq_done >= self.wimm_open_max:
                self.wimm_open_max = rq - self.rq_done + 1
            if self.imm_min < 0 or psn < self.imm_min:
                self.imm_min = psn
        off = reth.va - mr.addr
        mr.buf[off : off + size] = payload
        return True

    def _fatal(self, now: float, psn: int, meta: RxMeta, ts: int, detail: str) -> bool:
        qp = self.qp
        self._nack(NackReason.UNEXP_EVENT, psn, meta, ts)
        qp.fail(now, WcStatus.REM_OP_ERR, detail, first_status=False)
        return False

    def _complete_imm(self, cack: int) -> None:
        qp = self.qp
        imm = self.imm
        for psn in sorted(p for p in imm if p <= cack):
            rq, value, length = imm.pop(psn)
            self.rq_done = rq + 1
            r = qp.recvq.popleft()
            qp.emit(
                Completion(
                    self.recv_cq,
                    self.qpn,
                    r.wr_id,
                    WcStatus.SUCCESS,
                    WcOpcode.RECV_RDMA_WITH_IMM,
                    length,
                    value,
                )
            )
        self.imm_min = min(imm) if imm else -1

    # -- control packets ----------------------------------------------------------------
    def _sack(
        self,
        now: float,
        trig: int,
        ev: int,
        ts: int,
        arrived: float,
        port: int,
        m: int,
        pr: bool,
        more: int = 3,
    ) -> None:
        qp = self.qp
        cack = self.cack
        base_rel = 0
        unrep = self.unrep
        if unrep and not pr:
            low = (unrep & -unrep).bit_length() - 1
            if low >= 64:
                base_rel = low
        self.unrep = unrep & ~(MASK64 << base_rel)
        off = trig - cack
        if not -0x8000 <= off <= 0x7FFF:
            off = 0
        if self.svc and more == 3:  # follow-ups carry the first SACK's compensated stamp
            ts = (ts + int((now - arrived) * TS_PER_SECOND)) & TS_MASK
        # One SACK per few data packets: built with object.__new__ and slot stores (no
        # __init__ frames); require_fields below keeps the stores complete.
        bth = _new(Bth)
        bth.opcode = OP_SACK
        bth.se = bth.m = bth.fecn = bth.becn = bth.ack_req = bth.rtx = bth.tsh = False
        bth.pad = bth.tver = 0
        bth.pkey = 0xFFFF
        bth.dest_qp = self.dest_qpn
        bth.psn = cack & PSN_MASK
        seth = _new(Seth)
        seth.m = m
        seth.pr = pr
        seth.ack_psn_offset = off
        seth.entropy = ev
        seth.src_id = seth.dst_id = seth.cc_type = seth.cc_flags = 0
        seth.cack_psn = cack & PSN_MASK
        seth.mpr = (self.adv_mpr >> 7) if self.dyn_mpr else 0
        seth.sack_offset = base_rel + 1
        seth.bitmap = (self.rbits >> base_rel) & MASK64
        cc = _new(CcState)
        cc.tx_timestamp = ts
        cc.ooo_count = self.ooo & 0x7FFF
        cc.restore = self.restore
        cc.rcv_cwnd_pen = self.penalty
        cc.rcvd_bytes = (self.rcvd_bytes >> 8) & PSN_MASK
        pkt = _new(MrcPacket)
        pkt.bth = bth
        pkt.seth = seth
        pkt.cc_state = cc
        pkt.meth = pkt.tseth = pkt.reth = pkt.immdt = pkt.aeth = pkt.neth = None
        pkt.peth = pkt.erth = pkt.eeth = None
        pkt.payload = b""
        pkt.trimmed = False
        self.pending = 0
        self.ack_deadline = None
        qp.count("tx_sack")
        qp.send_ctrl(pkt, port)
        if pr:  # a probe's answer goes twice, on two control EVs of the rotation
            qp.count("tx_sack")
            qp.send_ctrl(pkt, port)
        if self.unrep and more > 0:
            # arrivals beyond this SACK's 64 PSNs are still unreported: follow-up SACKs
            self._sack(now, trig, ev, ts, arrived, port, SackVerdict.NONE, False, more - 1)

    def _nack(self, reason: int, psn: int, meta: RxMeta, ts: int) -> None:
        qp = self.qp
        pkt = MrcPacket(
            Bth(opcode=Opcode.NACK, dest_qp=self.dest_qpn, psn=psn & PSN_MASK),
            neth=Neth(reason=reason, entropy=meta.ev, nack_psn=psn & PSN_MASK, tx_timestamp=ts),
        )
        qp.count("tx_nack")
        qp.count("tx_nack_" + nack_reason_name(reason))
        qp.send_ctrl(pkt, meta.port)

    def on_probe(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        """Reliability probe: answer with a SACK (pr=1) reflecting the probe's EV at once,
        sent twice on successive control EVs: a requester probes because its oldest PSN is
        stuck, maybe on a dead path, and the way back may have died with it (the requester
        reads the first copy that arrives and ignores the other)."""
        qp = self.qp
        qp.count("rx_probe")
        if pkt.peth is None:
            qp.count("rx_malformed")
            return
        if self.rc:
            self._rc_ack(now, meta.port, False)
            return
        m = SackVerdict.SKIP_ONCE if meta.ce else SackVerdict.NONE
        self._sack(now, self.cack, meta.ev, pkt.peth.tx_timestamp, now, meta.port, m, True)

    def set_backpressure(self, penalty: int, restore: bool) -> None:
        """Responder host backpressure carried in every following SACK's CC_STATE."""
        self.penalty = max(0, min(127, penalty))
        self.restore = restore

    def set_dynamic_mpr(self, mpr_psns: int, now: float = 0.0) -> bool:
        """Advertise a new MPR (128 PSNs .. the negotiated one) in the following SACKs;
        True when it changed."""
        adv = max(128, min(mpr_psns, self.mpr_psns))
        if adv == self.adv_mpr:
            return False
        self.qp.count("mpr_adv_changes")
        self.qp.log(now, MPR_UPDATED, side="responder", old=self.adv_mpr, new=adv,
                    span=self.highest - self.cack)
        self.adv_mpr = adv
        if self.cack + adv > self.limit:
            self.limit = self.cack + adv
        return True

    def add_stats(self, out: dict[str, int]) -> None:
        """The responder's counters and gauges for ``HostCore.qp_stats``."""
        out["rx_data"] = self.n_rx_data
        if self.dyn_mpr:
            out["mpr_advertised"] = self.adv_mpr
        if self.wimm_open_max:
            out["wimm_open_max"] = self.wimm_open_max
        if self.limited:
            out["rx_bitmap_held_max"] = self.held_max
            out["rx_buffer_held_max"] = self.held_bytes_max

    # -- timers -------------------------------------------------------------------------
    def next_timer(self) -> float | None:
        return self.ack_deadline

    def handle_timer(self, now: float) -> None:
        if self.ack_deadline is not None and now >= self.ack_deadline:
            if self.rc:
                self._rc_ack(now, self.t_port, False)
            else:
                self._sack(
                    now,
                    self.t_psn,
                    self.t_ev,
                    self.t_ts,
                    self.t_time,
                    self.t_port,
                    SackVerdict.NONE,
                    False,
                )

    # -- RC baseline --------------------------------------------------------------------
    def _on_data_rc(
        self, pkt: MrcPacket, meta: RxMeta, now: float, psn: int, ts: int, trimmed: bool
    ) -> None:
        """Go-back-N responder: only the expected PSN is accepted; the first out-of-order
        packet after a loss gets one NAK (sequence error), duplicates get an ACK."""
        qp = self.qp
        expected = self.cack + 1
        if psn < expected:
            qp.count("rx_dup")
            self._rc_ack(now, meta.port, False)
            return
        if psn > expected or trimmed:
            qp.count("rx_trimmed" if trimmed else "rx_out_of_order")
            if not self.rc_nak_sent:
                self.rc_nak_sent = True
                self._rc_ack(now, meta.port, True)
            return
        if not self._place(pkt, meta, now, psn, ts):
            return
        self.rc_nak_sent = False
        self.cack = psn
        self.rcvd_bytes += len(pkt.payload)
        self.n_rx_data += 1
        if self.imm and self.imm_min <= psn:
            self._complete_imm(psn)
        self.pending += 1
        self.t_port = meta.port
        if pkt.bth.ack_req or self.pending >= self.coalesce:
            self._rc_ack(now, meta.port, False)
        elif self.ack_deadline is None:
            self.ack_deadline = now + self.ack_delay

    def _rc_ack(self, now: float, port: int, nak: bool) -> None:
        qp = self.qp
        psn = self.cack + 1 if nak else self.cack
        pkt = MrcPacket(
            Bth(opcode=Opcode.ACK, dest_qp=self.dest_qpn, psn=psn & PSN_MASK),
            aeth=Aeth(syndrome=RC_NAK_SEQ if nak else RC_ACK, msn=0),
        )
        self.pending = 0
        self.ack_deadline = None
        qp.count("tx_nak" if nak else "tx_ack")
        qp.send_ctrl(pkt, port)

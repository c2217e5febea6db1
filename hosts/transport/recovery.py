"""Loss recovery of one requester: what was sent and not yet acknowledged, and when it is lost.

``Recovery`` owns the scoreboard of the PSNs in flight, ``[una, next_psn)``: per PSN (rings
indexed by ``psn & mask``, at least as large as the MPR window) the size, last transmit time,
transmit sequence numbers of the last copy (global, and per plane), EV, retransmission count
and flags; the SACK bitmap ``sacked`` and the retransmit set ``lost`` (Python ints, bit i =
PSN ``una + i``); the bytes in flight. It finds losses in every way MRC has:

- fast loss per plane, by transmission order (pluggable ``LossDetector``, loss.py), and by
  time (``reo_mult`` x srtt, any plane);
- reliability probes after ``probe_after`` without progress, on the EV that delivered last,
  repeated a few RTTs later when unanswered, and what their answers show (a loss a probe finds
  makes its EV ASSUMED_BAD, as a timeout without trim does);
- the optional per-packet timer;
- the local ACK timeout, linear then exponential backoff, ending in RETRY_EXC_ERR;
- planes that go away.

It is driven by a few calls (as aioquic's ``QuicPacketRecovery``): the requester's
``on_sent`` per transmission, ``on_sack`` / ``on_cumulative_ack`` / ``detect_losses`` per
SACK, ``on_nack``; the QP's ``next_timer`` / ``on_timer`` and ``on_planes_lost``. The requester
takes retransmissions from ``lost`` (oldest first). In RC mode only the cumulative-ACK,
go-back-N and timeout parts are used.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol

from hosts.transport.cc import CongestionControl
from hosts.transport.counters import (
    RTX_ACK_TIMEOUT,
    RTX_COUNTERS,
    RTX_GO_BACK,
    RTX_NACK,
    RTX_PER_PACKET_TIMER,
    RTX_PLANE_DOWN,
    RTX_PROBE,
    RTX_SACK_GAP,
)
from hosts.transport.ev import EvManager
from hosts.transport.lognames import ACK_TIMEOUT, PACKETS_LOST
from hosts.transport.loss import LossDetector, ReorderThreshold
from hosts.transport.ops import OP_PROBE, TC_CONTROL
from hosts.transport.psn import TS_PER_SECOND, ack_timeout, ts16
from hosts.transport.rtt import RttEstimator
from hosts.transport.spray import PathSignal
from hosts.transport.types import (
    EXP_CNT_INFINITE,
    EvState,
    HostConfig,
    RetryAttr,
    TxPacket,
    WcStatus,
)
from hosts.wire import Bth, MrcPacket, Peth

FLAG_INFLIGHT = 1  # the PSN's bytes are counted in bytes_in_flight
FLAG_TRIMMED = 2  # a TRIMMED NACK was seen for this PSN (a later timeout is not the EV's fault)

# Inferred losses in a row on one EV with none of its packets delivered make it ASSUMED_BAD:
# three found by the reordering threshold, two that waited at least a round trip (found by
# time or the per-packet timer: the packet vanished while later ones arrived), each of those
# weighing one and a half, or one that a reliability probe's answer shows (the oldest PSN
# was stuck for probe_after: the spec's "timeout without trim").
K_REPEATED_LOSS = 6
K_LOSS_WEIGHT_FAST = 2
K_LOSS_WEIGHT_SLOW = 3
K_LOSS_WEIGHT_PROBE = K_REPEATED_LOSS
K_REO_MULT_MAX = 16.0  # cap of the time threshold's multiplier of srtt
# No shorter time threshold within a plane (RACK's srtt/4): a plane is a network of several
# paths (spines), and packets sprayed over them wait in queues that differ by up to a trim
# threshold, about a base RTT at the link's rate. Measured on a permutation over clos-2p at
# 100 Mb/s with 1 ms links: srtt/4 took 55 of 57 retransmissions for losses that were not.
K_PROBE_SPAN = 64  # PSNs a probe's SACK bitmap covers
# A probe unanswered for this many smoothed RTTs (at most probe_after) is taken as lost and
# repeated on another EV: the responder answers a probe at once, on a control EV of its own
# rotation, so after a path failure half the answers may die on the way back, and waiting a
# whole probe interval for each doubled the stall.
K_PROBE_ANSWER_RTTS = 4
K_PROBES_KEPT = 4  # recent probes whose answers are still recognised (by their timestamp)


class RecoveryQp(Protocol):
    """What recovery needs from its QP."""

    def count(self, name: str, n: int = 1) -> None: ...

    def log(self, now: float, name: str, **data: object) -> None: ...

    def fail(self, now: float, status: WcStatus, detail: str, *, first_status: bool = True) -> None:
        ...

    def mark_ready(self) -> None: ...

    def queue_control(self, tx: TxPacket) -> None: ...


class Recovery:
    def __init__(
        self,
        qp: RecoveryQp,
        ev: EvManager,
        cc: CongestionControl,
        cfg: HostConfig,
        *,
        qpn: int,
        rc: bool,
        dest_qpn: int,
        dest_gids: tuple[bytes, ...],
        sq_psn: int,
        mpr_psns: int,
        timeout: int,
        retry: RetryAttr,
        now: float,
    ) -> None:
        self.qp = qp
        self.ev = ev
        self.cc = cc
        self.rc = rc
        self.dest_qpn = dest_qpn
        self.dest_gids = dest_gids
        self.una = sq_psn  # oldest PSN not yet acknowledged
        self.next_psn = sq_psn  # next new PSN (the requester's segmentation advances it)
        self.sacked = 0
        self.lost = 0
        self.inflight = 0
        size = 1
        while size < mpr_psns + 1:
            size <<= 1
        self.mask = size - 1
        self.r_size = [0] * size
        self.r_time = [0.0] * size
        self.r_seq = [0] * size  # global transmit sequence of the PSN's last copy
        self.r_pseq = [0] * size  # per-plane transmit sequence of the PSN's last copy
        self.r_ev = [-1] * size
        self.r_cnt = [0] * size
        self.r_flags = [0] * size
        self.r_why = [0] * size  # RTX_* code: why the PSN was last put in the retransmit set
        self.rtx_by = [0] * len(RTX_COUNTERS)  # retransmissions per trigger
        self.txseq = 0  # transmissions so far (= tx_data counter)
        self.n_rtx = 0
        self.lost_pending = 0  # bytes inferred lost, not yet reported to the controller
        # EV indices of first transmissions acknowledged by the current SACK, for spraying
        # policies that recycle EVs (None: the policy does not want them)
        self.delivered: list[int] | None = [] if ev.wants_deliveries else None
        # Loss detection runs per plane: each plane is its own network with its own queues,
        # so transmission order predicts arrival order only within a plane.
        nplanes = len(cfg.ports)
        self.pseq = [0] * nplanes
        # per plane, in transmission order: (plane seq, psn, time, global seq)
        self.orders: list[deque[tuple[int, int, float, int]]] = [deque() for _ in range(nplanes)]
        factory = cfg.loss_factory
        self.detectors: list[LossDetector] = [
            factory(qpn)
            if factory is not None
            else ReorderThreshold(cfg.reorder_threshold, max(1, mpr_psns // 2))
            for _ in range(nplanes)
        ]
        self._maxs = [-1] * nplanes
        # across planes: time order (RACK-like): lost once a packet sent at least
        # reo_mult x srtt later was delivered (catches a silently dead plane)
        self.gorder: deque[tuple[float, int, int]] = deque()  # (time, psn, global seq)
        self.max_acked_t = float("-inf")
        self.fresh_ev = -1  # EV of the latest-sent packet known delivered (a working path)
        self.reo_mult = 1.0
        # per EV: inferred losses since the last delivery of a packet sent on it
        self.ev_loss: list[int] = [0] * len(ev.ports)
        self.rtt = RttEstimator()
        self.retries = 0  # consecutive ACK timeouts without progress
        self.last_progress = now
        self.last_feedback = now
        # the longest time the cumulative ACK stood still while PSNs were outstanding: a
        # flow's stall, measured where it happens (a completion-based figure is as coarse as
        # the WRs)
        self.advanced_at = now
        self.stall_max = 0.0
        self.probe_pending = False
        self.probe_id = 0
        self.probe_ev = -1  # EV index the last probe took
        # (TSETH stamp, send time) of recent probes: an answer reflects its probe's stamp
        self.probes_sent: deque[tuple[int, float]] = deque(maxlen=K_PROBES_KEPT)
        self.last_probe = float("-inf")  # send time of the last probe
        self.timeout_s = float("inf")
        self.last_interval = 0.0  # the ACK-timeout interval that expired last (s)
        self.max_interval = 0.0
        self.backoff_cap = max(1, cfg.ack_backoff_cap)
        self.linear_cnt = 0
        self.exp_cnt = 0
        self.probe_after = float("inf")
        self.probe_after_cfg = cfg.probe_after
        self.per_packet = cfg.per_packet_timeout
        # reflected timestamps within this many ticks of a copy's own belong to that copy
        self.copy_tolerance = int(2 * cfg.ack_delay * TS_PER_SECOND) + 1
        self.configure_timers(timeout, retry)

    def configure_timers(self, timeout: int, retry: RetryAttr) -> None:
        """ACK timeout exponent and retry counts (QP attributes; RTS -> RTS may change them)."""
        self.timeout_s = ack_timeout(timeout)
        self.linear_cnt = retry.linear_cnt
        self.exp_cnt = retry.exp_cnt
        cfg = self.probe_after_cfg
        self.probe_after = cfg if cfg is not None else self.timeout_s / 4

    # -- transmissions --------------------------------------------------------------------
    def on_sent(self, psn: int, idx: int, size: int, now: float, rtx: bool) -> int:
        """PSN ``psn`` left on EV index ``idx`` (``size``: its payload bytes, used for a new
        PSN); returns the plane (port) it took."""
        slot = psn & self.mask
        seq = self.txseq
        self.txseq = seq + 1
        port = self.ev.ports[idx]
        ps = self.pseq[port]
        self.pseq[port] = ps + 1
        self.r_time[slot] = now
        self.r_seq[slot] = seq
        self.r_pseq[slot] = ps
        self.r_ev[slot] = idx
        if rtx:
            self.r_cnt[slot] += 1
            self.n_rtx += 1
            self.rtx_by[self.r_why[slot]] += 1
            size = self.r_size[slot]
            flags = self.r_flags[slot]
            if not flags & FLAG_INFLIGHT:
                self.inflight += size
                self.r_flags[slot] = flags | FLAG_INFLIGHT
        else:
            if psn == self.una and not self.lost:  # nothing outstanding: timers start now
                self.last_progress = now
                self.last_feedback = now
                self.advanced_at = now
            self.next_psn = psn + 1
            self.r_size[slot] = size
            self.r_cnt[slot] = 0
            self.r_flags[slot] = FLAG_INFLIGHT
            self.inflight += size
        self.orders[port].append((ps, psn, now, seq))
        self.gorder.append((now, psn, seq))
        self.cc.on_packet_sent(
            now=now, size=size, bytes_in_flight=self.inflight, retransmission=rtx
        )
        return port

    # -- acknowledgements -----------------------------------------------------------------
    def on_feedback(self, now: float, *, answers_probe: bool) -> None:
        """A NACK or an RC ACK arrived (``answers_probe``: it ends a pending probe; a SACK
        always does, in ``on_sack``)."""
        self.last_feedback = now
        if answers_probe:
            self.probe_pending = False

    def on_sack(
        self, newly: int, trig: int, reflected_ts: int, duplicate: bool, use_ts: bool, now: float,
        arrived: float | None = None,
    ) -> tuple[int, float | None, float]:
        """One SACK newly acknowledged the PSNs of ``newly`` (bit i = una + i); ``trig`` is its
        trigger PSN, ``reflected_ts`` the timestamp it reflects, ``duplicate``: it answers a
        duplicate arrival and tells nothing new; it reached the host at ``arrived`` (default
        ``now``). Returns (newly acknowledged bytes, RTT sample or None, service time)."""
        if arrived is None:
            arrived = now
        self.last_feedback = now
        self.probe_pending = False
        una = self.una
        next_psn = self.next_psn
        acked = 0
        if newly:
            acked = self.on_acked(newly)
            self.sacked |= newly
            self.lost &= ~newly
            if use_ts and una <= trig < next_psn and (newly >> (trig - una)) & 1:
                slot = trig & self.mask
                if self.r_cnt[slot]:
                    # Karn's ambiguity resolved by the reflected timestamp: if it is (up to
                    # the service time) the one of the last copy, that copy arrived
                    lag = (reflected_ts - ts16(self.r_time[slot])) & 0xFFFF
                    if lag <= self.copy_tolerance:
                        plane = self.ev.ports[self.r_ev[slot]]
                        self.detectors[plane].on_acked(self.r_pseq[slot])
                        if self.r_time[slot] > self.max_acked_t:
                            self.max_acked_t = self.r_time[slot]
        elif duplicate:
            # a SACK that answers a duplicate arrival and tells nothing new: a retransmission
            # was not needed
            self.qp.count("spurious_rtx")
            for det in self.detectors:
                det.on_spurious()
            self.reo_mult = min(self.reo_mult * 2, K_REO_MULT_MAX)
        rtt: float | None = None
        svc = 0.0
        slot = trig & self.mask
        if una <= trig < next_psn and (newly >> (trig - una)) & 1 and self.r_cnt[slot] == 0:
            # RTT from our own send time of the trigger (only when this SACK is the first to
            # acknowledge it; exact, no 8.4 ms TSETH wrap); the reflected timestamp minus the
            # one we sent is the responder's service time
            sent = self.r_time[slot]
            rtt = arrived - sent
            if use_ts:
                svc = ((reflected_ts - ts16(sent)) & 0xFFFF) / TS_PER_SECOND
                if svc > rtt:
                    svc = 0.0  # not a service time (no SVC_TIME, or a bogus reflection)
                rtt -= svc
            self.rtt.on_sample(rtt, svc)
        return acked, rtt, svc

    def on_acked(self, newly: int) -> int:
        """Account for newly acknowledged PSNs (bit i = una + i); returns their bytes."""
        base = self.una
        mask = self.mask
        r_flags = self.r_flags
        r_size = self.r_size
        r_pseq = self.r_pseq
        r_ev = self.r_ev
        r_cnt = self.r_cnt
        ports = self.ev.ports
        maxs = self._maxs
        r_time = self.r_time
        max_t = float("-inf")
        fresh = -1
        ev_loss = self.ev_loss
        if len(ev_loss) != len(ports):
            ev_loss.extend([0] * (len(ports) - len(ev_loss)))
        acked = 0
        inflight = self.inflight
        delivered = self.delivered
        x = newly
        while x:
            low = x & -x
            x ^= low
            slot = (base + low.bit_length() - 1) & mask
            size = r_size[slot]
            acked += size
            f = r_flags[slot]
            if f & FLAG_INFLIGHT:
                inflight -= size
                r_flags[slot] = f & ~FLAG_INFLIGHT
            if not r_cnt[slot]:  # Karn: which copy of a retransmitted PSN arrived is unknown
                e = r_ev[slot]
                plane = ports[e]
                ps = r_pseq[slot]
                if ps > maxs[plane]:
                    maxs[plane] = ps
                t = r_time[slot]
                if t > max_t:
                    max_t = t
                    fresh = e
                ev_loss[e] = 0
                if delivered is not None:
                    delivered.append(e)
        self.inflight = inflight
        if max_t > self.max_acked_t:
            self.max_acked_t = max_t
            self.fresh_ev = fresh
        for plane, m in enumerate(maxs):
            if m >= 0:
                self.detectors[plane].on_acked(m)
                maxs[plane] = -1
        return acked

    def on_cumulative_ack(self, d: int, now: float) -> None:
        """The cumulative ACK moved ``d`` PSNs: slide the scoreboard, restart the timeout."""
        self.sacked >>= d
        self.lost >>= d
        self.una += d
        self.retries = 0
        self.last_progress = now
        stood = now - self.advanced_at
        if stood > self.stall_max:
            self.stall_max = stood
        self.advanced_at = now
        una = self.una
        for order in self.orders:
            while order and order[0][1] < una:
                order.popleft()
        gorder = self.gorder
        while gorder and gorder[0][1] < una:
            gorder.popleft()


    def on_nack(self, psn: int, *, trimmed: bool) -> int:
        """A recoverable NACK for an unacknowledged PSN: it is lost; returns its size."""
        slot = psn & self.mask
        if trimmed:
            self.r_flags[slot] |= FLAG_TRIMMED
        if self.mark_lost(psn, RTX_NACK):
            self.qp.count("loss_nack")
        return self.r_size[slot]

    def transmissions(self, psn: int) -> int:
        """Retransmissions of ``psn`` so far (0: sent once)."""
        return self.r_cnt[psn & self.mask]

    def retry_budget_exhausted(self, tries: int) -> bool:
        if self.exp_cnt >= EXP_CNT_INFINITE:
            return False
        return tries >= self.linear_cnt + self.exp_cnt + 1

    # -- loss ------------------------------------------------------------------------------
    def mark_lost(self, psn: int, why: int) -> bool:
        """Put an unacknowledged PSN in the retransmit set (``why``: the RTX_* trigger its
        retransmission is counted under); False if it is not outstanding, acknowledged or
        already lost."""
        rel = psn - self.una
        if rel < 0 or psn >= self.next_psn:
            return False
        bit = 1 << rel
        if self.sacked & bit or self.lost & bit:
            return False
        self.lost |= bit
        slot = psn & self.mask
        self.r_why[slot] = why
        f = self.r_flags[slot]
        if f & FLAG_INFLIGHT:
            self.inflight -= self.r_size[slot]
            self.r_flags[slot] = f & ~FLAG_INFLIGHT
        return True

    def detect_losses(self, now: float, probe_base: int | None, probe_ts: int = 0) -> None:
        """After a SACK: what a probe's answer (bitmap from ``probe_base``, reflecting the
        probe's stamp ``probe_ts``) shows; then fast loss per plane (walking each plane's
        transmit order from the oldest) and by time."""
        if probe_base is not None:
            sent = self._probe_sent_at(probe_ts)
            if sent is not None:
                self._probe_inference(probe_base, now, sent)
        una = self.una
        mask = self.mask
        r_seq = self.r_seq
        srtt = self.rtt.srtt
        found = 0
        for order, det in zip(self.orders, self.detectors, strict=True):
            while order:
                ps, psn, _sent, seq = order[0]
                if psn < una or r_seq[psn & mask] != seq or (self.sacked >> (psn - una)) & 1:
                    order.popleft()
                    continue
                if det.is_lost(ps):
                    order.popleft()
                    if self._inferred_loss(psn, now, RTX_SACK_GAP, K_LOSS_WEIGHT_FAST):
                        found += 1
                    continue
                break
        if found:
            self.qp.count("loss_fast", found)
            self._log_lost("fast", found, now)
        if srtt is None:
            return
        limit = self.max_acked_t - srtt * self.reo_mult
        gorder = self.gorder
        found = 0
        while gorder:
            t, psn, seq = gorder[0]
            if psn < una or r_seq[psn & mask] != seq or (self.sacked >> (psn - una)) & 1:
                gorder.popleft()
                continue
            if t <= limit:
                gorder.popleft()
                if self._inferred_loss(psn, now, RTX_SACK_GAP):
                    found += 1
                continue
            break
        if found:
            self.qp.count("loss_time", found)
            self._log_lost("time", found, now)

    def _inferred_loss(self, psn: int, now: float, why: int,
                       weight: int = K_LOSS_WEIGHT_SLOW) -> bool:
        """Mark a PSN lost that vanished (no NACK); an EV whose losses in a row, with none of
        its packets delivered in between, weigh K_REPEATED_LOSS is assumed bad (a silently
        dead path or plane)."""
        if not self.mark_lost(psn, why):
            return False
        slot = psn & self.mask
        self.lost_pending += self.r_size[slot]
        if self.rc:
            return True
        idx = self.r_ev[slot]
        ev_loss = self.ev_loss
        if idx >= 0:
            self.ev.signal(idx, PathSignal.LOSS, now)
        if 0 <= idx < len(ev_loss):
            ev_loss[idx] += weight
            if ev_loss[idx] >= K_REPEATED_LOSS:
                ev_loss[idx] = 0
                self.ev.set_state(idx, EvState.ASSUMED_BAD, "repeated_loss")
        return True

    def _log_lost(self, trigger: str, count: int, now: float) -> None:
        """qlog-like record of a loss detection (one per detection batch, not per packet);
        the controller hears of the bytes inferred lost."""
        self.qp.log(now, PACKETS_LOST, trigger=trigger, count=count, una=self.una)
        self._report_lost(now)

    def _report_lost(self, now: float) -> None:
        lost, self.lost_pending = self.lost_pending, 0
        if lost:
            self.cc.on_packets_lost(now=now, lost_bytes=lost, bytes_in_flight=self.inflight)

    def _probe_sent_at(self, stamp: int) -> float | None:
        """Send time of the probe an answer reflecting ``stamp`` answers, once: an answer
        to an older probe than the last one read is ignored."""
        probes = self.probes_sent
        for ts, sent in reversed(probes):
            if ts == stamp:
                while probes and probes[0][1] <= sent:  # older answers tell less
                    probes.popleft()
                self.qp.count("probe_answered")
                return sent
        return None

    def _probe_inference(self, base: int, now: float, sent: float) -> None:
        """A probe answer shows the responder's state after everything sent before the probe
        (minus a reordering guard): clear bits of its window for such PSNs are losses."""
        guard = self.rtt.srtt or 0.0
        limit = sent - guard
        end = min(base + K_PROBE_SPAN, self.next_psn)
        found = 0
        for psn in range(self.una, end):
            rel = psn - self.una
            if (self.sacked >> rel) & 1 or (self.lost >> rel) & 1:
                continue
            if self.r_time[psn & self.mask] <= limit and self._inferred_loss(
                    psn, now, RTX_PROBE, K_LOSS_WEIGHT_PROBE):
                found += 1
        if found:
            self.qp.count("loss_probe", found)
            self._log_lost("probe", found, now)

    def proven_ev(self, avoid: int) -> int:
        """The usable EV that most recently delivered a packet (not ``avoid``), or -1: where a
        PSN lost more than once, or a reliability probe, goes. Right after a path
        dies the rotation still holds its EVs (they need losses in a row to be assumed bad);
        an EV that just delivered is the best bet."""
        e = self.fresh_ev
        if e >= 0 and e != avoid and self.ev.is_usable(e):
            return e
        return -1

    def go_back(self) -> None:
        """RC: everything outstanding is retransmitted (go-back-N)."""
        if self.next_psn - self.una <= 0:
            return
        found = sum(self.mark_lost(psn, RTX_GO_BACK) for psn in range(self.una, self.next_psn))
        self.qp.count("rc_go_back")
        if found:
            self.qp.count("loss_go_back", found)
        self.qp.mark_ready()

    def on_planes_lost(self, ports: set[int], now: float) -> None:
        """Packets in flight on EVs of planes that went away are retransmitted elsewhere."""
        ports_of = self.ev.ports
        found = 0
        for psn in range(self.una, self.next_psn):
            idx = self.r_ev[psn & self.mask]
            if idx >= 0 and ports_of[idx] in ports and self.mark_lost(psn, RTX_PLANE_DOWN):
                found += 1
        if found:
            self.qp.count("loss_plane_down", found)
            self._log_lost("plane_down", found, now)

    def flush(self) -> None:
        """The QP is going to ERR: nothing is outstanding any more."""
        self.lost = 0
        self.una = self.next_psn

    # -- timers ----------------------------------------------------------------------------
    def _backoff(self) -> int:
        """Multiplier of the ACK timeout now: 1 for the first linear_cnt expiries, then
        doubling per expiry, capped at ``HostConfig.ack_backoff_cap``."""
        k = self.retries - self.linear_cnt
        if k <= 0:
            return 1
        return min(1 << min(k, 30), self.backoff_cap)

    def _interval(self) -> float:
        """The current ACK timeout: T for the first linear_cnt expiries, then doubling."""
        return self.timeout_s * self._backoff()

    def _probe_due(self) -> float:
        """When the next reliability probe goes out: ``probe_after`` without cumulative
        progress (and at least that long after the previous probe), or, while one is
        unanswered, the answer's wait (``K_PROBE_ANSWER_RTTS`` smoothed RTTs, at most
        ``probe_after``) times the ACK timeout's backoff after it (a probe lost on a dead path
        must not end probing). SACKs of later PSNs do not hold a probe back: the
        oldest unacknowledged PSN is what the ACK timeout would fire for."""
        if self.probe_pending:
            return self.last_probe + self._answer_wait() * self._backoff()
        return max(self.last_progress, self.last_probe) + self.probe_after

    def _answer_wait(self) -> float:
        """How long a probe's answer is awaited before the probe counts as lost."""
        srtt = self.rtt.srtt
        if not srtt:
            return self.probe_after
        return min(self.probe_after, K_PROBE_ANSWER_RTTS * srtt)

    def next_timer(self) -> float | None:
        if self.una >= self.next_psn:
            return None
        t = self.last_progress + self._interval()
        if not self.rc:
            tp = self._probe_due()
            if tp < t:
                t = tp
        if self.per_packet is not None:
            for order in self.orders:
                if order:
                    tpp = order[0][2] + self.per_packet
                    if tpp < t:
                        t = tpp
        return t

    def on_timer(self, now: float) -> None:
        if self.una >= self.next_psn:
            return
        if self.per_packet is not None:
            self._per_packet_expired(now)
        if now >= self.last_progress + self._interval() and not self._ack_timeout(now):
            return  # retries exhausted: the QP is in ERR
        if not self.rc and now >= self._probe_due() and self.una < self.next_psn:
            expired = self.probe_pending
            if expired:
                self.qp.count("probe_expired")  # unanswered: the next one takes another EV
            self._send_probe(now, expired)

    def _ack_timeout(self, now: float) -> bool:
        """One ACK timeout expiry; False when it exhausted the retries (QP failed)."""
        qp = self.qp
        interval = self._interval()
        self.retries += 1
        self.last_interval = interval
        if interval > self.max_interval:
            self.max_interval = interval
        qp.count("timeouts")
        if self.exp_cnt < EXP_CNT_INFINITE and self.retries > self.linear_cnt + self.exp_cnt:
            qp.fail(
                now,
                WcStatus.RETRY_EXC_ERR,
                f"local ACK timeout: {self.retries - 1} retries exhausted at PSN {self.una}",
            )
            return False
        qp.log(now, ACK_TIMEOUT, una=self.una, retries=self.retries, interval=interval,
               next_interval=self._interval())
        # everything whose last copy is at least one timeout old is presumed lost, and the
        # EVs those copies took (unless they were trimmed) are assumed bad
        stale = now - self.timeout_s
        r_time = self.r_time
        r_flags = self.r_flags
        r_ev = self.r_ev
        mask = self.mask
        bad: set[int] = set()
        found = 0
        for psn in range(self.una, self.next_psn):
            slot = psn & mask
            if r_time[slot] <= stale and self.mark_lost(psn, RTX_ACK_TIMEOUT):
                found += 1
                self.lost_pending += self.r_size[slot]
                if not r_flags[slot] & FLAG_TRIMMED and r_ev[slot] >= 0:
                    bad.add(r_ev[slot])
        if found:
            qp.count("loss_ack_timeout", found)
        if not self.rc:
            for idx in sorted(bad):
                self.ev.signal(idx, PathSignal.TIMEOUT, now)
                self.ev.set_state(idx, EvState.ASSUMED_BAD, "ack_timeout")
        self.cc.on_timeout(now=now, bytes_in_flight=self.inflight)
        self._report_lost(now)
        self.last_progress = now
        qp.mark_ready()
        return True

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
                if self._inferred_loss(psn, now, RTX_PER_PACKET_TIMER):
                    found += 1
        if found:
            self.qp.count("loss_per_packet_timer", found)
            self._log_lost("per_packet_timer", found, now)
            self.qp.mark_ready()

    def _send_probe(self, now: float, after_expired: bool = False) -> None:
        """A reliability probe on the EV that delivered last (the oldest PSN is stuck, maybe
        on a dead path; a probe lost there would cost another probe interval), or on the
        rotation when there is none or it just left a probe unanswered."""
        ev = self.ev
        idx = self.proven_ev(self.probe_ev if after_expired else -1)
        if idx < 0:
            idx = ev.pick()
        if idx < 0:
            self.last_probe = now  # no usable plane: try again one probe interval later
            return
        self.probe_id = (self.probe_id + 1) & 0xFFFF
        port = ev.ports[idx]
        pkt = MrcPacket(
            Bth(opcode=OP_PROBE, dest_qp=self.dest_qpn, psn=self.probe_id),
            peth=Peth(self.probe_id, ts16(now)),
        )
        self.qp.queue_control(
            TxPacket(pkt, port, self.dest_gids[port], ev.evs[idx], TC_CONTROL, False)
        )
        self.probe_pending = True
        self.probe_ev = idx
        self.probes_sent.append((ts16(now), now))
        self.last_probe = now
        self.qp.count("tx_probe")
        self.qp.mark_ready()

    # -- figures ---------------------------------------------------------------------------
    def add_stats(self, out: dict[str, int]) -> None:
        """The scoreboard's counters for ``HostCore.qp_stats``."""
        out["bytes_in_flight"] = self.inflight
        out["tx_data"] = self.txseq
        out["tx_rtx"] = self.n_rtx
        for name, n in zip(RTX_COUNTERS, self.rtx_by):
            if n:
                out[name] = n
        out["una_stall_max_us"] = round(self.stall_max * 1e6)
        if self.last_interval:
            out["timeout_interval_us"] = round(self.last_interval * 1e6)
            out["timeout_max_interval_us"] = round(self.max_interval * 1e6)
        thrs = [getattr(d, "threshold", None) for d in self.detectors]
        ints = [t for t in thrs if isinstance(t, int)]
        if ints:
            out["reorder_threshold"] = max(ints)

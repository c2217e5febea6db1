"""NSCC: UEC's network-signal congestion control, the ``uet-1.0-nscc`` algorithm of CC profiles.

A sender-side byte window driven by ECN and queueing delay (RTT minus base RTT), clocked by
SACKs (the growth of CC_STATE ``rcvd_bytes``). One controller per QP; parameters come from
the QP's CC profile (common/nscc.py reads them and fills what the profile leaves out from the
reference's scaling rules). The rules (shared/reference/nscc.md; htsim's uec.cpp settles the
details noted below), per SACK with ``nrb`` newly received bytes and delay ``d``:

- receiver penalty first: ``p > 0`` saves the window once and takes it to
  ``max(MTU, min(cwnd, inflight) - p x nrb / 128)``; ``restore`` brings the saved window back.
  While penalised nothing increases;
- quick adapt, at most once per ``base_rtt + target`` window: if that window saw a trim or a
  loss, or ``d > qa_threshold``, and fewer than ``max_wnd >> qa_gate`` bytes were delivered in
  it, ``cwnd = max(delivered, MTU)``; the ECN marks of the bytes in flight then are ignored
  (htsim ignores only marked feedback during that flight, increases go on);
- no ECN, ``d >= target``: fair increase, ``inc += fi x nrb``;
- no ECN, ``d < target``: proportional increase, ``inc += alpha x nrb x (target - d)``, or fast
  increase (``cwnd += fi_scale x nrb`` per SACK) once the path stayed empty (``d`` below
  ``fast_increase_delay``) for more than a window of bytes;
- ECN, ``d >= target``: multiplicative decrease at most once per base RTT, from the average
  delay ``a``: ``cwnd *= max(1 - gamma (a - target) / a, max_md_jump)``;
- ECN, ``d < target``: nothing (a path problem: load balancing moves away from the EV);
- every ``adjust_bytes_threshold`` bytes or ``adjust_period``: ``cwnd += inc / cwnd`` (and
  ``eta`` once per period), ``inc`` reset; the window stays in ``[MTU, max_wnd]``.

A trimmed packet's NACK (TRIMMED, TRIMMED_LASTHOP) arms quick adapt and, if it does not fire,
takes the packet's size off the window; so does every inferred loss (timeout, fast loss,
probe, per-packet timer). Samples come without the responder's service time; the base RTT is
the smallest sample (``max_wnd`` follows it down in proportion: 1.5 x rate x base RTT
where the least target does not apply, common/nscc.py). The average delay
is an EWMA (weight ``delay_ewma``); a trim counts as a sample of one base RTT of delay.

Not the reference's: with ``unmarked_last_hop`` (the fabric marks no ECN on the last hop, as
MRC switches do so that ECN means a path problem), a standing delay at or above target without
ECN counts as marked (standing: ``DELAY_MARK_SAMPLES`` fresh RTT samples in a row at or above
target, so that one late sample, e.g. a host busy for a moment, is not a mark; a longer
filter, the smallest sample of one to two ``base_rtt + target``, reacted so late that 8
senders' queue reached 2.4 x target at the 99th percentile, against 1.5 x with this one).
Fabric queues mark ECN below the target delay (0.2-0.8 BDP against 0.75
base RTT), so such a delay is the queue at the receiver's link: an incast. The reference
answers it with the fair increase (``fi`` per RTT, about 5 packets per sender), and its
answers to the incast's trims (the packet's size; quick adapt only once fewer than
``max_wnd >> qa_gate`` bytes got through in a window, i.e. from about 10 senders on) cannot
hold that: measured with 8 senders, the queue stayed at the trim threshold and a fifth of the
packets were trimmed (docs/transport.md).
"""

from __future__ import annotations

from common.nscc import NsccParams, from_profile_fields
from hosts.transport.cc import (
    CcSetup,
    NackFeedback,
    SackFeedback,
    register_congestion_control,
)
from hosts.wire import NackReason

NSCC = "uet-1.0-nscc"
DELAY_MARK_SAMPLES = 2  # with unmarked_last_hop: samples in a row over target that mark
_TRIM_REASONS = frozenset({int(NackReason.TRIMMED), int(NackReason.TRIMMED_LASTHOP)})


class Nscc:
    """One QP's NSCC state (see the module docstring for the rules)."""

    def __init__(self, params: NsccParams, mtu: int) -> None:
        problem = params.problem()
        if problem:
            raise ValueError(f"NSCC parameters: {problem}")
        self.p = params
        self.mtu = mtu  # the QP's packet size: the least window
        self.base_rtt = params.base_rtt
        self.max_wnd = float(max(mtu, params.max_cwnd))
        self.cwnd = self.max_wnd  # the reference starts at the largest window
        self.inc = 0.0  # pending increase (bytes^2, divided by cwnd at the next adjustment)
        self.received = 0  # bytes delivered since the last adjustment
        self.achieved = 0  # bytes delivered in the current quick-adapt window
        self.bytes_ignored = 0
        self.bytes_to_ignore = 0
        self.qa_end: float | None = None  # end of the current quick-adapt window
        self.trigger_qa = False  # a trim or loss happened: quick adapt may fire
        self.last_adjust: float | None = None
        self.last_decrease = float("-inf")
        self.avg_delay = 0.0
        self.fi_count = 0  # bytes delivered with an empty path in a row (fast increase)
        self.fast = False
        self.saved_cwnd: float | None = None  # window before a receiver penalty
        self.over_target = 0  # fresh RTT samples in a row at or above target (unmarked last hop)
        # for logs and metrics
        self.last_rtt: float | None = None
        self.last_service_time = 0.0
        self.last_delay = 0.0
        self.penalty = 0
        self.counts: dict[str, int] = dict.fromkeys(
            ("sacks", "ecn", "fair", "proportional", "fast", "md", "qa", "nack_decrease",
             "loss_decrease", "penalised", "restored", "timeouts", "delay_marked"), 0)

    # -- the CongestionControl hook -------------------------------------------------------
    def can_send(self, *, bytes_in_flight: int, size: int) -> bool:
        return bytes_in_flight + size <= self.cwnd or bytes_in_flight == 0

    def on_packet_sent(
        self, *, now: float, size: int, bytes_in_flight: int, retransmission: bool
    ) -> None:
        if self.last_adjust is None:
            self.last_adjust = now

    def on_sack(self, feedback: SackFeedback) -> None:
        c = self.counts
        c["sacks"] += 1
        now = feedback.now
        ecn = feedback.ecn
        if ecn:
            c["ecn"] += 1
        nrb = feedback.rcvd_bytes_delta
        self.received += nrb
        self.achieved += nrb
        self.bytes_ignored += nrb
        if self.last_adjust is None:
            self.last_adjust = now
        rtt = feedback.rtt
        self.last_service_time = feedback.service_time
        fresh = False
        if rtt is not None:
            self.last_rtt = rtt
            self._update_base_rtt(rtt)
            if rtt >= self.base_rtt:
                delay = rtt - self.base_rtt
                self._update_delay(delay)
                fresh = True
            else:
                delay = self.avg_delay
        else:
            delay = self.avg_delay
        self.last_delay = delay
        limited = self._apply_penalty(feedback.penalty, feedback.restore, nrb,
                                      feedback.bytes_in_flight)
        if self._quick_adapt(False, ecn, delay, now, feedback.bytes_in_flight):
            self._bound()
            return
        target = self.p.target_delay
        if fresh:
            self.over_target = self.over_target + 1 if delay >= target else 0
        if not ecn and self.p.unmarked_last_hop and self.over_target >= DELAY_MARK_SAMPLES:
            ecn = True  # the last hop's queue: the mark MRC's last hop does not set
            c["delay_marked"] += 1
        if not ecn:
            if not limited:
                if delay >= target:
                    self.inc += self.p.fi * nrb
                    c["fair"] += 1
                else:
                    self._proportional_increase(nrb, delay)
        elif delay >= target:
            self._multiplicative_decrease(now)
        self._bound()
        assert self.last_adjust is not None
        if self.received > self.p.adjust_bytes_threshold or (
            now - self.last_adjust > self.p.adjust_period
        ):
            self._fulfill(now)
            self._bound()

    def on_nack(self, feedback: NackFeedback) -> None:
        if feedback.reason not in _TRIM_REASONS:
            return  # receiver-side refusals (no buffer, out of window) are not congestion
        size = feedback.size
        self.bytes_ignored += size
        self._update_delay(self.p.base_rtt)  # a trim: the queue reached about a BDP
        self._decrease_on_loss(feedback.now, size, feedback.bytes_in_flight, "nack_decrease")


    def on_packets_lost(self, *, now: float, lost_bytes: int, bytes_in_flight: int) -> None:
        self._decrease_on_loss(now, lost_bytes, bytes_in_flight, "loss_decrease")

    def on_timeout(self, *, now: float, bytes_in_flight: int) -> None:
        self.counts["timeouts"] += 1
        self.trigger_qa = True

    def get_log_data(self) -> dict[str, float]:
        out: dict[str, float] = {
            "cwnd": round(self.cwnd),
            "max_wnd": round(self.max_wnd),
            "base_rtt": self.base_rtt,
            "target_delay": self.p.target_delay,
            "avg_delay": self.avg_delay,
            "delay": self.last_delay,
            "service_time": self.last_service_time,
            "penalty": self.penalty,
        }
        if self.last_rtt is not None:
            out["rtt"] = self.last_rtt
        out.update(self.counts)
        return out

    # -- the rules ------------------------------------------------------------------------
    def _bound(self) -> None:
        if self.cwnd < self.mtu:
            self.cwnd = float(self.mtu)
        elif self.cwnd > self.max_wnd:
            self.cwnd = self.max_wnd

    def _update_base_rtt(self, rtt: float) -> None:
        # a sample under half the profile's base RTT is a measurement error, not a shorter
        # path (it would shrink max_wnd for good)
        if 0.5 * self.p.base_rtt <= rtt < self.base_rtt:
            self.base_rtt = rtt
            self.max_wnd = max(float(self.mtu), self.p.max_cwnd * rtt / self.p.base_rtt)

    def _update_delay(self, delay: float) -> None:
        w = self.p.delay_ewma
        self.avg_delay = w * delay + (1.0 - w) * self.avg_delay

    def _apply_penalty(self, penalty: int, restore: bool, nrb: int, inflight: int) -> bool:
        """The responder's backpressure (CC_STATE rcv_cwnd_pen, restore); True while it
        limits the window."""
        self.penalty = penalty
        if penalty > 0:
            if self.saved_cwnd is None:
                self.saved_cwnd = self.cwnd
                self.counts["penalised"] += 1
            self.cwnd = max(float(self.mtu), min(self.cwnd, float(inflight)) - (penalty * nrb >> 7))
            return True
        if restore and self.saved_cwnd is not None:
            self.cwnd = min(self.saved_cwnd, self.max_wnd)
            self.saved_cwnd = None
            self.counts["restored"] += 1
        return False

    def _quick_adapt(self, loss: bool, ecn: bool, delay: float, now: float,
                     inflight: int) -> bool:
        """True when the feedback is consumed (the window was set, or marks are ignored)."""
        p = self.p
        if p.disable_qa:
            return False
        done = False
        if ecn and self.bytes_ignored < self.bytes_to_ignore:
            done = True
        elif self.qa_end is None or now > self.qa_end:
            if (
                self.qa_end is not None
                and (self.trigger_qa or loss or delay > p.qa_threshold)
                and self.achieved < (int(self.max_wnd) >> p.qa_gate)
            ):
                self.cwnd = float(max(self.achieved, self.mtu))
                self.bytes_to_ignore = inflight
                self.bytes_ignored = 0
                self.trigger_qa = False
                self.counts["qa"] += 1
                done = True
            self.achieved = 0
            self.qa_end = now + self.base_rtt + p.target_delay
        if done:
            self.inc = 0.0
            self.received = 0
        return done

    def _proportional_increase(self, nrb: int, delay: float) -> None:
        p = self.p
        if delay < p.fast_increase_delay:
            self.fi_count += nrb
            if self.fi_count > self.cwnd or self.fast:
                self.cwnd += nrb * p.fi_scale
                self.fast = True
                self.counts["fast"] += 1
                return
        else:
            self.fi_count = 0
        self.fast = False
        self.inc += p.alpha * nrb * (p.target_delay - delay)
        self.counts["proportional"] += 1

    def _multiplicative_decrease(self, now: float) -> None:
        p = self.p
        self.fast = False
        self.fi_count = 0
        a = self.avg_delay
        if a > p.target_delay and now - self.last_decrease > self.base_rtt:
            self.cwnd *= max(1.0 - p.gamma * (a - p.target_delay) / a, p.max_md_jump)
            self.last_decrease = now
            self.counts["md"] += 1

    def _fulfill(self, now: float) -> None:
        self.cwnd += self.inc / self.cwnd
        assert self.last_adjust is not None
        if now - self.last_adjust >= self.p.adjust_period:
            self.cwnd += self.p.eta
            self.last_adjust = now
        self.inc = 0.0
        self.received = 0

    def _decrease_on_loss(self, now: float, size: int, inflight: int, what: str) -> None:
        self.trigger_qa = True
        if not self._quick_adapt(True, True, 0.0, now, inflight):
            self.cwnd -= size
            self.counts[what] += 1
        self._bound()


def _factory(setup: CcSetup) -> Nscc:
    return Nscc(from_profile_fields(setup.params, setup.mtu), setup.mtu)


register_congestion_control(NSCC, _factory)

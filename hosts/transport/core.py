"""HostCore: the sans-I/O MRC endpoint of one host (all its QPs and endpoint operations).

Inputs are calls with an explicit ``now`` (seconds, any monotonic origin): receive(),
handle_timer(), post_send(), port_status(). Outputs are pulled: packets_to_send(), get_timer(),
next_event(). Nothing here touches sockets, threads or the wall clock (aioquic style), so the
same object runs under the real agent, in unit tests with a fake clock and in simulations.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from common.classes import TrafficClass
from hosts.transport.counters import add_counts
from hosts.transport.lognames import RX_ERROR
from hosts.transport.memory import MemoryRegion, MemoryTable
from hosts.transport.mpr import MprPolicy, MprUse, SharedBitmap
from hosts.transport.profiles import CcProfile, EvProfile
from hosts.transport.psn import PSN_MASK, TS_PER_SECOND, ts16, ts_elapsed
from hosts.transport.qp import Qp
from hosts.transport.rxres import RxPool
from hosts.transport.spray import SPRAY_POLICIES
from hosts.transport.types import (
    AsyncEvent,
    AsyncEventKind,
    EndpointResponse,
    EndpointTimeout,
    Event,
    EvState,
    HostConfig,
    LogRecord,
    QpAttr,
    QpAttrMask,
    QpError,
    QpState,
    QpType,
    RecvWR,
    RetryAttr,
    RxMeta,
    SendWR,
    TxPacket,
)
from hosts.wire import ENDPOINT_QP, Bth, Eeth, EndpointOp, Erth, MrcPacket, Opcode

_FIRST_QPN = 0x10


@dataclass(slots=True)
class _EpRequest:
    op: int
    dst_gid: bytes
    port: int
    ev: int
    sent: float
    deadline: float
    retries_left: int
    owner: tuple[Qp, int] | None  # (QP, EV index) for EV probes of ASSUMED_BAD EVs
    mask: int | None = None  # a port status update's mask when not this host's own


class HostCore:
    """All transport state of one host. Not thread-safe: drive it from one loop."""

    def __init__(self, config: HostConfig) -> None:
        if not config.ports:
            raise ValueError("a host needs at least one port")
        if any(len(p.gid) != 16 for p in config.ports):
            raise ValueError("port GIDs are 16-byte IPv6 addresses")
        self.config = config
        self.memory = MemoryTable()
        self.rx_pool = RxPool(config.rx_bitmap_host, config.rx_buffer_host)
        self.events: deque[Event] = deque()
        self.stats: dict[str, int] = {}
        self._retired: dict[str, int] = {}  # event counters of destroyed QPs (host totals)
        self._qps: dict[int, Qp] = {}
        self._ready: dict[Qp, None] = {}
        self._ev_profiles: dict[int, EvProfile] = {}
        self._cc_profiles: dict[int, CcProfile] = {}
        self._ctrl: deque[TxPacket] = deque()
        self._ep: dict[int, _EpRequest] = {}
        self._rng = random.Random(config.seed)
        self._next_qpn = _FIRST_QPN
        self.mpr_policy: MprPolicy | None = (
            SharedBitmap(config.mpr_budget) if config.mpr_budget > 0 else None)
        self._next_mpr = 0.0
        self._mpr_rx: dict[int, int] = {}  # QPN -> rx_data at the last MPR evaluation
        self._mpr_qps: set[int] = set()  # QPs with a Dynamic-MPR responder
        self._next_req = self._rng.randrange(1 << 20)
        self._mask = self._compute_mask()
        self._nports = len(config.ports)
        self._path_version = 0  # bumped when any QP's EV enters or leaves ASSUMED_BAD
        self._bad_paths: tuple[int, frozenset[tuple[bytes, int]]] = (0, frozenset())

    def _count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def _compute_mask(self) -> int:
        m = 0
        for i, p in enumerate(self.config.ports):
            if p.up:
                m |= 1 << i
        return m

    @property
    def port_status_mask(self) -> int:
        """Bit p set when local port p is up."""
        return self._mask

    @property
    def path_version(self) -> int:
        return self._path_version

    def paths_changed(self) -> None:
        self._path_version += 1

    def bad_paths(self) -> frozenset[tuple[bytes, int]]:
        """(peer address, EV) pairs some QP of this host holds ASSUMED_BAD (recomputed only
        after a change): control packets of every QP towards that address avoid them."""
        version, bad = self._bad_paths
        if version != self._path_version:
            found = set()
            for qp in self._qps.values():
                mgr = qp.ev
                if mgr is None or not mgr.has_bad():
                    continue
                gids = qp.dest_gids
                for i, state in enumerate(mgr.states):
                    if state == EvState.ASSUMED_BAD and mgr.ports[i] < len(gids):
                        found.add((gids[mgr.ports[i]], mgr.evs[i]))
            bad = frozenset(found)
            self._bad_paths = (self._path_version, bad)
        return bad

    # -- resources ------------------------------------------------------------------------
    def register_mr(self, buf: bytearray | memoryview, access: int) -> MemoryRegion:
        """Register caller memory (no copy); returns the region with .lkey/.rkey/.addr."""
        return self.memory.register(buf, access)

    def deregister_mr(self, mr: MemoryRegion) -> None:
        self.memory.deregister(mr)

    def set_ev_profile(self, profile: EvProfile) -> None:
        """Install or replace an EV profile (QPs bind to it at INIT by ev_profile_id); raises
        ValueError for a profile without EVs or with an unknown spraying policy."""
        profile.expand()  # validates
        if profile.spray not in SPRAY_POLICIES:
            raise ValueError(f"EV profile {profile.profile_id}: unknown spraying policy "
                             f"{profile.spray!r} (known: {', '.join(SPRAY_POLICIES)})")
        self._ev_profiles[profile.profile_id] = profile

    def set_cc_profile(self, profile: CcProfile) -> None:
        """Install or replace a CC profile (QPs bind to it at INIT by cc_profile_id)."""
        self._cc_profiles[profile.profile_id] = profile

    def cc_profile(self, profile_id: int) -> CcProfile | None:
        """The installed CC profile ``profile_id``, or None."""
        return self._cc_profiles.get(profile_id)

    def set_ev_state(self, profile_id: int, ev: int, state: EvState, now: float = 0.0) -> int:
        """Controller override of one EV in every QP bound to the profile (DENIED / GOOD /
        ASSUMED_BAD). Returns how many QPs changed."""
        changed = 0
        for qp in self._qps.values():
            mgr = qp.ev
            if mgr is None or qp.attr.ev_profile_id != profile_id:
                continue
            idx = mgr.index.get(ev)
            if idx is not None and mgr.set_state(idx, state, "controller", controller=True):
                changed += 1
                self.mark_ready(qp)
        return changed

    def ev_states(self, qpn: int) -> list[tuple[int, int, EvState]]:
        """(ev, port, state) of every EV of a QP (controller QUERY_EV_STATE)."""
        qp = self._qp(qpn)
        if qp.ev is None:
            return []
        m = qp.ev
        return list(zip(m.evs, m.ports, m.states))

    # -- QPs ------------------------------------------------------------------------------
    def _qp(self, qpn: int) -> Qp:
        qp = self._qps.get(qpn)
        if qp is None:
            raise QpError(f"no QP {qpn}")
        return qp

    def create_qp(
        self,
        qp_type: QpType,
        send_cq: int,
        recv_cq: int,
        max_send_wr: int = 4096,
        max_recv_wr: int = 4096,
    ) -> int:
        """Create a QP in RESET; returns its QPN (never 0..2)."""
        if len(self._qps) >= self.config.max_qps:
            raise QpError("too many QPs")
        if max_send_wr < 1 or max_recv_wr < 0:
            raise QpError("queue sizes must be positive")
        while self._next_qpn in self._qps or self._next_qpn <= ENDPOINT_QP:
            self._next_qpn = (self._next_qpn + 1) & 0xFFFFFF
        qpn = self._next_qpn
        self._next_qpn = (qpn + 1) & 0xFFFFFF
        self._qps[qpn] = Qp(self, qpn, qp_type, send_cq, recv_cq, max_send_wr, max_recv_wr)
        return qpn

    def modify_qp(self, qpn: int, attr: QpAttr, mask: QpAttrMask, now: float = 0.0) -> None:
        """mrc_modify_qp: apply the masked fields; raises QpError on an illegal transition or a
        missing/forbidden attribute (nothing is half-applied)."""
        qp = self._qp(qpn)
        evp = self._ev_profiles.get(attr.ev_profile_id) if mask & QpAttrMask.EV_PROFILE else None
        ccp = self._cc_profiles.get(attr.cc_profile_id) if mask & QpAttrMask.CC_PROFILE else None
        qp.modify(attr, mask, now, evp, ccp)
        if qp.resp is not None and qp.resp.dyn_mpr:
            self._mpr_qps.add(qpn)
        else:
            self._mpr_qps.discard(qpn)
        if qp.has_output():
            self.mark_ready(qp)

    def query_qp(self, qpn: int) -> QpAttr:
        a = self._qp(qpn).attr
        return QpAttr(
            qp_state=a.qp_state,
            qp_hint=a.qp_hint,
            ev_profile_id=a.ev_profile_id,
            cc_profile_id=a.cc_profile_id,
            mpr_dest=a.mpr_dest,
            max_wimm_dest=a.max_wimm_dest,
            mpr=a.mpr,
            max_wimm=a.max_wimm,
            retry=RetryAttr(a.retry.linear_cnt, a.retry.exp_cnt),
            timeout=a.timeout,
            dest_qpn=a.dest_qpn,
            dest_gids=a.dest_gids,
            rq_psn=a.rq_psn,
            sq_psn=a.sq_psn,
            path_mtu=a.path_mtu,
        )

    def qp_stats(self, qpn: int) -> dict[str, int]:
        """Counters of one QP (tx_data, tx_rtx, rtx_<trigger>, rx_nack_<reason>, timeouts,
        ev_state_<reason>, ...; docs/transport.md, "Counters")."""
        return self._qp_counters(self._qp(qpn))

    @staticmethod
    def _qp_counters(qp: Qp) -> dict[str, int]:
        out = dict(qp.stats)
        if qp.ev is not None:
            out["ev_refused"] = qp.ev.refused
            out["ev_fallbacks"] = qp.ev.fallbacks
        if qp.req is not None:
            qp.req.recovery.add_stats(out)
            qp.req.add_stats(out)
        if qp.resp is not None:
            qp.resp.add_stats(out)
        return out

    def host_stats(self) -> dict[str, int]:
        """The host's counters: its own (endpoint operations, drops before any QP) plus the
        event counters of every QP, destroyed ones included (levels such as bytes in flight
        are per QP only)."""
        out = dict(self._retired)
        for qp in self._qps.values():
            add_counts(out, self._qp_counters(qp))
        for key, value in self.stats.items():
            out[key] = out.get(key, 0) + value
        return out

    def qp_rtt(self, qpn: int) -> float | None:
        """Smoothed RTT from TSETH samples (seconds), None before the first sample."""
        req = self._qp(qpn).req
        return None if req is None else req.recovery.rtt.srtt

    def qp_rtt_stats(self, qpn: int) -> dict[str, float]:
        """RTT figures of a requester (seconds): ``srtt``, ``min_rtt``, ``latest_rtt`` (network
        RTTs, service time subtracted), ``service_time`` of the latest sample and the count of
        ``samples``; empty before the first sample."""
        req = self._qp(qpn).req
        if req is None or req.recovery.rtt.srtt is None:
            return {}
        r = req.recovery.rtt
        assert r.srtt is not None and r.min_rtt is not None and r.latest is not None
        return {"srtt": r.srtt, "min_rtt": r.min_rtt, "latest_rtt": r.latest,
                "service_time": r.service_time, "samples": r.samples}

    def qp_cc_log(self, qpn: int) -> dict[str, float]:
        """The QP's congestion-control state (``CongestionControl.get_log_data``)."""
        return dict(self._qp(qpn).cc.get_log_data())

    def set_dynamic_mpr(self, qpn: int, mpr_units: int, now: float = 0.0) -> bool:
        """Responder side: advertise a new MPR (units of 128 PSNs, <= mpr_dest) in the QP's
        following SACKs; True when the advertised value changed."""
        qp = self._qp(qpn)
        if qp.resp is None:
            raise QpError(f"QP {qpn} is not RTR/RTS")
        return qp.resp.set_dynamic_mpr(mpr_units * 128, now)

    def _share_mpr(self, now: float) -> None:
        """Run the Dynamic MPR policy over every Dynamic-MPR responder QP (RTR or RTS)."""
        assert self.mpr_policy is not None
        self._next_mpr = now + self.config.mpr_interval
        uses: list[MprUse] = []
        seen: dict[int, int] = {}
        for qpn in self._mpr_qps:
            qp = self._qps[qpn]
            resp = qp.resp
            if resp is None or qp.state == QpState.ERR:
                continue
            seen[qp.qpn] = resp.n_rx_data
            uses.append(MprUse(qp.qpn, resp.mpr_psns, resp.adv_mpr, resp.span_peak,
                               resp.n_rx_data - self._mpr_rx.get(qp.qpn, 0)))
            resp.span_peak = resp.highest - resp.cack
        self._mpr_rx = seen
        if not uses:
            return
        for qpn, psns in self.mpr_policy.allocate(uses).items():
            qp = self._qps[qpn]
            if qp.resp is not None:
                qp.resp.set_dynamic_mpr(psns, now)

    def set_backpressure(self, qpn: int, penalty: int, restore: bool = False) -> None:
        """Responder host backpressure: CC_STATE rcv_cwnd_pen (0..127) and restore flag of the
        QP's following SACKs (e.g. when the application falls behind)."""
        qp = self._qp(qpn)
        if qp.resp is None:
            raise QpError(f"QP {qpn} is not RTR/RTS")
        qp.resp.set_backpressure(penalty, restore)

    def set_host_backpressure(self, penalty: int, restore: bool = False) -> None:
        """Responder host backpressure for every QP of the host (and QPs created later): the
        host's own congestion, measured by the agent (hosts/agent/backpressure.py)."""
        self.config.rx_penalty = max(0, min(127, penalty))
        for qp in self._qps.values():
            if qp.resp is not None:
                qp.resp.set_backpressure(penalty, restore)

    def qp_numbers(self) -> list[int]:
        """The QPs this host holds (destroyed ones are gone)."""
        return sorted(self._qps)

    def destroy_qp(self, qpn: int) -> None:
        qp = self._qp(qpn)
        add_counts(self._retired, self._qp_counters(qp))
        qp.release_rx()
        del self._qps[qpn]
        self._path_version += 1
        self._mpr_qps.discard(qpn)
        self._ready.pop(qp, None)
        for rid in [r for r, e in self._ep.items() if e.owner and e.owner[0] is qp]:
            del self._ep[rid]

    def post_send(self, qpn: int, wr: SendWR, now: float) -> None:
        """Queue a Write/WriteImm; raises QpError if the QP is not RTS or the SQ is full, and
        ValueError on a bad local buffer (the WR is not queued)."""
        qp = self._qp(qpn)
        if wr.length < 0 or wr.length > 1 << 31:
            raise ValueError("length must be 0..2**31")
        if wr.length == 0:  # no local buffer needed (verbs: num_sge = 0)
            qp.post_send(wr, memoryview(b""), now)
            return
        mr = self.memory.local(wr.lkey, wr.local_addr, wr.length)
        if mr is None:
            raise ValueError(
                f"local buffer lkey={wr.lkey:#x} addr={wr.local_addr:#x} len={wr.length} "
                "is not inside a registered region"
            )
        qp.post_send(wr, mr.view(wr.local_addr, wr.length), now)

    def post_recv(self, qpn: int, wr: RecvWR) -> None:
        """Pre-post a receive for one incoming WriteImm (allowed from INIT on)."""
        self._qp(qpn).post_recv(wr)

    # -- network --------------------------------------------------------------------------
    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        """Process one received packet. Malformed or unexpected input is counted and dropped
        (see ``stats``); it never raises."""
        try:
            if not 0 <= meta.port < self._nports:
                self._count("rx_bad_port")
                return
            dest = pkt.bth.dest_qp
            if dest == ENDPOINT_QP:
                self._endpoint(pkt, meta, now)
                return
            qp = self._qps.get(dest)
            if qp is None:
                self._count("rx_unknown_qp")
                return
            qp.receive(pkt, meta, now)
        except Exception as exc:  # bad input must never take the host down
            self._count("rx_errors")
            self.events.append(
                LogRecord(now, pkt.bth.dest_qp, RX_ERROR, {"error": repr(exc)})
            )

    def mark_ready(self, qp: Qp) -> None:
        self._ready[qp] = None

    def packets_to_send(self, now: float, limit: int | None = None) -> list[TxPacket]:
        """Everything that may be sent now (control first, then retransmissions, then new
        data within MPR and the CC window); at most ``limit`` packets when given."""
        out: list[TxPacket] = []
        budget = limit if limit is not None else 1 << 30
        ctrl = self._ctrl
        while ctrl and len(out) < budget:
            out.append(ctrl.popleft())
        if not self._ready or len(out) >= budget:
            return out
        ready = self._ready
        qps = list(ready)
        for qp in qps:  # every QP's control packets (SACK/NACK/probe) before any data
            ctrl = qp.ctrl
            while ctrl and len(out) < budget:
                out.append(ctrl.popleft())
        if len(out) >= budget:
            return out
        # share the budget: every ready QP gets a quantum in turn (round robin across calls:
        # a QP that still has output goes to the back of the ready list)
        quantum = max(16, (budget - len(out)) // len(qps))
        for qp in qps:
            room = budget - len(out)
            if room <= 0:
                break
            qp.poll(now, out, min(room, quantum))
            ready.pop(qp, None)
            if qp.has_output():
                ready[qp] = None
        if len(out) < budget and ready:
            # quanta left unused by idle QPs go to the ones that still have output
            for qp in list(ready):
                room = budget - len(out)
                if room <= 0:
                    break
                qp.poll(now, out, room)
                if not qp.has_output():
                    ready.pop(qp, None)
        return out

    def get_timer(self) -> float | None:
        """Earliest time handle_timer() must be called, or None."""
        t: float | None = None
        for qp in self._qps.values():
            t2 = qp.next_timer()
            if t2 is not None and (t is None or t2 < t):
                t = t2
        for req in self._ep.values():
            if t is None or req.deadline < t:
                t = req.deadline
        if self.mpr_policy is not None and self._mpr_qps and (t is None or self._next_mpr < t):
            t = self._next_mpr
        return t

    def handle_timer(self, now: float) -> None:
        for qp in list(self._qps.values()):
            t = qp.next_timer()
            if t is not None and t <= now:
                qp.handle_timer(now)
        if self.mpr_policy is not None and now >= self._next_mpr:
            self._share_mpr(now)
        expired = [rid for rid, r in self._ep.items() if r.deadline <= now]
        for rid in expired:
            self._ep_expired(rid, now)

    def next_event(self) -> Event | None:
        """Pop the oldest pending event (Completion, AsyncEvent, EvStateChanged,
        EndpointResponse, EndpointTimeout, LogRecord)."""
        return self.events.popleft() if self.events else None

    # -- ports and endpoint operations ------------------------------------------------------
    def port_status(self, port: int, up: bool, now: float) -> None:
        """A local NIC port went up/down: EVs on it stop/start at once, peers are told."""
        if not 0 <= port < len(self.config.ports):
            raise ValueError(f"no port {port}")
        if self.config.ports[port].up == up:
            return
        self.config.ports[port].up = up
        self._mask = self._compute_mask()
        kind = AsyncEventKind.PORT_ACTIVE if up else AsyncEventKind.PORT_ERR
        self.events.append(AsyncEvent(kind, None, port, f"port {port} {'up' if up else 'down'}"))
        peers: dict[tuple[bytes, ...], Qp] = {}
        for qp in self._qps.values():
            qp.planes_changed(self._mask, None, now)
            if qp.dest_gids and qp.state >= QpState.RTR and qp.state != QpState.ERR:
                peers.setdefault(qp.dest_gids, qp)
        for gids, qp in peers.items():
            self._announce(gids, qp, now)

    def _announce(self, gids: tuple[bytes, ...], qp: Qp, now: float) -> None:
        """Port status update to one peer, over the first plane usable in both directions."""
        mgr = qp.ev
        for plane, gid in enumerate(gids):
            if not (self._mask >> plane) & 1:
                continue
            if mgr is not None and not (mgr.remote_mask >> plane) & 1:
                continue
            idx = mgr.pick_on_port(plane) if mgr is not None else -1
            ev = mgr.evs[idx] if mgr is not None and idx >= 0 else 0
            self._ep_send(EndpointOp.PORT_STATUS_UPDATE, gid, plane, ev, now, None)
            return

    def send_ev_probe(self, dst_gid: bytes, port: int, ev: int, now: float) -> int:
        """Send an EV probe (endpoint op on QP 0x2); returns its request id. The answer comes
        back as an EndpointResponse (or EndpointTimeout) event."""
        return self._ep_send(EndpointOp.EV_PROBE, dst_gid, port, ev, now, None)

    def send_port_status_update(self, dst_gid: bytes, now: float, mask: int | None = None) -> int:
        """Announce a port_status_mask to one peer address (via the first up port): this
        host's own, or ``mask`` (bit p = local port p usable) when the controller gives one;
        returns the request id."""
        port = next((i for i, p in enumerate(self.config.ports) if p.up), 0)
        if mask is not None and not 0 <= mask <= 0xFFFFFFFF:
            raise ValueError("port_status_mask is 32 bits")
        return self._ep_send(EndpointOp.PORT_STATUS_UPDATE, dst_gid, port, 0, now, None, mask)

    def ev_probe_for_qp(self, qp: Qp, idx: int, dst_gid: bytes, port: int, now: float) -> None:
        assert qp.ev is not None
        for r in self._ep.values():
            if r.owner is not None and r.owner[0] is qp and r.owner[1] == idx:
                return  # one probe per EV at a time
        self._ep_send(EndpointOp.EV_PROBE, dst_gid, port, qp.ev.evs[idx], now, (qp, idx))

    def _ep_send(
        self,
        op: int,
        dst_gid: bytes,
        port: int,
        ev: int,
        now: float,
        owner: tuple[Qp, int] | None,
        mask: int | None = None,
    ) -> int:
        rid = self._next_req
        self._next_req = (rid + 1) & PSN_MASK
        psu = op == EndpointOp.PORT_STATUS_UPDATE
        retries = self.config.endpoint_retries if psu else 0
        self._ep[rid] = _EpRequest(
            op, bytes(dst_gid), port, ev, now, now + self.config.endpoint_timeout, retries, owner,
            mask,
        )
        self._ctrl.append(self._ep_packet(rid, op, dst_gid, port, ev, now, mask))
        self._count("tx_ep_request")
        self._count("tx_psu" if psu else "tx_ev_probe")
        return rid

    def _ep_packet(
        self, rid: int, op: int, dst_gid: bytes, port: int, ev: int, now: float,
        mask: int | None = None,
    ) -> TxPacket:
        pkt = MrcPacket(
            Bth(opcode=Opcode.EP_REQUEST, dest_qp=ENDPOINT_QP, psn=rid),
            erth=Erth(op=op, port_status_mask=self._mask if mask is None else mask,
                      tx_timestamp=ts16(now)),
        )
        return TxPacket(pkt, port, bytes(dst_gid), ev, TrafficClass.CONTROL, False)

    def _ep_expired(self, rid: int, now: float) -> None:
        r = self._ep.get(rid)
        if r is None:
            return
        if r.retries_left > 0:
            r.retries_left -= 1
            r.deadline = now + self.config.endpoint_timeout
            self._ctrl.append(self._ep_packet(rid, r.op, r.dst_gid, r.port, r.ev, now, r.mask))
            self._count("tx_ep_retry")
            return
        del self._ep[rid]
        if r.owner is not None:
            # the datapath's own EV probes: the EV just stays ASSUMED_BAD (counted, no event)
            self._count("ev_probe_timeout")
            return
        self._count("ep_timeout")
        self.events.append(EndpointTimeout(rid, r.op, r.dst_gid, r.port, r.ev))

    def _endpoint(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        """Endpoint operations: requests are answered statelessly (swap the addresses, echo
        op and timestamp); responses are matched to our pending requests by request id."""
        op = pkt.bth.opcode
        if op == Opcode.EP_REQUEST and pkt.erth is not None:
            e = pkt.erth
            self._count("rx_ep_request")
            if e.op == EndpointOp.PORT_STATUS_UPDATE:
                self._count("rx_psu")
                self._peer_port_status(meta.src_gid, e.port_status_mask, now)
            elif e.op == EndpointOp.EV_PROBE:
                self._count("rx_ev_probe")
            else:
                self._count("rx_ep_bad_op")
                return
            resp = MrcPacket(
                Bth(opcode=Opcode.EP_RESPONSE, dest_qp=ENDPOINT_QP, psn=pkt.bth.psn),
                eeth=Eeth(
                    op=e.op,
                    port_status_mask=self._mask,
                    service_time=0,
                    tx_timestamp=e.tx_timestamp,
                ),
            )
            self._ctrl.append(
                TxPacket(resp, meta.port, bytes(meta.src_gid), meta.ev, TrafficClass.CONTROL)
            )
        elif op == Opcode.EP_RESPONSE and pkt.eeth is not None:
            r = self._ep.pop(pkt.bth.psn & PSN_MASK, None)
            if r is None:
                self._count("rx_ep_stale")
                return
            self._count("rx_ep_response")
            x = pkt.eeth
            self._count("rx_psu_response" if r.op == EndpointOp.PORT_STATUS_UPDATE
                        else "rx_ev_probe_response")
            svc = x.service_time / TS_PER_SECOND
            rtt = max(0.0, min(now - r.sent, ts_elapsed(now, x.tx_timestamp)) - svc)
            self.events.append(
                EndpointResponse(
                    pkt.bth.psn & PSN_MASK,
                    x.op,
                    r.dst_gid,
                    r.port,
                    r.ev,
                    rtt,
                    svc,
                    x.port_status_mask,
                )
            )
            if r.op == EndpointOp.EV_PROBE:
                self._ev_probe_answered(r, now)
        else:
            self._count("rx_ep_malformed")

    def _ev_probe_answered(self, r: _EpRequest, now: float) -> None:
        """An EV probe came back: its EV reached the peer, so it is GOOD again in every QP
        that sends to that peer address over it (endpoint operations are GID-scoped), the
        probing QP's included. Probes the controller asked for revive EVs as well."""
        reason = "ev_probe_ok" if r.owner is not None else "ctl_ev_probe_ok"
        revived = 0
        for qp in self._qps.values():
            mgr = qp.ev
            if mgr is None or r.port >= len(qp.dest_gids) or qp.dest_gids[r.port] != r.dst_gid:
                continue
            idx = mgr.index.get(r.ev)
            if idx is not None and mgr.ports[idx] == r.port:
                revived += qp.ev_probe_answered(idx, now, reason)
        if revived:
            self._count("ev_probe_revived", revived)

    def _peer_port_status(self, src_gid: bytes, mask: int, now: float) -> None:
        src = bytes(src_gid)
        self.events.append(
            AsyncEvent(
                AsyncEventKind.PEER_PORT_STATUS, None, None, f"peer {src.hex()} mask={mask:#x}"
            )
        )
        for qp in self._qps.values():
            if src in qp.dest_gids:
                nplanes = len(qp.dest_gids)
                qp.count("peer_psu")
                qp.planes_changed(None, mask & ((1 << nplanes) - 1), now)

"""One QP: lifecycle (RESET -> INIT -> RTR -> RTS -> ERR), attribute rules, and the glue
between its requester half (sends Writes, handles SACK/NACK) and responder half (places data,
sends SACK/NACK). Control packets of both halves share one queue that is always sent first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

import hosts.transport.nscc  # noqa: F401  (registers "uet-1.0-nscc")
import hosts.wire.layout as L
from common.classes import TrafficClass
from hosts.transport.cc import (
    CcSetup,
    CongestionControl,
    NoCongestionControl,
    congestion_control_factory,
    registered_algorithms,
)
from hosts.transport.counters import EV_STATE_PREFIX
from hosts.transport.ev import EvManager
from hosts.transport.lognames import QP_STATE
from hosts.transport.memory import MemoryTable
from hosts.transport.ops import DATA_OPS, OP_ACK, OP_NACK, OP_PROBE, OP_SACK
from hosts.transport.profiles import CcProfile, EvProfile
from hosts.transport.psn import MPR_UNIT
from hosts.transport.requester import Requester
from hosts.transport.responder import Responder
from hosts.transport.rxres import RxPool
from hosts.transport.spray import SPRAY_POLICIES
from hosts.transport.types import (
    AsyncEvent,
    AsyncEventKind,
    Completion,
    Event,
    EvState,
    EvStateChanged,
    HostConfig,
    LogRecord,
    QpAttr,
    QpAttrMask,
    QpError,
    QpHintFlag,
    QpState,
    QpType,
    RecvWR,
    RetryAttr,
    RxMeta,
    SendWR,
    TxPacket,
    WcOpcode,
    WcStatus,
)
from hosts.wire import MrcPacket, Opcode

M = QpAttrMask
RxHandler = Callable[[MrcPacket, RxMeta, float], None]

# Which half handles each opcode of layout.OPCODE_HEADERS (Qp.receive dispatches through a
# per-QP table built from these). The requester's feedback must carry every header its opcode
# requires or it is a counted drop (rx_dropped_state); the responder answers malformed data and
# probes itself (NACK UNEXP_EVENT, rx_malformed). Endpoint opcodes are for QP 0x2 (HostCore):
# sent to a QP they count as rx_bad_opcode, like opcodes the layout does not know.
_REQUESTER_OPS: dict[int, str] = {OP_SACK: "on_sack", OP_NACK: "on_nack", OP_ACK: "on_ack"}
_RESPONDER_OPS: dict[int, str] = {**dict.fromkeys(DATA_OPS, "on_data"), OP_PROBE: "on_probe"}
_ENDPOINT_OPS = frozenset({int(Opcode.EP_REQUEST), int(Opcode.EP_RESPONSE)})
_REQUIRED_HEADERS: dict[int, tuple[str, ...]] = {
    op: tuple(h for h in L.OPCODE_HEADERS[Opcode(op)] if h not in L.OPTIONAL_HEADERS)
    for op in _REQUESTER_OPS
}
if set(L.OPCODE_HEADERS) != set(_REQUESTER_OPS) | set(_RESPONDER_OPS) | _ENDPOINT_OPS:
    raise ImportError("layout.OPCODE_HEADERS and Qp.receive's opcode table disagree")
# (from, to) -> (required attributes, optional attributes)
_TRANSITIONS: dict[tuple[QpState, QpState], tuple[QpAttrMask, QpAttrMask]] = {
    (QpState.RESET, QpState.INIT): (M.HINT | M.EV_PROFILE | M.CC_PROFILE, M.PATH_MTU),
    (QpState.INIT, QpState.INIT): (M(0), M.HINT | M.EV_PROFILE | M.CC_PROFILE | M.PATH_MTU),
    (QpState.INIT, QpState.RTR): (
        M.MPR_DEST | M.MAX_WIMM_DEST | M.DEST_QPN | M.DEST_GIDS,
        M.RQ_PSN | M.PATH_MTU,
    ),
    (QpState.RTR, QpState.RTS): (M.MPR | M.MAX_WIMM | M.RETRY | M.TIMEOUT, M.SQ_PSN),
    (QpState.RTS, QpState.RTS): (M(0), M.RETRY | M.TIMEOUT),
}
# attributes modify_qp copies as they are (DEST_GIDS and RETRY are copied by value below)
_COPIED_ATTRS: tuple[tuple[QpAttrMask, str], ...] = (
    (M.HINT, "qp_hint"),
    (M.EV_PROFILE, "ev_profile_id"),
    (M.CC_PROFILE, "cc_profile_id"),
    (M.PATH_MTU, "path_mtu"),
    (M.MPR_DEST, "mpr_dest"),
    (M.MAX_WIMM_DEST, "max_wimm_dest"),
    (M.DEST_QPN, "dest_qpn"),
    (M.RQ_PSN, "rq_psn"),
    (M.SQ_PSN, "sq_psn"),
    (M.MPR, "mpr"),
    (M.MAX_WIMM, "max_wimm"),
    (M.TIMEOUT, "timeout"),
)


class Qp:
    """State of one QP; created and driven by HostCore."""

    def __init__(
        self,
        host: QpHost,
        qpn: int,
        qp_type: QpType,
        send_cq: int,
        recv_cq: int,
        max_send_wr: int,
        max_recv_wr: int,
    ) -> None:
        self.host = host
        self.cfg = host.config
        self.qpn = qpn
        self.qp_type = qp_type
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.max_send_wr = max_send_wr
        self.max_recv_wr = max_recv_wr
        self.attr = QpAttr()
        self.state = QpState.RESET
        self.ev: EvManager | None = None
        self.ev_profile: EvProfile | None = None
        self.cc: CongestionControl = NoCongestionControl(self.cfg.default_cc_window)
        self.req: Requester | None = None
        self.resp: Responder | None = None
        # opcode -> (handler, headers the packet must carry); filled at RTR and RTS
        self._rx: dict[int, tuple[RxHandler, tuple[str, ...]]] = {}
        self.ctrl: deque[TxPacket] = deque()
        self.recvq: deque[RecvWR] = deque()
        self.stats: dict[str, int] = {}
        self.dest_gids: tuple[bytes, ...] = ()
        self.dest_qpn = 0
        self.mtu = self.cfg.mtu
        self._route_cache: dict[int, list[tuple[int, bytes, int]]] = {}
        self._route_turn: dict[int, int] = {}
        self._route_version: tuple[int, int] = (-1, -1)
        self.next_ev_probe = 0.0
        self.ev_probe_at: dict[int, float] = {}  # per ASSUMED_BAD EV: next probe time
        self.ev_probe_wait: dict[int, float] = {}  # per ASSUMED_BAD EV: current interval
        dscp = self.cfg.classes.dscp
        self.dscp_trimmed = dscp[TrafficClass.TRIMMED]
        self.dscp_trimmed_lasthop = dscp[TrafficClass.TRIMMED_LASTHOP]

    # -- helpers used by both halves -----------------------------------------------------
    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] = self.stats.get(name, 0) + n

    def emit(self, event: Event) -> None:
        self.host.events.append(event)

    def log(self, now: float, name: str, **data: object) -> None:
        self.host.events.append(LogRecord(now, self.qpn, name, dict(data)))

    def mark_ready(self) -> None:
        """This QP may have packets to send."""
        self.host.mark_ready(self)

    def queue_control(self, tx: TxPacket) -> None:
        """Queue a control packet whose route the caller chose (sent before any data)."""
        self.ctrl.append(tx)

    @property
    def hint(self) -> QpHintFlag:
        return self.attr.qp_hint

    def ctrl_route(self, port: int) -> tuple[int, bytes, int]:
        """(port, dst_gid, ev) for the next control packet, preferring plane ``port``.

        Control packets rotate over every usable EV of the plane (or over the profile's
        control EVs) instead of sticking to one: a responder gets no feedback on the paths of
        its SACKs, so a single cached EV whose path died would silence the QP until the
        control plane repairs routing. Spraying keeps most SACKs flowing around a failure.
        EVs that another QP of this host found ASSUMED_BAD towards the same peer address are
        left out (the same EV to the same address takes the same path; path health is
        GID-scoped), unless that would leave none.
        """
        ev = self.ev
        assert ev is not None
        version = (ev.version, self.host.path_version)
        if version != self._route_version:
            self._route_cache.clear()
            self._route_version = version
        routes = self._route_cache.get(port)
        if routes is None:
            routes = self._ctrl_routes(port)
            self._route_cache[port] = routes
        if len(routes) == 1:
            return routes[0]
        turn = self._route_turn.get(port, 0)
        self._route_turn[port] = turn + 1
        return routes[turn % len(routes)]

    def _ctrl_routes(self, port: int) -> list[tuple[int, bytes, int]]:
        ev = self.ev
        assert ev is not None
        ctl = self.ev_profile.control_evs if self.ev_profile is not None else []
        if ctl:
            # the profile gives control packets EVs of their own (possibly another plane)
            usable = [e for e in ctl if e.port < len(self.dest_gids) and ev.plane_ok(e.port)]
            same = [e for e in usable if e.port == port]
            if same or usable:
                return [(e.port, self.dest_gids[e.port], e.ev) for e in (same or usable)]
        if ev.plane_ok(port):
            good = ev.good_on_port(port)
            if good:
                gid = self.dest_gids[port]
                bad = self.host.bad_paths()
                known = [i for i in good if (gid, ev.evs[i]) not in bad] if bad else good
                return [(port, gid, ev.evs[i]) for i in (known or good)]
        idx = ev.pick_on_port(port) if ev.plane_ok(port) else -1
        if idx < 0:
            idx = ev.pick()
        if idx < 0:
            # no usable plane at all: answer on the ingress plane anyway (it just worked)
            p = port if port < len(self.dest_gids) else 0
            return [(p, self.dest_gids[p] if self.dest_gids else b"\x00" * 16, 0)]
        p = ev.ports[idx]
        return [(p, self.dest_gids[p], ev.evs[idx])]

    def send_ctrl(self, pkt: MrcPacket, port: int) -> None:
        p, dst, ev = self.ctrl_route(port)
        self.ctrl.append(TxPacket(pkt, p, dst, ev, TrafficClass.CONTROL, False))
        self.host.mark_ready(self)

    def _on_ev_change(self, idx: int, old: EvState, new: EvState, reason: str) -> None:
        ev = self.ev
        assert ev is not None and self.ev_profile is not None
        self.count(EV_STATE_PREFIX + reason)
        if EvState.ASSUMED_BAD in (old, new):
            self.host.paths_changed()
            if new == EvState.ASSUMED_BAD:
                self.next_ev_probe = 0.0  # its first EV probe goes at the next timer
        self.emit(
            EvStateChanged(
                self.qpn, self.ev_profile.profile_id, ev.evs[idx], ev.ports[idx], old, new, reason
            )
        )

    # -- lifecycle ----------------------------------------------------------------------
    def modify(
        self,
        attr: QpAttr,
        mask: QpAttrMask,
        now: float,
        ev_profile: EvProfile | None,
        cc_profile: CcProfile | None,
    ) -> None:
        cur = self.state
        new = attr.qp_state if mask & M.STATE else cur
        if new in (QpState.RESET, QpState.ERR) and (mask & M.STATE):
            if new == QpState.RESET:
                self._reset()
                self.host.paths_changed()
            elif cur != QpState.ERR:
                self.fail(now, WcStatus.WR_FLUSH_ERR, "moved to ERR by modify_qp")
            return
        rule = _TRANSITIONS.get((cur, new))
        if rule is None:
            raise QpError(f"QP {self.qpn}: illegal transition {cur.name} -> {new.name}")
        required, optional = rule
        given = mask & ~M.STATE
        missing = required & ~given
        if missing:
            raise QpError(f"QP {self.qpn}: {cur.name} -> {new.name} needs {missing!r}")
        extra = given & ~(required | optional)
        if extra:
            raise QpError(f"QP {self.qpn}: {extra!r} not allowed in {cur.name} -> {new.name}")
        self._validate(attr, given, ev_profile)
        cc_factory = self._cc_factory(cc_profile) if given & M.CC_PROFILE else None
        # everything checked: apply
        a = self.attr
        for bit, name in _COPIED_ATTRS:
            if given & bit:
                setattr(a, name, getattr(attr, name))
        if given & M.DEST_GIDS:
            a.dest_gids = tuple(bytes(g) for g in attr.dest_gids)
        if given & M.RETRY:
            a.retry = RetryAttr(attr.retry.linear_cnt, attr.retry.exp_cnt)
        self.mtu = min(a.path_mtu, self.cfg.mtu)
        if new == QpState.INIT and given & (M.EV_PROFILE | M.CC_PROFILE):
            if given & M.EV_PROFILE:
                assert ev_profile is not None
                self._bind_ev(ev_profile)
            if cc_factory is not None:
                self.cc = cc_factory()
        if new == QpState.RTR and cur == QpState.INIT:
            self.dest_gids = a.dest_gids
            self.dest_qpn = a.dest_qpn
            assert self.ev is not None
            self.ev.set_masks(
                local_mask=self.host.port_status_mask,
                remote_mask=(1 << len(self.dest_gids)) - 1,
            )
            self.resp = Responder(
                self,
                self.host.memory,
                self.cfg,
                qpn=self.qpn,
                recv_cq=self.recv_cq,
                rc=self.qp_type == QpType.RC,
                hint=a.qp_hint,
                dest_qpn=self.dest_qpn,
                dscp_trimmed=self.dscp_trimmed,
                dscp_trimmed_lasthop=self.dscp_trimmed_lasthop,
                rq_psn=a.rq_psn,
                mpr_psns=a.mpr_dest * MPR_UNIT,
                max_wimm_dest=a.max_wimm_dest,
                pool=self.host.rx_pool,
            )
            self._bind_rx()
        if new == QpState.RTS and cur == QpState.RTR:
            assert self.ev is not None
            self.req = Requester(
                self,
                self.ev,
                self.cc,
                self.cfg,
                qpn=self.qpn,
                send_cq=self.send_cq,
                rc=self.qp_type == QpType.RC,
                mtu=self.mtu,
                hint=a.qp_hint,
                dest_qpn=self.dest_qpn,
                dest_gids=self.dest_gids,
                sq_psn=a.sq_psn,
                mpr_psns=a.mpr * MPR_UNIT,
                max_wimm=a.max_wimm,
                timeout=a.timeout,
                retry=a.retry,
                now=now,
            )
            self._bind_rx()
        if new == QpState.RTS and self.req is not None:
            self.req.recovery.configure_timers(a.timeout, a.retry)
        self.state = new
        a.qp_state = new
        self.log(now, QP_STATE, old=cur.name, new=new.name)

    def _validate(self, attr: QpAttr, given: QpAttrMask, ev_profile: EvProfile | None) -> None:
        if given & M.EV_PROFILE and ev_profile is None:
            raise QpError(f"EV profile {attr.ev_profile_id} is not installed")
        if given & M.PATH_MTU and not 256 <= attr.path_mtu <= 65536:
            raise QpError("path_mtu must be 256..65536")
        if given & M.MPR_DEST and not 1 <= attr.mpr_dest <= 255:
            raise QpError("mpr_dest must be 1..255 (units of 128 PSNs)")
        if given & M.MPR and not 1 <= attr.mpr <= 255:
            raise QpError("mpr must be 1..255 (units of 128 PSNs)")
        if given & M.MAX_WIMM_DEST and not 1 <= attr.max_wimm_dest <= 0x7FFF:
            raise QpError("max_wimm_dest must be 1..32767")
        if given & M.MAX_WIMM and not 1 <= attr.max_wimm <= 0x7FFF:
            raise QpError("max_wimm must be 1..32767")
        if given & M.TIMEOUT and not 0 <= attr.timeout <= 24:
            raise QpError("timeout must be 0..24")
        if given & M.RETRY and not (
            0 <= attr.retry.linear_cnt <= 7 and 0 <= attr.retry.exp_cnt <= 25
        ):
            raise QpError("retry.linear_cnt must be 0..7 and retry.exp_cnt 0..25")
        if given & M.DEST_QPN and not 3 <= attr.dest_qpn <= 0xFFFFFF:
            raise QpError("dest_qpn must be 3..0xFFFFFF")
        if given & M.DEST_GIDS and (
            not attr.dest_gids or any(len(g) != 16 for g in attr.dest_gids)
        ):
            raise QpError("dest_gids must be one 16-byte address per plane")
        if (given & M.RQ_PSN and not 0 <= attr.rq_psn <= 0xFFFFFF) or (
            given & M.SQ_PSN and not 0 <= attr.sq_psn <= 0xFFFFFF
        ):
            raise QpError("PSNs are 24 bits")

    def _bind_ev(self, profile: EvProfile) -> None:
        entries = profile.expand()
        nports = len(self.cfg.ports)
        entries = [e for e in entries if e.port < nports]
        if not entries:
            raise QpError(f"EV profile {profile.profile_id} has no EV on this host's ports")
        self.ev_profile = profile
        active = profile.active_count
        if self.qp_type == QpType.RC:
            active = 1
        seed = self.cfg.seed * 1_000_003 + self.qpn
        factory = self.cfg.spray_factory
        if factory is None:
            factory = SPRAY_POLICIES.get(profile.spray)
            if factory is None:
                raise QpError(f"EV profile {profile.profile_id}: unknown spraying policy "
                              f"{profile.spray!r} (known: {', '.join(SPRAY_POLICIES)})")
        self.ev = EvManager(
            entries,
            active_count=active,
            min_active=profile.ev_min_active,
            seed=seed,
            emit=self._on_ev_change,
            policy=factory([e.port for e in entries], seed),
        )
        self.ev.set_masks(local_mask=self.host.port_status_mask)

    def _cc_factory(self, profile: CcProfile | None) -> Callable[[], CongestionControl]:
        """How this QP's controller is built: the host's ``cc_factory`` if it has one, else
        the algorithm the CC profile names (no profile: the fixed window). Raises QpError for
        an algorithm nobody registered, before anything is applied."""
        cfg = self.cfg
        qpn = self.qpn
        host_factory = cfg.cc_factory
        if host_factory is not None:
            return lambda: host_factory(profile, qpn)
        if profile is None:
            return lambda: NoCongestionControl(cfg.default_cc_window)
        factory = congestion_control_factory(profile.algorithm)
        if factory is None:
            raise QpError(
                f"CC profile {profile.profile_id}: unknown congestion control "
                f"{profile.algorithm!r} (registered: {', '.join(registered_algorithms())})"
            )
        setup = CcSetup(qpn, cfg.mtu, cfg.default_cc_window, dict(profile.params))
        try:
            built = factory(setup)  # parameter errors surface before anything is applied
        except ValueError as exc:
            raise QpError(f"CC profile {profile.profile_id}: {exc}") from None
        return lambda: built

    def _bind_rx(self) -> None:
        """The receive table for the halves that exist (requester feedback before RTS is a
        counted drop, rx_dropped_state)."""
        rx: dict[int, tuple[RxHandler, tuple[str, ...]]] = {}
        if self.resp is not None:
            for op, name in _RESPONDER_OPS.items():
                rx[op] = (getattr(self.resp, name), ())
        for op, name in _REQUESTER_OPS.items():
            handler = getattr(self.req, name) if self.req is not None else self._no_requester
            rx[op] = (handler, _REQUIRED_HEADERS[op])
        self._rx = rx

    def _no_requester(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        self.count("rx_dropped_state")

    def release_rx(self) -> None:
        """Return the receive resources the responder holds to the host (rxres.py)."""
        if self.resp is not None:
            self.resp.release_all()

    def _reset(self) -> None:
        self.release_rx()
        self.__init__(  # type: ignore[misc]
            self.host,
            self.qpn,
            self.qp_type,
            self.send_cq,
            self.recv_cq,
            self.max_send_wr,
            self.max_recv_wr,
        )

    def fail(self, now: float, status: WcStatus, detail: str, *, first_status: bool = True) -> None:
        """Move to ERR: the oldest outstanding send completes with ``status``, everything
        else (sends and posted receives) with WR_FLUSH_ERR; async events are raised."""
        if self.state == QpState.ERR:
            return
        old = self.state
        self.state = QpState.ERR
        self.release_rx()
        self.attr.qp_state = QpState.ERR
        req = self.req
        if req is not None:
            st = status if first_status else WcStatus.WR_FLUSH_ERR
            for wqe in req.flush():
                self.emit(Completion(self.send_cq, self.qpn, wqe.wr_id, st, WcOpcode.RDMA_WRITE))
                st = WcStatus.WR_FLUSH_ERR
        while self.recvq:
            r = self.recvq.popleft()
            self.emit(
                Completion(
                    self.recv_cq,
                    self.qpn,
                    r.wr_id,
                    WcStatus.WR_FLUSH_ERR,
                    WcOpcode.RECV_RDMA_WITH_IMM,
                )
            )
        if status == WcStatus.RETRY_EXC_ERR:
            self.emit(AsyncEvent(AsyncEventKind.RETRY_EXCEEDED, self.qpn, None, detail))
        self.emit(AsyncEvent(AsyncEventKind.QP_FATAL, self.qpn, None, detail))
        self.log(now, QP_STATE, old=old.name, new="ERR", detail=detail)

    # -- work requests ------------------------------------------------------------------
    def post_send(self, wr: SendWR, view: memoryview, now: float) -> None:
        if self.state == QpState.ERR:
            self.emit(
                Completion(
                    self.send_cq, self.qpn, wr.wr_id, WcStatus.WR_FLUSH_ERR, WcOpcode.RDMA_WRITE
                )
            )
            return
        if self.state != QpState.RTS or self.req is None:
            raise QpError(f"QP {self.qpn}: post_send needs RTS (is {self.state.name})")
        if self.req.queued() >= self.max_send_wr:
            raise QpError(f"QP {self.qpn}: send queue full ({self.max_send_wr})")
        self.req.post(wr, view, now)
        self.host.mark_ready(self)

    def post_recv(self, wr: RecvWR) -> None:
        if self.state == QpState.RESET:
            raise QpError(f"QP {self.qpn}: post_recv needs INIT or later")
        if self.state == QpState.ERR:
            self.emit(
                Completion(
                    self.recv_cq,
                    self.qpn,
                    wr.wr_id,
                    WcStatus.WR_FLUSH_ERR,
                    WcOpcode.RECV_RDMA_WITH_IMM,
                )
            )
            return
        if len(self.recvq) >= self.max_recv_wr:
            raise QpError(f"QP {self.qpn}: receive queue full ({self.max_recv_wr})")
        self.recvq.append(wr)

    # -- packets ------------------------------------------------------------------------
    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        state = self.state
        if state < QpState.RTR or state == QpState.ERR:
            self.count("rx_dropped_state")
            return
        try:
            handler, required = self._rx[pkt.bth.opcode]
        except KeyError:
            self.count("rx_bad_opcode")
            return
        if required:
            for name in required:
                if getattr(pkt, name) is None:
                    self.count("rx_dropped_state")
                    return
        handler(pkt, meta, now)

    def poll(self, now: float, out: list[TxPacket], budget: int) -> int:
        """Append up to ``budget`` packets to ``out``; returns how many."""
        n = 0
        ctrl = self.ctrl
        while ctrl and n < budget:
            out.append(ctrl.popleft())
            n += 1
        if self.state == QpState.RTS and self.req is not None and n < budget:
            n += self.req.poll(now, out, budget - n)
        return n

    def has_output(self) -> bool:
        if self.ctrl:
            return True
        return self.state == QpState.RTS and self.req is not None and self.req.has_output()

    def next_timer(self) -> float | None:
        t: float | None = None
        if self.resp is not None and self.state in (QpState.RTR, QpState.RTS):
            t = self.resp.next_timer()
        if self.req is not None and self.state == QpState.RTS:
            t2 = self.req.recovery.next_timer()
            if t2 is not None and (t is None or t2 < t):
                t = t2
            if self.ev is not None and self.ev.has_bad():
                t3 = self.next_ev_probe
                if t is None or t3 < t:
                    t = t3
        return t

    def handle_timer(self, now: float) -> None:
        if self.state == QpState.ERR or self.state < QpState.RTR:
            return
        if self.resp is not None:
            self.resp.handle_timer(now)
        if self.req is not None and self.state == QpState.RTS:
            self.req.recovery.on_timer(now)
            ev = self.ev
            if ev is not None and ev.has_bad() and now >= self.next_ev_probe:
                self._probe_bad_evs(ev, now)
        if self.has_output():
            self.host.mark_ready(self)

    def _probe_bad_evs(self, ev: EvManager, now: float) -> None:
        """EV-probe every ASSUMED_BAD EV that is due; an EV that stays bad is probed with
        exponential backoff (ev_probe_interval doubling up to 64x), so a long outage costs
        little."""
        base = self.cfg.ev_probe_interval
        nxt = float("inf")
        for idx in ev.bad():
            at = self.ev_probe_at.get(idx, 0.0)
            if now >= at:
                port = ev.ports[idx]
                self.host.ev_probe_for_qp(self, idx, self.dest_gids[port], port, now)
                wait = self.ev_probe_wait.get(idx, 0.0)
                wait = base if wait <= 0.0 else min(wait * 2, base * 64)
                self.ev_probe_wait[idx] = wait
                at = now + wait
                self.ev_probe_at[idx] = at
            if at < nxt:
                nxt = at
        self.next_ev_probe = nxt if nxt != float("inf") else now + base

    def ev_probe_answered(self, idx: int, now: float, reason: str = "ev_probe_ok") -> bool:
        """An EV probe on EV ``idx`` towards our peer came back: the EV is GOOD again (with
        ``reason``: ``ev_probe_ok`` for the datapath's probes, ``ctl_ev_probe_ok`` for the
        controller's); True when it was ASSUMED_BAD."""
        self.ev_probe_at.pop(idx, None)
        self.ev_probe_wait.pop(idx, None)
        ev = self.ev
        if ev is not None and idx < len(ev.states) and ev.states[idx] == EvState.ASSUMED_BAD:
            ev.set_state(idx, EvState.GOOD, reason)
            self.host.mark_ready(self)
            return True
        return False

    def planes_changed(self, local_mask: int | None, remote_mask: int | None, now: float) -> None:
        """A local port or a peer plane changed: EVs follow at once, and packets in flight on
        a plane that just went away are retransmitted on the others."""
        ev = self.ev
        if ev is None:
            return
        before = [ev.plane_ok(p) for p in range(max(len(self.cfg.ports), len(self.dest_gids)))]
        ev.set_masks(local_mask=local_mask, remote_mask=remote_mask)
        lost_ports = {p for p, ok in enumerate(before) if ok and not ev.plane_ok(p)}
        if lost_ports and self.ctrl:
            # queued control packets for a plane that just went away take another plane
            queued = list(self.ctrl)
            self.ctrl.clear()
            for tx in queued:
                if tx.port in lost_ports:
                    p, dst, evv = self.ctrl_route(tx.port)
                    tx = TxPacket(tx.pkt, p, dst, evv, tx.tclass, tx.ecn_capable)
                self.ctrl.append(tx)
        if lost_ports and self.req is not None and self.state == QpState.RTS:
            self.req.recovery.on_planes_lost(lost_ports, now)
        self.host.mark_ready(self)


class QpHost(Protocol):
    """What a Qp needs from its HostCore (kept narrow so the Qp is testable on its own)."""

    config: HostConfig
    memory: MemoryTable
    events: deque[Event]
    rx_pool: RxPool  # the host's receive resources (rxres.py)

    @property
    def port_status_mask(self) -> int: ...

    def mark_ready(self, qp: Qp) -> None: ...

    def ev_probe_for_qp(self, qp: Qp, idx: int, dst_gid: bytes, port: int, now: float) -> None: ...

    @property
    def path_version(self) -> int: ...

    def paths_changed(self) -> None: ...

    def bad_paths(self) -> frozenset[tuple[bytes, int]]: ...

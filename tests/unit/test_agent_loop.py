"""The agent loop, framing and NIC batching, driven with a small stand-in core (no root).

Two agents are joined by a datagram socketpair in place of a veth, so the real NicPort,
Framer (the hosts/wire codec), event loop and API code run. The stand-in core (StubCore) is
deliberately simple: lossless, one plane, Write/WriteImm segmented at the MTU, a cumulative
ACK per packet, a window of ``WINDOW`` packets. It exists only to test the agent and the API
before/independently of the real HostCore; it is not a transport.
"""

from __future__ import annotations

import itertools
import random
import socket
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from common.classes import DEFAULT_CLASSES, TrafficClass
from common.evbits import usid_container
from common.netns import wait_until
from hosts.agent.agent import Agent
from hosts.agent.config import AgentConfig, parse_config
from hosts.agent.framing import Framer
from hosts.agent.nic import NicPort
from hosts.agent.qlog import read_qlog
from hosts.transport import (
    Completion,
    LogRecord,
    QpAttr,
    QpAttrMask,
    QpError,
    QpState,
    QpType,
    RecvWR,
    RxMeta,
    SendWR,
    TxPacket,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from hosts.transport.memory import MemoryRegion, MemoryTable
from hosts.wire import (
    Aeth,
    Bth,
    EvMode,
    ImmDt,
    Meth,
    MrcPacket,
    Opcode,
    Reth,
    build_frame,
    decode_frame,
    fields_to_ev,
)

WINDOW = 32


@dataclass
class _StubQp:
    qpn: int
    send_cq: int
    recv_cq: int
    attr: QpAttr
    next_psn: int = 0
    acked: int = -1
    pending: deque[tuple[int, SendWR]] | None = None  # (last psn, wr) awaiting ACK
    queue: deque[MrcPacket] | None = None  # built packets not yet sent
    recvs: deque[RecvWR] | None = None


class StubCore:
    """Stand-in with HostCore's method surface (see module docstring)."""

    def __init__(self, mtu: int = 4096) -> None:
        self.mtu = mtu
        self.mem = MemoryTable()
        self.qps: dict[int, _StubQp] = {}
        self.next_qpn = 3
        self.out: list[TxPacket] = []
        self.events: deque[Any] = deque()
        self.timer_at: float | None = None
        self.timer_calls: list[float] = []
        self.port_calls: list[tuple[int, bool]] = []
        self.received = 0

    def register_mr(self, buf: bytearray | memoryview, access: int) -> MemoryRegion:
        return self.mem.register(buf, access)

    def deregister_mr(self, mr: MemoryRegion) -> None:
        self.mem.deregister(mr)

    def create_qp(self, qp_type: QpType, send_cq: int, recv_cq: int, max_send_wr: int = 4096,
                  max_recv_wr: int = 4096) -> int:
        qpn = self.next_qpn
        self.next_qpn += 1
        self.qps[qpn] = _StubQp(qpn, send_cq, recv_cq, QpAttr(), pending=deque(),
                                queue=deque(), recvs=deque())
        return qpn

    def modify_qp(self, qpn: int, attr: QpAttr, mask: QpAttrMask, now: float = 0.0) -> None:
        qp = self._qp(qpn)
        if mask & QpAttrMask.STATE and attr.qp_state <= qp.attr.qp_state:
            raise QpError(f"illegal transition {qp.attr.qp_state.name} -> {attr.qp_state.name}")
        if mask & QpAttrMask.STATE:
            qp.attr.qp_state = attr.qp_state
        if mask & QpAttrMask.DEST_QPN:
            qp.attr.dest_qpn = attr.dest_qpn
        if mask & QpAttrMask.DEST_GIDS:
            qp.attr.dest_gids = attr.dest_gids

    def query_qp(self, qpn: int) -> QpAttr:
        return replace(self._qp(qpn).attr)

    def destroy_qp(self, qpn: int) -> None:
        self._qp(qpn)
        del self.qps[qpn]

    def _qp(self, qpn: int) -> _StubQp:
        if qpn not in self.qps:
            raise QpError(f"no QP {qpn}")
        return self.qps[qpn]

    def post_send(self, qpn: int, wr: SendWR, now: float) -> None:
        qp = self._qp(qpn)
        if qp.attr.qp_state != QpState.RTS:
            raise QpError("QP not in RTS")
        mr = self.mem.local(wr.lkey, wr.local_addr, wr.length)
        if mr is None:
            raise ValueError("bad local buffer")
        assert qp.queue is not None and qp.pending is not None
        imm = wr.opcode == WrOpcode.WRITE_WITH_IMM
        n = max(1, -(-wr.length // self.mtu))
        for i in range(n):
            off = i * self.mtu
            size = min(self.mtu, wr.length - off)
            if n == 1:
                op = Opcode.WRITE_ONLY_IMM if imm else Opcode.WRITE_ONLY
            elif i == n - 1:
                op = Opcode.WRITE_LAST_IMM if imm else Opcode.WRITE_LAST
            else:
                op = Opcode.WRITE_FIRST if i == 0 else Opcode.WRITE_MIDDLE
            pkt = MrcPacket(
                bth=Bth(opcode=op, dest_qp=qp.attr.dest_qpn, psn=qp.next_psn),
                meth=Meth(),
                reth=Reth(va=wr.remote_addr + off, rkey=wr.rkey, dma_len=size),
                immdt=ImmDt(wr.imm) if op in (Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST_IMM)
                else None,
                payload=bytes(mr.view(wr.local_addr + off, size)),
            )
            qp.queue.append(pkt)
            qp.next_psn += 1
        qp.pending.append((qp.next_psn - 1, wr))

    def post_recv(self, qpn: int, wr: RecvWR) -> None:
        recvs = self._qp(qpn).recvs
        assert recvs is not None
        recvs.append(wr)

    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        self.received += 1
        qp = self.qps.get(pkt.bth.dest_qp)
        if qp is None:
            return
        if pkt.bth.opcode == Opcode.ACK:
            qp.acked = pkt.bth.psn
            assert qp.pending is not None
            while qp.pending and qp.pending[0][0] <= qp.acked:
                _, wr = qp.pending.popleft()
                self.events.append(Completion(qp.send_cq, qp.qpn, wr.wr_id, WcStatus.SUCCESS,
                                              WcOpcode.RDMA_WRITE, wr.length))
            return
        assert pkt.reth is not None
        mr = self.mem.remote_write(pkt.reth.rkey, pkt.reth.va, len(pkt.payload))
        if mr is None:
            return
        mr.view(pkt.reth.va, len(pkt.payload))[:] = pkt.payload
        if pkt.immdt is not None:
            assert qp.recvs is not None
            wr = qp.recvs.popleft()
            self.events.append(Completion(qp.recv_cq, qp.qpn, wr.wr_id, WcStatus.SUCCESS,
                                          WcOpcode.RECV_RDMA_WITH_IMM, 0, pkt.immdt.imm))
        ack = MrcPacket(bth=Bth(opcode=Opcode.ACK, dest_qp=qp.attr.dest_qpn, psn=pkt.bth.psn),
                        aeth=Aeth())
        self.out.append(TxPacket(ack, meta.port, meta.src_gid, meta.ev, TrafficClass.CONTROL))

    def port_status(self, port: int, up: bool, now: float) -> None:
        self.port_calls.append((port, up))

    def packets_to_send(self, now: float, limit: int | None = None) -> list[TxPacket]:
        out, self.out = self.out, []
        for qp in self.qps.values():
            assert qp.queue is not None
            while qp.queue and qp.queue[0].bth.psn - qp.acked <= WINDOW:
                pkt = qp.queue.popleft()
                out.append(TxPacket(pkt, 0, qp.attr.dest_gids[0], 0x8000 + pkt.bth.psn % 16,
                                    TrafficClass.TRIMMABLE, True))
        return out

    def get_timer(self) -> float | None:
        return self.timer_at

    def handle_timer(self, now: float) -> None:
        self.timer_calls.append(now)
        self.timer_at = None
        self.events.append(LogRecord(now, 3, "mrc:stub_timer", {"fired": True}))

    def next_event(self) -> Any:
        return self.events.popleft() if self.events else None


def agent_config(name: str, gid: str, peer_mac: str, own_mac: str, **extra: Any) -> AgentConfig:
    return parse_config({
        "name": name,
        "ports": [{"ifname": f"{name}p0", "mac": own_mac, "gid": gid, "neighbor_mac": peer_mac}],
        **extra,
    })


def socket_pair_ports(batch: int = 64) -> tuple[NicPort, NicPort]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    for s in (a, b):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    return NicPort.from_socket(a, "pa", batch), NicPort.from_socket(b, "pb", batch)


class Pair:
    """Two started agents with stub cores joined by a socketpair."""

    def __init__(self, tmp: Path | None = None, real_core: bool = False,
                 clock: Callable[[], float] | None = None, coalesce: float = 0.0,
                 **extra: Any) -> None:
        pa, pb = socket_pair_ports()
        qlog = {"qlog_dir": str(tmp), "metrics_interval": 0.05} if tmp else {}
        self.cfg_a = agent_config("ha", "fd00::a", "02:00:00:00:00:0b", "02:00:00:00:00:0a",
                                  **qlog, **extra)
        self.cfg_b = agent_config("hb", "fd00::b", "02:00:00:00:00:0a", "02:00:00:00:00:0b",
                                  **qlog, **extra)
        self.core_a, self.core_b = StubCore(), StubCore()
        loop = {"clock": clock, "coalesce": coalesce}
        if real_core:  # the transport core itself (hosts/transport), as the agent builds it
            self.a = Agent(self.cfg_a, None, monitor_links=False, ports=[pa], **loop)
            self.b = Agent(self.cfg_b, None, monitor_links=False, ports=[pb], **loop)
        else:
            self.a = Agent(self.cfg_a, self.core_a, monitor_links=False, ports=[pa], **loop)
            self.b = Agent(self.cfg_b, self.core_b, monitor_links=False, ports=[pb], **loop)
        self.a.start()
        self.b.start()

    def close(self) -> None:
        self.a.stop()
        self.b.stop()
        assert self.a.loop_error is None and self.b.loop_error is None


@pytest.fixture
def pair() -> Any:
    p = Pair()
    try:
        yield p
    finally:
        p.close()


def _connect(agent: Agent, core: StubCore, peer_qpn: int, peer_gid: bytes, qpn: int) -> None:
    attr = QpAttr(qp_state=QpState.RTS, dest_qpn=peer_qpn, dest_gids=(peer_gid,))
    agent.call(core.modify_qp, qpn, attr,
               QpAttrMask.STATE | QpAttrMask.DEST_QPN | QpAttrMask.DEST_GIDS)


def _write_and_check(pair: Pair, size: int) -> None:
    """One Write of ``size`` bytes a -> b through both agents; checks data and counters."""
    sink = bytearray(size)
    data = bytearray(random.Random(size).randbytes(size))
    seen: list[Completion] = []
    handler = lambda ev, now: seen.append(ev) if isinstance(ev, Completion) else None  # noqa: E731
    pair.a.add_handler(handler)
    rx_before = pair.core_b.received
    tx_before = pair.a.ports[0].counters.tx_frames
    mr_b = pair.b.call(pair.core_b.register_mr, sink, 3)
    mr_a = pair.a.call(pair.core_a.register_mr, data, 3)
    qa = pair.a.call(pair.core_a.create_qp, QpType.MRC, 1, 1)
    qb = pair.b.call(pair.core_b.create_qp, QpType.MRC, 1, 1)
    _connect(pair.a, pair.core_a, qb, pair.cfg_b.ports[0].gid, qa)
    _connect(pair.b, pair.core_b, qa, pair.cfg_a.ports[0].gid, qb)
    wr = SendWR(wr_id=77, opcode=WrOpcode.WRITE, local_addr=mr_a.addr, length=len(data),
                lkey=mr_a.lkey, remote_addr=mr_b.addr, rkey=mr_b.rkey)
    pair.a.call(pair.core_a.post_send, qa, wr, pair.a.now())
    wait_until(lambda: bool(seen), 10, f"send completion of a {size}-byte Write")
    pair.a.remove_handler(handler)
    assert seen == [Completion(1, qa, 77, WcStatus.SUCCESS, WcOpcode.RDMA_WRITE, size)]
    assert sink == data
    packets = -(-size // 4096)
    assert pair.core_b.received - rx_before == packets
    assert pair.a.ports[0].counters.tx_frames - tx_before == packets


def test_write_moves_bytes_through_agents_and_completes(pair: Pair) -> None:
    _write_and_check(pair, 1 << 20)
    assert pair.b.ports[0].counters.rx_frames == 256
    assert pair.a.framer.rx.malformed == pair.b.framer.rx.malformed == 0


def test_coalesced_rounds_move_every_byte_and_are_counted() -> None:
    """Agents whose clock stands still see every round "at once" after the previous one: once
    two rounds found work they moderate (sleep the slack with the NIC unwatched, then take
    what arrived in one round). A 1 MiB Write still lands exactly, and the lag meter counts
    moderated rounds, fewer wake-ups than frames received."""
    p = Pair(clock=lambda: 0.0, coalesce=0.002)
    try:
        _write_and_check(p, 1 << 20)
        snap = p.b.lag.snapshot(0.0)
        assert snap["slack_s"] == 0.002 and snap["moderated"] >= 1
        assert snap["wakeups"] < p.b.ports[0].counters.rx_frames
    finally:
        p.close()


def test_loop_fires_core_timer_and_logs_records(tmp_path: Path) -> None:
    p = Pair(tmp_path)
    try:
        due = p.a.now() + 0.05
        p.a.call(setattr, p.core_a, "timer_at", due)
        wait_until(lambda: bool(p.core_a.timer_calls), 5, "core timer to fire")
        assert p.core_a.timer_calls[0] >= due
        assert len(p.core_a.timer_calls) == 1  # handle_timer cleared it; not called again
        wait_until(lambda: p.a.iterations > 3 and (tmp_path / "ha-agent.sqlog").exists(),
                   5, "metrics sample")
    finally:
        p.close()
    _, events = read_qlog(tmp_path / "ha-qp3.sqlog")
    assert [e["name"] for e in events] == ["mrc:stub_timer"]
    _, agent_events = read_qlog(tmp_path / "ha-agent.sqlog")
    samples = [e for e in agent_events if e["name"] == "mrc:metrics_sampled"]
    assert samples and samples[0]["data"]["ports"][0]["ifname"] == "pa"


class _FakeMonitor:
    """Stands in for the rtnetlink socket: hands out scripted link changes."""

    def __init__(self, changes: list[tuple[str, bool]]) -> None:
        self.changes = changes

    def fileno(self) -> int:
        return -1

    def read(self) -> list[tuple[str, bool]]:
        out, self.changes = self.changes, []
        return out

    def close(self) -> None:
        pass


def test_link_changes_become_core_port_status_and_qlog(tmp_path: Path) -> None:
    pa, pb = socket_pair_ports()
    core = StubCore()
    cfg = agent_config("hx", "fd00::1", "02:00:00:00:00:02", "02:00:00:00:00:01",
                       qlog_dir=str(tmp_path))
    agent = Agent(cfg, core, monitor_links=False, ports=[pa])
    try:
        agent.linkmon = _FakeMonitor(  # type: ignore[assignment]
            [("hxp0", False), ("other0", False), ("hxp0", False), ("hxp0", True)])
        hooked: list[tuple[int, bool]] = []
        agent.port_hooks.append(lambda port, up: hooked.append((port, up)))
        agent._link_changes(agent.now())
        # Repeated states and foreign interfaces are ignored.
        assert core.port_calls == [(0, False), (0, True)]
        assert hooked == [(0, False), (0, True)]
        assert agent.port_up == [True]
        # Administrative disable: the core sees the port down whatever the carrier says, and
        # a carrier change while disabled does not bring it back.
        agent.set_port_admin(0, False)
        agent.linkmon = _FakeMonitor([("hxp0", False), ("hxp0", True)])  # type: ignore[assignment]
        agent._link_changes(agent.now())
        assert core.port_calls == [(0, False), (0, True), (0, False)]
        agent.set_port_admin(0, True)
        assert core.port_calls[-1] == (0, True) and agent.port_up == [True]
        with pytest.raises(ValueError):
            agent.set_port_admin(3, False)
        agent.linkmon = None
    finally:
        agent.stop()
        pb.close()
    _, events = read_qlog(tmp_path / "hx-agent.sqlog")
    assert [(e["name"], e["data"].get("up", e["data"].get("enabled"))) for e in events] == [
        ("mrc:port_status", False), ("mrc:port_status", True), ("mrc:port_admin", False),
        ("mrc:port_status", False), ("mrc:port_status", True), ("mrc:port_admin", True)]


def _tx(cfg: AgentConfig, ev: int, tclass: TrafficClass = TrafficClass.TRIMMABLE) -> TxPacket:
    pkt = MrcPacket(bth=Bth(opcode=Opcode.WRITE_ONLY, dest_qp=9, psn=5), meth=Meth(),
                    reth=Reth(va=0x1000, rkey=7, dma_len=4), payload=b"\x01\x02\x03\x04")
    return TxPacket(pkt, 0, bytes.fromhex("fd00" + "00" * 13 + "bb"), ev, tclass, True)


@pytest.mark.parametrize("mode", ["ecmp", "structured"])
def test_framer_places_ev_and_class_and_reads_them_back(mode: str) -> None:
    tx_cfg = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a",
                          ev_mode=mode)
    rx_cfg = agent_config("hb", "fd00::bb", "02:00:00:00:00:0a", "02:00:00:00:00:0b",
                          ev_mode=mode)
    ev = 0x1234ABCD if mode == "structured" else 0xABCD
    f_tx, f_rx = Framer(tx_cfg), Framer(rx_cfg)
    n = f_tx.encode(_tx(tx_cfg, ev))
    raw = bytes(f_tx.tx_buf[:n])
    frame, pkt = decode_frame(raw)  # independent decode of what went on the wire
    assert frame.eth_dst == rx_cfg.ports[0].mac and frame.eth_src == tx_cfg.ports[0].mac
    assert frame.ip_src == tx_cfg.ports[0].gid and frame.ip_dst == rx_cfg.ports[0].gid
    assert frame.dscp == DEFAULT_CLASSES.dscp[TrafficClass.TRIMMABLE] and frame.ecn == 2
    assert frame.udp_sport == ev & 0xFFFF
    assert frame.flow_label == (ev >> 16 if mode == "structured" else 0)
    got = f_rx.decode(memoryview(raw), 0)
    assert got is not None
    rpkt, meta = got
    assert meta == RxMeta(port=0, src_gid=tx_cfg.ports[0].gid, dst_gid=rx_cfg.ports[0].gid,
                          ev=ev, dscp=frame.dscp, ce=False, length=n)
    assert bytes(rpkt.payload) == b"\x01\x02\x03\x04" and rpkt.reth == pkt.reth
    ctrl = f_tx.encode(_tx(tx_cfg, ev, TrafficClass.CONTROL))
    assert decode_frame(bytes(f_tx.tx_buf[:ctrl]))[0].dscp == DEFAULT_CLASSES.dscp[
        TrafficClass.CONTROL]


def test_framer_srv6_builds_container_from_destination_template() -> None:
    tmpl = {"block": "0xfc000000", "slots": [{"base": 0x100, "ev_shift": 0, "ev_width": 4},
                                            {"base": 0x200}]}
    cfg = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a",
                       ev_mode="srv6", srv6_templates={"fd00::bb": tmpl})
    f = Framer(cfg)
    n = f.encode(_tx(cfg, 0x8003))
    frame, _ = decode_frame(bytes(f.tx_buf[:n]))
    assert frame.srv6 is not None
    assert frame.srv6.dst == usid_container(cfg.srv6_templates[frame.ip_dst], 0x8003)
    assert frame.srv6.dst[:8] == bytes.fromhex("fc000000" "0103" "0200")
    assert fields_to_ev(EvMode.SRV6, frame.udp_sport) == 0x8003
    # No template for a destination: a counted no-send, not an exception.
    other = _tx(cfg, 1)
    other.dst_gid = bytes(16)
    assert f.encode(other) == 0 and f.no_template == 1


def test_framer_counts_garbage_wrong_destination_and_bad_icrc() -> None:
    cfg = agent_config("hb", "fd00::bb", "02:00:00:00:00:0a", "02:00:00:00:00:0b")
    f = Framer(cfg)
    assert f.decode(memoryview(b"\x00" * 10), 0) is None
    assert f.decode(memoryview(bytes(200)), 0) is None
    assert f.rx.malformed == 2
    good_cfg = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a")
    tx = _tx(good_cfg, 5)
    tx.dst_gid = bytes.fromhex("fd00" + "00" * 13 + "cc")
    fa = Framer(good_cfg)
    raw = bytes(fa.tx_buf[: fa.encode(tx)])
    assert f.decode(memoryview(raw), 0) is None and f.rx.not_for_us == 1
    ok = bytearray(fa.tx_buf[: fa.encode(_tx(good_cfg, 5))])
    assert f.decode(memoryview(bytes(ok)), 0) is not None
    ok[-1] ^= 0xFF  # corrupt the ICRC
    assert f.decode(memoryview(bytes(ok)), 0) is None and f.rx.malformed == 3


def test_frames_from_socket_batches_are_decoded_in_order() -> None:
    pa, pb = socket_pair_ports(batch=8)
    cfg = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a")
    frames = []
    for i in range(20):
        tx = _tx(cfg, i)
        tx.pkt.bth.psn = i
        tx.dst_gid = bytes.fromhex("fd00" + "00" * 13 + "bb")
        frames.append(build_frame_for(cfg, tx))
    for f in frames:
        assert pa.send(f)
    got: list[bytes] = []
    while len(got) < 20:
        n = pb.recv_batch()
        assert n > 0
        assert n <= 8
        got.extend(bytes(pb.views[i][: pb.lengths[i]]) for i in range(n))
    assert got == frames
    assert pb.recv_batch() == 0
    pa.close()
    pb.close()


def build_frame_for(cfg: AgentConfig, tx: TxPacket) -> bytes:
    f = Framer(cfg)
    out = bytes(f.tx_buf[: f.encode(tx)])
    frame, pkt = decode_frame(out)
    assert build_frame(frame, pkt) == out  # the framer's output is a canonical frame
    return out


class _StuckTimerCore(StubCore):
    """A core whose handle_timer leaves the due timer in place (a core bug the loop survives)."""

    def handle_timer(self, now: float) -> None:
        self.timer_calls.append(now)


def test_loop_does_not_spin_on_a_timer_the_core_leaves_due() -> None:
    from hosts.agent.agent import TIMER_STALL_BACKOFF

    pa, pb = socket_pair_ports()
    core = _StuckTimerCore()
    cfg = agent_config("hx", "fd00::1", "02:00:00:00:00:02", "02:00:00:00:00:01")
    agent = Agent(cfg, core, monitor_links=False, ports=[pa])
    core.timer_at = agent.now() - 1.0
    agent.start()
    try:
        wait_until(lambda: len(core.timer_calls) >= 5, 5, "repeated timer calls")
    finally:
        agent.stop()
        pb.close()
    calls = core.timer_calls
    span = calls[-1] - calls[0]
    # At most one handle_timer per back-off interval (plus the first call).
    assert len(calls) <= span / TIMER_STALL_BACKOFF + 2
    assert all(b - a >= TIMER_STALL_BACKOFF for a, b in itertools.pairwise(calls))
    assert agent.timer_stalls == len(calls)


def test_garbage_frames_are_counted_and_the_loop_keeps_working(pair: Pair) -> None:
    rng = random.Random(5)
    cfg = pair.cfg_a
    good = bytearray(build_frame_for(cfg, _tx_to(cfg, pair.cfg_b.ports[0].gid)))
    bad_icrc = bytearray(good)
    bad_icrc[-2] ^= 0x55
    other = _tx_to(cfg, bytes.fromhex("fd00" + "00" * 13 + "ee"))
    junk = [b"", b"\x00", bytes(13), rng.randbytes(60), rng.randbytes(3000),
            bytes(good[:40]), bytes(bad_icrc), build_frame_for(cfg, other)]
    sock = pair.a.ports[0].sock
    for frame in junk:
        sock.send(frame)
    # A frame for an unknown QP is well-formed: it reaches the core, which ignores it.
    sock.send(bytes(good))
    rx = pair.b.framer.rx
    wait_until(lambda: pair.core_b.received == 1 and rx.not_for_us == 1, 5, "junk processed")
    assert rx.malformed == len(junk) - 1
    assert pair.b.running and pair.b.loop_error is None
    _write_and_check(pair, 100_000)  # still fully functional


def _tx_to(cfg: AgentConfig, dst: bytes) -> TxPacket:
    tx = _tx(cfg, 3)
    tx.dst_gid = dst
    tx.pkt.bth.dest_qp = 0x7777
    return tx


@pytest.mark.parametrize("mode", ["ecmp", "structured", "srv6"])
def test_framer_ev_placement_agrees_with_wire_helpers(mode: str) -> None:
    """The framer inlines EV placement for speed; it must match hosts.wire's ev_to_fields /
    fields_to_ev (the single definition) for any EV."""
    from hosts.wire import ev_to_fields, fields_to_ev

    tmpl = {"block": "0xfc000000", "slots": [{"base": 0x100, "ev_shift": 0, "ev_width": 4}]}
    extra: dict[str, Any] = {"ev_mode": mode}
    if mode == "srv6":
        extra["srv6_templates"] = {"fd00::bb": tmpl}
    cfg = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a", **extra)
    rx = agent_config("hb", "fd00::bb", "02:00:00:00:00:0a", "02:00:00:00:00:0b", **extra)
    f, fr = Framer(cfg), Framer(rx)
    rng = random.Random(4)
    for _ in range(200):
        ev = rng.getrandbits(32 if mode == "structured" else 16)
        raw = bytes(f.tx_buf[: f.encode(_tx(cfg, ev))])
        frame, _ = decode_frame(raw)
        assert (frame.udp_sport, frame.flow_label) == ev_to_fields(cfg.ev_mode, ev)
        got = fr.decode(memoryview(raw), 0)
        assert got is not None
        assert got[1].ev == fields_to_ev(cfg.ev_mode, frame.udp_sport, frame.flow_label) == ev


class _RecordingCore(StubCore):
    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[int, int, int]] = []  # (port, qpn, psn)

    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        self.order.append((meta.port, pkt.bth.dest_qp, pkt.bth.psn))


def test_two_port_batches_reach_the_core_in_psn_order_per_qp() -> None:
    """Sprayed packets of one batch are handed over by (QP, PSN), across the 24-bit wrap;
    packets of different QPs keep their own order."""
    (a0, b0), (a1, b1) = socket_pair_ports(), socket_pair_ports()
    cfg = parse_config({"name": "hb", "ports": [
        {"ifname": f"hbp{i}", "mac": f"02:00:00:00:00:0{i}", "gid": f"fd00:{i}::b",
         "neighbor_mac": "02:00:00:00:00:0a"} for i in (0, 1)]})
    sender = agent_config("ha", "fd00::a", "02:00:00:00:00:0b", "02:00:00:00:00:0a")
    core = _RecordingCore()
    # PSNs around the wrap, sprayed over the two ports in an irregular pattern; plus QP 9.
    psns = [(0xFFFFFE + k) & 0xFFFFFF for k in range(8)]
    plan = [(0, 7, psns[1]), (0, 7, psns[2]), (0, 7, psns[5]), (0, 9, 100), (1, 7, psns[0]),
            (1, 9, 99), (1, 7, psns[3]), (1, 7, psns[4]), (0, 7, psns[7]), (1, 7, psns[6])]
    for port, qpn, psn in plan:
        tx = _tx(sender, 1)
        tx.pkt.bth.dest_qp = qpn
        tx.pkt.bth.psn = psn
        tx.dst_gid = cfg.ports[port].gid
        (a0 if port == 0 else a1).send(build_frame_for(sender, tx))
    agent = Agent(cfg, core, monitor_links=False, ports=[b0, b1])
    try:
        agent._receive_all(agent.now())
    finally:
        agent.stop()
        a0.close()
        a1.close()
    qp7 = [psn for _, qpn, psn in core.order if qpn == 7]
    assert qp7 == psns  # 0xFFFFFE, 0xFFFFFF, 0, 1, ... in order despite the wrap
    assert [psn for _, qpn, psn in core.order if qpn == 9] == [99, 100]
    assert sorted(p for p, _, _ in core.order) == [0] * 5 + [1] * 5


class _ArrivalCore(StubCore):
    def __init__(self) -> None:
        super().__init__()
        self.arrivals: list[tuple[float, float]] = []  # (rx_time, now)
        self.penalties: list[tuple[int, bool]] = []

    def receive(self, pkt: MrcPacket, meta: RxMeta, now: float) -> None:
        self.arrivals.append((meta.rx_time, now))

    def set_host_backpressure(self, penalty: int, restore: bool = False) -> None:
        self.penalties.append((penalty, restore))


def test_frames_carry_their_kernel_arrival_on_the_core_clock_and_the_wait_is_measured() -> None:
    import socket as socketmod
    import time

    from common.pktio import SO_TIMESTAMPNS

    a, b = socket_pair_ports()
    b.sock.setsockopt(socketmod.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # as NicPort does on a NIC
    cfg = agent_config("hb", "fd00::bb", "02:00:00:00:00:0a", "02:00:00:00:00:0b")
    sender = agent_config("ha", "fd00::aa", "02:00:00:00:00:0b", "02:00:00:00:00:0a")
    tx = _tx(sender, 1)
    tx.dst_gid = cfg.ports[0].gid
    core = _ArrivalCore()
    agent = Agent(cfg, core, monitor_links=False, ports=[b])
    try:
        sent_at = agent.now()
        for _ in range(3):
            a.send(build_frame_for(sender, tx))
        time.sleep(0.02)  # the frames wait 20 ms in the socket before the loop reads them
        agent._receive_all(agent.now())
    finally:
        agent.stop()
        a.close()
    assert len(core.arrivals) == 3
    for rx_time, now in core.arrivals:
        assert sent_at - 2e-3 <= rx_time <= sent_at + 5e-3  # when the kernel got it
        assert now - rx_time >= 0.019
    assert agent.rx_wait.max >= 0.019 and agent.rx_wait.avg > 0


def test_the_receive_wait_becomes_the_hosts_penalty_and_its_restore() -> None:
    from hosts.agent.backpressure import RxWait

    w = RxWait(low=0.005, high=0.015)
    for _ in range(40):
        w.observe(0.001, 0.001, 64)
    assert not w.update() and w.penalty == 0  # below low: nothing changes
    for _ in range(80):
        w.observe(0.015, 0.005, 64)  # frames waited 10 ms on average: halfway to high
    assert w.update()
    assert w.penalty == 64 and not w.restore  # ceil(127 x 5 / 10)
    for _ in range(80):
        w.observe(0.030, 0.030, 64)
    w.update()
    assert w.penalty == 127  # capped
    for _ in range(80):
        w.observe(0.0, 0.0, 64)
    assert w.update() and (w.penalty, w.restore) == (0, True)  # over: restore
    assert not w.update()  # unchanged
    window = w.window()
    assert window["rx_wait_max"] == 0.030 and window["frames"] == 280 * 64
    assert RxWait(0.0, 0.0).update() is False  # disabled


def test_the_wait_is_averaged_over_frames_not_batches() -> None:
    """A host that stalls: one big batch whose frames waited, then many one-frame batches
    read at once; the average follows the frames (most waited), not the batch count."""
    from hosts.agent.backpressure import RxWait

    w = RxWait(low=0.005, high=0.05)
    for _ in range(40):  # per stall: 60 frames waited 20 .. 0 ms, then 27 single frames
        w.observe(0.020, 0.0, 60)
        for _ in range(27):
            w.observe(0.0)
    assert 0.005 < w.avg < 0.010  # per frame: 60 x 10 ms / 87 = 6.9 ms
    assert w.update() and w.penalty > 0


def test_a_penalty_change_goes_to_the_core_and_the_qlog(tmp_path: Path) -> None:
    cfg = agent_config("hb", "fd00::bb", "02:00:00:00:00:0a", "02:00:00:00:00:0b",
                       qlog_dir=str(tmp_path))
    a, b = socket_pair_ports()
    core = _ArrivalCore()
    agent = Agent(cfg, core, monitor_links=False, ports=[b])
    try:
        agent.rx_wait.observe(0.04, 0.04, 1000)
        agent._iteration([], agent.now())
        agent.rx_wait.observe(0.0, 0.0, 1000)
        agent._iteration([], agent.now())
    finally:
        agent.stop()
        a.close()
    assert core.penalties[0][0] > 0 and core.penalties[-1] == (0, True)
    _, events = read_qlog(tmp_path / "hb-agent.sqlog")
    bp = [e["data"] for e in events if e["name"] == "mrc:backpressure"]
    assert [(d["penalty"] > 0, d["restore"]) for d in bp] == [(True, False), (False, True)]

"""Bulk transfers on the simulated fabric: one connected QP per flow, one RDMA WRITE of
``size`` bytes each (the emulation's writer data, hosts.apps.pattern), every byte checked
where it landed, and per-flow completion times.

Connections are set up out of band (hosts.transport.sim.connect: the PSNs and attributes
the emulation exchanges through the controller), so a flow's clock starts at its first
packet.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hosts.apps import pattern
from hosts.transport import ALL_ACCESS
from hosts.transport.sim import QpOptions, connect
from hosts.transport.types import Completion, QpType, SendWR, WcStatus, WrOpcode
from mrcnet.sim.hostnode import SimHost

WR_ID = 1


@dataclass
class Flow:
    src: str
    dst: str
    size: int
    seed: int  # of its data (hosts.apps.pattern, the emulation's writer data)
    qpn: int = 0
    peer_qpn: int = 0
    finished_at: float | None = None
    status: str = "pending"
    verified: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    _dst_buf: bytearray = field(default_factory=bytearray, repr=False)


def start_flows(hosts: dict[str, SimHost], pairs: list[tuple[str, str]], size: int,
                qp_type: QpType = QpType.MRC, opts: QpOptions | None = None,
                seed: int = 1) -> list[Flow]:
    """Connect a QP per (src, dst) and post one WRITE of ``size`` bytes on each, now."""
    base = opts or QpOptions(profile_id=0)
    o = replace(base, qp_type=qp_type)
    flows = []
    for i, (src, dst) in enumerate(pairs):
        a, b = hosts[src], hosts[dst]
        qa, qb = connect(a.core, b.core, o)
        flow_seed = seed * 1000 + i
        data = pattern(size, flow_seed)
        sink = bytearray(size)
        ma = a.core.register_mr(data, ALL_ACCESS)
        mb = b.core.register_mr(sink, ALL_ACCESS)
        a.core.post_send(qa, SendWR(WR_ID, WrOpcode.WRITE, ma.addr, size, ma.lkey, mb.addr,
                                    mb.rkey), a.sched.now)
        flows.append(Flow(src, dst, size, flow_seed, qa, qb, _dst_buf=sink))
    for host in hosts.values():
        host.pump()
    return flows


def collect(hosts: dict[str, SimHost], flows: list[Flow]) -> None:
    """Take the completions the hosts reported: a flow is done at its WRITE's completion;
    its bytes are then compared with what was sent."""
    by_qp = {(f.src, f.qpn): f for f in flows}
    for name, host in hosts.items():
        rest = []
        for when, ev in host.events:
            flow = by_qp.get((name, ev.qpn)) if isinstance(ev, Completion) else None
            if flow is None or not isinstance(ev, Completion) or ev.wr_id != WR_ID:
                rest.append((when, ev))
                continue
            flow.finished_at = when
            flow.status = "ok" if ev.status == WcStatus.SUCCESS else ev.status.name.lower()
            flow.verified = flow._dst_buf == pattern(flow.size, flow.seed)
            flow.stats = host.core.qp_stats(flow.qpn)
        host.events = rest


def run_flows(hosts: dict[str, SimHost], flows: list[Flow], limit: float,
              slice_s: float = 1e-3) -> bool:
    """Run the scheduler until every flow completed (True) or ``limit`` simulated seconds
    passed (False). Completion times come from the events' own timestamps, so the slice
    only sets how often this looks."""
    sched = next(iter(hosts.values())).sched
    while sched.now < limit:
        sched.run(until=min(limit, sched.now + slice_s))
        collect(hosts, flows)
        if all_done(flows):
            return True
        if sched.next_time() is None:
            return False
    return False


def all_done(flows: list[Flow]) -> bool:
    return all(f.finished_at is not None for f in flows)

"""What a simulated run records besides its results: per-QP qlog, switch samples, the plots.

The emulation's run folder holds a qlog file per QP (written by each agent,
hosts/agent/qlog.py), a time series of switch samples (mrcnet/fabric/liveview.py
``StatsSampler``, from the controller's GetSwitchStats) and the plots drawn from both
(mrcnet/fabric/results.py ``plot``). The simulator records the same with the same code:

- qlog: one ``QlogWriter`` per host fed every core event the agent would log
  (hosts/agent/events.py ``qlog_record``); ``reference_time`` is 0 and times are simulated
  milliseconds, so a file reads like an emulated run's that started at the Unix epoch;
- samples: the ``StatsSampler`` asks ``switch_stats`` for a GetSwitchStatsResponse built
  from the simulated switches (each port's figures as the switch's admin service reports
  them, switch/admin.py), at every ``interval`` of simulated time, between two scheduler
  slices (no event of its own: a run ends when its flows do);
- EV states: the hosts' EV state changes reach an ``EvTracker`` as the agents' reports reach
  the controller (GOOD and ASSUMED_BAD; not SKIP -> GOOD);
- plots: ``results.plot`` over those samples, on simulated time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.proto import mrc_ctl_pb2 as pb
from common.proto import switch_admin_pb2 as admin_pb
from common.switchfigures import embedded_figures
from hosts.agent.events import qlog_record
from hosts.agent.qlog import QlogWriter
from hosts.transport.types import EvState, EvStateChanged
from mrcnet.fabric.liveview import EvTracker, Sample, StatsSampler
from mrcnet.sim.events import Scheduler
from mrcnet.sim.fabric import SimFabric
from mrcnet.sim.hostnode import SimHost
from mrcnet.sim.switchnode import SimSwitch
from switch.adminstats import direction_stats
from topologies.model import Topology

SAMPLE_INTERVAL_S = 0.01  # simulated seconds between two switch samples
_REPORTED = {EvState.GOOD: pb.EV_GOOD, EvState.ASSUMED_BAD: pb.EV_ASSUMED_BAD}


class SimClock:
    """The scheduler's time as the run clock the sampler reads (no dilation, no wall time)."""

    dilated = False
    tdf = 1.0

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched

    def now(self) -> float:
        return self.sched.now

    def to_wall(self, seconds: float) -> float:
        return seconds


def port_detail(sw: SimSwitch) -> admin_pb.GetPortsResponse:
    """Every port of ``sw`` as the switch's admin service answers GetPorts."""
    resp = admin_pb.GetPortsResponse()
    for port in sorted(sw.tm.egress):
        eg, ing = sw.tm.egress[port], sw.tm.ingress[port]
        resp.ports.append(admin_pb.PortInfo(
            port=port, admin_up=sw.tm.admin_up(port), carrier_up=sw.tm.admin_up(port),
            tx_packets=eg.stats.packets, tx_bytes=eg.stats.bytes,
            egress=direction_stats(eg.stats, eg.depth),
            ingress=direction_stats(ing.stats, ing.depth)))
    return resp


def switch_stats(fab: SimFabric) -> pb.GetSwitchStatsResponse:
    """Every simulated switch's figures with their port detail (GetSwitchStats)."""
    out = pb.GetSwitchStatsResponse()
    for name in sorted(fab.switches):
        detail = port_detail(fab.switches[name])
        sent, drops, trims, ecn = embedded_figures(detail)
        out.switches.append(pb.SwitchStats(name=name, kind="sim", egress_bytes=sent,
                                           drops=drops, trims=trims, ecn_marks=ecn,
                                           detail=detail))
    return out


class Recorder:
    """The run's qlog (with ``qlog_dir``), switch samples and EV-state timeline."""

    def __init__(self, topo: Topology, fab: SimFabric, hosts: dict[str, SimHost],
                 qlog_dir: Path | None = None, interval: float = SAMPLE_INTERVAL_S) -> None:
        sched = fab.sched
        self.interval = interval
        self.tracker = EvTracker(clock=sched.clock, t0=0.0)
        self.sampler = StatsSampler(topo, lambda *_a, **_k: switch_stats(fab), self.tracker,
                                    interval, clock=SimClock(sched))  # type: ignore[arg-type]
        self.qlogs: list[QlogWriter] = []
        for name, host in hosts.items():
            qlog = (QlogWriter(qlog_dir, name, 0.0, reference_unix=0.0)
                    if qlog_dir is not None else None)
            if qlog is not None:
                self.qlogs.append(qlog)
            host.observers.append(self._observer(name, qlog, sched))
        self.next_sample = 0.0
        self.tick(sched.now)

    def _observer(self, host: str, qlog: QlogWriter | None, sched: Scheduler) -> Any:
        tracker = self.tracker

        def observe(ev: object) -> None:
            if qlog is not None:
                rec = qlog_record(ev)
                if rec is not None:
                    qlog.event(rec[0], rec[1], rec[2], sched.now)
            if isinstance(ev, EvStateChanged):
                state = _REPORTED.get(ev.new)
                if state is None or (ev.new == EvState.GOOD and ev.old != EvState.ASSUMED_BAD):
                    return
                tracker.on_event(pb.EvEvent(host=host, qpn=ev.qpn, state=state,
                                            ev=pb.Ev(value=ev.ev, port=ev.port + 1)))
        return observe

    def tick(self, now: float) -> None:
        """A sample when one is due (the run's loop calls this between scheduler slices)."""
        if now + 1e-12 >= self.next_sample:
            self.sampler.sample()
            self.next_sample = now + self.interval

    def finish(self) -> list[Sample]:
        """The last sample, the qlog files closed; the samples."""
        self.sampler.sample()
        for qlog in self.qlogs:
            qlog.close()
        return self.sampler.samples

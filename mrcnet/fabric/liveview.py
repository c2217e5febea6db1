"""Live view of a run: switch counters sampled periodically, EV states from the controller.

``StatsSampler`` asks the controller for every switch's figures (MrcFabric GetSwitchStats:
the switches' drivers read them, whatever their kind) every ``interval`` seconds and keeps a
time series of

- ``plane_bps``: MRC bits/s delivered to hosts per plane (bytes sent by the MRC queues of
  host-facing leaf ports, i.e. what crossed the last emulated link; includes headers and
  retransmissions, not the best-effort queue of the hosts' kernel traffic);
- ``drops`` (tail + down + random-loss drops, both directions, all ports), ``trims`` and
  ``ecn`` (per-queue counters), all as totals since the start;
- ``ev_bad``: EVs currently ASSUMED_BAD over all (host, QP) pairs (from ``EvTracker``);
- ``cc``: the QPs' congestion control from their qlog samples (``QpTail``: window min/mean/
  max, smoothed RTT, ECN-marked SACKs, largest receiver penalty), when a qlog folder is given.

- ``behind``: the largest fraction of the interval any switch spent behind its schedule
  (its data-plane lag meter, common/lag.py; switches of a kind without one do not count),
  and which switch.

``EvTracker`` consumes the controller's EV event stream (agents' datapath transitions) and
keeps the latest state of every (host, QP, EV) plus a timeline. With ``show=True`` one
status line per sample goes to stderr (stdout stays free for ``--json``).

Times and rates are on the run's clock (common/vclock.py): seconds since the tracker's start
and bits per second of virtual time; the status line says "virtual" under time dilation.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.lag import window
from common.proto import mrc_ctl_pb2 as pb
from common.vclock import RunClock
from mrcnet.fabric.portstats import PortReading, PortTotals, port_readings
from mrcnet.fabric.qptail import QpTail
from topologies.model import NodeKind, Topology

LINE_INTERVAL = 0.5  # seconds of the run's clock between two lines of the live view
STATE_NAMES = {pb.EV_GOOD: "GOOD", pb.EV_ASSUMED_BAD: "ASSUMED_BAD", pb.EV_DENIED: "DENIED"}


@dataclass
class EvTracker:
    """Latest EV state per (host, qpn, ev, port) of the QPs that exist, and the timeline of
    every report. A QP that was destroyed (its workload's job released it) leaves ``latest``
    (``retire``); a late report of it only joins the timeline (QP numbers are not reused)."""

    clock: Callable[[], float] = time.monotonic  # the run's clock
    t0: float = -1.0  # the clock's reading at the start (default: when created)
    latest: dict[tuple[str, int, int, int], str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    retired: set[tuple[str, int]] = field(default_factory=set)  # (host, qpn) destroyed
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.t0 < 0:
            self.t0 = self.clock()

    def on_event(self, ev: pb.EvEvent) -> None:
        state = STATE_NAMES.get(ev.state, str(ev.state))
        with self.lock:
            self.dropped += ev.drop_count
            if (ev.host, ev.qpn) not in self.retired:
                self.latest[(ev.host, ev.qpn, int(ev.ev.value), int(ev.ev.port))] = state
            self.events.append({"t": self.clock() - self.t0, "host": ev.host, "qpn": ev.qpn,
                                "ev": int(ev.ev.value), "port": int(ev.ev.port),
                                "state": state})

    def retire(self, host: str, qpn: int) -> None:
        """QP ``qpn`` of ``host`` is gone: its EVs leave the current states."""
        with self.lock:
            self.retired.add((host, qpn))
            for key in [k for k in self.latest if k[0] == host and k[1] == qpn]:
                del self.latest[key]

    def counts(self) -> dict[str, int]:
        with self.lock:
            out: dict[str, int] = {}
            for s in self.latest.values():
                out[s] = out.get(s, 0) + 1
            return out

    def for_host(self, host: str) -> list[tuple[int, int, int, str]]:
        """(qpn, ev, port, state) reported by ``host``."""
        with self.lock:
            return sorted((q, e, p, s) for (h, q, e, p), s in self.latest.items() if h == host)

    def evs_that_went(self, state: str) -> set[tuple[int, int]]:
        """(ev, port) that were reported in ``state`` at least once."""
        with self.lock:
            return {(e["ev"], e["port"]) for e in self.events if e["state"] == state}


@dataclass
class Sample:
    t: float
    plane_bps: list[float]
    drops: int
    trims: int
    ecn: int
    ev_bad: int
    plane_bytes: list[int]  # totals since the switches started (rates above are per window)
    behind: float = 0.0  # largest fraction of the window a switch was behind schedule
    behind_switch: str = ""
    cc: dict[str, float] = field(default_factory=dict)  # QpTail.summary()
    # Per port ("switch:port", non-zero only; mrcnet/fabric/portstats.py): bits/s sent and
    # received across the emulated link, bytes queued at egress now, ports down now.
    port_bps: dict[str, float] = field(default_factory=dict)
    port_in_bps: dict[str, float] = field(default_factory=dict)
    port_depth: dict[str, int] = field(default_factory=dict)
    ports_down: list[str] = field(default_factory=list)


StatsSource = Callable[..., pb.GetSwitchStatsResponse]
"""Every switch's figures now (the orchestrator passes ``CtlClient.switch_stats``; asked with
``detail=True``: per-port figures where the switch's kind has them, for the web view)."""


class SampleError(RuntimeError):
    """A switch could not be read: the sample is not taken (counted in ``errors``)."""


class StatsSampler:
    """Periodic switch counters -> samples (a daemon thread; ``stop()`` idempotent)."""

    def __init__(self, topo: Topology, stats: StatsSource, tracker: EvTracker,
                 interval: float = 0.5, show: bool = False,
                 clock: RunClock | None = None,
                 qlog_dir: Path | None = None) -> None:
        """``stats``: every switch's figures now (the controller's GetSwitchStats).
        ``interval``: seconds of the run's ``clock`` (default TDF 1). ``qlog_dir``: the
        agents' qlog files (the QPs' congestion control, QpTail)."""
        self.clock = clock or RunClock(1.0)
        self.topo = topo
        self.qps = QpTail(qlog_dir) if qlog_dir is not None else None
        self.stats = stats
        self.tracker = tracker
        self.interval = interval
        self.show = show
        # Where the status line goes (mrcnet/fabric/livedisplay.py sets it; default stderr).
        self.display: Callable[[str], None] = _to_stderr
        # At most one line per LINE_INTERVAL of the run's clock, however often it samples
        # (mrcnet up --web samples every 0.5 wall seconds, many samples per virtual second).
        self._line_t = float("-inf")
        self._ports = PortTotals()
        self.t0 = tracker.t0
        self.samples: list[Sample] = []
        self.errors = 0
        self._last: tuple[float, list[int]] | None = None
        self._timing: dict[str, dict[str, Any]] = {}  # switch -> last lag-meter snapshot
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._host_ports: dict[str, dict[int, int]] = {}  # switch -> host-facing port -> plane
        for sw in topo.nodes_of(NodeKind.SWITCH):
            for port, link in topo.ports(sw.name).items():
                if topo.node(link.other(sw.name).node).kind == NodeKind.HOST:
                    self._host_ports.setdefault(sw.name, {})[port] = int(sw.plane or 0)

    def start(self) -> None:
        # Baseline now: a workload shorter than one interval still gets a sample at the end.
        try:
            self.sample()
        except Exception:
            self.errors += 1
        self._thread = threading.Thread(target=self._run, name="stats", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(self.clock.to_wall(self.interval)):
            try:
                self.sample()
            except Exception:
                self.errors += 1

    def sample(self) -> Sample | None:
        """Take one sample now (thread-safe: the CLI and the results call it too)."""
        with self._lock:
            return self._sample()

    def _sample(self) -> Sample | None:
        planes = self.topo.fabric.planes
        delivered = [0] * planes
        drops = trims = ecn = 0
        behind, behind_switch = 0.0, ""
        from common.lag_proto import timing_snapshot

        readings: dict[str, dict[int, PortReading]] = {}
        for sw in self.stats(detail=True).switches:
            if sw.error:  # an unreadable switch is an error of the sample, never zeros
                raise SampleError(f"{sw.name}: {sw.error}")
            readings[sw.name] = (port_readings(sw.detail) if sw.HasField("detail") else
                                 {port: PortReading(int(b), 0, 0, True)
                                  for port, b in sw.egress_bytes.items()})
            if sw.has_timing:
                snap = timing_snapshot(sw.timing)
                prev = self._timing.get(sw.name)
                self._timing[sw.name] = snap
                if prev is not None:
                    frac = window(prev, snap)["lag_fraction"]
                    if frac > behind:
                        behind, behind_switch = frac, sw.name
            for port, plane in self._host_ports.get(sw.name, {}).items():
                delivered[plane] += sw.egress_bytes.get(port, 0)
            drops += sw.drops
            trims += sw.trims
            ecn += sw.ecn_marks
        now = self.clock.now() - self.t0
        last, self._last = self._last, (now, delivered)
        ports = self._ports.rates(readings, now - last[0] if last is not None else 1.0)
        if last is None:
            return None
        dt = max(1e-6, now - last[0])
        bps = [(b - a) * 8 / dt for a, b in zip(last[1], delivered)]
        bad = self.tracker.counts().get("ASSUMED_BAD", 0)
        cc: dict[str, float] = {}
        if self.qps is not None:
            self.qps.poll()
            cc = self.qps.summary()
        s = Sample(now, bps, drops, trims, ecn, bad, list(delivered), round(behind, 4),
                   behind_switch, cc, ports.egress_bps, ports.ingress_bps, ports.depth_bytes,
                   ports.down)
        self.samples.append(s)
        if self.show and s.t - self._line_t >= 0.9 * LINE_INTERVAL:
            self._line_t = s.t
            self.display(self.status_line(s))
        return s

    def status_line(self, s: Sample) -> str:
        """The live view's one line for sample ``s``."""
        planes_txt = " ".join(f"p{i}={v / 1e6:6.1f}" for i, v in enumerate(s.plane_bps))
        unit = "virtual s" if self.clock.dilated else "s"
        late = f" | behind {s.behind:.0%} ({s.behind_switch})" if s.behind > 0.01 else ""
        cc_txt = ""
        cc = s.cc
        if cc:
            cc_txt = (f" | {cc['qps']:.0f} QPs cwnd {cc['cwnd_min'] / 1024:.0f}/"
                      f"{cc['cwnd_mean'] / 1024:.0f}/{cc['cwnd_max'] / 1024:.0f} KiB "
                      f"rtt {cc['srtt_mean'] * 1e3:.1f} ms ecn {cc['ecn']:.0f} "
                      f"pen {cc['penalty_max']:.0f}")
        return (f"[{s.t:6.2f} {unit}] Mb/s {planes_txt} | EV bad {s.ev_bad:3d} | drops "
                f"{s.drops} trims {s.trims} ecn {s.ecn}{late}{cc_txt}")


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)

"""Start and stop a whole fabric run, in order, with roll back.

Start order (each step waits for readiness with a timeout whose message names the log):

1. the run folder ``results/runs/<run-id>/`` and the run's topology file (the source file with
   ``--rate`` and ``--delay`` applied to every link, so controller thresholds match the
   emulated links);
2. Mininet: host namespaces (with their kernel IPv6 addresses, mrcnet/fabric/hostnet.py),
   links, then every switch node of the run's kind (switch/targets/; ready = P4Runtime
   listening);
3. the controller with ``--switches`` (it becomes primary on every switch, pushes the
   pipeline and writes the path mode's tables before it prints ``listening on``), with
   ``--cp-delay`` for route withdrawal after port changes; with ``pcap`` every switch
   port's capture, through the controller (mrcnet/fabric/captures.py);
4. the run's EV format/EV profiles (ONLINE before agents register, so each agent gets them in
   its registration snapshot);
5. one agent per host in its namespace (ready = registered with the controller), each running
   the job app (mrcnet/fabric/hostjobs.py);
6. the EV event subscription, the CC profile (with NSCC: after a base RTT measurement on the
   fabric, mrcnet/fabric/base_rtt.py; jobs bound to it wait until it reached their agent)
   and the switch stats sampler; then ``fabric.json`` and the fabric registry entry
   (common/fabric_registry.py) say how to attach: each switch's gRPC address and device id,
   the controller socket.

Any failure rolls back everything started so far. ``stop()`` is idempotent and ignores
SIGINT while it runs, so Ctrl-C during a run (or a second one during the stop) never leaves
namespaces, interfaces or processes behind. Processes are stopped by the pid started.

Time: the run has one clock (``Fabric.clock``, common/vclock.py) with the time-dilation
factor ``RunOptions.tdf`` and an epoch read when the Fabric is created; every switch, the
controller and every agent get it as ``--tdf``/``--clock-epoch``. The workload runner, the
failure schedule, the live view and the results use it too (virtual seconds under
dilation); start-up timings and readiness timeouts are wall-clock. A kind of switch that
cannot run on a dilated clock (``supports_dilation``: BMv2) is refused with a TDF other than 1
before anything starts.
``Fabric.fidelity`` marks the switches' lag meters (read by the controller) and the processes'
CPU for the workloads' fidelity figures (mrcnet/fabric/fidelity.py).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import fabric_registry
from common.netns import stop_process_group, stop_process_groups, wait_until
from common.p4runtime_client import CONTROLLER_ELECTION_ID
from common.pktring import check_frames
from common.vclock import RunClock
from controller.profile_store import LB_POLICIES
from mrcnet.fabric.base_rtt import measure_base_rtt
from mrcnet.fabric.builder import MininetFabric
from mrcnet.fabric.captures import Captures
from mrcnet.fabric.ctlclient import CC_PROFILE, EV_PROFILE, CtlClient
from mrcnet.fabric.fidelity import FidelityMonitor, controller_timings
from mrcnet.fabric.liveview import EvTracker, StatsSampler
from mrcnet.fabric.plan import FabricPlan, derive_topology, make_plan, receive_ring_bytes
from mrcnet.fabric.runparams import (
    CC_CHOICES,
    ack_timeout_exponent,
    agent_transport,
    circuit_agent,
    core_tuning,
)
from mrcnet.fabric.workloads import WorkloadRunner
from switch.targets import DEFAULT_KIND, target_class
from topologies.loader import load, resolve
from topologies.model import FabricKind, Link, PathMode, Topology
from topologies.paths import base_rtt

REPO = Path(__file__).resolve().parents[2]


LB_CHOICES = LB_POLICIES  # RunOptions.lb: the EV profile's spraying policy


METRICS_INTERVAL = 0.5  # s between the agents' qlog metrics (what the live view reads)
class FabricError(RuntimeError):
    """Start-up failed (everything started was rolled back); the message names the log."""


@dataclass
class RunOptions:
    topology: str = "clos-2p"
    switch: str = DEFAULT_KIND  # kind of switch node (switch.targets.kinds())
    mode: str | None = None  # default: the topology's path mode
    rate: str | None = "100Mbps"  # every link's rate (None: as in the file)
    delay: str | None = None  # every link's one-way delay (None: as in the file)
    cp_delay: float = 1.0  # control-plane delay before route withdrawal/restoration
    window: int = 128 << 10  # bytes in flight per QP (fixed-window CC)
    # The workloads' congestion control: "fixed" (the window above) or "nscc" (CC profile 1).
    # NSCC is not the default: it meets its targets in faithful runs, not in CPU-bound TDF 1
    # runs with fast links (docs/fabric.md, "Congestion control").
    cc: str = "fixed"
    lb: str = "rotation"  # load balancing of the run's EV profile: rotation, reps, bitmap
    cc_qp: str | None = None  # "HOST:QPN" whose congestion control cc.png plots (ccplot.py)
    results_root: Path = REPO / "results" / "runs"
    prefix: str | None = None  # run prefix for interfaces (default: random "m" + 4 hex)
    show: bool = False  # live view lines on stderr
    pcap: bool = False  # one pcap per switch port under <run dir>/pcap/
    sample_interval: float = 0.5  # seconds of the run's clock
    tdf: float = 1.0  # time-dilation factor of the run's clock (common/vclock.py)
    # Lag (virtual seconds) up to which a process counts as on time; None: the time one
    # MTU-sized frame takes on the fastest link (see lag_tolerance()).
    lag_tolerance: float | None = None
    # Wake-up coalescing slack of switches and agents (virtual seconds, common/coalesce.py):
    # 0 (off) by default: measured on clos-2p at TDF 200 it saved a quarter of the wake-ups
    # but no CPU, and doubled the time processes spent behind schedule (docs/switch.md);
    # None: half the lag tolerance.
    coalesce: float | None = 0.0
    rx_ring: int | None = None  # receive ring slots per switch port (None: the kind's default)
    # Transport-core knobs for the agents (mrcnet/fabric/runparams.py says why these).
    core_tuning: dict[str, float | int | None] = field(default_factory=core_tuning)


RING_MEMORY_SHARE = 0.5  # of the memory available, at most this much for receive rings


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def lag_tolerance(topo: Topology) -> float:
    """The run's on-time budget: one MTU-sized frame's time on the fastest link (a process
    later than that reorders the emulated network's events by a whole packet); 2 ms when no
    link has a rate."""
    rates = [ln.params.rate_bps for ln in topo.links if ln.params.rate_bps > 0]
    return topo.fabric.mtu * 8 / max(rates) if rates else 2e-3


class Fabric:
    """One running fabric. Use as a context manager or call ``start()`` / ``stop()``."""

    def __init__(self, opts: RunOptions) -> None:
        self.opts = opts
        self.prefix = opts.prefix or "m" + secrets.token_hex(2)
        self.run_id = time.strftime("%Y%m%d-%H%M%S-") + self.prefix
        self.run_dir = Path(opts.results_root) / self.run_id
        self.clock = RunClock(opts.tdf, time.monotonic())  # ClockError on a bad factor
        self.fidelity: FidelityMonitor | None = None
        self.lag_tolerance = 0.0  # set at start (RunOptions.lag_tolerance or the topology's)
        self.coalesce = 0.0  # wake-up coalescing slack of switches and agents (set at start)
        self.proc_args: list[str] = []  # clock and lag flags of every switch and agent
        self.topo: Topology | None = None
        self.plan: FabricPlan | None = None
        self.mn: MininetFabric | None = None
        self.ctl: CtlClient | None = None
        self.tracker = EvTracker(clock=self.clock.now)
        self.sampler: StatsSampler | None = None
        self.runner: WorkloadRunner | None = None
        self.controller: subprocess.Popen[bytes] | None = None
        self.agents: dict[str, subprocess.Popen[bytes]] = {}
        self.captures: Captures | None = None
        self.started = time.time()
        self.sock_dir: Path | None = None
        self.mode: PathMode | None = None
        self.timings: dict[str, float] = {}
        self.cli_workloads: list[dict[str, Any]] = []  # summaries of workloads run from the CLI
        self.link_log: list[dict[str, Any]] = []  # link/port changes: t (tracker clock), link, up
        self.calibration: dict[str, Any] = {}  # the CC profile's base RTT and parameters
        self._stopped = False

    def __enter__(self) -> Fabric:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def say(self, text: str) -> None:
        print(f"[mrcnet] {text}", file=sys.stderr, flush=True)

    # -- start -----------------------------------------------------------------------------
    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _step(self, name: str, t0: float) -> None:
        self.timings[name] = round(time.monotonic() - t0, 3)

    def _start(self) -> None:
        opts = self.opts
        if opts.cc not in CC_CHOICES:
            raise ValueError(f"congestion control {opts.cc!r}: one of {', '.join(CC_CHOICES)}")
        if opts.rx_ring is not None:
            check_frames(opts.rx_ring)
        if opts.lb not in LB_CHOICES:
            raise ValueError(f"load balancing {opts.lb!r}: one of {', '.join(LB_CHOICES)}")
        t0 = time.monotonic()
        try:
            kind = target_class(opts.switch)
        except ValueError as exc:
            raise FabricError(str(exc)) from None
        if not kind.available():
            raise FabricError(kind.unavailable_reason())
        if self.clock.dilated and not kind.supports_dilation:
            raise FabricError(f"--tdf {opts.tdf:g}: {kind.label} runs on the wall clock and "
                              f"cannot be dilated; use --tdf 1 or the {DEFAULT_KIND} switch")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        load(opts.topology)  # TopologyError: every problem of the file, nothing started yet
        topo_path = derive_topology(resolve(opts.topology), self.run_dir / "topology.yaml",
                                     opts.rate, opts.delay)
        self.topo = topo = load(str(topo_path))
        self.mode = mode = PathMode(opts.mode) if opts.mode else topo.fabric.path_mode
        self.plan = plan = make_plan(topo, mode, self.prefix)
        self.say(f"run {self.run_id}: {topo.name}, {len(plan.switches)} switches "
                 f"({opts.switch}), {len(plan.hosts)} hosts, mode {mode.value}, "
                 f"links {opts.rate or 'as in the file'}; results in {self.run_dir}")
        if self.clock.dilated:
            self.say(f"time dilation: TDF {self.clock.tdf:g} (a virtual second lasts "
                     f"{self.clock.tdf:g} wall seconds; times and rates below are virtual)")
        self.lag_tolerance = opts.lag_tolerance or lag_tolerance(topo)
        self.coalesce = (self.lag_tolerance / 2 if opts.coalesce is None else opts.coalesce)
        self.proc_args = [*self.clock.args(), "--lag-tolerance", repr(self.lag_tolerance),
                          "--coalesce", repr(self.coalesce)]
        # receive rings: sized per port by the switch from its link and the TDF, for frames
        # of the fabric's MTU (common/pktring.py frames_for), unless a size is asked for
        ring = ["--mtu", str(topo.fabric.mtu)]
        if opts.rx_ring is not None:
            ring += ["--rx-ring", str(opts.rx_ring)]
        if kind.takes_run_flags:
            rings = receive_ring_bytes(topo, opts.tdf, opts.rx_ring)
            available = mem_available()
            if available is not None and rings > RING_MEMORY_SHARE * available:
                raise FabricError(
                    f"the switches' receive rings need {rings / 2**30:.2f} GiB of kernel memory "
                    f"({sum(len(s.ifnames) for s in plan.switches)} ports at TDF "
                    f"{opts.tdf:g}), more than {RING_MEMORY_SHARE:.0%} of the "
                    f"{available / 2**30:.2f} GiB available: a larger --tdf sizes them smaller "
                    "(common/pktring.py frames_for), or --rx-ring N gives every port N slots "
                    "of 16 KiB (0: no ring)")
            self.say(f"receive rings: {rings / 2**20:.0f} MiB of kernel memory over the "
                     "switches' ports")
        self.mn = MininetFabric(plan, self.run_dir, opts.switch, [*self.proc_args, *ring])
        self.mn.build()
        self.mn.start_switches()
        for note in self.mn.notes():
            self.say(note)
        self._step("switches", t0)
        self._start_controller(topo_path, mode)
        self._step("controller", t0)
        assert self.ctl is not None
        self.captures = Captures(self.run_dir, self.ctl,
                                 {s.name: sorted(s.ifnames) for s in plan.switches})
        if opts.pcap:
            count = self.captures.start_all()
            self.say(f"capturing {count} switch ports into {self.captures.dir}")
        self.ctl.setup_profiles(topo, mode, opts.lb)
        self._start_agents(mode)
        self._step("agents", t0)
        self.ctl.watch_run_events(self.tracker.on_event)
        self.fidelity = FidelityMonitor(self.clock, controller_timings(self.ctl.switch_stats),
                                        self.pids)
        self.runner = WorkloadRunner(self.run_dir, [h.name for h in plan.hosts], EV_PROFILE,
                                     self.clock, topo, self.fidelity, self.cc_profile)
        self.runner.on_qp_released = self.tracker.retire  # released QPs have no EV states
        self._setup_cc(topo)
        self._step("cc_profile", t0)
        if not self.circuit:  # the live view samples packet switches' per-plane counters
            self.sampler = StatsSampler(topo, self.ctl.switch_stats, self.tracker,
                                        opts.sample_interval, show=opts.show, clock=self.clock,
                                        qlog_dir=self.run_dir / "qlog")
            self.sampler.start()
        info = self._write_state("running")
        fabric_registry.register(self.prefix, info)
        self.say(f"fabric up in {time.monotonic() - t0:.1f} s")
        self.say(f"controller socket {info['controller']} (mrcnet ctl finds it); switches "
                 f"(P4Runtime, controller election id {info['election_id']}):")
        for name, sw in info["switches"].items():
            self.say(f"  {name:<16} {sw['grpc']:<22} device {sw['device_id']}")

    def _setup_cc(self, topo: Topology) -> None:
        """CC profile 1: with NSCC on a packet fabric, scaled for the base RTT measured on the
        running fabric (mrcnet/fabric/base_rtt.py), else for the topology's."""
        assert self.ctl is not None and self.runner is not None
        base: float | None = None
        if self.opts.cc == "nscc" and not self.circuit:
            self.calibration = measure_base_rtt(self.runner, topo, self.check_alive)
            base = self.calibration["base_rtt"]
        nscc = self.ctl.setup_cc_profile(topo, base)
        self.calibration["nscc"] = {f.name: v for f, v in nscc.ListFields()}
        self.runner.ack_timeout = ack_timeout_exponent(base or base_rtt(topo))
        self.calibration["ack_timeout"] = self.runner.ack_timeout
        if base is not None:
            self.say(f"NSCC scaled for a base RTT of {base * 1e3:.2f} ms (measured "
                     f"{(self.calibration['measured_min_rtt'] or 0) * 1e3:.2f} ms, topology "
                     f"{self.calibration['topology_base_rtt'] * 1e3:.2f} ms)")

    def _write_state(self, state: str) -> dict[str, Any]:
        """``fabric.json``: how to attach (``mrcnet run --attach``, ``mrcnet ctl``,
        p4runtime-shell): hosts, switches' gRPC addresses and device ids, controller socket."""
        if self.plan is None:
            return {}
        switches = {}
        if self.mn is not None:
            switches = {n: {"grpc": sw.grpc_address, "device_id": sw.device_id}
                        for n, sw in self.mn.switches.items()}
        info: dict[str, Any] = {
            "state": state, "pid": os.getpid(), "prefix": self.prefix, "started": self.started,
            "results_dir": str(self.run_dir),
            "hosts": [h.name for h in self.plan.hosts], "ev_profile": EV_PROFILE,
            "addresses": {h.name: [p.gid for p in h.ports] for h in self.plan.hosts},
            "cc_profile": self.cc_profile,
            "topology": str(self.run_dir / "topology.yaml"),
            "mode": self.mode.value if self.mode else None,
            "tdf": self.clock.tdf, "clock_epoch": self.clock.epoch,
            "controller": str(self.sock_dir / "ctl.sock") if self.sock_dir else None,
            "election_id": {"high": CONTROLLER_ELECTION_ID >> 64,
                            "low": CONTROLLER_ELECTION_ID & ((1 << 64) - 1)},
            "switches": switches,
            "pcap_dir": str(self.captures.dir) if self.captures and self.captures.active else None,
        }
        (self.run_dir / "fabric.json").write_text(json.dumps(info, indent=1))
        return info

    def _start_controller(self, topo_path: Path, mode: PathMode) -> None:
        assert self.mn is not None
        smap = self.run_dir / "switches.json"
        smap.write_text(json.dumps(self.mn.switch_map(), indent=1))
        self.sock_dir = Path(tempfile.mkdtemp(prefix=f"mrcnet-{self.prefix}-"))
        sock = self.sock_dir / "ctl.sock"
        log = self.run_dir / "controller.log"
        cmd = [sys.executable, "-m", "controller.server", "--unix", str(sock), "--topology",
               str(topo_path), "--switches", str(smap), "--mode", mode.value,
               "--cp-delay", str(self.opts.cp_delay), *self.clock.args()]
        with open(log, "wb") as out:
            self.controller = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True,
                                               cwd=REPO)
        proc = self.controller

        def ready() -> bool:
            if proc.poll() is not None:
                raise FabricError(f"controller exited ({proc.returncode}) during start-up: "
                                  f"{log.read_text(errors='replace').strip()[-600:]} "
                                  f"(log {log})")
            return "listening on" in log.read_text(errors="replace")

        wait_until(ready, 90, f"the controller to program the switches (log {log})", 0.05)
        self.ctl = CtlClient(f"unix:{sock}")

    @property
    def cc_profile(self) -> int:
        """The CC profile the run's workloads bind their QPs to (0: the fixed window)."""
        return CC_PROFILE if self.opts.cc == "nscc" else 0

    @property
    def circuit(self) -> bool:
        """A photonic scale-up domain (GPUs around an OCS) rather than a packet fabric."""
        return self.topo is not None and self.topo.fabric.kind == FabricKind.CIRCUIT

    def agent_config(self, host: str, mode: PathMode) -> dict[str, Any]:
        assert self.plan is not None and self.sock_dir is not None
        extra: dict[str, Any] = {}
        core = dict(self.opts.core_tuning)
        if self.circuit:  # GPUs: built-in router, one EV per routing bucket
            extra = circuit_agent(self.plan, host, self.opts.window, core)
        return {
            **agent_transport(self.plan, host, mode, self.opts.window, core),
            "qlog_dir": str(self.run_dir / "qlog"),
            "metrics_interval": METRICS_INTERVAL,
            "controller": f"unix:{self.sock_dir / 'ctl.sock'}",
            "apps": [{"target": "mrcnet.fabric.hostjobs:serve",
                      "args": {"jobs_dir": str(self.run_dir / "jobs" / host)}}],
            **extra,
        }

    def _start_agents(self, mode: PathMode) -> None:
        assert self.plan is not None and self.mn is not None
        adir = self.run_dir / "agents"
        adir.mkdir(exist_ok=True)
        logs = {}
        for h in self.plan.hosts:
            cfg = adir / f"{h.name}.json"
            cfg.write_text(json.dumps(self.agent_config(h.name, mode), indent=1))
            log = logs[h.name] = adir / f"{h.name}.log"
            with open(log, "wb") as out:
                self.agents[h.name] = self.mn.hosts[h.name].popen(
                    [sys.executable, "-m", "hosts", "--config", str(cfg),
                     *self.proc_args],
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(REPO))

        def ready() -> bool:
            for name, proc in self.agents.items():
                if proc.poll() is not None:
                    raise FabricError(f"agent {name} exited ({proc.returncode}) during start-up:"
                                      f" {logs[name].read_text(errors='replace')[-600:]} "
                                      f"(log {logs[name]})")
            return all(f"agent {n} ready" in logs[n].read_text(errors="replace")
                       for n in self.agents)

        wait_until(ready, 60, f"agents to register (logs in {adir})", 0.05)

    # -- operations --------------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        """Process name -> pid of every process of the run that is running now."""
        out: dict[str, int] = {}
        if self.controller is not None and self.controller.poll() is None:
            out["controller"] = self.controller.pid
        for name, proc in self.agents.items():
            if proc.poll() is None:
                out[f"agent-{name}"] = proc.pid
        if self.mn is not None:
            for name, sw in self.mn.switches.items():
                if sw.pid is not None and sw.alive():
                    out[name] = sw.pid
        return out

    def switch_detail(self, names: list[str] | None = None) -> dict[str, Any]:
        """Switch -> its per-port statistics (GetPortsResponse) as its driver reads them, for
        the named switches (all by default); FabricError when one cannot be read."""
        assert self.ctl is not None
        out = {}
        for sw in self.ctl.switch_stats(names, detail=True).switches:
            if sw.error:
                raise FabricError(f"switch {sw.name}: {sw.error}")
            out[sw.name] = sw.detail
        return out

    def log_link(self, label: str, up: bool) -> None:
        self.link_log.append({"t": self.clock.now() - self.tracker.t0, "link": label, "up": up})

    def set_link(self, endpoint: str, label: str, up: bool) -> Any:
        """A link change through the controller, recorded for the results."""
        assert self.ctl is not None
        view = self.ctl.set_link(endpoint, up)
        self.log_link(label, up)
        return view

    def set_links(self, links: Sequence[Link], label: str, up: bool) -> None:
        """Several links down or up through the controller (a plane: all of its links),
        recorded once for the results."""
        assert self.ctl is not None
        for link in links:
            self.ctl.set_link(str(link.a), up)
        self.log_link(label, up)

    def set_plane(self, plane: int, up: bool) -> None:
        """Every link of plane ``plane`` down or up (mrcnet.fabric.failures.plane_links)."""
        from mrcnet.fabric.failures import plane_links

        assert self.topo is not None
        self.set_links(plane_links(self.topo, plane), f"plane {plane}", up)

    def set_host_port(self, host: str, port: int, up: bool) -> None:
        assert self.mn is not None
        self.mn.set_host_port(host, port, up)
        self.log_link(f"{host}:{port}", up)

    def host_counters(self, timeout: float = 15.0) -> dict[str, dict[str, int]]:
        """Every agent's ``HostCore.host_stats()`` (the hosts' mechanism counters), asked for
        through a ``host_stats`` job; hosts that did not answer in time are left out."""
        return {host: dict(res.get("host_stats", {}))
                for host, res in self._host_stats_jobs(timeout).items()}

    def open_qps(self, timeout: float = 15.0) -> dict[str, list[int]]:
        """The QP numbers every agent holds (a finished workload leaves none behind)."""
        return {host: [int(q) for q in res.get("open_qps", [])]
                for host, res in self._host_stats_jobs(timeout).items()}

    def _host_stats_jobs(self, timeout: float) -> dict[str, dict[str, Any]]:
        from hosts.bulk import write_json

        if self.plan is None or not self.agents:
            return {}
        tag = f"stats{time.monotonic_ns()}"
        paths = {}
        for h in self.plan.hosts:
            d = self.run_dir / "jobs" / h.name
            d.mkdir(parents=True, exist_ok=True)
            write_json(d / f"{tag}.job.json", {"id": tag, "role": "host_stats"})
            paths[h.name] = d / f"{tag}.result.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not all(p.exists() for p in paths.values()):
            time.sleep(0.02)
        return {host: dict(json.loads(path.read_text()))
                for host, path in paths.items() if path.exists()}

    def check_alive(self) -> None:
        """Raise FabricError if a process of the run died."""
        if self.controller is not None and self.controller.poll() is not None:
            raise FabricError(f"the controller exited; see {self.run_dir / 'controller.log'}")
        for name, proc in self.agents.items():
            if proc.poll() is not None:
                raise FabricError(f"agent {name} exited ({proc.returncode}); see "
                                  f"{self.run_dir / 'agents' / (name + '.log')}")
        if self.mn is not None:
            for name, sw in self.mn.switches.items():
                if not sw.alive():
                    raise FabricError(f"switch {name} exited; see {sw.log_path}")

    # -- stop --------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop everything this run started (idempotent; SIGINT and SIGTERM, which the CLI
        turns into KeyboardInterrupt, are ignored meanwhile so the clean-up runs to the end)."""
        if self._stopped:
            return
        self._stopped = True
        previous: dict[signal.Signals, Any] = {}
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass
        try:
            self._stop_all()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop_all(self) -> None:
        fabric_registry.unregister(self.prefix)
        if (self.run_dir / "fabric.json").exists():
            self._write_state("stopped")
        if self.sampler is not None:
            self.sampler.stop()
        if self.fidelity is not None:
            self.fidelity.close()
        agents, self.agents = list(self.agents.values()), {}
        stop_process_groups(agents)  # together: one timeout for all, not one each
        if self.captures is not None:  # through the controller, before it stops
            self.captures.stop_all()
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        if self.controller is not None:
            stop_process_group(self.controller)
            self.controller = None
        if self.mn is not None:
            self.mn.stop()
        if self.sock_dir is not None:
            shutil.rmtree(self.sock_dir, ignore_errors=True)
            self.sock_dir = None



"""The agent's controller link against a real controller (unix socket, clos-2p) and a real
HostCore behind a minimal stand-in agent (no NIC, no loop thread)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.proto import mrc_ctl_pb2 as pb
from controller.server import ControllerServer, ServerConfig, start
from hosts.agent.config import parse_config
from hosts.agent.corecfg import build_core
from hosts.agent.ctl_link import CtlLink, CtlLinkError
from hosts.transport import EvState, EvStateChanged
from mrcnet.fabric.ctlclient import CC_PROFILE, EV_PROFILE, CtlClient, ev_array
from topologies.loader import load
from topologies.model import PathMode


class StandInAgent:
    """What CtlLink uses of hosts.agent.Agent: config, port_up, core, call, now, handlers."""

    def __init__(self, host: str) -> None:
        self.config = parse_config({"name": host, "ev_mode": "stev", "ports": [
            {"ifname": f"{host}p{p}", "mac": f"02:00:00:00:00:0{p}",
             "gid": f"fd00:6d72:6300:{p}::1", "neighbor_mac": "02:01:00:00:00:01"}
            for p in (0, 1)]})
        self.port_up = [True, True]
        self.core = build_core(self.config)
        self.lock = threading.Lock()
        self.handlers: list[Callable[[object, float], None]] = []

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        with self.lock:
            return fn(*args)

    def now(self) -> float:
        return time.monotonic()

    def add_handler(self, h: Callable[[object, float], None]) -> None:
        self.handlers.append(h)

    def remove_handler(self, h: Callable[[object, float], None]) -> None:
        self.handlers.remove(h)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControllerServer]:
    srv = start(ServerConfig(unix=str(tmp_path / "ctl.sock"), topology="clos-2p", max_workers=16))
    yield srv
    srv.stop()


def _wait(pred: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not pred():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_profiles_denials_and_reports(server: ControllerServer) -> None:
    ctl = CtlClient(server.address)
    ctl.setup_profiles(load("clos-2p"), PathMode.STEV, "reps")
    ctl.setup_cc_profile(load("clos-2p"), 2e-3)
    agent = StandInAgent("h0")
    link = CtlLink(agent, server.address)  # type: ignore[arg-type]
    link.start()
    events: queue.Queue[pb.EvEvent] = queue.Queue()
    try:
        # the snapshot at registration installed profile 1: the controller's array,
        # 1-based ports turned into NIC port indexes
        _fmt, _w, evs = ev_array(load("clos-2p"), PathMode.STEV)
        core_prof = agent.core._ev_profiles[EV_PROFILE]
        assert [(e.ev, e.port) for e in core_prof.entries] == [
            (int(e.value), int(e.port) - 1) for e in evs]
        assert core_prof.spray == "reps"  # the profile's load balancing
        cc = agent.core._cc_profiles[CC_PROFILE]  # the NSCC profile, stored by the core
        assert cc.algorithm == "uet-1.0-nscc" and cc.params["mtu"] == 4096
        assert cc.params["base_rtt_ns"] == 2_000_000  # the base RTT the orchestrator gave
        _wait(lambda: ctl.agents() == {"h0": True}, "agent attached")
        # DENY: sent to the agent, the EV leaves the profile new QPs bind to
        ctl.set_ev_state([(0x100, 1)], pb.EV_DENIED)
        _wait(lambda: (0x100, 0) not in [(e.ev, e.port) for e in
                                         agent.core._ev_profiles[EV_PROFILE].entries],
              "denied EV removed from the core's profile")
        assert link.denied[EV_PROFILE] == {0x100}
        ctl.set_ev_state([(0x100, 1)], pb.EV_GOOD)
        _wait(lambda: (0x100, 0) in [(e.ev, e.port) for e in
                                     agent.core._ev_profiles[EV_PROFILE].entries],
              "denial lifted")
        # datapath reports reach subscribers; SKIP -> GOOD is not reported
        ctl.watch_events(events.put)
        _wait(lambda: ctl.fabric.GetStatistics(pb.GetStatisticsRequest())
              .counters["event_subscribers"] == 1, "the subscription")
        report = link._on_core_event
        report(EvStateChanged(17, EV_PROFILE, 0x80000101, 1, EvState.GOOD,
                              EvState.ASSUMED_BAD, "loss"), 0.0)
        report(EvStateChanged(17, EV_PROFILE, 0x80000102, 1, EvState.SKIP, EvState.GOOD,
                              "ecn"), 0.0)
        report(EvStateChanged(17, EV_PROFILE, 0x80000101, 1, EvState.ASSUMED_BAD,
                              EvState.GOOD, "probe"), 0.0)
        report(EvStateChanged(17, 99, 0x1, 0, EvState.GOOD, EvState.ASSUMED_BAD, "x"), 0.0)
        got = [events.get(timeout=5), events.get(timeout=5)]
        assert [(e.host, e.qpn, e.ev.value, e.ev.port, e.state) for e in got] == [
            ("h0", 17, 0x80000101, 2, pb.EV_ASSUMED_BAD), ("h0", 17, 0x80000101, 2, pb.EV_GOOD)]
        assert events.empty()
    finally:
        link.close()
        ctl.close()
    link.close()  # idempotent


def test_registration_refused_names_the_reason(server: ControllerServer) -> None:
    agent = StandInAgent("h9")  # not a host of clos-2p
    with pytest.raises(CtlLinkError, match="NOT_FOUND"):
        CtlLink(agent, server.address).start()  # type: ignore[arg-type]

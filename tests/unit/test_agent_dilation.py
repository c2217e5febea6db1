"""The agent loop on a dilated clock (no root: a socketpair NIC and the stand-in core).

A core timer is virtual time: with TDF N the loop must wait N times longer on the wall clock
before it fires, hand the core a ``now`` on the run's clock, and count the timer in its lag
meter; qlog files say which clock their times are on.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from common.netns import wait_until
from common.vclock import RunClock
from hosts.agent.agent import Agent
from hosts.agent.qlog import read_qlog
from tests.unit.test_agent_loop import StubCore, agent_config, socket_pair_ports


@pytest.mark.parametrize("tdf", [1.0, 5.0])
def test_core_timer_fires_after_the_dilated_wait(tdf: float, tmp_path: Path) -> None:
    pa, pb = socket_pair_ports()
    core = StubCore()
    clock = RunClock(tdf)
    cfg = agent_config("hx", "fd00::1", "02:00:00:00:00:02", "02:00:00:00:00:01",
                       qlog_dir=str(tmp_path), metrics_interval=10.0)
    agent = Agent(cfg, core, monitor_links=False, ports=[pa], run_clock=clock)
    agent.start()
    try:
        assert agent.clock is clock.now
        wall0 = time.monotonic()
        due = agent.call(lambda: setattr(core, "timer_at", clock.now() + 0.03) or core.timer_at)
        wait_until(lambda: bool(core.timer_calls), 10, "the core timer to fire")
        wall = time.monotonic() - wall0
        assert wall >= 0.03 * tdf * 0.98  # never early on the wall clock
        assert core.timer_calls[0] >= due  # the core's now is the run's clock
        snap = agent.timing()
        assert snap["tdf"] == tdf and snap["events"] >= 1
        assert snap["idle_s"] > 0.0
    finally:
        agent.stop()
        pb.close()
    header, _events = read_qlog(tmp_path / "hx-agent.sqlog")
    assert header["trace"]["common_fields"]["time_dilation"] == tdf

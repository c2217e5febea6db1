"""The controller on the run's clock: the control-plane delay is virtual time."""

from __future__ import annotations

import threading
import time

import pytest

from common.vclock import RunClock
from controller.convergence import Convergence
from controller.core import Controller
from topologies.loader import load
from topologies.model import PathMode
from topologies.routes import switch_tables


@pytest.mark.parametrize("tdf", [1.0, 6.0])
def test_cp_delay_waits_tdf_times_longer_on_the_wall_clock(tdf: float) -> None:
    topo = load("clos-2p")
    clock = RunClock(tdf)
    conv = Convergence(topo, switch_tables(topo, PathMode.STEV), {}, delay=0.02, clock=clock)
    fired = threading.Event()
    at: list[float] = []

    def reconcile() -> int:
        at.append(time.monotonic())
        fired.set()
        return 0

    conv.reconcile = reconcile  # type: ignore[method-assign]
    t0 = time.monotonic()
    conv.port_changed("p0-leaf0", 3, False)
    assert fired.wait(10)
    assert at[0] - t0 >= 0.02 * tdf * 0.98
    stamp = conv.history.port_events[0][0]
    assert stamp == pytest.approx(clock.unix(), abs=1.0)  # Unix time on the run's clock
    conv.close()


def test_controller_keeps_the_run_clock_for_its_timers() -> None:
    clock = RunClock(3.0)
    ctl = Controller(load("clos-2p"), clock=clock)
    assert ctl.clock is clock
    assert Controller(load("clos-2p")).clock.tdf == 1.0

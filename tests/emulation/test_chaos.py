"""Bounded chaos (mrcnet/fabric/chaos.py): random link flaps, host port flaps and one
whole-plane outage while all-to-all MRC rounds keep running on clos-2p, and GPU port flaps
during a collective on the photonic domain (scaleup-ocs, the CollectiveDriver's own
settings). Zero bytes lost (every round verified against an independent hash), zero QP
errors, every fault applied, and nothing of either run left on the machine. The soak (the
same for minutes) runs with ``--slow``, or as ``mrcnet bench chaos``.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.collectives import build
from controller.harvest.model import Params
from hosts.collective.runner import expected_sum
from mrcnet.fabric.chaos import ChaosSpec, leftovers, port_flaps, run_packet_chaos
from mrcnet.fabric.collectives import CollectiveDriver
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from mrcnet.fabric.scenario import apply_event

pytestmark = pytest.mark.emulation

SIZE = 1 << 20


def _packet_fabric_chaos(prefix: str, root: Path, duration: float, seed: int) -> dict[str, Any]:
    return run_packet_chaos(RunOptions(topology="clos-2p", prefix=prefix, results_root=root,
                                       cp_delay=2.0, show=False),
                            ChaosSpec(duration=duration, seed=seed), SIZE)


def test_chaos_on_a_packet_fabric(run_prefix: str, tmp_path: Path) -> None:
    out = _packet_fabric_chaos(run_prefix, tmp_path, duration=15.0, seed=7)
    print(f"chaos: {out}")
    assert out["passed"], out
    assert out["kinds"] == ["link", "plane", "port"] and out["faults"] >= 8
    assert out["rounds"] >= 2 and out["leftovers"] == [], out


def test_chaos_during_a_collective_on_the_photonic_domain(run_prefix: str,
                                                          tmp_path: Path) -> None:
    """Recursive-doubling AllReduce under the Harvest schedule while GPU ports flap: every
    GPU ends with the exact sum of all inputs, no QP in ERR."""
    fab = Fabric(RunOptions(topology="scaleup-ocs", rate="20Mbps", window=128 << 10,
                            prefix=run_prefix, results_root=tmp_path, show=False))
    seed = 5
    size = 2 << 20  # per GPU: the collective lasts seconds, the flaps fall inside it
    applied: list[tuple[float, str]] = []
    errors: list[str] = []
    try:
        fab.start()
        assert fab.topo is not None
        driver = CollectiveDriver(fab, timeout=90)
        coll = build("rd", 8)
        params = Params(1, 20e6, 1e-3, 1e-4, 0.03)
        sched = driver.schedules_for(coll, size, 1, params, ["harvest"])[0]
        plan = driver.plan_for(coll, sched, size, 1, params, dark_s=0.03)
        flaps = port_flaps(fab.topo, ChaosSpec(duration=0, seed=seed, start=0.3,
                                               down=(0.2, 0.5), gap=(0.2, 0.4)), 4)
        stop = threading.Event()

        clock = fab.clock  # flap times are seconds of the run's clock, like --fail's

        def inject() -> None:
            t0 = clock.now()
            for ev in flaps:
                if stop.wait(max(0.0, clock.to_wall(t0 + ev.at - clock.now()))):
                    return
                try:
                    apply_event(fab, ev)
                    applied.append((clock.now(), f"{ev.label} {'up' if ev.up else 'down'}"))
                except Exception as exc:  # recorded: the test fails on it
                    errors.append(repr(exc))

        thread = threading.Thread(target=inject, daemon=True)
        thread.start()
        try:
            out = driver.run_plan(plan, seed=seed)
            finished = clock.now()
        finally:
            thread.join(30)
            stop.set()
    finally:
        fab.stop()
    want = expected_sum(seed, 8, "int32", size // 4)
    digest = hashlib.sha256(want.astype(np.int32).tobytes()).hexdigest()
    assert [g["sha256"] for g in out.gpus] == [digest] * 8 and out.verified is True
    assert errors == [] and len(applied) == len(flaps) == 8, (applied, errors)
    assert sum(t <= finished for t, _what in applied) >= 6, (applied, finished)  # during it
    states = {s for g in out.gpus for s in g["qp_states"].values()}
    assert states == {"RTS"}, states
    assert leftovers(run_prefix) == []


@pytest.mark.soak
def test_chaos_soak(run_prefix: str, tmp_path: Path) -> None:
    out = _packet_fabric_chaos(run_prefix, tmp_path, duration=240.0, seed=11)
    assert out["passed"], out
    assert out["leftovers"] == [], out

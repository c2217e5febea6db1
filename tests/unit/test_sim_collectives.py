"""Collectives on a simulated circuit fabric (mrcnet/sim/collective.py): the emulation's plans,
routes, runner reductions and controller protocol on the simulated clock; sums checked
against a numpy sum computed here, dark ports counted by the OCS program, the same inputs
giving the same results."""

from __future__ import annotations

import hashlib
import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.collectives import build
from common.proto import mrc_ctl_pb2 as pb
from controller.fabric import FabricState
from controller.harvest.model import Params
from hosts.collective.runner import StepTiming, make_input
from mrcnet import cmd_collective
from mrcnet.cli import main
from mrcnet.sim.collective import SimCircuitFabric, SimCollectiveDriver
from mrcnet.sim.collrun import simulate_collectives
from mrcnet.sim.fabric import build_fabric
from mrcnet.sim.gpurun import SimGpuRunner
from mrcnet.sim.ocs import SimOcs, reconfigure
from topologies.loader import load

SIZE = 64 * 1024  # 8 blocks of 8 KiB: a few milliseconds of simulated time at 1 Gb/s
DARK = 10e-6  # scaleup-ocs's reconfig_delay


def spec(run: str = "allreduce:rd", size: str = "64KiB") -> dict[str, Any]:
    args = Namespace(run=run, size=size, schedule="static,every-step,harvest", alpha_r=None,
                     degree=None, dtype="int32", barrier="all", calibration="shapes")
    return cmd_collective.prepare(args, load("scaleup-ocs"))


def numpy_sum(seed: int, n: int, count: int) -> np.ndarray:
    """Every rank's input summed in int64, wrapped to int32 (two's complement), computed
    apart from the runner's ``expected_sum``."""
    total = np.sum([make_input(seed, r, "int32", count).astype(np.int64) for r in range(n)],
                   axis=0)
    return ((total + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def test_rd_allreduce_on_8_gpus_verifies_every_schedule(tmp_path: Path) -> None:
    topo = load("scaleup-ocs")
    driver = SimCollectiveDriver(SimCircuitFabric(topo, tmp_path))
    coll = build("rd", 8, "allreduce")
    params = Params(1, 1e9, 20e-6, 2e-6, DARK)
    want = hashlib.sha256(numpy_sum(7, 8, SIZE // 4).tobytes()).hexdigest()
    measured = {}
    for sched in driver.schedules_for(coll, SIZE, 1, params, cmd_collective.DEFAULT_SCHEDULES):
        plan = driver.plan_for(coll, sched, SIZE, 1, params, DARK)
        out = driver.run_plan(plan, seed=7)
        assert out.verified is True, sched.name
        assert [g["sha256"] for g in out.gpus] == [want] * 8  # every GPU holds the sum
        assert all(s.circuits_ok for s in out.steps)  # the OCS read back the plan's circuits
        assert out.reconfigurations == sched.reconfigurations
        # the barrier's records add up, and a reconfiguring step waited the dark time out
        assert out.measured_s == pytest.approx(sum(s.gap_s + s.step_s for s in out.steps))
        for s in out.steps:
            assert s.gap_s == pytest.approx(DARK if s.reconfigured and s.step > 1 else 0.0,
                                            abs=1e-12)
        assert out.dark_drops == 0  # barrier "all": nothing in flight while ports are dark
        assert sum(g["router"]["forwarded"] for g in out.gpus) > 0 or sched.name != "static"
        measured[sched.name] = out.measured_s
    assert measured["harvest"] < measured["static"]  # multi-hop ring steps cost more


def test_results_are_byte_identical_and_model_compared(tmp_path: Path) -> None:
    topo = load("scaleup-ocs")
    a = simulate_collectives(topo, spec(), tmp_path / "a", seed=3)
    b = simulate_collectives(topo, spec(), tmp_path / "b", seed=3)
    text = json.dumps(a.results, sort_keys=True)
    assert text == json.dumps(b.results, sort_keys=True)
    res = a.results
    assert res["verified"] is True and res["simulated"] is True
    for name in ("static", "every-step", "harvest"):
        row = res["schedules"][name]
        assert row["verified"] is True
        assert row["ratio"] == pytest.approx(row["measured_s"] / row["model_s"])
        assert 0.5 < row["ratio"] < 2.0
    assert res["calibration"]["bandwidth_bps"] > 0
    assert res["sim"]["events"] > 0


def test_a_corrupted_reduction_fails_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    original = SimGpuRunner.apply_arrivals

    def corrupt(self: SimGpuRunner, i: int, timing: StepTiming) -> None:
        original(self, i, timing)
        if self.rank == 5 and i == 3:  # its last reduce-scatter step: the block it owns
            self.data += 1  # is off by one, and the all-gather spreads it

    monkeypatch.setattr(SimGpuRunner, "apply_arrivals", corrupt)
    res = simulate_collectives(load("scaleup-ocs"), spec(), tmp_path, seed=1).results
    assert res["verified"] is False
    assert all(row["verified"] is False for row in res["schedules"].values())
    out = tmp_path / "cli"
    assert main(["sim", "scaleup-ocs", "--size", "64KiB", "--schedule", "static",
                 "--out", str(out)]) == 1
    (run_dir,) = out.iterdir()
    assert json.loads((run_dir / "results.json").read_text())["verified"] is False


class Capture:
    def __init__(self) -> None:
        self.got: list[tuple[float, int, bytes]] = []
        self.now = lambda: 0.0

    def receive(self, port: int, frame: bytes) -> None:
        self.got.append((self.now(), port, frame))


def test_frames_meeting_a_reconfiguring_port_are_dropped_and_counted() -> None:
    topo = load("scaleup-ocs")
    fab = build_fabric(topo)
    caps = {g: Capture() for g in ("g1", "g2")}
    for g, cap in caps.items():
        cap.now = fab.sched.clock
        fab.attach(g, 0, cap)
    ocs = SimOcs(fab)
    state = FabricState(topo, ocs)
    to_g1 = [pb.Circuit(src="g0:0", dst="g1:0")]
    to_g2 = [pb.Circuit(src="g0:0", dst="g2:0")]
    state.reconfigure(to_g1)
    frame = bytes(range(200))  # light: the OCS forwards any bytes
    fab.send("g0", 0, frame)
    fab.sched.run()
    assert [f for _, _, f in caps["g1"].got] == [frame] and ocs.dark_drops() == 0
    done: list[float] = []
    dark = 1e-3
    t0 = fab.sched.now
    assert reconfigure(state, ocs, to_g2, dark, lambda: done.append(fab.sched.now))
    fab.send("g0", 0, frame)  # into the dark port
    fab.sched.run(until=t0 + dark / 2)
    fab.send("g0", 0, frame)  # still dark
    fab.sched.run()
    assert done == [pytest.approx(t0 + dark)]
    assert ocs.dark_drops() == 2
    assert len(caps["g1"].got) == 1 and caps["g2"].got == []
    assert ocs.read_circuits() == state.cross_connects
    fab.send("g0", 0, frame)  # the new circuit carries it to g2
    fab.sched.run()
    assert [f for _, _, f in caps["g2"].got] == [frame] and ocs.dark_drops() == 2
    # an unchanged circuit set darkens nothing
    assert not reconfigure(state, ocs, to_g2, dark, lambda: None)


def test_swing_on_both_ports_and_the_cli_writes_the_same_bytes(tmp_path: Path) -> None:
    """Swing at degree 2 (both optical ports of every GPU, routes forwarded by the GPUs'
    routers); two runs of the command write the same results.json."""
    argv = ["sim", "scaleup-ocs", "--run", "allreduce:swing", "--size", "64KiB",
            "--schedule", "static,harvest"]
    raws = []
    for name in ("a", "b"):
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
        (run_dir,) = (tmp_path / name).iterdir()
        raws.append((run_dir / "results.json").read_bytes())
    assert raws[0] == raws[1]
    res = json.loads(raws[0])
    assert res["degree"] == 2 and res["verified"] is True
    assert set(res["schedules"]) == {"static", "harvest"}
    for run in res["runs"]:
        assert run["verified"] is True and run["ratio"] == pytest.approx(
            run["measured_s"] / run["model_s"])
        assert sum(s["step_s"] + s["gap_s"] for s in run["steps"]) == pytest.approx(
            run["measured_s"])


def test_barrier_early_starts_the_reconfiguration_when_the_listed_gpus_arrived(
        tmp_path: Path) -> None:
    """The controller's protocol under barrier "early", driven by hand: step 2 starts a new
    interval and lists GPUs 0 and 1; their arrival starts the dark time, the others arrive
    during it, the step is released when both the dark time and the last arrival are over."""
    import dataclasses

    from mrcnet.sim.barrier import SimSession

    topo = load("scaleup-ocs")
    driver = SimCollectiveDriver(SimCircuitFabric(topo, tmp_path))
    coll = build("rd", 8, "allreduce")
    params = Params(1, 1e9, 20e-6, 2e-6, DARK)
    (sched,) = driver.schedules_for(coll, SIZE, 1, params, ["every-step"])
    plan = driver.plan_for(coll, sched, SIZE, 1, params, 1e-3, barrier="early")
    steps = list(plan.steps)
    assert steps[1].interval != steps[0].interval and steps[1].reconfigure_after is not None
    steps[1] = dataclasses.replace(steps[1], reconfigure_after=(0, 1))
    plan = dataclasses.replace(plan, steps=tuple(steps))
    fab = build_fabric(topo)
    ocs = SimOcs(fab)
    session = SimSession(plan, FabricState(topo, ocs), ocs)
    released: list[tuple[int, float]] = []
    session.releases.append(lambda step, t: released.append((step, t)))
    session.start()
    for r in range(8):
        session.arrive(r, 1)
    assert released == [(1, 0.0)]
    fab.sched.run(until=1e-4)
    session.arrive(0, 2)
    assert not session.records[1].reconfigured  # GPU 1 still sending
    fab.sched.run(until=2e-4)
    session.arrive(1, 2)  # the listed GPUs are in: the mirrors move now
    rec = session.records[1]
    assert rec.reconfigured and rec.dark_start_s == pytest.approx(2e-4)
    for r in range(2, 8):
        fab.sched.run(until=3e-4 + r * 1e-4)
        session.arrive(r, 2)
    assert len(released) == 1  # everyone arrived at 0.9 ms, the dark time ends at 1.2 ms
    fab.sched.run()
    assert released[1] == (2, pytest.approx(1.2e-3))
    assert rec.to_json()["early"] is True and rec.dark_end_s == pytest.approx(1.2e-3)
    assert rec.readback == session.state.cross_connects  # the new circuits, read back

"""Collectives on the photonic scale-up domain, for real: 8 GPU agents, one OCS, the controller.

One fabric (scaleup-ocs: 8 GPUs, 2 optical ports each) runs recursive doubling (d = 1), Swing
(d = 2) and ring AllReduce under the static, every-step and Harvest schedules. For each run:
every GPU's buffer equals the int32 sum of all inputs (recomputed here, independently of the
GPUs), the cross-connects read back from the OCS over P4Runtime before each step equal the
schedule's circuits, the controller counted as many reconfigurations as the schedule has, and
frames were forwarded by GPUs where the topology is multi-hop. Linear-shift and Bruck
all-to-all leave every GPU with each peer's block for it. A reconfiguration under
traffic (barrier "early") drops frames on the dark port, MRC recovers them and every buffer is
exact; with barrier "all" no frame meets a dark port. Then: a schedule that does not fit is
refused before anything starts, and nothing of the run is left behind.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from common.collectives import build
from controller.harvest import calfile
from controller.harvest.model import Params
from hosts.collective.runner import expected_sum, make_input
from mrcnet.fabric import microcal
from mrcnet.fabric.collectives import Calibration, CollectiveDriver
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from tests.overlap_plan import READER, WRITER, expected_digests, overlap_plan

pytestmark = pytest.mark.emulation
REPO = Path(__file__).resolve().parents[2]
SIZE = 256 << 10
RATE = 20e6
SEED = 11


@pytest.fixture(scope="module")
def domain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fabric, CollectiveDriver]]:
    prefix = "tc" + hashlib.sha1(str(tmp_path_factory.getbasetemp()).encode()).hexdigest()[:3]
    fab = Fabric(RunOptions(topology="scaleup-ocs", rate="20Mbps", window=128 << 10,
                            prefix=prefix, results_root=tmp_path_factory.mktemp("runs"),
                            show=False))
    try:
        fab.start()
        yield fab, CollectiveDriver(fab, timeout=90)
    finally:
        fab.stop()
    left = [n for _, n in socket.if_nameindex() if n.startswith(prefix)]
    assert not left, f"interfaces left behind: {left}"
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert prefix not in netns


CASES = [("rd", 1, s) for s in ("static", "every-step", "harvest")] + \
        [("swing", 2, s) for s in ("static", "every-step", "harvest")] + \
        [("ring", 1, s) for s in ("static", "every-step", "harvest")]


@pytest.mark.parametrize(("algorithm", "degree", "schedule"), CASES)
def test_allreduce_on_real_circuits(domain: tuple[Fabric, CollectiveDriver], algorithm: str,
                                    degree: int, schedule: str) -> None:
    _fab, driver = domain
    coll = build(algorithm, 8)
    # alpha_r of 30 ms against steps of 13..52 ms: Harvest reconfigures, but not every step
    params = Params(degree, RATE, 1e-3, 1e-4, 0.03)
    sched = driver.schedules_for(coll, SIZE, degree, params, [schedule])[0]
    plan = driver.plan_for(coll, sched, SIZE, degree, params, dark_s=0.03)
    out = driver.run_plan(plan, seed=SEED)
    # every GPU holds the sum of all inputs (int32, exact): checked here, not by the GPUs
    want = expected_sum(SEED, 8, "int32", SIZE // 4)
    digest = hashlib.sha256(want.astype(np.int32).tobytes()).hexdigest()
    assert [g["sha256"] for g in out.gpus] == [digest] * 8
    assert out.verified is True
    # the OCS served the schedule's circuits at every step, and reconfigured as planned
    assert all(m.circuits_ok for m in out.steps)
    assert out.reconfigurations == sched.reconfigurations
    assert sum(m.reconfigured for m in out.steps) == sched.reconfigurations
    for m in out.steps:
        assert (m.dark_s >= 0.03) == m.reconfigured  # dark for at least alpha_r, on the run clock
    # dark drops are this run's own (a difference of the OCS counters, read without error):
    # a schedule that never reconfigures has no dark port, whatever earlier runs dropped
    assert out.errors == [] and out.dark_drops is not None
    if sched.reconfigurations == 0:
        assert out.dark_drops == 0
    hops = max(st.hops for st in plan.steps)
    forwarded = sum(g["router"]["forwarded"] for g in out.gpus)
    if hops > 1:
        assert forwarded > 0  # multi-hop routes really crossed intermediate GPUs
    assert all(g["router"]["hop_limit"] == 0 for g in out.gpus)
    if algorithm == "rd" and schedule == "harvest":
        assert 0 < sched.reconfigurations < 5  # between static (0) and every step (4)


def _all_to_all_digest(seed: int, rank: int, n: int, size: int) -> str:
    """Rank ``rank``'s buffer after an all-to-all, from the inputs: position j holds what
    rank (rank - j) mod n had at position j (its block for ``rank``)."""
    items = size // 4 // n
    out = np.empty(size // 4, dtype=np.int32)
    for j in range(n):
        origin = make_input(seed, (rank - j) % n, "int32", size // 4)
        out[j * items:(j + 1) * items] = origin[j * items:(j + 1) * items]
    return hashlib.sha256(out.tobytes()).hexdigest()


@pytest.mark.parametrize(("algorithm", "schedule"),
                         [("shift", "harvest"), ("bruck", "static"), ("bruck", "every-step")])
def test_all_to_all_on_real_circuits(domain: tuple[Fabric, CollectiveDriver], algorithm: str,
                                     schedule: str) -> None:
    """Linear shift and Bruck all-to-all as the engine schedules them: every GPU's buffer
    holds each peer's block for it (Bruck relays blocks over several steps)."""
    _fab, driver = domain
    coll = build(algorithm, 8, "all-to-all")
    params = Params(1, RATE, 1e-3, 1e-4, 0.03)
    sched = driver.schedules_for(coll, SIZE, 1, params, [schedule])[0]
    out = driver.run_plan(driver.plan_for(coll, sched, SIZE, 1, params, dark_s=0.03),
                          seed=SEED)
    assert [g["sha256"] for g in out.gpus] == [_all_to_all_digest(SEED, r, 8, SIZE)
                                              for r in range(8)]
    assert out.verified is True and out.errors == []
    assert out.reconfigurations == sched.reconfigurations
    assert all(m.circuits_ok for m in out.steps)


def test_micro_benchmark_calibration_predicts_before_the_run(
        domain: tuple[Fabric, CollectiveDriver], tmp_path: Path) -> None:
    """Point-to-point micro-benchmarks (not the collective's shapes) give the model's
    parameters; saved and read back, they predict a run whose plan, with the prediction and
    its time, is in the run folder before the run starts."""
    fab, driver = domain
    cal = driver.calibrate_micro(SIZE, 0.03)
    assert 0 < cal.fit.bandwidth_bps <= RATE  # payload across a 20 Mb/s circuit
    assert cal.fit.alpha_s >= 0 and cal.fit.delta_s >= 0
    # every size at every hop count on the ring and on the two half rings
    assert len(cal.samples) == 2 * len(microcal.HOPS) * len(microcal.BLOCK_COUNTS) * \
        microcal.REPEATS
    assert cal.fit.ack_delta_s >= 0 and cal.ack_hop_s >= cal.fit.ack_delta_s
    data = calfile.load(microcal.save(cal, tmp_path / "calibration.json"))
    params = Calibration.from_file(data, 0.03).params(1)
    coll = build("rd", 8)
    sched = driver.schedules_for(coll, SIZE, 1, params, ["every-step"])[0]
    out = driver.run_plan(driver.plan_for(coll, sched, SIZE, 1, params, dark_s=0.03),
                          seed=SEED)
    assert out.verified is True
    saved = json.loads((fab.run_dir / "collectives" / out.tag / "plan.json").read_text())
    assert data["created_unix"] < saved["predicted_unix"] < time.time()
    assert saved["model"]["model_s"] == pytest.approx(sched.model_s)
    assert saved["model"]["bandwidth_bps"] == pytest.approx(data["bandwidth_bps"])


OVERLAP_SIZE = 2 << 20  # g0 writes 1 MiB to g2: about 0.2 s at 2 x 20 Mb/s
OVERLAP_DARK_S = 0.1


@pytest.mark.parametrize("barrier", ["early", "all"])
def test_a_reconfiguration_under_traffic_meets_packets_and_mrc_recovers(
        domain: tuple[Fabric, CollectiveDriver], barrier: str) -> None:
    """Barrier "early": the reconfiguration into step 2 starts while g0 still writes to g2
    over two paths, one of which crosses the circuit that changes (tests/overlap_plan.py):
    frames meet the dark port and are dropped and counted in this run, MRC resends them
    over the direct circuit, and every buffer is exact. Barrier "all" waits for every GPU:
    nothing meets a dark port."""
    _fab, driver = domain
    plan = overlap_plan(OVERLAP_SIZE, driver.ranks, OVERLAP_DARK_S, barrier)
    out = driver.run_plan(plan, seed=SEED)
    assert [g["sha256"] for g in out.gpus] == expected_digests(SEED, OVERLAP_SIZE)
    assert out.errors == [] and out.dark_drops is not None
    assert out.reconfigurations == 1 and out.records[1]["reconfigured"]
    assert all(m.circuits_ok for m in out.steps)
    writer = out.gpus[WRITER]["qp_stats"][str(READER)]
    if barrier == "early":
        assert out.records[1]["early"]  # started before the last GPU arrived
        assert out.dark_drops > 0, out.to_json()
        assert int(writer["tx_rtx"]) > 0  # MRC resent what the dark port took
    else:
        assert not out.records[1]["early"]
        assert out.dark_drops == 0, out.to_json()


def test_schedule_that_does_not_fit_is_refused_before_start(tmp_path: Path) -> None:
    """A Swing schedule (degree 2) for recursive doubling on degree 1: refused, nothing runs."""
    coll = build("swing", 8)
    from controller.harvest.engine import synthesize

    res = synthesize(coll, SIZE, Params(2, RATE, 0.0, 0.0, 1e-3))
    bad = tmp_path / "swing.json"
    bad.write_text(json.dumps(res.to_json()))
    proc = subprocess.run(
        [sys.executable, "-m", "mrcnet.cli", "up", "scaleup-ocs", "--run", "allreduce:rd",
         "--schedule", str(bad), "--no-cli"],
        capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 2
    assert "swing" in proc.stderr and "rd" in proc.stderr
    assert "[mrcnet] run" not in proc.stderr  # no run folder, no fabric


def test_cli_runs_calibrates_and_reports(tmp_path: Path) -> None:
    """The one command: calibration, the Harvest schedule, results JSON with the model."""
    proc = subprocess.run(
        [sys.executable, "-m", "mrcnet.cli", "up", "scaleup-ocs", "--run", "allreduce:ring",
         "--schedule", "harvest", "--size", "128KiB", "--rate", "20Mbps", "--window", "128KiB",
         "--no-cli", "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["collective"] == "ring" and res["gpus"] == 8 and res["size_bytes"] == 128 << 10
    run = res["schedules"]["harvest"]
    assert run["verified"] is True and run["reconfigurations"] == 0  # ring: one static ring
    # the model, recomputed here from the calibrated figures: ring AllReduce is 2 (n - 1)
    # steps, each sending m / n bytes one circuit hop on the static ring (theta 1, L = 1)
    n, m = 8, 128 << 10
    step = res["alpha_s"] + res["delta_s"] + 8.0 * (m / n) / res["bandwidth_bps"]
    assert run["model_s"] == pytest.approx(2 * (n - 1) * step, rel=1e-9)
    # no faster than the links (the timed span covers at least all steps but the first)
    assert run["measured_s"] > (2 * (n - 1) - 1) * 8.0 * (m / n) / RATE
    # calibrated payload bandwidth: what crossed the 20 Mb/s links, so never above their rate
    assert 0 < res["bandwidth_bps"] <= RATE
    folder = Path(res["results_dir"])
    assert (folder / "collectives.json").exists()
    assert (folder / "collective_timeline.png").stat().st_size > 1000


def test_tdf_auto_calibrates_a_circuit_fabric_and_runs_verified(tmp_path: Path) -> None:
    """``--tdf auto`` on a circuit fabric: the circuit probe runs through the same calibration
    search as packet fabrics (one typed probe signature), then the runs use the chosen factor."""
    proc = subprocess.run(
        [sys.executable, "-m", "mrcnet.cli", "up", "scaleup-ocs", "--run", "allreduce:rd",
         "--tdf", "auto", "--no-cli", "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    found = res["tdf_calibration"]
    assert found["probes"] and found["probes"][0]["tdf"] == 1.0
    assert all(Path(p["results_dir"]).is_dir() for p in found["probes"])
    assert res["tdf"] == found["tdf"]  # the runs used the factor the search chose
    assert res["verified"] is True
    assert {s["verified"] for s in res["schedules"].values()} == {True}
    assert "calibration probe 1: TDF 1" in proc.stderr

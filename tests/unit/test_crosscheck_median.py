"""``mrcnet bench crosscheck`` judges an MRC failover case on the emulated run with the median
longest stall (three runs) against the simulated run with the median longest stall (nine
moments of the cut), and reports every stall."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mrcnet.sim.compare as compare
from mrcnet.sim.compare import STALL, Row
from testbed.bench import crosscheck


def test_an_mrc_failover_case_is_judged_on_its_median_emulated_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    case = next(c for c in crosscheck.cases()["failover"] if c.qp == "MRC")
    assert case.repeats == crosscheck.MRC_FAILOVER_REPEATS == 3
    assert case.phases == crosscheck.MRC_FAILOVER_PHASES == 9
    stalls = iter([0.60, 0.45, 0.50])  # emulated, in the order the runs finish
    made: list[str] = []
    stall_of: dict[str, float] = {}

    def emulate(_case: Any, _tdf: str) -> dict[str, Any]:
        made.append(str(tmp_path / f"run{len(made)}"))
        stall_of[made[-1]] = next(stalls)
        return {"results_dir": made[-1], "tdf": 1.0, "faithful": True}

    # simulated: the cut at 1.500, 1.505, ... 1.540 s, stalls as the moment falls
    sim_stall = {1.5 + 0.005 * k: v for k, v in enumerate(
        [0.26, 0.15, 0.20, 0.15, 0.15, 0.19, 0.15, 0.46, 0.149])}
    sims: list[Path] = []

    def simulate_case(c: Any, out: Path) -> Path:
        (spec,) = c.fail
        assert spec.startswith("leaf0-spine0@")
        at = round(float(spec.split("@")[1]), 6)
        sims.append(out / f"sim-{at}" / "results.json")
        return sims[-1]

    def longest_stall(results: Path) -> float:
        return sim_stall[float(results.parent.name.removeprefix("sim-"))]

    def compare_files(emu: Path, sim: Path) -> tuple[list[Row], list[str]]:
        return [Row(STALL, stall_of[str(emu.parent)], longest_stall(sim)),
                Row("QP errors", 0, 0)], []

    monkeypatch.setattr(crosscheck, "emulate", emulate)
    monkeypatch.setattr(crosscheck, "simulate_case", simulate_case)
    monkeypatch.setattr(crosscheck, "longest_stall", longest_stall)
    monkeypatch.setattr(compare, "compare_files", compare_files)
    result = crosscheck.check(case, "1", tmp_path)
    assert result["emulated_stalls"] == [0.60, 0.45, 0.50]
    assert result["emulations"] == made and result["emulation"] == made[2]  # the 0.50 run
    assert result["simulated_stalls"] == list(sim_stall.values())
    assert result["simulation"] == str(sims[6].parent)  # sorted stably, the fifth of nine
    stall = next(r for r in result["rows"] if r["metric"] == STALL)
    # the median of the nine simulated stalls is 0.15 (sorted: .149 .15 .15 .15 .15 ...)
    assert stall["sim"] == 0.15
    assert stall["emu"] == 0.50 and stall["rel"] == pytest.approx(0.15 / 0.50 - 1)
    assert stall["within_bound"] is False and result["within_bounds"] is False
    assert result["faithful"] is True
    # a small case runs once
    assert crosscheck.small(case).repeats == 1 and crosscheck.small(case).phases == 1


def test_failures_are_shifted_by_the_phase() -> None:
    assert crosscheck.shifted(("leaf0-spine0@1.5", "s1-s2@2"), 0.015) == (
        "leaf0-spine0@1.515", "s1-s2@2.015")

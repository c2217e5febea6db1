"""``mrcnet bench crosscheck`` judges an MRC failover case on the emulated run with the median
longest stall (three runs), and reports every emulated stall."""

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
    stalls = iter([0.60, 0.45, 0.50])  # emulated, in the order the runs finish
    made: list[str] = []
    stall_of: dict[str, float] = {}

    def emulate(_case: Any, _tdf: str) -> dict[str, Any]:
        made.append(str(tmp_path / f"run{len(made)}"))
        stall_of[made[-1]] = next(stalls)
        return {"results_dir": made[-1], "tdf": 1.0, "faithful": True}

    def compare_files(emu: Path, _sim: Path) -> tuple[list[Row], list[str]]:
        return [Row(STALL, stall_of[str(emu.parent)], 0.448), Row("QP errors", 0, 0)], []

    monkeypatch.setattr(crosscheck, "emulate", emulate)
    monkeypatch.setattr(crosscheck, "simulate_case",
                        lambda _c, out: out / "sim" / "results.json")
    monkeypatch.setattr(compare, "compare_files", compare_files)
    result = crosscheck.check(case, "1", tmp_path)
    assert result["emulated_stalls"] == [0.60, 0.45, 0.50]
    assert result["emulations"] == made and result["emulation"] == made[2]  # the 0.50 run
    stall = next(r for r in result["rows"] if r["metric"] == STALL)
    assert stall["emu"] == 0.50 and stall["rel"] == pytest.approx(0.448 / 0.50 - 1)
    assert stall["within_bound"] is True and result["within_bounds"] is True
    assert result["faithful"] is True
    # a small case runs once
    assert crosscheck.small(case).repeats == 1

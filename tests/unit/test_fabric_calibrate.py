"""The --tdf auto search (mrcnet/fabric/calibrate.py) against scripted probes, and the nice grid."""

from __future__ import annotations

from typing import Any

import pytest

from mrcnet.fabric.calibrate import calibrate
from mrcnet.fabric.fidelity import nice_tdf, suggest_tdf


def scripted(threshold: float, suggestion: float) -> tuple[Any, list[float]]:
    """A probe that is faithful from ``threshold`` on and suggests tdf x ``suggestion``."""
    seen: list[float] = []

    def run(_opts: Any, tdf: float, *_args: Any) -> dict[str, Any]:
        seen.append(tdf)
        ok = tdf >= threshold
        return {"tdf": tdf, "completed": True, "faithful": ok, "max_lag_fraction": 0.0,
                "slowest": "s", "goodput_fraction": 0.9,
                "suggested_tdf": None if ok else tdf * suggestion, "results_dir": ""}

    return run, seen


@pytest.mark.parametrize(("threshold", "suggestion", "want"), [
    (1.0, 2.0, 1.0),    # faithful at once
    (3.2, 10.0, 4.0),   # overshoot to 10, then bisect 1 < {1.5 .. 8} < 10 down to 4
    (3.2, 2.0, 4.0),    # 1 -> 2 -> 4 (faithful), then 3 (not): nothing left between
    (1.2, 1.0, 1.5),    # a suggestion below the minimal step still moves by 1.5x
])
def test_finds_the_smallest_faithful_grid_factor(threshold: float, suggestion: float,
                                                 want: float) -> None:
    run, seen = scripted(threshold, suggestion)
    res = calibrate(None, "all-to-all", 1 << 20, max_probes=8, run_probe=run)
    assert res["tdf"] == want and res["verified"]
    assert len(seen) == len(res["probes"]) <= 8
    # Every factor below the answer that was probed was unfaithful, the answer was probed.
    assert want in seen
    assert all(t < threshold for t in seen if t < want)


def test_budget_exhausted_gives_an_unverified_suggestion() -> None:
    run, seen = scripted(1000.0, 2.0)
    res = calibrate(None, "all-to-all", 1 << 20, max_probes=3, run_probe=run)
    assert seen == [1.0, 2.0, 4.0]
    assert res["verified"] is False and res["tdf"] == 8.0


def test_probe_size_is_capped_and_the_job_fields_reach_the_probes() -> None:
    sizes: list[int] = []
    extras: list[Any] = []

    def run(_opts: Any, tdf: float, _w: str, size: int, _qp: str, _t: float,
            extra: Any) -> dict[str, Any]:
        sizes.append(size)
        extras.append(extra)
        return {"tdf": tdf, "completed": True, "faithful": True, "max_lag_fraction": 0.0,
                "slowest": "s", "goodput_fraction": 1.0, "suggested_tdf": None,
                "results_dir": ""}

    calibrate(None, "all-to-all", 1 << 30, run_probe=run, extra={"wimm": True, "max_wimm": 4})
    assert sizes == [2 << 20]
    assert extras == [{"wimm": True, "max_wimm": 4}]  # --wimm: the probes run it too


def test_nice_grid_and_cpu_model() -> None:
    assert [nice_tdf(x) for x in (0.5, 1.0, 1.1, 2.6, 7.0, 9.0, 11.0, 170.0)] == [
        1.0, 1.0, 1.5, 3.0, 8.0, 10.0, 15.0, 200.0]
    # Half the capacity reached with 1.6 of 2 cores busy: twice the CPU needed, at most 80%
    # of the cores -> 2 x 1.6 / 1.6 = 2x the factor.
    assert suggest_tdf(1.0, 1.6, 0.5, 2, 0.5) == 2.0
    # A saturated loop alone: 1 / 0.8 -> at least the minimal step 1.5.
    assert suggest_tdf(4.0, 0.2, 1.0, 2, None) == 6.0

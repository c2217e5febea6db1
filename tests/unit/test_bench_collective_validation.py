"""The validation table's arithmetic (testbed/bench/collective_validation.py)."""

from __future__ import annotations

from typing import Any

import pytest

from testbed.bench.collective_validation import crossover, summarize


def test_crossover_is_where_every_step_costs_what_static_does() -> None:
    # every-step: 1.0 s of transfers + 4 reconfigurations; static: 1.8 s -> 0.2 s each
    assert crossover(1.8, 1.0, 4) == pytest.approx(0.2)
    assert 1.0 + 4 * crossover(1.8, 1.0, 4) == pytest.approx(1.8)
    assert crossover(0.9, 1.0, 4) == 0.0  # static is cheaper whatever alpha_r
    assert crossover(1.8, 1.0, 0) == 0.0


def _row(schedule: str, model: float, measured: float, alphas: list[float]) -> dict[str, Any]:
    return {"collective": "rd", "phase": "allreduce", "size_bytes": 1, "schedule": schedule,
            "alpha_r_values": alphas, "model_s": model, "measured_s": measured,
            "error": abs(measured / model - 1)}


def test_summary_errors_and_ranking() -> None:
    rows = [_row("static", 1.0, 1.05, [0.1, 0.2]),
            _row("every-step", 0.8, 0.82, [0.1]),  # model and measured agree: faster
            _row("harvest", 0.79, 1.2, [0.1]),  # within 5% of every-step: not ranked ...
            _row("every-step", 1.3, 0.9, [0.2]),  # ... this one is ranked and disagrees
            _row("harvest", 0.95, 0.97, [0.2])]
    s = summarize(rows)
    errors = sorted(r["error"] for r in rows)
    assert s["runs"] == 5 and s["max_error"] == errors[-1]
    assert s["median_error"] == pytest.approx(errors[2])
    # alpha 0.1: every-step/static ranked, agrees; harvest/static ranked, disagrees (1.2 s
    # measured against static's 1.05 s); every-step/harvest within 5%: not ranked.
    # alpha 0.2: every-step/harvest and every-step/static ranked, both disagree;
    # harvest/static (0.95 vs 1.0: just over 5%) ranked, agrees.
    assert s["ranked_pairs"] == 5
    assert s["ranking_agrees"] == 2
    assert len(s["ranking_disagreements"]) == 3

"""Benchmarks refuse to call a figure from an unfaithful run a result (testbed/bench/verdicts.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from testbed.bench import verdicts


def _strict(argv: list[str]) -> bool:
    parser = argparse.ArgumentParser()
    verdicts.add_strict(parser)
    return bool(parser.parse_args(argv).strict)


@pytest.mark.parametrize(
    ("runs", "overall", "strict_status"),
    [
        ({"mrc": True, "ecmp": True}, True, 0),
        ({"mrc": True, "ecmp": False}, False, verdicts.NOT_FAITHFUL_EXIT),
        ({"mrc": True, "ecmp": None}, None, verdicts.NOT_FAITHFUL_EXIT),
        ({}, None, verdicts.NOT_FAITHFUL_EXIT),  # no run, no evidence
    ],
)
def test_the_verdict_is_recorded_warned_and_strict_refuses(
    runs: dict[str, bool | None], overall: bool | None, strict_status: int,
    capsys: pytest.CaptureFixture[str],
) -> None:
    figures: dict[str, Any] = {"goodput_bps": 1}
    assert verdicts.conclude("spray", figures, runs, strict=False) == 0
    assert figures["fidelity_verdict"] == {"faithful": overall, "runs": runs}
    err = capsys.readouterr().err
    for label, value in runs.items():
        assert (f"run {label}:" in err) == (value is not True)
    assert f"faithful: {({True: 'yes', False: 'NO', None: 'unknown'})[overall]}" in err
    assert verdicts.conclude("spray", dict(figures), runs, strict=_strict(["--strict"])) \
        == strict_status


def test_a_failing_benchmark_keeps_its_own_status() -> None:
    assert verdicts.conclude("collective", {}, {"static": True}, strict=True, status=1) == 1
    assert verdicts.conclude("collective", {}, {"static": False}, strict=True, status=1) == 1
    assert not _strict([])


def test_tdf_is_a_factor_or_auto() -> None:
    from testbed.bench import tdfarg

    assert tdfarg.parse("auto") is None and tdfarg.parse(" AUTO ") is None
    assert tdfarg.parse("4") == 4.0 and tdfarg.parse("1") == 1.0
    for bad in ("0.5", "x", "", "-2"):
        with pytest.raises(ValueError, match="auto"):
            tdfarg.parse(bad)

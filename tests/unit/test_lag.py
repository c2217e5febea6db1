"""The lag meter (common/lag.py), driven with scripted due/ran times."""

from __future__ import annotations

import pytest

from common.lag import DEFAULT_TOLERANCE_WALL, HIST_BUCKETS, LagMeter, window


def test_on_time_work_is_never_behind() -> None:
    m = LagMeter(start=0.0, tolerance=1e-3)
    for i in range(100):
        m.due(i * 0.01, i * 0.01 + 0.5e-3)  # every run half a tolerance late
    w = window(None, m.snapshot(1.0))
    assert w["events"] == 100 and w["late"] == 0
    assert w["lag_fraction"] == 0.0
    assert w["max_lag_s"] == pytest.approx(0.5e-3)


def test_behind_time_is_the_union_of_late_intervals() -> None:
    m = LagMeter(start=0.0, tolerance=1e-3)
    # Due at 1.0, ran at 1.011: behind from 1.001 to 1.011 (10 ms).
    m.due(1.0, 1.011)
    # Due at 1.005, ran at 1.013: overlaps the first; only 1.011..1.013 is new (2 ms).
    m.due(1.005, 1.013)
    # Due at 2.0, ran at 2.004: 3 ms more.
    m.due(2.0, 2.004)
    w = window(None, m.snapshot(4.0))
    assert w["late"] == 3
    assert w["lag_fraction"] == pytest.approx((0.010 + 0.002 + 0.003) / 4.0)
    assert w["max_lag_s"] == pytest.approx(0.011)


def test_default_tolerance_is_wall_time_so_dilation_shrinks_it_in_virtual_time() -> None:
    m = LagMeter(start=0.0, tdf=10.0)
    assert m.tolerance == pytest.approx(DEFAULT_TOLERANCE_WALL / 10)
    m.due(1.0, 1.0 + DEFAULT_TOLERANCE_WALL / 10 * 1.5)  # 1.5 tolerances late
    assert m.late == 1
    # A frame that waited 30 ms of wall time in a socket queue: 3 ms of virtual lag.
    m.queued(0.03, 5.0)
    assert m.max_lag == pytest.approx(0.003)


def test_histogram_buckets_double() -> None:
    m = LagMeter(start=0.0, tolerance=1e-3)
    m.due(0.0, 1.5e-3)   # [1x, 2x) tolerance -> bucket 1
    m.due(1.0, 1.0035)   # [2x, 4x) -> bucket 2
    m.due(2.0, 2.0075)   # [4x, 8x) -> bucket 3
    m.due(3.0, 13.0)     # far beyond the last bucket
    assert m.hist[1:4] == [1, 1, 1]
    assert m.hist[HIST_BUCKETS - 1] == 1


def test_window_between_snapshots_sees_only_its_interval() -> None:
    m = LagMeter(start=0.0, tolerance=1e-3)
    m.due(0.5, 0.6)  # before the window: 99 ms behind, max lag 100 ms
    m.waited(0.2)
    first = m.snapshot(1.0)
    m.due(1.5, 1.5035)  # 2.5 ms behind, lag 3.5 ms: bucket [2x, 4x)
    m.waited(0.5)
    w = window(first, m.snapshot(2.0))
    assert w["seconds"] == pytest.approx(1.0)
    assert w["late"] == 1 and w["events"] == 1
    assert w["lag_fraction"] == pytest.approx(0.0025)
    assert w["busy_fraction"] == pytest.approx(0.5)
    # The cumulative maximum (100 ms) is older than the window: the bucket bound is used.
    assert w["max_lag_s"] == pytest.approx(4e-3)


def test_snapshot_is_json_ready_and_bad_parameters_are_refused() -> None:
    import json

    m = LagMeter(start=5.0)
    json.dumps(m.snapshot(6.0))
    with pytest.raises(ValueError):
        LagMeter(start=0.0, tdf=0.5)
    with pytest.raises(ValueError):
        LagMeter(start=0.0, tolerance=0.0)

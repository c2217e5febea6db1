"""The run's virtual clock (common/vclock.py): dilation, conversions, hand-over to children."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import pytest

from common import vclock
from common.vclock import ClockError, RunClock


def test_tdf_one_is_the_monotonic_clock_itself() -> None:
    clock = RunClock(1.0, epoch=123.0)
    assert clock.now is time.monotonic
    assert clock.to_wall(0.25) == 0.25
    assert not clock.dilated


def test_dilated_clock_runs_tdf_times_slower_from_the_epoch() -> None:
    epoch = time.monotonic() - 40.0  # the run began 40 wall seconds ago
    clock = RunClock(8.0, epoch)
    before = time.monotonic()
    v = clock.now()
    after = time.monotonic()
    # Independent computation of the definition, bracketing the reading.
    assert epoch + (before - epoch) / 8 <= v <= epoch + (after - epoch) / 8
    assert clock.elapsed() == pytest.approx(5.0, abs=0.01)  # 40 wall s = 5 virtual s


def test_a_wall_interval_is_tdf_times_a_virtual_one() -> None:
    clock = RunClock(5.0)
    v0, w0 = clock.now(), time.monotonic()
    time.sleep(0.05)
    v1, w1 = clock.now(), time.monotonic()
    assert (v1 - v0) * 5 == pytest.approx(w1 - w0, abs=2e-3)


def test_conversions_are_inverse_and_wall_at_hits_the_virtual_instant() -> None:
    clock = RunClock(2.5, epoch=1000.0)
    assert clock.to_wall(0.4) == pytest.approx(1.0)
    assert clock.to_virtual(clock.to_wall(0.123)) == pytest.approx(0.123)
    assert clock.wall_at(1000.0) == 1000.0
    assert clock.wall_at(1004.0) == pytest.approx(1010.0)


def test_sleep_waits_the_wall_equivalent() -> None:
    clock = RunClock(4.0)
    w0 = time.monotonic()
    clock.sleep(0.01)  # 40 ms of wall time
    assert time.monotonic() - w0 >= 0.039
    clock.sleep(-1.0)  # no wait, no error


def test_unix_stamps_advance_in_virtual_seconds_from_the_epochs_wall_time() -> None:
    epoch = time.monotonic() - 10.0
    clock = RunClock(10.0, epoch)
    wall_unix_of_epoch = time.time() - 10.0
    assert clock.unix(epoch) == pytest.approx(wall_unix_of_epoch, abs=0.01)
    assert clock.unix() == pytest.approx(wall_unix_of_epoch + 1.0, abs=0.01)  # 1 virtual s on
    assert clock.unix_ns() / 1e9 == pytest.approx(clock.unix(), abs=1e-3)
    assert RunClock(1.0).unix_ns is time.time_ns


def test_env_round_trip_gives_the_same_clock_in_a_child_process() -> None:
    clock = RunClock(3.0, epoch=time.monotonic() - 6.0)
    code = ("from common.vclock import RunClock; import time; c = RunClock.from_env(); "
            "print(c.tdf, c.epoch, c.now(), time.monotonic())")
    out = subprocess.run([sys.executable, "-c", code], env={**clock.env()}, capture_output=True,
                         text=True, check=True, cwd=vclock.__file__.rsplit("/common/", 1)[0])
    tdf, epoch, child_now, child_mono = (float(x) for x in out.stdout.split())
    assert (tdf, epoch) == (clock.tdf, clock.epoch)
    # The child's reading agrees with the definition at the child's own monotonic time
    # (CLOCK_MONOTONIC is system-wide, so both processes share the epoch's meaning).
    assert child_now == pytest.approx(clock.epoch + (child_mono - clock.epoch) / 3, abs=1e-4)


def test_from_env_defaults_and_errors() -> None:
    c = RunClock.from_env({})
    assert c.tdf == 1.0 and abs(c.epoch - time.monotonic()) < 1.0
    with pytest.raises(ClockError, match="MRCNET_TDF"):
        RunClock.from_env({"MRCNET_TDF": "fast"})
    with pytest.raises(ClockError, match="MRCNET_CLOCK_EPOCH"):
        RunClock.from_env({"MRCNET_CLOCK_EPOCH": "yesterday"})
    with pytest.raises(ClockError):
        RunClock.from_env({"MRCNET_TDF": "0.5"})


@pytest.mark.parametrize("bad", [0.0, 0.99, -3.0, float("nan"), float("inf"), 2e6])
def test_bad_factors_are_refused(bad: float) -> None:
    with pytest.raises(ClockError):
        RunClock(bad)


def test_flags_round_trip_and_bad_flags_are_argument_errors() -> None:
    parser = argparse.ArgumentParser()
    vclock.add_arguments(parser)
    clock = RunClock(6.0, epoch=55.5)
    got = RunClock.from_args(parser.parse_args(clock.args()))
    assert (got.tdf, got.epoch) == (6.0, 55.5)
    with pytest.raises(SystemExit):
        parser.parse_args(["--tdf", "0"])
    defaults = RunClock.from_args(parser.parse_args([]))
    assert defaults.tdf >= 1.0

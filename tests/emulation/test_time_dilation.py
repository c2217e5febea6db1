"""Time dilation: one experiment at rate R on the wall clock and at 10R on a clock 10x slower.

The same all-to-all (clos-2p, verified byte for byte) runs twice: links at R = 10 Mb/s with
TDF 2, and links at 10R with TDF 20 (TDF 1 at R fell 3% behind its schedule on a 2-core CI
machine, so both runs are dilated twice more than the claim needs). Every time constant of the model scales with the rate
(each link's delay: 10 x 5 us at R; the SACK coalescing delay, the quiet time before a
reliability probe, the EV-probe period and the endpoint timeout: 10 x their values at 10R),
so the two runs are one experiment in units of a packet time, and the second one, at 10R in
virtual time, does the same work per wall second as the first. Goodput (in units of the link rate) and
flow completion times (in units of a packet time) must therefore agree, and the dilated run
must really have lasted ten times its virtual duration on the wall clock. A wait converted
with the wrong clock, or a figure measured on the wall clock, breaks one of these by a factor
close to 10, so the test allows 20% (two faithful runs on a shared machine differ by a few
percent: a 5% tolerance failed once in a loaded suite at 5.1%); how close the two runs come
is a measurement, reported by ``mrcnet bench fidelity``, not a test threshold. The window (32 KiB per QP) keeps the flows partly window-limited,
so the goodput depends on the emulated RTT, not only on the link rates; the ACK timeout
(134 ms in both) stays far above the RTT and never fires (no loss is configured).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from mrcnet.fabric.orchestrator import Fabric, RunOptions
from topologies.loader import resolve

pytestmark = pytest.mark.emulation

R = 10e6
SIZE = 1 << 20  # bytes per flow: about 1.4 s at R
WINDOW = 32 << 10
BASE_TDF = 2.0  # the slow run's factor; the fast run's is ten times it
TOLERANCE = 0.2  # a clock error is a factor near 10 (see the module docstring)


def _topology(tmp: Path, delay_s: float) -> Path:
    data = yaml.safe_load(resolve("clos-2p").read_text())
    data["link_defaults"]["delay"] = f"{delay_s * 1e6:g}us"
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / f"clos-2p-delay{delay_s * 1e6:g}us.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(tmp: Path, prefix: str, rate: float, tdf: float) -> tuple[dict[str, Any], float, Fabric]:
    scale = R * 10 / rate  # 10 at R, 1 at 10R
    opts = RunOptions(topology=str(_topology(tmp, 5e-6 * scale)), rate=f"{rate:g}bps",
                      tdf=tdf, window=WINDOW, prefix=prefix, results_root=tmp / "runs")
    # Every transport time constant at 10R as the defaults have it (probe_after: a quarter of
    # the 134 ms ACK timeout), ten times that at R.
    opts.core_tuning.update({"ack_delay": 20e-6 * scale, "probe_after": 0.0335 * scale,
                             "ev_probe_interval": 0.05 * scale, "endpoint_timeout": 0.25 * scale})
    fab = Fabric(opts)
    try:
        fab.start()
        assert fab.runner is not None
        wl = fab.runner.submit("all-to-all", SIZE, "MRC", timeout=60)
        wall0 = time.monotonic()  # the workload's start (Workload.started) is now
        assert fab.runner.wait(wl, 90, fab.check_alive)
        wall = time.monotonic() - wall0
        summary = wl.summary()
    finally:
        fab.stop()
    return summary, wall, fab


def _fcts(summary: dict[str, Any]) -> list[float]:
    return [float(f["seconds"]) for f in summary["per_flow"]]


def test_ten_times_the_rate_on_a_ten_times_slower_clock_is_the_same_run(
    run_prefix: str, tmp_path: Path
) -> None:
    # The claim is about faithful runs: a run the fidelity monitor calls unfaithful (other
    # work on the machine took the CPU meanwhile) is repeated, at most twice.
    for attempt in range(3):
        slow, slow_wall, _ = _run(tmp_path / f"r{attempt}", run_prefix, R, BASE_TDF)
        if slow["fidelity"]["faithful"]:
            break
    for attempt in range(3):
        fast, fast_wall, fab = _run(tmp_path / f"r10-{attempt}", run_prefix, 10 * R,
                                    10 * BASE_TDF)
        if fast["fidelity"]["faithful"]:
            break
    assert slow["fidelity"]["faithful"] and fast["fidelity"]["faithful"], (
        "the CPU did not sustain the runs (three tries each): "
        f"{slow['fidelity']['max_lag_fraction']}, {fast['fidelity']['max_lag_fraction']}")
    for s in (slow, fast):
        assert s["completed"], s["errors"]
        assert s["verified_flows"] == s["flows"] == 12
    assert fab.clock.tdf == 10 * BASE_TDF
    # Each run lasted its factor times its virtual duration on the wall clock (the
    # wall time also covers the final fidelity mark, a few milliseconds).
    assert fast_wall / fast["seconds"] == pytest.approx(10 * BASE_TDF, rel=TOLERANCE)
    assert slow_wall / slow["seconds"] == pytest.approx(BASE_TDF, rel=TOLERANCE)
    # Goodput in units of the link rate, FCTs in units of a packet time: the same.
    report = (f"R, TDF {BASE_TDF:g}: goodput {slow['goodput_bps'] / 1e6:.2f} Mb/s, FCT max "
              f"{max(_fcts(slow)):.4f} s, faithful {slow['fidelity']['faithful']}; "
              f"10R, TDF {10 * BASE_TDF:g}: {fast['goodput_bps'] / 1e6:.2f} Mb/s, FCT max "
              f"{max(_fcts(fast)):.4f} s, faithful {fast['fidelity']['faithful']}")
    assert fast["goodput_bps"] / 10 == pytest.approx(slow["goodput_bps"], rel=TOLERANCE), report
    assert 10 * max(_fcts(fast)) == pytest.approx(max(_fcts(slow)), rel=TOLERANCE), report
    assert 10 * statistics.median(_fcts(fast)) == pytest.approx(
        statistics.median(_fcts(slow)), rel=TOLERANCE), report
    # The configured capacity scales with the rate; both runs measured it the same way.
    assert fast["capacity_bps"] == pytest.approx(10 * slow["capacity_bps"])
    assert fast["goodput_fraction"] == pytest.approx(slow["goodput_fraction"], rel=TOLERANCE)

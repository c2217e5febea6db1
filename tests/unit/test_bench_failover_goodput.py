"""testbed.bench.failover_goodput: the capacity, goodput and recovery definitions it reports."""

from __future__ import annotations

import pytest

from mrcnet.fabric.failures import find_link
from mrcnet.fabric.workloads import flows_for
from testbed.bench.failover_goodput import capacity, goodput_series, recovery
from topologies.loader import load


def test_capacity_and_recovery_definitions() -> None:
    topo = load("clos-1p")  # 1 Gb/s links, 2 leaves x 2 spines, 2 hosts per leaf
    flows = flows_for("shift:2", ["h0", "h1", "h2", "h3"])
    assert capacity(topo, flows, set()) == pytest.approx(4e9)
    leaf_spine = find_link(topo, "leaf0-spine0").index
    # leaf0 keeps one uplink (1 Gb/s each way): half of the cross-leaf capacity remains
    assert capacity(topo, flows, {leaf_spine}) == pytest.approx(2e9)
    # 0.1 s bins ending at 0.1, 0.2, ...; failure at 0.2: bins from the third on count
    series = [((i + 1) / 10, float(v)) for i, v in enumerate([10, 10, 2, 2, 6, 9, 9, 9])]
    assert recovery(series, 0.2, 8.0, bin_s=0.1) == (pytest.approx(0.5), True)  # (9+9)/2
    assert recovery(series, 0.2, 2.0, bin_s=0.1) == (pytest.approx(0.1), True)  # first bin
    assert recovery(series, 0.2, 20.0, bin_s=0.1)[1] is False
    # two writers: 1 MB acked in [0, 0.5) by one, 0.5 MB in [0.5, 1.0) by the other
    prog = [[[0.0, 0], [0.2, 500_000], [0.4, 1_000_000]], [[0.0, 0], [0.7, 500_000]]]
    assert goodput_series(prog, 0.5) == [(0.5, 16e6), (1.0, 8e6)]


def test_cp_delay_sweep_argument_and_plot(tmp_path: object) -> None:
    import argparse
    from pathlib import Path

    from testbed.bench.failover_goodput import _delays, add_arguments, plot

    assert _delays("0.5,1,2") == [0.5, 1.0, 2.0] and _delays("3") == [3.0]
    for bad in ("", "x", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            _delays(bad)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    assert args.cp_delay == [0.5, 1.0, 2.0] and args.window == "32KiB"
    out = {"cp_delay_s": [0.5, 1.0, 2.0],
           "mrc": {"p100_stall_s": [0.1, 0.11, None]},
           "rc": {"p100_stall_s": [0.7, 1.1, 3.0]}}
    path = plot(out, Path(str(tmp_path)) / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

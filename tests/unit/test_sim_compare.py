"""The emulation-vs-simulation comparison (mrcnet/sim/compare.py) on synthetic results files
with known answers: per-host goodput, nearest-rank FCT percentiles, counts, relative
differences, what makes two runs different experiments, clear errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mrcnet.cli import main
from mrcnet.sim.compare import (
    CompareError,
    Row,
    compare,
    compare_files,
    figures,
    judge,
    mismatches,
    percentile,
    table,
)

MIB = 1 << 20


def results(fcts: dict[str, float | None], rtx: int, trims: int, rx_trimmed: int,
            verified: tuple[str, ...] | None = None, pairs: dict[str, str] | None = None
            ) -> dict[str, Any]:
    """A results.json with one workload round, one 1 MiB flow per source host."""
    pairs = pairs or {"h0": "h1", "h1": "h2", "h2": "h0"}
    rows = [{"id": f"w1f{i}-{s}-{pairs[s]}", "src": s, "dst": pairs[s], "bytes": MIB,
             "verified": s in (verified if verified is not None else fcts), "fct_s": fct,
             "tx_rtx": 0} for i, (s, fct) in enumerate(fcts.items())]
    return {"topology": "clos-2p",
            "workloads": [{"workload": "permutation", "qp_type": "MRC", "per_flow": rows,
                           "retransmitted_packets": rtx, "qp_errors": 0,
                           "mechanisms": {"rx_trimmed": rx_trimmed, "tx_rtx": rtx}}],
            "samples": [{"t": 0.0, "trims": 0}, {"t": 1.0, "trims": trims}]}


def by_metric(rows: list[Row]) -> dict[str, Row]:
    return {r.metric: r for r in rows}


def test_nearest_rank_percentiles_are_values_a_flow_had() -> None:
    assert percentile([], 50) is None
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 99) == 4.0
    assert percentile([float(i) for i in range(1, 201)], 99) == 198.0
    assert percentile([7.0], 100) == 7.0


def test_goodput_fct_and_counts_side_by_side_with_relative_differences() -> None:
    emu = figures(results({"h0": 0.1, "h1": 0.2, "h2": 0.4}, rtx=100, trims=40,
                          rx_trimmed=38))
    sim = figures(results({"h0": 0.05, "h1": 0.2, "h2": 0.5}, rtx=80, trims=0, rx_trimmed=0))
    rows = by_metric(compare(emu, sim))
    g0 = rows["goodput h0 (bit/s)"]
    assert g0.emu == pytest.approx(MIB * 8 / 0.1) and g0.sim == pytest.approx(MIB * 8 / 0.05)
    assert g0.rel == pytest.approx(1.0)
    assert rows["goodput h1 (bit/s)"].rel == pytest.approx(0.0)
    assert rows["FCT p50 (s)"].emu == 0.2 and rows["FCT p50 (s)"].sim == 0.2
    assert rows["FCT p100 (s)"].rel == pytest.approx(0.25)
    assert rows["retransmitted packets"].rel == pytest.approx(-0.2)
    assert rows["switch trims"].emu == 40 and rows["switch trims"].rel == pytest.approx(-1.0)
    assert rows["trimmed packets received"].sim == 0
    assert rows["verified flows"].rel == 0
    assert Row("x", 0.0, 5.0).rel is None  # no relative difference to nothing
    text = table(compare(emu, sim))
    assert "+100.0%" in text and "-20.0%" in text and text.count("\n") == len(rows) + 1


def test_an_unverified_flow_has_no_goodput() -> None:
    fig = figures(results({"h0": 0.1, "h1": 0.2, "h2": None}, 0, 0, 0, verified=("h0",)))
    assert fig.goodput == {"h0": pytest.approx(MIB * 8 / 0.1), "h1": None, "h2": None}
    assert fig.verified == 1 and fig.fcts == [0.1, 0.2]
    row = by_metric(compare(fig, fig))["goodput h1 (bit/s)"]
    assert row.emu is None and row.rel is None


def test_runs_of_different_experiments_are_named() -> None:
    a = figures(results({"h0": 0.1, "h1": 0.1, "h2": 0.1}, 0, 0, 0))
    assert mismatches(a, a) == []
    other = results({"h0": 0.1, "h1": 0.1, "h2": 0.1}, 0, 0, 0,
                    pairs={"h0": "h2", "h1": "h0", "h2": "h1"})
    other["topology"] = "clos-1p"
    assert mismatches(a, figures(other)) == ["topology: clos-2p vs clos-1p",
                                              "flow pairs differ (another seed?)"]


def test_files_that_are_not_results_are_refused_with_the_reason(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(results({"h0": 0.1, "h1": 0.1, "h2": 0.1}, 0, 0, 0)))
    cases = {"missing.json": None, "list.json": "[1, 2]", "text.json": "not json",
             "empty.json": json.dumps({"workloads": []}),
             "row.json": json.dumps({"workloads": [{"per_flow": [{"dst": "h1"}]}]})}
    expect = {"missing.json": "missing.json", "list.json": "not a results.json",
              "text.json": "not JSON", "empty.json": "no workloads", "row.json": "lacks 'src'"}
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(CompareError, match=expect[name]):
            compare_files(path, good)
    with pytest.raises(CompareError, match="round 2 of 1"):
        compare_files(good, good, round_no=2)


def test_the_cli_prints_the_table_and_refuses_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    emu, sim = tmp_path / "emu.json", tmp_path / "sim.json"
    emu.write_text(json.dumps(results({"h0": 0.1, "h1": 0.2, "h2": 0.4}, 10, 4, 4)))
    sim.write_text(json.dumps(results({"h0": 0.1, "h1": 0.1, "h2": 0.4}, 10, 4, 4)))
    assert main(["sim", "compare", str(emu), str(sim)]) == 0
    out = capsys.readouterr().out
    assert "goodput h1 (bit/s)" in out and "+100.0%" in out
    assert main(["sim", "compare", str(emu), str(sim), "--json"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["FCT p50 (s)"]["emu"] == 0.2 and rows["FCT p50 (s)"]["sim"] == 0.1
    assert main(["sim", "compare", str(emu)]) == 2
    assert "give the emulated run's results.json" in capsys.readouterr().err
    assert main(["sim", "compare", str(emu), str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def test_aggregate_goodput_and_the_stall_of_a_run_with_a_failure() -> None:
    emu_res = results({"h0": 0.1, "h1": 0.2, "h2": 0.4}, rtx=0, trims=0, rx_trimmed=0)
    sim_res = results({"h0": 0.1, "h1": 0.2, "h2": 0.5}, rtx=0, trims=0, rx_trimmed=0)
    rows = by_metric(compare(figures(emu_res), figures(sim_res)))
    assert rows["goodput, all flows (bit/s)"].emu == pytest.approx(3 * MIB * 8 / 0.4)
    assert rows["goodput, all flows (bit/s)"].sim == pytest.approx(3 * MIB * 8 / 0.5)
    assert "longest stall p100 (s)" not in rows  # no link event: no failure to judge
    for res, stalls in ((emu_res, (0.01, 0.9, 0.02)), (sim_res, (0.01, 1.2, 0.03))):
        res["link_events"] = [{"t": 0.1, "link": "leaf0-spine0", "up": False}]
        for row, stall in zip(res["workloads"][0]["per_flow"], stalls):
            row["longest_stall_s"] = stall
    stall = by_metric(compare(figures(emu_res), figures(sim_res)))["longest stall p100 (s)"]
    assert (stall.emu, stall.sim) == (0.9, 1.2)


def test_rows_are_judged_against_the_simulation_issue_bounds() -> None:
    assert judge(Row("FCT p99 (s)", 1.0, 1.09)) is True
    assert judge(Row("FCT p99 (s)", 1.0, 0.89)) is False
    assert judge(Row("goodput h0 (bit/s)", 100.0, 111.0)) is False
    assert judge(Row("goodput h0 (bit/s)", 100.0, 111.0), per_host=False) is None
    assert judge(Row("goodput, all flows (bit/s)", 100.0, 111.0), per_host=False) is False
    assert judge(Row("longest stall p100 (s)", 1.0, 1.19)) is True
    assert judge(Row("longest stall p100 (s)", 1.0, 1.21)) is False
    # counts: 20 %, or a couple of packets when both are small
    assert judge(Row("retransmitted packets", 100.0, 119.0)) is True
    assert judge(Row("retransmitted packets", 100.0, 130.0)) is False
    assert judge(Row("retransmitted packets", 0.0, 2.0)) is True
    assert judge(Row("retransmitted packets", 0.0, 3.0)) is False
    assert judge(Row("verified flows", 4.0, 4.0)) is True
    assert judge(Row("verified flows", 4.0, 3.0)) is False
    assert judge(Row("FCT p50 (s)", None, 1.0)) is None
    text = table([Row("FCT p50 (s)", 1.0, 1.5), Row("FCT p99 (s)", 1.0, 1.05)])
    assert [line.split()[-1] for line in text.splitlines()[2:]] == ["NO", "yes"]

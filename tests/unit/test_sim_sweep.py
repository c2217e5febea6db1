"""`mrcnet sim sweep`: every combination of the comma lists is one `mrcnet sim` run in its
own folder, the rows are the same whatever the pool (apart from wall times), a bad grid is
refused before any run, and Ctrl-C stops the pool."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from mrcnet.cli import main
from mrcnet.sim import sweep

GRID = ["sim", "sweep", "clos-2p", "--size", "64KiB,128KiB", "--seed", "1,2"]


def load(out: Path) -> tuple[Path, dict[str, Any]]:
    (folder,) = out.iterdir()
    return folder, json.loads((folder / "sweep.json").read_text())


def rows_without_wall(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in doc["rows"]]


def test_a_grid_runs_every_combination_the_same_way_whatever_the_pool(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*GRID, "--jobs", "2", "--out", str(tmp_path / "a")]) == 0
    table = capsys.readouterr().out
    assert main([*GRID, "--jobs", "1", "--out", str(tmp_path / "b")]) == 0
    folder, doc = load(tmp_path / "a")
    _, doc_b = load(tmp_path / "b")
    assert rows_without_wall(doc) == rows_without_wall(doc_b)  # deterministic, any pool
    assert doc["swept"] == {"size": ["64KiB", "128KiB"], "seed": ["1", "2"]}
    rows = doc["rows"]
    assert [(r["params"]["size"], r["params"]["seed"]) for r in rows] == [
        (65536, 1), (65536, 2), (131072, 1), (131072, 2)]
    for r in rows:
        assert r["error"] is None and r["completed"]
        assert r["verified_flows"] == r["flows"] == 4
        assert 0 < r["fct_p50_s"] <= r["fct_p99_s"] <= r["fct_p100_s"]
        assert r["worst_stall_s"] is None  # no failure in this grid
        assert (folder / r["run"] / "results.json").is_file()
    assert rows[1]["run"] == "002_size-64KiB_seed-2"
    assert doc["plots"] == ["sweep_size.png"]  # seeds are replicas, not an axis
    assert (folder / "sweep_size.png").stat().st_size > 0
    assert "64KiB" in table and "128KiB" in table and "4/4" in table
    # a sweep's run is the single run of the same options, byte for byte
    assert main(["sim", "clos-2p", "--size", "128KiB", "--seed", "2",
                 "--out", str(tmp_path / "one")]) == 0
    (single,) = (tmp_path / "one").iterdir()
    assert (single / "results.json").read_bytes() == (
        folder / rows[3]["run"] / "results.json").read_bytes()


def test_a_failure_in_the_grid_reports_the_worst_stall(tmp_path: Path) -> None:
    assert main(["sim", "sweep", "clos-2p", "--size", "256KiB", "--cp-delay", "0,1ms",
                 "--fail", "none,p0-leaf0-p0-spine0@0.0005", "--jobs", "1",
                 "--out", str(tmp_path)]) == 0
    _, doc = load(tmp_path)
    by = {(r["swept"]["cp_delay"], r["swept"]["fail"]): r for r in doc["rows"]}
    assert len(by) == 4
    assert by[("0", "none")]["worst_stall_s"] is None
    failed = by[("1ms", "p0-leaf0-p0-spine0@0.0005")]
    assert failed["params"]["fail"] == ["p0-leaf0-p0-spine0@0.0005"]
    assert failed["worst_stall_s"] > 0 and failed["verified_flows"] == 4
    assert by[("0", "none")]["params"]["cp_delay"] == 0.0
    assert failed["params"]["cp_delay"] == pytest.approx(1e-3)


@pytest.mark.parametrize(("argv", "message"), [
    (["--size", "1MiB,"], "empty value"),
    (["--size", "1MiB,lots"], "--size lots"),
    (["--cp-delay", "0,-1"], "--cp-delay -1"),
    (["--qp", "MRC,TCP"], "--qp TCP: one of MRC, RC"),
    (["--seed", "1,1"], "given twice"),
    (["--run", "permutation,bogus"], "unknown workload"),
    (["--fail", "none,nosuch@1"], "nosuch"),
    (["--fail", "none", "--fail", "none"], "give it once"),
    (["--seed", ",".join(str(i) for i in range(1, 102))], "--max-runs 101"),
    (["--size", "1KiB,2KiB", "--max-runs", "1"], "more than 1"),
    (["--jobs", "0"], "--jobs 0"),
])
def test_a_bad_grid_is_refused_before_any_run(argv: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "sweep", "clos-2p", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # no sweep folder, no run


def test_an_unknown_option_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sim", "sweep", "clos-2p", "--sizes", "1MiB,2MiB"])
    assert exc.value.code == 2
    assert "--sizes" in capsys.readouterr().err


def test_a_single_run_takes_one_value(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "clos-1p", "--size", "1MiB,2MiB", "--out", str(tmp_path)]) == 2
    assert "comma lists are for mrcnet sim sweep" in capsys.readouterr().err
    assert main(["sim", "clos-1p", "--jobs", "2", "--out", str(tmp_path)]) == 2


def _slow_task(task: sweep.Task) -> dict[str, Any]:
    """The first run finishes at once; the second interrupts the sweep (as Ctrl-C would) and
    would then run for a minute."""
    if task.point.index == 0:
        return {"index": 0, "run": task.point.name, "swept": task.point.swept,
                "params": sweep.params(task.point), "error": "stand-in", "completed": False,
                "wall_s": 0.0}
    os.kill(os.getppid(), signal.SIGINT)
    time.sleep(60)
    raise AssertionError("not terminated")


def test_ctrl_c_terminates_the_pool_and_keeps_the_finished_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "run_task", _slow_task)
    # mrcnet's main ignores SIGINT and SIGTERM once interrupted (the process is about to
    # exit); this one is pytest's and goes on, and its later children must not inherit that
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.monotonic()
    try:
        rc = main(["sim", "sweep", "clos-2p", "--size", "64KiB,128KiB", "--jobs", "2",
                   "--out", str(tmp_path)])
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert rc == 130
    assert time.monotonic() - t0 < 30
    assert not multiprocessing.active_children()  # every worker is gone
    _, doc = load(tmp_path)
    assert doc["interrupted"] and doc["runs"] == 2
    assert [r["index"] for r in doc["rows"]] in ([], [0])

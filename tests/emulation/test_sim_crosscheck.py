"""The simulator and the emulation run the same experiment (``mrcnet bench crosscheck``, small).

Each kind of the bench's cases, shrunk (``--small``): the permutation and the all-to-all on
clos-2p, the NSCC incast on incast-8, the clos-1p failover with MRC and with RC, RD AllReduce
on scaleup-ocs. Both sides
must describe one experiment (the same topology, workload, flow pairs and sizes: the
simulator's flows are the emulation's round 1), verify every flow without a QP error, and
give every figure the comparison reads. How close the figures are is the benchmark's to judge
(timing belongs to faithful benchmark runs, not to a CI machine); what the simulator decides
alone is checked here: after the cut, RC waits for the control plane and MRC does not.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from testbed.bench.crosscheck import Case, cases, check, small

pytestmark = pytest.mark.emulation

TDF = "4"


def _one(name: str, qp: str | None = None) -> Case:
    return small(next(c for c in cases()[name] if (qp is None or c.qp == qp)
                      and c.cp_delay in (None, 1.0)))


@pytest.mark.parametrize("case", [
    _one("permutation"), _one("all-to-all"), _one("incast"),
    _one("failover", "MRC"), _one("failover", "RC")], ids=lambda c: c.name)
def test_simulation_runs_the_emulated_experiment(case: Case, tmp_path: Path) -> None:
    result = check(case, TDF, tmp_path)
    emu_dir = Path(result["emulation"])
    try:
        assert result["mismatches"] == []
        rows = {r["metric"]: r for r in result["rows"]}
        flows = rows["verified flows"]
        assert flows["emu"] == flows["sim"] and flows["emu"] > 0
        assert rows["QP errors"]["emu"] == 0 and rows["QP errors"]["sim"] == 0
        sim = json.loads((Path(result["simulation"]) / "results.json").read_text())
        per_flow = sim["workloads"][0]["per_flow"]
        assert len(per_flow) == flows["sim"] and all(f["verified"] for f in per_flow)
        sources = {f["src"] for f in per_flow}
        for host in sources:
            row = rows[f"goodput {host} (bit/s)"]
            assert row["emu"] and row["sim"] and row["emu"] > 0 and row["sim"] > 0
        for q in (50, 99, 100):
            assert rows[f"FCT p{q} (s)"]["emu"] > 0 and rows[f"FCT p{q} (s)"]["sim"] > 0
        if case.fail:
            stall = rows["longest stall p100 (s)"]
            assert stall["emu"] is not None and stall["sim"] is not None
            assert case.cp_delay is not None
            if case.qp == "RC":  # one path: no byte moves until the routes avoid the cut
                assert stall["sim"] >= case.cp_delay
            else:  # MRC resends on the other EVs at once
                assert stall["sim"] < case.cp_delay / 2
    finally:
        if emu_dir.is_dir() and emu_dir.parent.name == "runs":
            shutil.rmtree(emu_dir)


def test_simulation_runs_the_emulated_collective(tmp_path: Path) -> None:
    """RD AllReduce on scaleup-ocs, every schedule, on both sides: every GPU's sum verified
    against the expected sum in both, the same schedules measured, the fixed plans the same
    (static never reconfigures, every-step at every change of topology; harvest's plan comes
    from each side's own calibration, so it may differ)."""
    case = small(cases()["collectives"][0])
    result = check(case, TDF, tmp_path)
    emu_dir = Path(result["emulation"])
    try:
        rows = {r["metric"]: r for r in result["rows"]}
        assert rows["sums verified"]["emu"] == rows["sums verified"]["sim"] == 1.0
        times = [m for m in rows if m.startswith("schedule ")]
        assert sorted(times) == ["schedule every-step (s)", "schedule harvest (s)",
                                 "schedule static (s)"]
        assert all(rows[m]["emu"] > 0 and rows[m]["sim"] > 0 for m in times)
        emu = json.loads((emu_dir / "collectives.json").read_text())
        sim = json.loads((Path(result["simulation"]) / "results.json").read_text())
        for name in ("static", "every-step"):
            assert (emu["schedules"][name]["reconfigurations"]
                    == sim["schedules"][name]["reconfigurations"])
        assert sim["schedules"]["static"]["reconfigurations"] == 0
        assert sim["schedules"]["every-step"]["reconfigurations"] > 0
    finally:
        if emu_dir.is_dir() and emu_dir.parent.name == "runs":
            shutil.rmtree(emu_dir)

"""`mrcnet sim` end to end: a run folder with results.json, the same bytes for the same
inputs, a link failure survived by MRC without a byte lost, clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrcnet.cli import main

SMALL = ["sim", "clos-1p", "--size", "256KiB"]


def results(out: Path) -> tuple[bytes, dict[str, object]]:
    (run_dir,) = out.iterdir()
    raw = (run_dir / "results.json").read_bytes()
    assert json.loads((run_dir / "perf.json").read_text())["events"] > 0
    return raw, json.loads(raw)


def test_the_same_inputs_give_byte_identical_results(tmp_path: Path) -> None:
    assert main([*SMALL, "--out", str(tmp_path / "a")]) == 0
    assert main([*SMALL, "--out", str(tmp_path / "b")]) == 0
    raw_a, res = results(tmp_path / "a")
    raw_b, _ = results(tmp_path / "b")
    assert raw_a == raw_b
    (summary,) = res["workloads"]  # type: ignore[misc]
    assert isinstance(summary, dict)
    assert summary["verified_flows"] == summary["flows"] == 4
    assert summary["verified_bytes"] == 4 * 256 * 1024
    assert res["completed"] and res["qp_errors"] == 0
    # goodput never beats the workload's capacity (computed apart, by the max-flow LP)
    assert 0 < summary["goodput_fraction"] <= 1.0
    assert main([*SMALL, "--seed", "2", "--out", str(tmp_path / "c")]) == 0
    raw_c, _ = results(tmp_path / "c")
    assert raw_c != raw_a  # the seed is an input: another permutation


def test_mrc_loses_no_byte_to_a_spine_link_failure(tmp_path: Path) -> None:
    out = tmp_path / "fail"
    assert main(["sim", "clos-2p", "--size", "1MiB", "--fail", "p0-leaf0-p0-spine0@0.002",
                 "--out", str(out)]) == 0
    _, res = results(out)
    (summary,) = res["workloads"]  # type: ignore[misc]
    assert isinstance(summary, dict)
    assert summary["verified_flows"] == 4 and summary["qp_errors"] == 0
    switches = res["switches"]
    assert isinstance(switches, dict)
    assert switches["drops"]["down"] > 0  # the cut really cost packets in flight
    assert summary["retransmitted_packets"] > 0  # and MRC resent them


@pytest.mark.parametrize(("argv", "message"), [
    (["sim", "clos-1p", "--run", "bogus"], "unknown workload"),
    (["sim", "scaleup-ocs", "--run", "permutation"], "circuit fabric"),
    (["sim", "scaleup-ocs", "--degree", "3"], "--degree 3"),
    (["sim", "scaleup-ocs", "--run", "allreduce:bogus"], "ALGORITHM"),
    (["sim", "scaleup-ocs", "--fail", "g0-ocs0@0.001"], "packet fabrics only"),
    (["sim", "scaleup-ocs", "--size", "100"], "multiple of 32"),
    (["sim", "clos-1p", "--fail", "nosuch@1"], "nosuch"),
    (["sim", "clos-1p", "--size", "lots"], "lots"),
    (["sim", "clos-1p", "--cp-delay", "-1"], "--cp-delay"),
    (["sim", "clos-1p", "clos-2p"], "one topology"),
    (["sim", "clos-1p", "--size", "65536GiB"], "sink buffers"),
])
def test_bad_input_is_refused_with_the_reason(argv: list[str], message: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # a refused run leaves no folder


def test_a_run_folder_has_each_qps_qlog_switch_samples_and_the_plots(tmp_path: Path) -> None:
    from hosts.agent.qlog import read_qlog

    out = tmp_path / "rec"
    assert main(["sim", "clos-2p", "--rate", "20Mbps", "--size", "256KiB", "--cc", "nscc",
                 "--lb", "reps", "--out", str(out)]) == 0
    (run_dir,) = out.iterdir()
    res = json.loads((run_dir / "results.json").read_text())
    # one qlog per QP: a writer and a sink per flow
    writers = [(r["src"], r["dst"]) for r in res["workloads"][0]["per_flow"]]
    files = sorted((run_dir / "qlog").glob("*.sqlog"))
    assert len(files) == 2 * len(writers)
    samples_cc = 0
    for path in files:
        header, events = read_qlog(path)
        assert header["trace"]["common_fields"]["reference_time"] == 0.0
        assert all(0.0 <= ev["time"] <= res["sim"]["simulated_s"] * 1e3 for ev in events)
        samples_cc += sum(1 for ev in events if ev["name"] == "mrc:recovery_metrics_updated")
    assert samples_cc > 0  # NSCC's window samples, which cc.png draws
    # switch samples every 10 simulated ms, on the emulation's fields; what reached the
    # hosts covers every verified byte plus headers and acknowledgements, not more than 10 %
    samples = res["samples"]
    assert len(samples) >= int(res["sim"]["simulated_s"] / 0.01)
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
    delivered = sum(samples[-1]["plane_bytes"])
    verified = res["workloads"][0]["verified_bytes"]
    assert verified < delivered < 1.1 * verified
    for name in ("overview.png", "goodput.png", "ev_states.png", "cc.png"):
        assert (run_dir / name).stat().st_size > 10_000, name

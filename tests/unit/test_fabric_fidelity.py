"""The fabric's fidelity verdict from lag-meter snapshots, and the --tdf option (no root)."""

from __future__ import annotations

import os

import pytest

from common.lag import LagMeter
from mrcnet.cmd_up import parse_tdf
from mrcnet.fabric.fidelity import Mark, agent_windows, assess, cpu_seconds, verdict, warning
from mrcnet.fabric.results import summary_table


def _run(m: LagMeter, late_until: float | None) -> None:
    """On-time work every 10 ms for 10 s, 9 s of it waiting in the OS, and optionally one
    piece of work due at 5.0 that ran at ``late_until``."""
    for i in range(1000):
        m.due(i * 0.01, i * 0.01 + 1e-4)
    m.waited(9.0)
    if late_until is not None:
        m.due(5.0, late_until)


def test_verdict_names_the_slowest_process_and_suggests_a_factor() -> None:
    switch, agent = LagMeter(0.0, tolerance=1e-3), LagMeter(0.0, tolerance=1e-3)
    first = Mark(t=0.0, wall=100.0, switches={"s1": switch.snapshot(0.0)},
                 cpu={"s1": 1.0, "agent-h0": 2.0})
    agent_start = agent.snapshot(0.0)
    _run(switch, None)
    _run(agent, 5.301)  # 300 ms behind in a 10 s window: 3%
    last = Mark(t=10.0, wall=110.0, switches={"s1": switch.snapshot(10.0)},
                cpu={"s1": 6.0, "agent-h0": 11.0})  # 0.5 and 0.9 cores
    agents = agent_windows([("h0", {"timing": {"start": agent_start,
                                               "end": agent.snapshot(10.0)}})])
    rep = assess(1.0, first, last, agents, goodput_fraction=0.5, cores=2)
    assert rep["faithful"] is False
    assert rep["slowest"] == "agent-h0"
    assert rep["max_lag_fraction"] == pytest.approx(0.03, abs=1e-3)
    assert rep["processes"]["s1"]["lag_fraction"] == 0.0
    assert rep["processes"]["s1"]["busy_fraction"] == pytest.approx(0.1)
    assert rep["processes"]["agent-h0"]["cpu_cores"] == pytest.approx(0.9)
    assert rep["cpu_cores_used"] == pytest.approx(1.4)
    # 1.4 cores at half the capacity: 2.8 cores needed, at most 80% of 2 -> 1.75x -> 2.
    assert rep["suggested_tdf"] == 2.0
    text = warning(rep)
    assert text is not None and "agent-h0" in text and "--tdf 2" in text
    ok = assess(1.0, first, last, {}, cores=2)
    assert ok["faithful"] is True and ok["suggested_tdf"] is None and warning(ok) is None


def test_agent_windows_span_all_jobs_of_a_host() -> None:
    a = {"timing": {"start": {"t": 1.0}, "end": {"t": 3.0}}}
    b = {"timing": {"start": {"t": 0.5}, "end": {"t": 2.0}}}
    w = agent_windows([("h0", a), ("h0", b), ("h1", {"errors": ["no timing"]})])
    assert list(w) == ["h0", "h1"]
    assert w["h0"][0]["t"] == 0.5 and w["h0"][1]["t"] == 3.0
    assert isinstance(w["h1"], str)  # no snapshots: a reason, not a window


def test_faithful_is_not_true_without_a_measurement_of_every_process() -> None:
    """No evidence, no verdict: a run with nothing measured, an unreadable switch or an agent
    without lag snapshots is ``faithful: None`` with the reason, never ``True``."""
    nothing = assess(1.0, Mark(t=0.0, wall=0.0), Mark(t=1.0, wall=1.0), {}, cores=2)
    assert nothing["faithful"] is None and nothing["reason"] == "no process was measured"
    assert warning(nothing) == "fidelity unknown: no process was measured"
    meter = LagMeter(0.0, tolerance=1e-3)
    first = Mark(t=0.0, wall=0.0, switches={"s1": meter.snapshot(0.0)})
    _run(meter, None)
    last = Mark(t=10.0, wall=10.0, switches={"s1": meter.snapshot(10.0)},
                unmeasured={"s2": "unreadable: UNAVAILABLE"})
    rep = assess(1.0, first, last, {}, cores=2)
    assert rep["faithful"] is None and "s2: unreadable" in rep["reason"]
    whole = Mark(t=10.0, wall=10.0, switches={"s1": meter.snapshot(10.0)})
    agents = agent_windows([("h0", {"errors": ["crashed"]})])
    rep = assess(1.0, first, whole, agents, cores=2)
    assert rep["faithful"] is None and "agent-h0" in rep["reason"]
    # the same run with every process measured on time is faithful
    assert assess(1.0, first, whole, {}, cores=2)["faithful"] is True


def test_cpu_seconds_reads_this_process() -> None:
    own = cpu_seconds(os.getpid())
    t = os.times()
    assert own is not None and own == pytest.approx(t.user + t.system, abs=0.05)
    assert cpu_seconds(2**22 + 12345) is None  # no such process


def test_tdf_option() -> None:
    assert parse_tdf("1", "embedded") == 1.0
    assert parse_tdf("12.5", "embedded") == 12.5
    assert parse_tdf("auto", "embedded") is None
    for bad in ("0.5", "fast", "-2", "nan"):
        with pytest.raises(ValueError, match="--tdf"):
            parse_tdf(bad, "embedded")
    with pytest.raises(ValueError, match="simple_switch_grpc runs on the wall clock"):
        parse_tdf("4", "bmv2")
    with pytest.raises(ValueError, match="simple_switch_grpc runs on the wall clock"):
        parse_tdf("auto", "bmv2")
    assert parse_tdf("1", "bmv2") == 1.0


def test_summary_table_labels_virtual_time_and_shows_the_verdict() -> None:
    w = {"workload": "all-to-all", "qp_type": "MRC", "flows": 12, "verified_flows": 12,
         "verified_bytes": 12 << 20, "qp_errors": 0, "retransmitted_packets": 3,
         "seconds": 0.5, "goodput_fraction": 0.913, "fidelity": {"faithful": False}}
    table = summary_table([w], virtual=True)
    assert "virtual s" in table.splitlines()[0]
    assert "91%" in table and "NO" in table
    assert "virtual" not in summary_table([w]).splitlines()[0]


def test_the_verdict_of_a_workload_summary() -> None:
    assert verdict({"fidelity": {"faithful": True, "max_lag_fraction": 0.002}}) == {
        "faithful": True, "max_lag_fraction": 0.002}
    # no monitor (BMv2): never called faithful
    assert verdict({"fidelity": None}) == {"faithful": None, "max_lag_fraction": None}
    assert verdict({}) == {"faithful": None, "max_lag_fraction": None}
    assert verdict({"fidelity": {"faithful": None, "max_lag_fraction": 0.0}})["faithful"] is None

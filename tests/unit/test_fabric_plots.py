"""Run plots: failures as shaded spans (one legend entry per kind), legends outside the axes,
no warnings, and retransmissions over time per QP class from the QPs' qlog files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hosts.agent.qlog import QlogWriter
from mrcnet.fabric.liveview import Sample
from mrcnet.fabric.results import failure_spans, plot, retransmission_series


def _samples(n: int = 20) -> list[Sample]:
    return [Sample(0.5 * i, [1e6 * i, 2e6], 0, 0, 0, i % 3, [i, i]) for i in range(n)]


EVENTS = [
    {"t": 2.0, "link": "p0-leaf0-p0-spine0", "up": False},
    {"t": 5.0, "link": "p0-leaf0-p0-spine0", "up": True},
    {"t": 3.0, "link": "h1:0", "up": False},
    {"t": 6.0, "link": "p1-leaf0-p1-spine1", "up": False},  # never restored
]


def test_failure_spans_pair_downs_with_ups_and_end_open_ones() -> None:
    assert failure_spans(EVENTS, 9.5) == [
        ("link", "p0-leaf0-p0-spine0", 2.0, 5.0),
        ("host port", "h1:0", 3.0, 9.5),
        ("link", "p1-leaf0-p1-spine1", 6.0, 9.5),
    ]


def _writer(run_dir: Path, host: str, qpn: int, qp_type: str, wall0: float) -> QlogWriter:
    """A writer job's files as a run leaves them, and a qlog writer for its QP."""
    d = run_dir / "jobs" / host
    d.mkdir(parents=True, exist_ok=True)
    (d / f"f{qpn}-writer.job.json").write_text(json.dumps({"qp_type": qp_type}))
    (d / f"f{qpn}-writer.result.json").write_text(json.dumps({"qpn": qpn}))
    w = QlogWriter(run_dir / "qlog", host, t0=0.0)
    w.reference_ms = wall0 * 1000.0
    return w


def _jobs(run_dir: Path, host: str, qpn: int, qp_type: str, rtx: list[int], wall0: float,
          ) -> None:
    w = _writer(run_dir, host, qpn, qp_type, wall0)
    for i, n in enumerate(rtx):
        w.event(qpn, "mrc:qp_metrics", {"tx_rtx": n}, float(i))
    w.close()


def test_retransmissions_per_class_sum_the_writer_qps(tmp_path: Path) -> None:
    wall0 = 1_700_000_000.0
    _jobs(tmp_path, "h0", 3, "MRC", [0, 4, 9], wall0 + 1.0)
    _jobs(tmp_path, "h1", 5, "MRC", [1, 1, 2], wall0 + 1.5)
    _jobs(tmp_path, "h2", 7, "RC", [0, 30], wall0)
    series = retransmission_series(tmp_path, wall0)
    assert series["RC"] == [(0.0, 0), (1.0, 30)]
    assert series["MRC"] == [(1.0, 0), (1.5, 1), (2.0, 5), (2.5, 5), (3.0, 10), (3.5, 11)]


def test_plots_are_written_without_warnings(tmp_path: Path) -> None:
    wall0 = 1_700_000_000.0
    _jobs(tmp_path, "h0", 3, "MRC", [0, 4, 9], wall0)
    _jobs(tmp_path, "h2", 7, "RC", [0, 30], wall0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = plot(tmp_path, _samples(), EVENTS, [], planes=2, wall_t0=wall0)
    assert [p.name for p in paths] == ["overview.png", "goodput.png", "ev_states.png",
                                       "retransmissions.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_legend_has_one_entry_per_failure_kind_outside_the_axes(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mrcnet.fabric.plotkit import finish as _finish

    fig, ax = plt.subplots()
    ax.plot([0, 9], [0, 1], label="plane 0")
    _finish(ax, EVENTS, 9.5, "y", "t")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["plane 0", "link down", "host port down"]
    fig.canvas.draw()
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 >= ax.get_window_extent().x1  # right of the axes
    plt.close(fig)


def test_windows_leave_out_the_idle_time_between_workloads() -> None:
    from mrcnet.fabric.plotkit import PAD, windows

    # a scenario 0.5-8.2 s with a flap inside it, a minute at the prompt, a CLI run 70-72 s
    spans = windows([(0.5, 3.0), (3.1, 8.2), (70.0, 72.0)],
                    [{"t": 2.0, "link": "x", "up": False}, {"t": 5.0, "link": "x", "up": True}],
                    0.0, 90.0)
    assert spans == [(0.5 - PAD, 8.2 + PAD), (70.0 - PAD, 72.0 + PAD)]
    assert windows(None, [], 0.0, 9.0) == [(0.0, 9.0)]  # no workload: the sampled span
    # a link event outside every workload widens the window it is near, or makes its own
    assert windows([(1.0, 2.0)], [{"t": 3.5, "link": "x", "up": False}], 0.0, 9.0) == [
        (1.0 - PAD, 3.5 + PAD)]


def test_retransmissions_by_trigger_sum_every_writer_qp(tmp_path: Path) -> None:
    from mrcnet.fabric.plotkit import retransmissions_by_trigger

    wall0 = 1_700_000_000.0
    for host, qpn, counts in (("h0", 3, [(0, 0), (2, 1), (5, 1)]), ("h1", 5, [(1, 0), (1, 4)])):
        d = tmp_path / "jobs" / host
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{qpn}-writer.job.json").write_text(json.dumps({"qp_type": "MRC"}))
        (d / f"f{qpn}-writer.result.json").write_text(json.dumps({"qpn": qpn}))
        w = QlogWriter(tmp_path / "qlog", host, t0=0.0)
        w.reference_ms = wall0 * 1000.0
        for i, (nack, probe) in enumerate(counts):
            w.event(qpn, "mrc:qp_metrics", {"rtx_nack": nack, "rtx_probe": probe,
                                            "rtx_ack_timeout": 0}, float(i))
        w.close()
    series = retransmissions_by_trigger(tmp_path, wall0)
    assert set(series) == {"nack", "probe"}  # a trigger that never fired is left out
    assert series["nack"][-1][1] == 5 + 1  # h0's last 5 + h1's last 1
    assert series["probe"][-1][1] == 1 + 4
    assert [t for t, _ in series["nack"]] == sorted(t for t, _ in series["nack"])


def test_overview_shows_the_busiest_port_of_the_windows(tmp_path: Path) -> None:
    from mrcnet.fabric.plotkit import busiest_port

    samples = [Sample(0.5 * i, [1e6, 2e6], 0, 0, 0, 0, [i, i],
                      port_depth={"p0-leaf0:3": 1000 * i, "p1-leaf1:2": 30000 if i == 2 else 0})
               for i in range(20)]
    assert busiest_port(samples) == "p1-leaf1:2"
    assert busiest_port(samples, (5.0, 10.0)) == "p0-leaf0:3"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = plot(tmp_path, samples, EVENTS, [], planes=2, workloads=[(1.0, 4.0), (7.0, 9.0)])
    assert (tmp_path / "overview.png") in paths


def _nscc_qlog(run_dir: Path, host: str, qpn: int, wall0: float, samples: int) -> None:
    w = _writer(run_dir, host, qpn, "MRC", wall0)
    for i in range(samples):  # 10 more SACKs per sample, i of them ECN-marked
        cc = {"cwnd": 8192.0 * (i + 1), "max_wnd": 65536.0, "rtt": 0.002 + 0.001 * i,
              "avg_delay": 0.0005 * i, "target_delay": 0.003, "sacks": 10 * i,
              "ecn": sum(range(i + 1))}
        w.event(qpn, "mrc:qp_metrics", {"tx_rtx": 0, "cc": cc}, 0.5 * i)
    w.event(qpn + 1, "mrc:qp_metrics", {"cc": {"cwnd": 1.0}}, 0.0)  # fixed window: no plot
    w.close()


def test_the_nscc_plot_of_a_chosen_qp(tmp_path: Path) -> None:
    from mrcnet.fabric import ccplot

    wall0 = 1_700_000_000.0
    _nscc_qlog(tmp_path, "h0", 3, wall0, 4)
    _nscc_qlog(tmp_path, "h1", 5, wall0 + 1.0, 6)
    s = ccplot.chosen(tmp_path, wall0, None)  # the NSCC writer with the most samples
    assert s is not None and (s.host, s.qpn) == ("h1", 5)
    assert s.t == [1.0 + 0.5 * i for i in range(6)]
    assert s.cwnd == [8192.0 * (i + 1) for i in range(6)] and s.target_delay == 0.003
    # share of each interval's SACKs that were marked: i marks among 10 new SACKs
    assert s.ecn_share == [None] + [i / 10 for i in range(1, 6)]
    named = ccplot.chosen(tmp_path, wall0, "h0:3")
    assert named is not None and len(named.t) == 4
    for bad in ("h0:4", "h9:3"):  # no NSCC samples of that QP (fixed window, no file)
        with pytest.raises(ccplot.CcPlotError, match="no NSCC samples"):
            ccplot.chosen(tmp_path, wall0, bad)
    with pytest.raises(ccplot.CcPlotError, match="HOST:QPN"):
        ccplot.parse_qp("h0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paths = plot(tmp_path, _samples(), [], [], 2, wall_t0=wall0, cc_qp="h0:3")
    assert tmp_path / "cc.png" in paths and (tmp_path / "cc.png").stat().st_size > 0


def test_the_nscc_plot_prefers_the_cores_fine_samples(tmp_path: Path) -> None:
    """A QP with the core's recovery:metrics_updated records (every 10 ms in fabric runs) is
    plotted from those, not from the agent's 0.5 s qp_metrics."""
    from mrcnet.fabric import ccplot

    wall0 = 1_700_000_000.0
    w = _writer(tmp_path, "h2", 7, "MRC", wall0)
    w.event(7, "mrc:qp_metrics", {"cc": {"cwnd": 1.0, "target_delay": 0.003}}, 0.5)
    for i in range(50):  # every 10 ms
        w.event(7, "recovery:metrics_updated",
                {"cwnd": 1000.0 + i, "max_wnd": 2000.0, "rtt": 0.004, "avg_delay": 0.001,
                 "target_delay": 0.003, "sacks": i, "ecn": 0}, 0.01 * i)
    w.close()
    s = ccplot.chosen(tmp_path, wall0, "h2:7")
    assert s is not None and len(s.t) == 50 and s.cwnd[-1] == 1049.0
    assert s.t[1] - s.t[0] == pytest.approx(0.01)


def test_a_released_qp_leaves_the_current_ev_states() -> None:
    from common.proto import mrc_ctl_pb2 as pb
    from mrcnet.fabric.liveview import EvTracker

    def report(host: str, qpn: int, ev: int, state: int) -> pb.EvEvent:
        return pb.EvEvent(host=host, qpn=qpn, ev=pb.Ev(value=ev, port=1), state=state)

    t = EvTracker()
    t.on_event(report("h0", 5, 0x10, pb.EV_ASSUMED_BAD))
    t.on_event(report("h0", 6, 0x10, pb.EV_ASSUMED_BAD))
    assert t.counts() == {"ASSUMED_BAD": 2}
    t.retire("h0", 5)
    assert t.counts() == {"ASSUMED_BAD": 1}
    t.on_event(report("h0", 5, 0x11, pb.EV_ASSUMED_BAD))  # late, from the released QP
    assert t.counts() == {"ASSUMED_BAD": 1} and len(t.events) == 3  # kept in the timeline
    assert t.evs_that_went("ASSUMED_BAD") == {(0x10, 1), (0x11, 1)}

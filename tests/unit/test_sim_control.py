"""The controller's logic in the simulator (mrcnet/sim/control.py): the run's profiles reach
every host's core, the jobs' QPs get the emulation's attributes, a link failure goes through
the controller and its routes converge ``cp_delay`` simulated seconds later, so RC (one
path, no spraying) survives a cut link the way it does in the emulation."""

from __future__ import annotations

import pytest

from controller.profile_store import NSCC, nscc_defaults
from hosts.transport.types import QpHintFlag, RetryAttr
from mrcnet.fabric.ctlclient import ev_array, host_link_rate
from mrcnet.fabric.runparams import ack_timeout_exponent, core_tuning
from mrcnet.fabric.workloads import workload_flows
from mrcnet.sim.control import SimController
from mrcnet.sim.fabric import build_fabric
from mrcnet.sim.hostnode import SimHost, agent_config
from mrcnet.sim.run import SimOptions, simulate
from mrcnet.sim.workload import start_flows
from tests.unit.test_sim_fabric import Capture, mrc_frame
from topologies.loader import load
from topologies.model import PathMode
from topologies.paths import base_rtt
from topologies.trace import trace


def test_hosts_get_the_controllers_profiles_and_the_jobs_qp_attributes() -> None:
    topo = load("clos-2p")
    mode = PathMode.STEV
    fab = build_fabric(topo, mode)
    base = base_rtt(topo)
    ctl = SimController(fab, None, "reps", nscc_base_rtt=base)
    hosts = {}
    for h in topo.hosts:
        hosts[h.name] = SimHost(h.name, fab, agent_config(fab.plan, h.name, mode, 65536,
                                                          core_tuning()))
        ctl.install(hosts[h.name])
    # CC profile 1: NSCC as the controller's defaults scale it for this fabric
    want = nscc_defaults(host_link_rate(topo), base, topo.fabric.mtu)
    cc = hosts["h2"].core.cc_profile(1)
    assert cc is not None and cc.algorithm == NSCC
    assert cc.params == {f.name: pytest.approx(float(v)) for f, v in want.ListFields()}
    job = {"size": 65536, "qp_type": "MRC", "ev_profile": 1, "cc_profile": 1,
           "ack_timeout": ack_timeout_exponent(base)}
    (flow,) = workload_flows([("h0", "h3")], 65536, seed=2, count=1)
    (jobs,) = start_flows(hosts, [flow], job, seed=2)
    core = hosts["h0"].core
    # the writer sprays over the controller's EV profile 1, EV for EV
    _fmt, _widths, evs = ev_array(topo, mode)
    assert {(ev, port + 1) for ev, port, _state in core.ev_states(jobs.wqp)} == \
        {(e.value, e.port) for e in evs}
    attr = core.query_qp(jobs.wqp)
    assert (attr.ev_profile_id, attr.cc_profile_id) == (1, 1)
    assert attr.timeout == ack_timeout_exponent(base) >= 17
    assert attr.retry == RetryAttr(7, 25)
    assert QpHintFlag.SVC_TIME in attr.qp_hint  # the API's default hint, as the jobs'


def test_routes_converge_cp_delay_after_a_cut_and_come_back_after_a_restore() -> None:
    """A frame whose EV picks the cut spine is dropped until the controller rewrote the
    leaf's routes (cp_delay later); then it goes round; after the restore (and cp_delay)
    it takes its own spine again."""
    topo = load("clos-2p")
    mode = PathMode.STEV
    fab = build_fabric(topo, mode)
    ctl = SimController(fab, cp_delay=0.01)
    h3 = Capture(fab.sched)
    fab.attach("h3", 0, h3)
    ev = next(e for e in range(0, 1 << 32, 1 << 29)
              if "p0-spine0" in trace(topo, mode, 0, "h0", "h3", e).nodes)
    (link,) = [ln for ln in topo.links if {ln.a.node, ln.b.node} == {"p0-leaf0", "p0-spine0"}]
    sched = fab.sched
    spine0, spine1 = fab.switches["p0-spine0"].counters, fab.switches["p0-spine1"].counters

    def send_at(t: float) -> None:
        sched.run(until=t)
        fab.send("h0", 0, mrc_frame(topo, "h0", "h3", ev))
        sched.run(until=t + 0.001)

    ctl.set_links((link,), up=False)
    send_at(0.005)  # before convergence: the leaf still sends it to the dead port
    assert h3.got == [] and ctl.convergence is not None and not ctl.convergence.withdrawn
    send_at(0.012)  # after: round the other spine
    assert len(h3.got) == 1 and spine1.rx_frames == 1 and spine0.rx_frames == 0
    assert ctl.convergence.withdrawn  # routes to h2/h3 at leaf0 and h0/h1 at leaf1
    ctl.set_links((link,), up=True)
    send_at(0.015)  # restored link, routes not yet restored: still round
    assert spine1.rx_frames == 2 and spine0.rx_frames == 0
    send_at(0.03)
    assert len(h3.got) == 3 and spine0.rx_frames == 1 and not ctl.convergence.withdrawn
    assert [line.split(" ", 2)[2] for line in ctl.log] == [
        "p0-leaf0 port 3 down; routes recomputed in 0.010 s",
        "p0-spine0 port 1 down; routes recomputed in 0.010 s",
        "reconciled: 4 route(s) rewritten, 4 withdrawn now",
        "reconciled: 0 route(s) rewritten, 4 withdrawn now",
        "p0-leaf0 port 3 up; routes recomputed in 0.010 s",
        "p0-spine0 port 1 up; routes recomputed in 0.010 s",
        "reconciled: 4 route(s) rewritten, 0 withdrawn now",
        "reconciled: 0 route(s) rewritten, 0 withdrawn now"]


FAIL = ("p0-leaf0-p0-spine0@0.002",)


def test_rc_survives_a_cut_link_once_the_routes_converge() -> None:
    """RC has one path: its flows over the cut link retransmit at their ACK timeout until the
    controller has moved the routes, then finish, every byte verified and no QP in error."""
    topo = load("clos-2p")
    res = simulate(topo, SimOptions(qp="RC", size=512 * 1024, fail=FAIL, cp_delay=0.05,
                                    limit_s=5.0)).results
    (wl,) = res["workloads"]
    assert res["completed"] and wl["verified_flows"] == 4 and res["qp_errors"] == 0
    assert res["link_events"] == [{"t": 0.002, "link": "p0-leaf0-p0-spine0", "up": False}]
    assert any("reconciled: 4 route(s)" in line for line in res["convergence"])
    assert res["mechanisms"].get("rtx_ack_timeout", 0) > 0  # recovered by its timeout
    assert res["switches"]["drops"]["down"] > 0
    # the flows that waited for the routes finished after them: later than cp_delay
    assert max(r["fct_s"] for r in wl["per_flow"]) > 0.052


def test_without_convergence_rc_flows_over_the_cut_link_do_not_finish() -> None:
    """The same run with the controller's reaction later than the run's limit: the flows on
    the dead path are still retrying when the run gives up (the cut is what stops them)."""
    topo = load("clos-2p")
    res = simulate(topo, SimOptions(qp="RC", size=512 * 1024, fail=FAIL, cp_delay=30.0,
                                    limit_s=2.0)).results
    (wl,) = res["workloads"]
    assert not res["completed"] and 0 < wl["verified_flows"] < 4
    assert res["convergence"] and not any("reconciled" in ln for ln in res["convergence"])
    stuck = [r for r in wl["per_flow"] if not r["verified"]]
    assert all(r["writer_qp"] == "RTS" for r in stuck)  # retrying, not in error

"""Whole fabrics on every kind of switch: what ``mrcnet up TOPO --switch KIND --run
all-to-all --fail A-B@2 --restore A-B@5 --no-cli --json`` runs, written once against the
switch-target interface and run on each kind (switch/targets/: the embedded target and
BMv2), in every path mode of clos-2p on BMv2 and in SRv6 on fattree-3t, plus the CLI's link,
port and stats commands on BMv2 switches.

BMv2 cases are skipped with a reason where BMv2 is not installed. Sizes are small and the
workload repeats for 6 s so that the failure (2 s) and the restoration (5 s) both fall
inside traffic.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from common.bmv2_cli import register_value, run_cli
from common.netns import wait_until
from mrcnet.fabric.cli_shell import FabricCLI
from mrcnet.fabric.failures import parse_schedule
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from mrcnet.fabric.scenario import run_scenario
from switch.targets import kinds, target_class
from tests.emulation.switch_util import BMV2_MISSING, bmv2_available
from tests.emulation.test_fabric_up import _pids, assert_clean
from topologies.loader import load

pytestmark = pytest.mark.emulation
needs_bmv2 = pytest.mark.skipif(not bmv2_available(), reason=BMV2_MISSING)

SIZE = 512 << 10
DURATION = 6.0


def _port_down(fab: Fabric, switch: str, port: int) -> int:
    """MrcIngress.port_down[port] of a BMv2 switch, read over Thrift."""
    assert fab.mn is not None
    sw = fab.mn.switches[switch]
    return register_value(run_cli(sw.thrift_port, [f"register_read MrcIngress.port_down {port}"])[0])


def _run(run_prefix: str, tmp_path: Path, topology: str, mode: str, link: str,
         kind: str = "bmv2") -> dict[str, Any]:
    topo = load(topology)
    events = parse_schedule(topo, [f"{link}@2"], [f"{link}@5"])
    fab = Fabric(RunOptions(topology=topology, switch=kind, mode=mode, prefix=run_prefix,
                            results_root=tmp_path, show=False))
    try:
        fab.start()
        pids, sock_dir = _pids(fab), fab.sock_dir
        res = run_scenario(fab, "all-to-all", SIZE, events=events, duration=DURATION)
    finally:
        fab.stop()
    assert_clean(run_prefix, pids, sock_dir)
    return res


def _check(res: dict[str, Any], link: str, ends: list[str], kind: str = "bmv2") -> None:
    assert res["switch"] == kind
    assert res["completed"] and res["qp_errors"] == 0, res["workloads"]
    # rounds run back to back until DURATION (past the restore at 5 s): one slow round on a
    # loaded machine may span the whole schedule, so the count of rounds is not asserted
    rounds = len(res["workloads"])
    assert rounds >= 1 and res["verified_bytes"] == rounds * 12 * SIZE
    assert [(e["link"], e["up"]) for e in res["link_events"]] == [(link, False), (link, True)]
    assert not res["failure_errors"]
    # the port changes reached the controller's convergence through its BMv2 port state
    lines = "\n".join(res["convergence"])
    for end in ends:
        assert f"{end} down" in lines and f"{end} up" in lines, lines
    # the live view read the switches through the controller's drivers: every plane
    # delivered bytes to its hosts
    delivered = res["samples"][-1]["plane_bytes"]
    assert delivered and min(delivered) > 0, delivered
    # the verdict has evidence: measured where the kind keeps a lag meter, open otherwise
    for w in res["workloads"]:
        if target_class(kind).has_lag_meter:
            assert w["fidelity"]["faithful"] is not None, w["fidelity"]
        else:  # never called faithful without the switches' evidence (false if one lagged)
            assert w["fidelity"]["faithful"] is not True
            unmeasured = w["fidelity"]["unmeasured"]
            assert unmeasured and all("keep no lag meter" in why
                                      for why in unmeasured.values()), unmeasured
            procs = w["fidelity"]["processes"]
            assert not [n for n, p in procs.items() if p["kind"] == "switch"]


KIND_CASES = [pytest.param(k, marks=[] if target_class(k).available() else
                           [pytest.mark.skip(reason=target_class(k).unavailable_reason())],
                           id=k) for k in kinds()]


@pytest.mark.parametrize("kind", KIND_CASES)
def test_the_same_fabric_scenario_runs_on_every_kind_of_switch(
    run_prefix: str, tmp_path: Path, kind: str
) -> None:
    """One scenario, written against the switch-target interface, on each kind."""
    res = _run(run_prefix, tmp_path, "clos-2p", "stev", "p0-leaf0-p0-spine0", kind)
    _check(res, "p0-leaf0-p0-spine0", ["p0-leaf0 port 3", "p0-spine0 port 1"], kind)


@needs_bmv2
@pytest.mark.parametrize("mode", ["ecmp", "srv6"])
def test_clos_2p_all_to_all_through_a_link_failure_on_bmv2(
    run_prefix: str, tmp_path: Path, mode: str
) -> None:
    res = _run(run_prefix, tmp_path, "clos-2p", mode, "p0-leaf0-p0-spine0")
    _check(res, "p0-leaf0-p0-spine0", ["p0-leaf0 port 3", "p0-spine0 port 1"])


@needs_bmv2
def test_fattree_3t_srv6_all_to_all_through_a_link_failure_on_bmv2(
    run_prefix: str, tmp_path: Path
) -> None:
    res = _run(run_prefix, tmp_path, "fattree-3t", "srv6", "pod0-agg0-core0")
    _check(res, "pod0-agg0-core0", ["pod0-agg0 port 3", "core0 port 1"])


SCRIPT = """\
link p0-leaf0 p0-spine0 down
stats
run pair:h0:h2 MRC 256KiB
"""


@needs_bmv2
def test_cli_link_port_and_stats_on_bmv2(
    run_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``link A B down|up`` writes port_down at both BMv2 ends, ``port HOST N down`` reaches
    the controller through the switch port's carrier, ``stats`` reads BMv2 counters."""
    script = tmp_path / "script.txt"
    script.write_text(SCRIPT)
    fab = Fabric(RunOptions(switch="bmv2", prefix=run_prefix, results_root=tmp_path,
                            show=False))
    try:
        fab.start()
        assert fab.ctl is not None
        assert _port_down(fab, "p0-leaf0", 3) == 0
        with open("/dev/null") as devnull:
            FabricCLI(fab, size=256 << 10, stdin=devnull, script=str(script))
        out = capsys.readouterr().out
        down = (_port_down(fab, "p0-leaf0", 3), _port_down(fab, "p0-spine0", 1))
        links = {(ln.a, ln.b): ln.up for ln in fab.ctl.topology().links}
        fab.set_link("p0-leaf0:3", "p0-leaf0-p0-spine0", True)
        up = (_port_down(fab, "p0-leaf0", 3), _port_down(fab, "p0-spine0", 1))
        # h1's NIC port 1 faces p1-leaf0 port 2: its carrier loss is the controller's event
        fab.set_host_port("h1", 1, False)
        wait_until(lambda: _port_down(fab, "p1-leaf0", 2) == 1, 20,
                   "p1-leaf0 port 2 down after h1 port 1 lost carrier")
        fab.set_host_port("h1", 1, True)
        wait_until(lambda: _port_down(fab, "p1-leaf0", 2) == 0, 20,
                   "p1-leaf0 port 2 up after h1 port 1 came back")
        # the controller logs a port change when it recomputed routes (cp-delay later)
        logfile = fab.run_dir / "controller.log"
        wait_until(lambda: "p1-leaf0 port 2 up" in logfile.read_text(), 20,
                   "the controller logged p1-leaf0 port 2 up")
        log = logfile.read_text()
    finally:
        fab.stop()
    assert "link p0-leaf0:3 -- p0-spine0:1 down" in out
    assert down == (1, 1) and up == (0, 0)
    assert links[("p0-leaf0:3", "p0-spine0:1")] is False
    assert "plane 0:" in out and "plane 1:" in out and "drops" in out  # stats
    assert "pair:h0:h2" in out and "1/1" in out  # a verified flow around the failed link
    assert "p1-leaf0 port 2 down" in log and "p1-leaf0 port 2 up" in log
    assert not [n for _, n in socket.if_nameindex() if n.startswith(run_prefix)]

"""The fabric CLI (Mininet's CLI extended), driven by a script on a running clos-2p fabric."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from common.proto import mrc_ctl_pb2 as pb
from mrcnet.fabric.cli_shell import FabricCLI, parse_evs
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from switch.stats import fetch

pytestmark = pytest.mark.emulation

SCRIPT = """\
evs
link p0-leaf0 p0-spine0 down
stats
run pair:h0:h2 MRC 256KiB
link p0-leaf0 p0-spine0 up
deny 0x100@1 0x80000101@1
allow 0x80000101@1
port h1 1 down
ev h0
link p0-leaf0 p0-leaf1 down
port h9 0 down
run ring
deny 0x999@1
h0 true
ctl topo
ctl ev 1 --query 0x100@1
ctl link p0-leaf0:3 sideways
"""


def test_cli_commands(run_prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "script.txt"
    script.write_text(SCRIPT)
    fab = Fabric(RunOptions(prefix=run_prefix, results_root=tmp_path, show=False))
    try:
        fab.start()
        assert fab.ctl is not None and fab.mn is not None
        with open("/dev/null") as devnull:
            FabricCLI(fab, size=256 << 10, stdin=devnull, script=str(script))
        out = capsys.readouterr().out
        links = {(ln.a, ln.b): ln.up for ln in fab.ctl.topology().links}
        profile = fab.ctl.ctl.QueryEvProfile(pb.QueryEvProfileRequest(profile_id=1)).profile
        p1_leaf0 = {p.port: p for p in fetch(fab.mn.switches["p1-leaf0"].grpc_address).ports}
    finally:
        fab.stop()
    assert "0x100@1" in out and "0x80000117@2" in out  # evs
    assert "link p0-leaf0:3 -- p0-spine0:1 down" in out
    assert "plane 0:" in out and "plane 1:" in out  # stats
    assert "pair:h0:h2" in out and "1/1" in out  # run: one flow, verified
    assert "link p0-leaf0:3 -- p0-spine0:1 up" in out
    assert links[("p0-leaf0:3", "p0-spine0:1")] is True
    assert "denied: 0x100@1, 0x80000101@1" in out and "allowed: 0x80000101@1" in out
    assert [(int(e.value), int(e.port)) for e in profile.denied] == [(0x100, 1)]
    assert "h1 port 1 down" in out
    assert not p1_leaf0[2].carrier_up  # p1-leaf0:2 faces h1:1
    assert "link: " in out  # p0-leaf0 and p0-leaf1 are not linked
    assert "port: no such host port" in out
    assert "run: unknown workload 'ring'" in out
    assert "denied: NOT_FOUND: " in out and "0x999" in out  # the controller's refusal
    assert len(fab.cli_workloads) == 1 and fab.cli_workloads[0]["completed"]
    # ctl: mrcnet ctl's commands against the fabric's controller, errors as usage text
    assert "clos-2p: packet, 2 plane(s), stev" in out and "[agent]" in out  # ctl topo
    assert "  0x100@1 DENIED" in out  # ctl ev 1 --query: the denial above
    assert "usage: ctl link" in out and "invalid choice: 'sideways'" in out
    assert not [n for _, n in socket.if_nameindex() if n.startswith(run_prefix)]


def test_parse_evs() -> None:
    assert parse_evs(["0x10@1", "7@2"]) == [(0x10, 1), (7, 2)]
    for bad in ([], ["0x10"], ["x@1"]):
        with pytest.raises(ValueError):
            parse_evs(bad)


def test_mrcnet_run_attaches_to_a_running_fabric(run_prefix: str, tmp_path: Path) -> None:
    """`mrcnet run WORKLOAD --attach RUN_DIR` submits to the agents of a running fabric and
    verifies the result itself; a stopped fabric is refused."""
    import json
    import subprocess
    import sys

    fab = Fabric(RunOptions(prefix=run_prefix, results_root=tmp_path, show=False))
    cmd = [sys.executable, "-m", "mrcnet.cli", "run", "shift:1", "--size", "256KiB", "--json",
           "--attach"]
    try:
        fab.start()
        out = subprocess.run([*cmd, str(fab.run_dir)], capture_output=True, text=True,
                             timeout=200, check=False)
    finally:
        fab.stop()
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["completed"] and summary["verified_flows"] == 4 == summary["flows"]
    refused = subprocess.run([*cmd, str(fab.run_dir)], capture_output=True, text=True,
                             timeout=60, check=False)
    assert refused.returncode == 2 and "is not a running fabric" in refused.stderr

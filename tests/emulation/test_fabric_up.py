"""The whole fabric: clos-2p with real switch processes, controller and agents.

All-to-all Writes are verified byte for byte (the sink's SHA-256 against a hash computed here
from the writer's pattern) in every path mode; both planes carry data (spraying); after stop
no interface, process or socket of the run is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

import pytest

from hosts.bulk import pattern
from mrcnet.fabric.orchestrator import Fabric, FabricError, RunOptions
from mrcnet.fabric.scenario import run_scenario

pytestmark = pytest.mark.emulation

SIZE = 512 << 10


def _ifaces(prefix: str) -> set[str]:
    return {name for _, name in socket.if_nameindex() if name.startswith(prefix)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _pids(fab: Fabric) -> list[int]:
    assert fab.mn is not None and fab.controller is not None
    pids = [p.pid for p in fab.agents.values()] + [fab.controller.pid]
    pids += [sw.proc.pid for sw in fab.mn.switches.values() if sw.proc is not None]
    pids += [h.pid for h in fab.mn.hosts.values()]
    pids += [node.pid for node in fab.mn.nodes.values()]  # the switches' Mininet shells
    return pids


def _await_no_open_qps(fab: Fabric, deadline_s: float) -> dict[str, list[int]]:
    deadline = time.monotonic() + deadline_s
    while True:
        open_qps = fab.open_qps()
        if (open_qps and not any(open_qps.values())) or time.monotonic() > deadline:
            return open_qps
        time.sleep(0.2)


def assert_clean(prefix: str, pids: list[int], sock_dir: Path | None) -> None:
    assert not _ifaces(prefix), _ifaces(prefix)
    assert not [p for p in pids if _alive(p)]
    assert sock_dir is None or not sock_dir.exists()


@pytest.mark.parametrize(("mode", "rx_ring"), [("stev", None), ("ecmp", None), ("srv6", 0)])
def test_all_to_all_byte_exact_in_every_path_mode(run_prefix: str, tmp_path: Path,
                                                   mode: str, rx_ring: int | None) -> None:
    """(The SRv6 run's switches read their ports with recvmmsg instead of a receive ring.)"""
    fab = Fabric(RunOptions(mode=mode, prefix=run_prefix, results_root=tmp_path,
                            rx_ring=rx_ring))
    try:
        fab.start()
        pids, sock_dir = _pids(fab), fab.sock_dir
        assert fab.mn is not None
        for sw in fab.mn.switches.values():
            assert sw.proc is not None
            argv = Path(f"/proc/{sw.proc.pid}/cmdline").read_bytes().split(b"\0")
            assert (b"--rx-ring" in argv) == (rx_ring is not None)
        assert len(_ifaces(run_prefix)) == 16 + 8  # switch ports: 8 host links, 8 uplinks x 2
        res = run_scenario(fab, "all-to-all", SIZE)
        # the jobs' QPs are released once done (the sinks' when their writer is): an event
        # wait, bounded
        open_qps = _await_no_open_qps(fab, deadline_s=60.0)
    finally:
        fab.stop()
    assert_clean(run_prefix, pids, sock_dir)
    assert set(open_qps) == {f"h{i}" for i in range(4)} and not any(open_qps.values()), \
        open_qps
    wl = res["workloads"][0]
    assert res["completed"] and res["qp_errors"] == 0, wl
    assert res["verified_bytes"] == 12 * SIZE
    # independent check of every flow: the sink's digest against the writer's job pattern
    run_dir = Path(res["results_dir"])
    for flow in wl["per_flow"]:
        job = json.loads((run_dir / "jobs" / flow["src"] / f"{flow['id']}-writer.job.json")
                         .read_text())
        sink = json.loads((run_dir / "jobs" / flow["dst"] / f"{flow['id']}-sink.result.json")
                          .read_text())
        assert sink["sha256"] == hashlib.sha256(pattern(SIZE, job["seed"])).hexdigest()
        assert flow["writer_qp"] == "RTS" and flow["sink_qp"] == "RTS"
    # both planes delivered data (MRC sprays over every plane): byte totals of the final
    # sample, not windowed rates, which miss a plane whose flows ended between two samples
    delivered = res["samples"][-1]["plane_bytes"]
    assert len(delivered) == 2 and min(delivered) > 0, delivered
    results_json = Path(res["results_dir"]) / "results.json"
    assert results_json.exists()
    fab.stop()  # idempotent


def test_bad_topology_gives_a_clear_error_and_nothing_starts(run_prefix: str,
                                                             tmp_path: Path) -> None:
    from topologies.loader import TopologyError

    bad = tmp_path / "bad.yaml"
    bad.write_text("fabric: {kind: packet, planes: 0}\nhosts: [h0]\nswitches: []\nlinks: []\n")
    fab = Fabric(RunOptions(topology=str(bad), prefix=run_prefix, results_root=tmp_path))
    with pytest.raises(TopologyError, match="planes"):
        fab.start()
    assert not _ifaces(run_prefix)
    assert fab.controller is None and not fab.agents


def test_start_failure_rolls_back_everything(run_prefix: str, tmp_path: Path) -> None:
    """A controller that cannot start (its path mode cannot be programmed) -> roll back."""
    fab = Fabric(RunOptions(prefix=run_prefix, results_root=tmp_path))
    orig = fab._start_controller
    pids: list[int] = []

    def broken(topo_path: Path, mode: object) -> None:
        assert fab.mn is not None
        pids.extend(sw.proc.pid for sw in fab.mn.switches.values() if sw.proc is not None)
        orig(tmp_path / "missing.yaml", mode)  # type: ignore[arg-type]

    fab._start_controller = broken  # type: ignore[method-assign]
    with pytest.raises(FabricError, match="controller exited"):
        fab.start()
    assert len(pids) == 8 and fab.controller is None
    assert_clean(run_prefix, pids, fab.sock_dir)


def _cmdlines_with(text: str) -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            out.append(f"{proc.name}: {cmd}")
    return out


def _sigint_default() -> None:
    """The child gets SIGINT as a terminal would deliver it: a suite started in the
    background of a non-interactive shell inherits SIGINT ignored, and Python then keeps
    ignoring it (seen: the run went on for its whole 60 s and exited 0)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_run_leaves_nothing(tmp_path: Path) -> None:
    """SIGINT to `mrcnet up` mid-workload: the run is torn down (its run id is in every
    process's command line: agents' configs, switch logs, the controller's files)."""
    import re
    import signal
    import subprocess
    import sys

    from common.netns import wait_until

    err = tmp_path / "up.err"
    with open(err, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mrcnet.cli", "up", "--no-cli", "--run", "all-to-all",
             "--duration", "60", "--quiet"], stdout=subprocess.DEVNULL, stderr=out,
            stdin=subprocess.DEVNULL, preexec_fn=_sigint_default)
    try:
        wait_until(lambda: "fabric up" in err.read_text(), 90, f"the fabric ({err})")
        run_id = re.search(r"run (\S+):", err.read_text())
        assert run_id is not None
        prefix = run_id.group(1).rsplit("-", 1)[1]
        assert _ifaces(prefix) and _cmdlines_with(run_id.group(1))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 130
    finally:
        if proc.poll() is None:
            try:  # a slow clean-up still finishes; SIGKILL now would orphan the fabric
                proc.wait(180)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert not _ifaces(prefix), _ifaces(prefix)
    assert not _cmdlines_with(run_id.group(1))

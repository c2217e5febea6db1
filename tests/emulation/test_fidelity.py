"""The overload signal on real processes: receive timestamps, a run's verdict, BMv2 refused.

- A frame left waiting in a NIC port's socket is seen as late as it really was (the
  kernel's receive timestamp against the time it was read).
- clos-2p all-to-all at 1 Gb/s on the wall clock is far more than 2 cores can emulate: the
  run must say so (not faithful, a warning naming a process and a larger factor), with the
  per-process figures of every switch and agent in the results.
- A dilated clock with BMv2 is refused before anything is created.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from pathlib import Path

import pytest

from common.netns import NetKit
from hosts.agent.nic import NicPort
from mrcnet.fabric.orchestrator import Fabric, FabricError, RunOptions
from mrcnet.fabric.scenario import run_scenario

pytestmark = pytest.mark.emulation


def _frame() -> bytes:
    """Ethernet + IPv6 + UDP to port 4791: what the NIC port's socket filter admits."""
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x86\xdd"
    ip6 = struct.pack("!IHBB", 6 << 28, 8 + 32, 17, 64) + bytes(15) + b"\x01" + bytes(15) + b"\x02"
    return eth + ip6 + struct.pack("!HHHH", 49152, 4791, 8 + 32, 0) + bytes(32)


def test_a_frame_waiting_in_the_socket_is_as_late_as_it_waited(run_prefix: str) -> None:
    with NetKit(run_prefix) as kit:
        a, b = kit.add_namespace("a"), kit.add_namespace("b")
        kit.add_veth(f"{run_prefix}a0", f"{run_prefix}b0", a, b)
        pa = NicPort(f"{run_prefix}a0", netns=a)
        pb = NicPort(f"{run_prefix}b0", netns=b)
        try:
            assert pb.rx_stamp.supported
            for wait in (0.0, 0.05):
                assert pa.send(_frame())
                select.select([pb.fileno()], [], [], 5)
                time.sleep(wait)  # the frame sits in pb's socket meanwhile
                t_read = time.time()
                assert pb.recv_batch() == 1
                stamp = pb.rx_stamp.newest()
                assert stamp is not None and stamp <= t_read
                assert t_read - stamp >= wait
                assert pb.rx_stamp.age() < wait + 1.0
        finally:
            pa.close()
            pb.close()
    # A socket without kernel timestamps (a socketpair) is detected, never asked again.
    s1, s2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    port = NicPort.from_socket(s1, "sp")
    assert not port.rx_stamp.supported and port.rx_stamp.age() == 0.0
    port.close()
    s2.close()


def test_an_overloaded_run_says_it_was_not_faithful(run_prefix: str, tmp_path: Path) -> None:
    fab = Fabric(RunOptions(rate="1Gbps", prefix=run_prefix, results_root=tmp_path))
    try:
        fab.start()
        res = run_scenario(fab, "all-to-all", 1 << 20, timeout=60)
    finally:
        fab.stop()
    assert res["completed"], res["workloads"][0]["errors"]
    w = res["workloads"][0]
    assert res["tdf"] == 1.0 and res["time"] == "wall"
    fid = res["fidelity"]
    procs = fid["processes"]
    assert {n for n, p in procs.items() if p["kind"] == "switch"} == set(fab.mn.switches)  # type: ignore[union-attr]
    assert {n for n, p in procs.items() if p["kind"] == "agent"} == {
        f"agent-h{i}" for i in range(4)}
    assert all(p["events"] > 0 for p in procs.values() if "events" in p)
    # 12 flows of 1 Gb/s links in Python on 2 cores: far below the configured capacity.
    assert w["goodput_fraction"] < 0.9, w["goodput_fraction"]
    assert res["faithful"] is False and fid["faithful"] is False
    assert fid["max_lag_fraction"] > fid["limit"]
    assert fid["suggested_tdf"] > 1.0
    assert res["warnings"] and fid["slowest"] in res["warnings"][0]


def test_bmv2_cannot_run_on_a_dilated_clock(run_prefix: str, tmp_path: Path) -> None:
    fab = Fabric(RunOptions(switch="bmv2", tdf=4, prefix=run_prefix, results_root=tmp_path))
    with pytest.raises(FabricError, match="BMv2"):
        fab.start()
    assert not list(tmp_path.iterdir())  # nothing was created
    assert not [n for _, n in socket.if_nameindex() if n.startswith(run_prefix)]

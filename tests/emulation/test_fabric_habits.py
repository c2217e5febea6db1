"""Mininet habits on a running fabric: the CLI driven from stdin (pingall, ping, iperf3 -6, a
pcap), p4runtime-shell attached with its defaults while the controller keeps converging."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from common.netns import wait_until
from common.p4schema import PROGRAMS
from common.proto.p4.v1 import p4runtime_pb2
from hosts.agent.qlog import read_qlog
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from tests.p4shell import P4Shell, P4ShellError
from topologies.routes import RouteEv, switch_tables

pytestmark = pytest.mark.emulation

LUA = Path(__file__).resolve().parents[2] / "hosts" / "wire" / "mrc.lua"
SCRIPT = """\
pingall
h0 ping -c 3 h3
iperf h0 h3 1
run pair:h0:h2 MRC 256KiB
pcap p0-leaf0 1 stop
pcap p0-leaf0 9
"""


def _ifaces(prefix: str) -> set[str]:
    return {n for _, n in socket.if_nameindex() if n.startswith(prefix)}


def _tshark(pcap: Path, *fields: str) -> list[list[str]]:
    tshark = shutil.which("tshark")
    assert tshark is not None, "tshark is installed by make install"
    cmd = [tshark, "-n", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    return [line.split("\t") for line in out.splitlines()]


def test_cli_from_stdin_pings_iperfs_and_captures(tmp_path: Path) -> None:
    out, err = tmp_path / "up.out", tmp_path / "up.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.run(
            [sys.executable, "-m", "mrcnet.cli", "up", "clos-2p", "--pcap", "--cli", "--quiet"],
            input=SCRIPT.encode(), stdout=o, stderr=e, timeout=400, check=False)
    text, log = out.read_text(), err.read_text()
    assert proc.returncode == 0, log[-2000:]
    prefix = re.search(r"run \S+-(\w+):", log).group(1)  # type: ignore[union-attr]
    assert not _ifaces(prefix)
    # every host reaches every other host on both planes through the P4 switches
    assert "*** Results: 0% dropped (24/24 received)" in text
    assert "3 packets transmitted, 3 received, 0% packet loss" in log  # node output: stderr
    sent, got = map(float, re.search(  # type: ignore[union-attr]
        r"\*\*\* Results: \['([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", text).groups())
    assert sent > 0 and got > 0
    assert re.search(r"pair:h0:h2 .* 1/1", text), text  # the MRC flow, verified
    # how to attach: printed and in fabric.json
    run_dir = Path(re.search(r"results: (\S+)", text).group(1))  # type: ignore[union-attr]
    info = json.loads((run_dir / "fabric.json").read_text())
    assert info["state"] == "stopped" and len(info["switches"]) == 8
    for name, sw in info["switches"].items():
        assert re.search(rf"{name}\s+{re.escape(sw['grpc'])}\s+device {sw['device_id']}", log)
    assert info["controller"] in log
    # the capture: as many frames as the switch wrote, MRC and the kernel's ICMPv6 and TCP
    count, pcap = re.search(r"pcap: (\d+) packets in (\S+)", text).groups()  # type: ignore[union-attr]
    assert Path(pcap) == run_dir / "pcap" / "p0-leaf0-p1.pcap"
    rows = _tshark(Path(pcap), "mrc.bth.opcode", "icmpv6.type", "tcp.dstport")
    assert len(rows) == int(count) > 0
    assert sum(1 for r in rows if r[0]) > 0  # MRC frames dissected by mrc.lua
    assert sum(1 for r in rows if r[1] == "128") >= 3 + 3  # echo requests: pingall + ping
    assert any(r[2] == "5201" for r in rows)  # iperf3
    assert "pcap: p0-leaf0 has no port 9" in text
    assert len(list((run_dir / "pcap").glob("*.pcap"))) == 24  # --pcap: every switch port
    # non-MRC traffic never reached the agents' MRC decoders
    for host in ("h0", "h3"):
        _, events = read_qlog(run_dir / "qlog" / f"{host}-agent.sqlog")
        metrics = [ev["data"] for ev in events if ev["name"] == "mrc:metrics_sampled"]
        assert metrics and metrics[-1]["rx_drops"] == {"malformed": 0, "not_for_us": 0,
                                                       "not_mrc": 0}


def test_p4runtime_shell_with_defaults_reads_and_the_controller_still_converges(
    run_prefix: str, tmp_path: Path,
) -> None:
    fab = Fabric(RunOptions(prefix=run_prefix, results_root=tmp_path, cp_delay=0.3))
    shell = None
    route_ecmp = PROGRAMS["mrc_switch"].id("MrcIngress.route_ecmp")
    try:
        fab.start()
        assert fab.mn is not None and fab.topo is not None
        leaf = fab.mn.switches["p0-leaf0"]
        shell = P4Shell()
        shell.setup(leaf.grpc_address, leaf.device_id)  # default election id, P4Info read back

        def routes() -> list[p4runtime_pb2.TableEntry]:
            return [p4runtime_pb2.TableEntry.FromString(bytes.fromhex(h))
                    for h in shell.run("result = read_hex('MrcIngress.ipv6_route')")]

        tables = switch_tables(fab.topo)["p0-leaf0"]
        assert len(routes()) == len(tables.routes)
        assert shell.run("result = len(list(sh.TableEntry('MrcIngress.dscp_class').read()))") == 6
        with pytest.raises(P4ShellError) as refused:  # a backup cannot write
            shell.run("route_entry('2001:db8::', 64, 1).insert()")
        assert "PERMISSION_DENIED" in str(refused.value) or refused.value.code == "PERMISSION_DENIED"
        multipath = sum(1 for r in tables.routes if isinstance(r.action, RouteEv))
        assert multipath > 0
        fab.set_link("p0-leaf0:3", "p0-leaf0-p0-spine0", False)

        def rewritten() -> bool:
            return sum(1 for r in routes() if r.action.action.action_id == route_ecmp) == multipath

        wait_until(rewritten, 30, "the controller to withdraw p0-spine0 from p0-leaf0's routes")
        fab.set_link("p0-leaf0:3", "p0-leaf0-p0-spine0", True)
        wait_until(lambda: not any(r.action.action.action_id == route_ecmp for r in routes()),
                   30, "the controller to restore p0-leaf0's routes")
        assert fab.controller is not None and fab.controller.poll() is None
    finally:
        if shell is not None:
            shell.close()
        fab.stop()
    assert not _ifaces(run_prefix)

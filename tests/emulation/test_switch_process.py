"""The switch process: admin service (links, pcap), stats CLI, clean stop on SIGTERM."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from scapy.utils import rdpcap

from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc
from testbed.switch_lab import Lab, SwitchProcess
from tests.emulation.switch_util import connect, lab, mark_frame, mrc_frame, psn_of, route

pytestmark = pytest.mark.emulation
__all__ = ["lab"]

DST = "fd00:0:0:2::1"


def _two_port_switch(lab: Lab, link: str = "") -> tuple[str, SwitchProcess]:
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    sw = lab.start_switch(
        "s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")}, links={2: link} if link else None
    )
    return ns, sw


def test_pcap_capture_stats_cli_and_link_changes(lab: Lab, tmp_path: Path) -> None:
    ns, sw = _two_port_switch(lab)
    pcap = tmp_path / "p2.pcap"
    with connect(sw) as client, grpc.insecure_channel(sw.address) as channel:
        admin = pb_grpc.SwitchAdminStub(channel)
        route(client, "fd00:0:0:2::", 64, 2)
        started = admin.StartCapture(
            pb.StartCaptureRequest(port=2, path=str(pcap), direction=pb.TX)
        )
        assert started.active
        sniffer = lab.sniff(ns, [lab.ifname("h2")], count=5, marks=0)
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=i) for i in range(5)])
        received = [f for _, _, f in sniffer.result().frames]
        stopped = admin.StopCapture(pb.StopCaptureRequest(port=2))
        assert stopped.packets == 5 and not stopped.active
        assert [bytes(p) for p in rdpcap(str(pcap))] == received

        # Bad requests get clear gRPC errors, nothing changes.
        with pytest.raises(grpc.RpcError) as err:
            admin.SetLink(pb.SetLinkRequest(port=9, update=pb.LinkUpdate(rate_bps=1e6)))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as err:
            admin.SetLink(pb.SetLinkRequest(port=2, update=pb.LinkUpdate(loss=1.5)))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as err:
            admin.StartCapture(pb.StartCaptureRequest(port=2, path="/nonexistent/dir/x.pcap"))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        # Link changes apply at once: a tiny queue on a slow link (1000 bytes hold a 20 kb/s
        # wire for 400 ms) tail-drops a burst, and the drops show up in the admin stats and the
        # stats CLI; the P4 program's drop counters do not count them (no v1model program
        # sees a traffic-manager drop).
        info = admin.SetLink(pb.SetLinkRequest(port=2, update=pb.LinkUpdate(rate_bps=2e4, qpkts=2)))
        assert info.egress_link.rate_bps == 2e4 and info.egress_link.qpkts == 2
        assert info.egress_link.delay_s == 0.0  # untouched fields keep their value
        sniffer = lab.sniff(ns, [lab.ifname("h2")])
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=100 + i, size=1000) for i in range(10)])
        admin.SetLink(pb.SetLinkRequest(port=2, update=pb.LinkUpdate(rate_bps=0, qpkts=64)))
        lab.send(ns, lab.ifname("h1"), [mark_frame(DST)])
        got = [psn_of(f) for _, _, f in sniffer.result().frames]
        # One packet on the wire plus two queued survive; the seven others were tail-dropped.
        assert got == [100, 101, 102]
        out = subprocess.run(
            [sys.executable, "-m", "switch.stats", sw.address, "--json"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        stats = json.loads(out.stdout)
        port2 = next(p for p in stats["ports"] if p["port"] == 2)
        assert int(port2["egress"]["tail_drops"]) == 7
        assert int(port2["tx_packets"]) == 5 + 3 + 1
        (queue,) = [q for q in port2["egress"]["queues"] if int(q["drops"])]
        assert int(queue["drops"]) == 7
        table = subprocess.run(
            [sys.executable, "-m", "switch.stats", sw.address],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert "switch s1" in table and lab.ifname("p2") in table
        assert "pipeline drops" not in table
        assert stats["pipeline_drops"] == {}
        assert sum(pkts for pkts, _ in client.read_counter("MrcIngress.drop_reason").values()) == 0


def test_sigterm_stops_cleanly_and_releases_everything(lab: Lab) -> None:
    _ns, sw = _two_port_switch(lab)
    port = int(sw.address.rsplit(":", 1)[1])
    popen = sw.process.popen
    popen.send_signal(signal.SIGTERM)
    assert popen.wait(10) == 0
    log = sw.log.read_text()
    assert "ready" in log and "stopped" in log
    with socket.socket() as s:  # the gRPC port is free again
        s.bind(("127.0.0.1", port))


def _tgkill(pid: int, tid: int, sig: int) -> None:
    """Send a signal to one thread of another process (no Python wrapper for tgkill)."""
    libc = ctypes.CDLL(None, use_errno=True)
    sys_tgkill = 234  # x86_64
    if libc.syscall(sys_tgkill, pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="tgkill syscall number is x86_64's")
def test_sigterm_taken_by_a_grpc_thread_still_stops_an_idle_switch(lab: Lab) -> None:
    """The kernel may hand a process-directed signal to any thread. Python runs the handler
    in the main thread, which sits in select() while the switch is idle: without a wake-up
    fd the stop waited for the next packet (seen once in CI as a 10 s SIGTERM)."""
    _ns, sw = _two_port_switch(lab)
    popen = sw.process.popen
    threads = sorted(int(t) for t in os.listdir(f"/proc/{popen.pid}/task"))
    others = [t for t in threads if t != popen.pid]
    assert others, "the switch runs gRPC threads besides the main one"
    _tgkill(popen.pid, others[-1], signal.SIGTERM)
    assert popen.wait(10) == 0
    assert "stopped" in sw.log.read_text()


def test_bad_arguments_and_missing_interface_fail_with_a_message(lab: Lab, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "switch.main", "--name", "x", "--grpc-addr", "127.0.0.1:1"]
    bad = subprocess.run(
        [*base, "--port", "1=a", "--link", "3:rate=1"], capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and "unknown port 3" in bad.stderr
    missing = lab.ifname("zz")
    log = tmp_path / "m.log"
    res = subprocess.run(
        [*base, "--port", f"1={missing}", "--log", str(log)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 1 and f"no interface {missing!r}" in res.stderr
    assert "start-up failed" in log.read_text()


def test_ingress_shaping_and_seeded_random_loss(lab: Lab) -> None:
    """Host-to-switch shaping happens at the switch; loss follows the seeded generator."""
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    sw = lab.start_switch(
        "s1",
        {1: lab.ifname("p1"), 2: lab.ifname("p2")},
        extra=["--ingress-link", "1:rate=2e4,qpkts=2", "--seed", "1234"],
    )
    with connect(sw) as client, grpc.insecure_channel(sw.address) as channel:
        admin = pb_grpc.SwitchAdminStub(channel)
        route(client, "fd00:0:0:2::", 64, 2)
        # Ten 1000-byte frames reach a 20 kb/s ingress link at once: one is serialised, two
        # wait, seven are dropped before the pipeline ever sees them.
        sniffer = lab.sniff(ns, [lab.ifname("h2")])
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=i, size=1000) for i in range(10)])
        admin.SetLink(
            pb.SetLinkRequest(
                port=1, direction=pb.INGRESS, update=pb.LinkUpdate(rate_bps=0, qpkts=64)
            )
        )
        lab.send(ns, lab.ifname("h1"), [mark_frame(DST)])
        assert [psn_of(f) for _, _, f in sniffer.result().frames] == [0, 1, 2]
        port1 = admin.GetPorts(pb.GetPortsRequest(ports=[1])).ports[0]
        assert port1.rx_packets == 11 and port1.ingress.tail_drops == 7
        assert port1.ingress.queues[0].max_depth_pkts >= 2  # the burst filled the queue
        rx = client.read_counter("MrcIngress.rx_port_class")
        assert sum(pkts for i, (pkts, _b) in rx.items() if i // 8 == 1) == 4  # 3 + the mark

        # 40% loss on port 2's egress, drawn from random.Random(1234) once per frame sent.
        loss = 0.4
        admin.SetLink(pb.SetLinkRequest(port=2, update=pb.LinkUpdate(loss=loss)))
        n = 60
        frames = [mrc_frame(DST, psn=100 + i, size=200) for i in range(n)]
        reference = random.Random(1234)
        survivors = [100 + i for i in range(n) if not reference.random() < loss]
        sniffer = lab.sniff(ns, [lab.ifname("h2")], count=len(survivors), marks=0)
        lab.send(ns, lab.ifname("h1"), frames)
        assert [psn_of(f) for _, _, f in sniffer.result().frames] == survivors
        port2 = admin.GetPorts(pb.GetPortsRequest(ports=[2])).ports[0]
        assert port2.egress.loss_drops == n - len(survivors)


def test_ctl_cli_drives_links_ports_and_captures(lab: Lab, tmp_path: Path) -> None:
    ns, sw = _two_port_switch(lab)

    def ctl(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "switch.ctl", sw.address, *argv],
            capture_output=True,
            text=True,
            timeout=30,
        )

    pcap = tmp_path / "c.pcap"
    with connect(sw) as client, grpc.insecure_channel(sw.address) as channel:
        admin = pb_grpc.SwitchAdminStub(channel)
        route(client, "fd00:0:0:2::", 64, 2)
        out = ctl("link", "2", "rate=5e8,delay=2e-6")
        assert out.returncode == 0 and "rate_bps: 500000000" in out.stdout
        info = admin.GetPorts(pb.GetPortsRequest(ports=[2])).ports[0]
        assert info.egress_link.rate_bps == 5e8 and info.egress_link.delay_s == 2e-6
        assert ctl("capture", "2", str(pcap), "--direction", "tx").returncode == 0
        sniffer = lab.sniff(ns, [lab.ifname("h2")], count=2, marks=0)
        lab.send(ns, lab.ifname("h1"), [mrc_frame(DST, psn=1), mrc_frame(DST, psn=2)])
        assert len(sniffer.result().frames) == 2
        out = ctl("stop-capture", "2")
        assert "2 packets written" in out.stdout
        assert [psn_of(bytes(p)) for p in rdpcap(str(pcap))] == [1, 2]
        out = ctl("port", "2", "down")
        assert out.returncode == 0 and "admin down" in out.stdout
        assert not admin.GetPorts(pb.GetPortsRequest(ports=[2])).ports[0].admin_up
        bad = ctl("port", "7", "up")
        assert bad.returncode == 1 and "NOT_FOUND" in bad.stderr
        assert ctl("link", "2", "loss=3").returncode == 2

"""The controller process: readiness line, clean stop on SIGTERM, clear start-up errors."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]


def test_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "ctl.sock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller.server", "--unix", str(sock), "--topology", "clos-1p"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until ready (or EOF if it died)
        assert line.strip() == f"listening on unix:{sock}", (
            proc.stderr.read() if proc.stderr else ""
        )
        with grpc.insecure_channel(f"unix:{sock}") as ch:
            view = pb_grpc.MrcFabricStub(ch).GetTopology(pb.GetTopologyRequest(), timeout=5)
            assert view.name == "clos-1p"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_bad_start_up_is_explained(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "controller.server", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )

    res = run("--tcp", "127.0.0.1:0")
    assert res.returncode == 2 and "--tcp needs --token-file" in res.stderr
    res = run("--unix", str(tmp_path / "s.sock"), "--topology", "no-such-topo")
    assert res.returncode == 2 and "no such topology file" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "fabric: {planes: 1}\nhosts: [h0]\nswitches: [{name: s, tier: 0}]\nlinks: ['h0:0 -- s:600']\n"
    )
    res = run("--unix", str(tmp_path / "s.sock"), "--topology", str(bad))
    assert res.returncode == 2 and "bad.yaml" in res.stderr and "outside 1..510" in res.stderr

"""``python -m switch.main --json FILE``: the switch process runs a BMv2 JSON from the start
(no controller push), and refuses one it cannot execute at start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format

from common.p4schema.model import Program
from testbed.switch_lab import Lab
from tests.emulation.switch_util import lab, mrc_frame
from tests.unit.p4json_programs import Builder, assign, extract, field, hexstr

pytestmark = pytest.mark.emulation
__all__ = ["lab"]
NEW_SRC = 0x02000000BEEF


def rewrite_program(tmp: Path) -> tuple[Path, Path]:
    """Every frame from any port leaves on port 2 with source MAC NEW_SRC."""
    b = Builder()
    b.header_type("eth_t", [("dst", 48), ("src", 48), ("type", 16)])
    b.header("eth", "eth_t")
    b.state("start", [extract("eth")])
    b.order = ["eth"]
    b.chain("ingress", [b.call("ingress", "fwd", [
        assign(field("standard_metadata", "egress_spec"), hexstr(2, 9)),
        assign(field("eth", "src"), hexstr(NEW_SRC, 48)),
    ])])
    prog, info = tmp / "rewrite.json", tmp / "rewrite.p4info.txtpb"
    prog.write_text(json.dumps(b.json()))
    info.write_text(text_format.MessageToString(Program("rewrite", (), ()).render_p4info()))
    return prog, info


def test_switch_forwards_with_the_json_it_was_started_with(lab: Lab, tmp_path: Path) -> None:
    prog, _info = rewrite_program(tmp_path)
    ns = lab.namespace("h")
    lab.wire("p1", "h1", None, ns)
    lab.wire("p2", "h2", None, ns)
    lab.start_switch("s1", {1: lab.ifname("p1"), 2: lab.ifname("p2")},
                     extra=["--json", str(prog)])  # its P4Info beside it: rewrite.p4info.txtpb
    sniffer = lab.sniff(ns, [lab.ifname("h2")], count=3, marks=0)
    frames = [mrc_frame("fd00:0:0:2::1", psn=i) for i in range(3)]
    lab.send(ns, lab.ifname("h1"), frames)
    got = [f for _, _, f in sniffer.result().frames]
    assert got == [f[:6] + NEW_SRC.to_bytes(6, "big") + f[12:] for f in frames]


def test_a_json_the_target_cannot_run_stops_start_up(tmp_path: Path) -> None:
    prog, info = rewrite_program(tmp_path)
    data = json.loads(prog.read_text())
    data["extern_instances"] = [{"name": "x", "id": 0, "type": "my_extern"}]
    prog.write_text(json.dumps(data))
    # no ports are opened before the arguments are checked; use a name that cannot exist
    done = subprocess.run(
        [sys.executable, "-m", "switch.main", "--name", "bad", "--grpc-addr", "127.0.0.1:0",
         "--port", "1=lo", "--json", str(prog), "--p4info", str(info)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert "unsupported: extern instances" in done.stderr

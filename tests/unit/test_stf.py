"""The STF runner: the file format, p4c's name and value rules, the verdict, and the runs over
the shared p4c test programs (../shared/p4-stf) on the embedded target and on BMv2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from switch.stf import embedded, keys
from switch.stf.parse import Add, Direct, Expect, Packet, SetDefault, StfError, parse_text
from switch.stf.toolchain import P4C, SIMPLE_SWITCH, find_tool
from switch.stf.verdict import check, matches
from tests.unit.p4json_programs import Builder, assign, extract, field, param, to_port

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "p4-stf"
need_shared = pytest.mark.skipif(
    not SHARED.is_dir() or find_tool(P4C) is None,
    reason=f"needs {SHARED} (p4c's STF test programs) and {P4C}",
)


def test_parse_commands() -> None:
    cmds = parse_text(
        """
        # comment
        add test1 503 data.f1:0x****0202 ingress.setb1(val:7, port:3)
        add tbl ipv4.dstAddr:0x0a010065 act() = A
        setdefault tbl drop()
        packet 0 0101 0202 # trailing comment
        expect 1 01** 02 $
        expect 2
        mirroring_add 5 3
        wait
        """
    )
    assert cmds[0] == Add("test1", 503, [("data.f1", "0x****0202")], "ingress.setb1",
                          [("val", "7"), ("port", "3")], 3)
    assert isinstance(cmds[1], Add) and cmds[1].priority is None and cmds[1].args == []
    assert isinstance(cmds[2], SetDefault) and cmds[2].action == "drop"
    assert cmds[3] == Packet(0, bytes.fromhex("01010202"), 6)
    assert cmds[4] == Expect(1, "01**02", True, 7)
    assert cmds[5] == Expect(2, None, False, 8)
    assert cmds[6] == Direct("mirroring_add", ["5", "3"], 9)
    assert len(cmds) == 7  # wait is ignored as p4c's driver does
    for bad in ("packet 0 abc", "frobnicate 1", "add t k:1", "expect 1 0g"):
        with pytest.raises(StfError):
            parse_text(bad)


def test_expect_patterns() -> None:
    assert matches("01**02", False, bytes.fromhex("01ff02aa")) is None  # longer is fine
    assert matches("01**02", True, bytes.fromhex("01ff02aa")) is not None  # $: exact length
    assert matches("01**02", False, bytes.fromhex("01ff")) is not None
    assert matches("01**02", False, bytes.fromhex("02ff02")) is not None


def test_verdict_counts_per_interface_and_ignores_other_ports() -> None:
    cmds = parse_text("packet 0 00\nexpect 1 aa\nexpect 1 bb\nexpect 3\n")
    assert check(cmds, {1: [b"\xaa", b"\xbb"], 9: [b"\x00"], 3: [b"\x01", b"\x02"]}) is None
    assert check(cmds, {1: [b"\xbb", b"\xaa"]}) is not None  # order matters per port
    assert check(cmds, {1: [b"\xaa"]}) is not None
    assert check(cmds, {1: [b"\xaa", b"\xbb"], 0: [b"\x00"]}) is not None  # unexpected on 0


def _ternary_program() -> Builder:
    b = Builder()
    b.header_type("data_t", [("f1", 32), ("b1", 8)])
    b.header("data", "data_t")
    b.state("start", [extract("data")])
    b.order = ["data"]
    setb1 = b.action("ingress.setb1", [assign(field("data", "b1"), param(0))], [("val", 8)])
    noop = b.action("NoAction", [])
    b.table("ingress", "ingress.test1", [("ternary", ["data", "f1"])], [setb1, noop], noop)
    b.chain("ingress", ["ingress.test1", b.call("ingress", "fwd", [to_port(2)])])
    return b


def test_stf_priorities_and_ternary_digits_on_the_engine() -> None:
    text = """
    add test1 10 data.f1:0x****0101 setb1(val:0x7f)
    add test1 20 f1:0x01**0101 setb1(val:0x11)
    packet 0 01020101 00
    expect 2 01020101 11 $
    packet 0 ff000101 00
    expect 2 ff000101 7f $
    packet 0 ff000102 00
    expect 2 ff000102 00 $
    """
    prog = json.dumps(_ternary_program().json())
    assert embedded.run(prog, parse_text(text)) == ("pass", "")
    wrong = text.replace("expect 2 01020101 11", "expect 2 01020101 7f")
    status, why = embedded.run(prog, parse_text(wrong))
    assert status == "fail" and "port 2 packet 0" in why


def test_key_values_follow_p4cs_driver() -> None:
    prog = _ternary_program().json()
    from switch.p4json.program import load_program

    p = load_program(prog)
    table = keys.find_table(p, "test1")
    assert keys.key_parts(table, [("data.f1", "0x****0101")]) == ((0x0101, 0x0000FFFF),)
    assert keys.key_parts(table, [("f1", "0b1*")]) == ((0b10, 0b10),)
    assert keys.key_parts(table, []) == ((0, 0),)  # left out: don't care
    assert keys.bmv2_priority(table, 10) == 9990
    with pytest.raises(keys.KeyError_):
        keys.key_parts(table, [("f1", "17")])  # decimal ternary values are not accepted
    with pytest.raises(keys.KeyError_):
        keys.find_table(p, "nope")


def test_cli_on_a_ready_program(tmp_path: Path) -> None:
    stf = tmp_path / "t.stf"
    stf.write_text("add test1 1 f1:0x00000000&&&0x0 setb1(val:5)\npacket 0 00000001 00\n"
                   "expect 2 00000001 05\n")
    (tmp_path / "t.p4").write_text("// compiled below\n")
    prog = tmp_path / "t.json"
    prog.write_text(json.dumps(_ternary_program().json()))
    done = subprocess.run([sys.executable, "-m", "switch.stf", str(stf), "--program", str(prog),
                           "--json"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["programs"] == {"t": "pass"} and (out["passed"], out["failed"]) == (1, 0)


def _bmv2_results() -> dict[str, str]:
    lines = (SHARED / "bmv2-results.txt").read_text().split("\n")
    return dict(line.split()[:2] for line in lines if line.strip())  # type: ignore[misc]


@pytest.mark.slow
@need_shared
def test_shared_stf_programs_pass_on_the_embedded_target(tmp_path: Path) -> None:
    """Every program BMv2 passes passes here too, or is refused as unsupported (>= 90 %)."""
    done = subprocess.run(
        [sys.executable, "-m", "switch.stf", str(SHARED), "--json", "--build", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=1800, check=False,
    )
    out = json.loads(done.stdout)
    # the exit status counts an unsupported program as untested, not as a pass
    assert done.returncode == (1 if out["failed"] else 3 if out["unsupported"] else 0)
    bmv2 = _bmv2_results()
    regressions = {name: out["reasons"].get(name, "") for name, status in out["programs"].items()
                   if status == "fail" and bmv2.get(name) == "pass"}
    assert regressions == {}
    assert out["passed"] >= 0.9 * len(out["programs"])


@pytest.mark.slow
@need_shared
@pytest.mark.skipif(find_tool(SIMPLE_SWITCH) is None, reason=f"needs BMv2 ({SIMPLE_SWITCH})")
def test_bmv2_driver_agrees_with_p4cs(tmp_path: Path) -> None:
    """The BMv2 side of the runner reproduces bmv2-results.txt on a sample of programs."""
    sample = ["v1model-special-ops-bmv2", "checksum-l4-bmv2", "table-entries-priority-bmv2",
              "issue1879-bmv2"]
    for name in sample:
        done = subprocess.run(
            [sys.executable, "-m", "switch.stf", str(SHARED / f"{name}.stf"), "--target", "both",
             "--json", "--build", str(tmp_path)],
            capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
        )
        out = json.loads(done.stdout)
        assert out["targets"]["bmv2"][name] == _bmv2_results()[name], out
        assert out["programs"][name] == "pass", out

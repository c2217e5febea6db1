"""The BMv2 target's pure parts: link spec -> queue settings, the command line, the Thrift
CLI runner (against a stand-in CLI), the switch map, the controller's BMv2 port state and the
host-side shaper, all without BMv2 or root."""

from __future__ import annotations

import json
import queue
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from common.bmv2_cli import Bmv2CliError, register_value, run_cli
from common.p4runtime_client import PortEvent
from controller.drivers.bmv2_ports import Bmv2Ports, Bmv2PortState
from controller.server import read_switch_map
from controller.southbound import SouthboundError
from switch.targets.bmv2 import (
    CELL_BYTES,
    TBF_BURST,
    UNLIMITED_DEPTH,
    bmv2_queue,
    command,
    host_shaper_command,
    queue_commands,
)
from switch.traffic import parse_link_spec


def q(spec: str):  # type: ignore[no-untyped-def]
    return bmv2_queue(parse_link_spec(spec))


def test_link_specs_become_packet_rates_and_depths_in_4096_byte_cells() -> None:
    assert CELL_BYTES == 4096
    assert q("rate=1e8").rate_pps == round(1e8 / (8 * 4096)) == 3052
    assert q("rate=1e5").rate_pps == 3
    assert q("rate=1").rate_pps == 1  # a rate never rounds to "unlimited"
    assert q("rate=0").rate_pps == 0
    assert q("qpkts=32").depth_pkts == 32
    assert q("qpkts=32,qbytes=65536").depth_pkts == 16  # the smaller limit, in cells
    assert q("qpkts=0,qbytes=131072").depth_pkts == 32
    assert q("qpkts=0,qbytes=100").depth_pkts == 1
    assert q("qpkts=0,qbytes=0").depth_pkts == UNLIMITED_DEPTH
    assert q("rate=1e9,delay=5e-6,overhead=24").ignored == ("delay=5e-06", "overhead=24")
    assert q("rate=1e9").ignored == ()
    with pytest.raises(ValueError, match="random loss"):
        q("loss=0.01")
    assert queue_commands(3, q("rate=1e8,qpkts=32")) == [
        "set_queue_rate 3052 3", "set_queue_depth 32 3"]


def test_command_line_has_priority_queues_own_ports_and_no_program() -> None:
    cmd = command("/x/simple_switch_grpc", 7, {2: "b", 1: "a"}, "127.0.0.1:5", 9, Path("/l/s"))
    assert cmd[:3] == ["/x/simple_switch_grpc", "--device-id", "7"]
    assert cmd[3:7] == ["-i", "1@a", "-i", "2@b"]
    assert cmd[cmd.index("--thrift-port") + 1] == "9"
    assert cmd[cmd.index("--log-level") + 1] == "warn"
    assert "--no-p4" in cmd
    target = cmd[cmd.index("--") + 1:]
    assert target == ["--grpc-server-addr", "127.0.0.1:5", "--priority-queues", "8"]


FAKE_CLI = r'''#!{python}
import sys
print("Obtaining JSON from switch...\nDone\nControl utility for runtime P4 table manipulation")
for line in sys.stdin:
    print("RuntimeCmd: ", end="")
    cmd = line.split()
    if cmd[0] == "register_read":
        print(f"{{cmd[1]}}[{{cmd[2]}}]= 5")
    elif cmd[0] == "bad":
        print("Error: Invalid register name (nope)")
    elif cmd[0] == "crash":
        sys.exit(1)
print("RuntimeCmd: ")
'''


@pytest.fixture
def fake_cli(tmp_path: Path) -> Path:
    path = tmp_path / "simple_switch_CLI"
    path.write_text(FAKE_CLI.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_cli_runner_splits_answers_at_prompts_and_names_the_failed_command(
    fake_cli: Path,
) -> None:
    answers = run_cli(9090, ["set_queue_rate 3 2", "register_read R 4"], cli=fake_cli)
    assert answers == ["", "R[4]= 5"]
    assert register_value(answers[1]) == 5
    with pytest.raises(Bmv2CliError, match=r"'bad x'.*Invalid register name"):
        run_cli(9090, ["set_queue_rate 3 2", "bad x"], cli=fake_cli)
    with pytest.raises(Bmv2CliError, match="'crash' failed"):
        run_cli(9090, ["crash"], cli=fake_cli)
    with pytest.raises(Bmv2CliError, match="bad CLI command"):
        run_cli(9090, ["a\nb"], cli=fake_cli)
    with pytest.raises(Bmv2CliError, match="unexpected register_read answer"):
        register_value("nothing")


def test_cli_runner_without_the_tool_says_so(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("P4_BIN_DIR", raising=False)
    with pytest.raises(Bmv2CliError, match="simple_switch_CLI is not on PATH"):
        run_cli(9090, ["x"])


def test_switch_map_reads_bmv2_entries_and_refuses_incomplete_ones(tmp_path: Path) -> None:
    path = tmp_path / "switches.json"
    path.write_text(json.dumps({
        "a": {"address": "127.0.0.1:1", "device_id": 1},
        "b": {"address": "127.0.0.1:2", "device_id": 2, "target": "bmv2", "thrift_port": 9,
              "ports": {"2": "if2", "1": "if1"}},
    }))
    eps = read_switch_map(str(path))
    assert eps["a"].kind == "embedded" and dict(eps["a"].extras) == {}
    assert eps["b"].kind == "bmv2" and eps["b"].extras["thrift_port"] == 9
    assert eps["b"].extras["ifnames"] == {1: "if1", 2: "if2"}
    for bad, why in (({"kind": "bmv2"}, "needs thrift_port and ports"),
                     ({"kind": "tofino"}, "unknown switch kind 'tofino'; known: bmv2, embedded")):
        path.write_text(json.dumps({"c": {"address": "x:1", "device_id": 3, **bad}}))
        with pytest.raises(SouthboundError, match=why):
            read_switch_map(str(path))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, list[str]]] = []
        self.fail = False

    def __call__(self, port: int, commands: Sequence[str]) -> object:
        if self.fail:
            raise Bmv2CliError("refused")
        self.calls.append((port, list(commands)))
        return None


def test_bmv2_port_state_writes_port_down_and_reports_each_change_once() -> None:
    cli = Recorder()
    events: queue.Queue[PortEvent] = queue.Queue()
    # "lo" has carrier, so start() writes nothing: the pushed pipeline's port_down is all 0
    state = Bmv2PortState({"s": Bmv2Ports(9, {3: "lo"}, events)}, cli)
    state.start()
    try:
        assert cli.calls == [] and events.empty()
        state.set_admin("s", 3, False)
        assert cli.calls == [(9, ["register_write MrcIngress.port_down 3 1"])]
        assert events.get_nowait() == PortEvent(3, False) and not state.oper_up("s", 3)
        state.set_admin("s", 3, False)  # no change: no write, no event
        assert len(cli.calls) == 1 and events.empty()
        cli.fail = True
        with pytest.raises(Bmv2CliError):
            state.set_admin("s", 3, True)
        assert not state.oper_up("s", 3) and events.empty()  # nothing half-applied
        cli.fail = False
        state.set_admin("s", 3, True)
        assert cli.calls[-1] == (9, ["register_write MrcIngress.port_down 3 0"])
        assert events.get_nowait() == PortEvent(3, True)
        with pytest.raises(KeyError):
            state.set_admin("s", 4, True)
    finally:
        state.close()


def test_a_port_without_carrier_at_start_is_written_down() -> None:
    cli = Recorder()
    events: queue.Queue[PortEvent] = queue.Queue()
    state = Bmv2PortState({"s": Bmv2Ports(9, {1: "no-such-if0"}, events)}, cli)
    state.start()
    state.close()
    assert cli.calls == [(9, ["register_write MrcIngress.port_down 1 1"])]
    assert events.get_nowait() == PortEvent(1, False)


def test_host_shaper_is_a_tbf_with_the_links_rate_and_queue() -> None:
    assert host_shaper_command("h0p0", "rate=0") is None
    assert host_shaper_command("h0p0", "rate=1e8,qpkts=32,qbytes=131072") == (
        f"tc qdisc replace dev h0p0 root tbf rate 100000000bit burst {TBF_BURST} limit 131072")
    assert host_shaper_command("h0p0", "rate=1e6,qpkts=8,qbytes=0") == (
        f"tc qdisc replace dev h0p0 root tbf rate 1000000bit burst {TBF_BURST} limit 32768")


def test_mrcnet_up_refuses_what_bmv2_cannot_do_before_starting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--pcap (the embedded switch's capture service) and a dilated clock with --switch bmv2:
    exit code 2 and the reason, nothing started (no root needed to get there)."""
    from mrcnet.cli import main

    assert main(["up", "clos-2p", "--switch", "bmv2", "--pcap", "--no-cli"]) == 2
    assert "simple_switch_grpc takes no captures at run time" in capsys.readouterr().err
    assert main(["up", "clos-2p", "--switch", "bmv2", "--tdf", "4", "--no-cli"]) == 2
    assert "cannot be dilated" in capsys.readouterr().err

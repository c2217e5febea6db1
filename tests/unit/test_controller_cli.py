"""`mrcnet ctl` against a real controller on a unix socket."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.server import ControllerServer, ServerConfig, start
from mrcnet.cli import main


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[str]:
    srv: ControllerServer = start(
        ServerConfig(unix=str(tmp_path / "c.sock"), topology="clos-2p", max_workers=8)
    )
    yield str(tmp_path / "c.sock")
    srv.stop()


def ctl(sock: str, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["ctl", "--unix", sock, *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_profile_workflow_through_the_cli(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert ctl(sock, capsys, "fmt", "1", "--state", "offline", "--mode", "stev")[0] == 0
    assert ctl(sock, capsys, "fmt", "1", "--state", "online", "--fields", "1,31")[0] == 0
    rc, _, _ = ctl(
        sock, capsys, "ev", "2", "--state", "offline", "--mode", "exp", "--fmt", "1", "--count", "2"
    )
    assert rc == 0
    assert (
        ctl(sock, capsys, "ev", "2", "--replace", "0@0=0x80000001@1", "--replace", "0@0=0x2@2")[0]
        == 0
    )
    rc, _, _ = ctl(
        sock, capsys, "ev", "2", "--state", "online", "--min-active", "1", "--events", "ASSUMED_BAD"
    )
    assert rc == 0
    assert ctl(sock, capsys, "ev", "2", "--deny", "0x2@2")[0] == 0
    rc, out, _ = ctl(sock, capsys, "--json", "ev", "2", "--array")
    data = json.loads(out)
    assert data["profile"]["state"] == "PROFILE_ONLINE"
    states = {(int(r["ev"]["value"]), r["ev"]["port"]): r["state"] for r in data["results"]}
    assert states == {(0x80000001, 1): "EV_GOOD", (2, 2): "EV_DENIED"}
    # CC defaults from the topology (clos-2p: 1 Gb/s links, base RTT from the file)
    assert ctl(sock, capsys, "cc", "1", "--state", "offline", "--algorithm", "uet-1.0-nscc")[0] == 0
    rc, out, _ = ctl(
        sock, capsys, "--json", "cc", "1", "--state", "online", "--defaults", "--set", "gamma=0.5"
    )
    cc = json.loads(out)
    assert cc["state"] == "PROFILE_ONLINE" and cc["nscc"]["gamma"] == 0.5
    assert int(cc["nscc"]["base_rtt_ns"]) == 173_120


def test_errors_are_reported_with_codes(
    sock: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rc, _, err = ctl(sock, capsys, "ev", "999")
    assert rc == 1 and "NOT_FOUND" in err and "ids 1..64" in err
    rc, _, err = ctl(sock, capsys, "fmt", "1", "--state", "online")
    assert rc == 1 and "INVALID_ARGUMENT" in err and "INIT to ONLINE" in err
    rc, _, err = ctl(sock, capsys, "ev", "1", "--deny", "12")
    assert rc == 2 and "VALUE@PORT" in err
    rc, _, err = ctl(str(tmp_path / "nothing.sock"), capsys, "version")
    assert rc == 1 and "cannot reach the controller" in err


def test_topology_link_and_stats(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = ctl(sock, capsys, "topo")
    assert rc == 0 and "clos-2p: packet, 2 plane(s), stev" in out and "p1-spine1" in out
    rc, out, _ = ctl(sock, capsys, "--json", "link", "p1-leaf1:4", "down")
    assert rc == 0 and json.loads(out).get("up", False) is False
    rc, out, _ = ctl(sock, capsys, "stats")
    assert rc == 0 and "link_state_changes" in out
    rc, out, _ = ctl(sock, capsys, "--json", "port", "h1", "2", "--disable")
    assert json.loads(out)["admin_state"] == "PORT_ADMIN_DISABLED"


def test_a_shell_runs_the_same_commands_over_the_same_client(sock: str) -> None:
    """The fabric CLI's ``ctl`` path: the commands' own parser, writing to the shell's
    stream and raising instead of exiting, executed through ControllerClient."""
    import io

    from controller.client import ControllerClient
    from controller.commands import CommandParseExit, command_parser, execute

    out = io.StringIO()
    parser = command_parser("ctl", out)
    with pytest.raises(CommandParseExit):
        parser.parse_args(["link", "p0-leaf0:3", "sideways"])
    assert "invalid choice: 'sideways'" in out.getvalue() and "usage: ctl link" in out.getvalue()
    with ControllerClient(f"unix:{sock}", timeout=5) as client:
        out = io.StringIO()
        assert execute(parser.parse_args(["--json", "link", "p0-leaf0:3", "down"]), client,
                       out) == 0
        assert json.loads(out.getvalue())["a"] == "p0-leaf0:3"
        assert not client.topology().links[json.loads(out.getvalue())["id"]].up
        out = io.StringIO()
        execute(parser.parse_args(["topo"]), client, out)
        shell_topo = out.getvalue()
    assert shell_topo.startswith("clos-2p: packet, 2 plane(s), stev")
    assert "p0-leaf0:3 -- p0-spine0:1" in shell_topo and "DOWN" in shell_topo

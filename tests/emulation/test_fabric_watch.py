"""Watching a running fabric: the CLI in a real terminal (tmux) with the live view's status
row on, and the web view in headless Chromium while a link is down and traffic runs."""

from __future__ import annotations

import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed.browser import CHROMIUM, Chromium
from topologies.loader import load

pytestmark = pytest.mark.emulation
REPO = Path(__file__).resolve().parents[2]
PROMPT = "mrcnet> "
PING_ROW = re.compile(r"^h\d+ -> ((h\d+|X) ?)+$")


def _ifaces(prefix: str) -> set[str]:
    return {n for _, n in socket.if_nameindex() if n.startswith(prefix)}


def _wait(what: str, check: Callable[[], object], timeout: float = 300.0,
          alive: Callable[[], None] = lambda: None,
          show: Callable[[], object] = lambda: "") -> object:
    """Until ``check()`` is truthy (it reads the terminal or the page: an event, not a
    duration), else fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {show()}")
        time.sleep(0.1)


class Tmux:
    """A tmux server of the test's own (-L socket), one window of a fixed size."""

    def __init__(self, command: list[str], cols: int = 200, rows: int = 40) -> None:
        self.socket = f"mrcnet-test-{secrets.token_hex(4)}"
        self._tmux("new-session", "-d", "-s", "t", "-x", str(cols), "-y", str(rows),
                   " ".join(command))
        self._tmux("set-option", "-t", "t", "remain-on-exit", "on")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def screen(self) -> list[str]:
        text = self._tmux("capture-pane", "-p", "-t", "t")
        return text.split("\n")[:-1]  # one "\n" ends every row

    def type(self, line: str) -> None:
        self._tmux("send-keys", "-t", "t", line, "Enter")

    def dead(self) -> bool:
        return self._tmux("display-message", "-p", "-t", "t", "#{pane_dead}").strip() == "1"

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30, check=False)


@pytest.fixture
def tmux_cli(tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is installed by make install")
    log = tmp_path / "up.err"
    cmd = ["cd", str(REPO), "&&", sys.executable, "-m", "mrcnet.cli", "up", "clos-2p",
           f"2>{log}"]
    term = Tmux(cmd)
    try:
        yield term, log
    finally:
        if not term.dead():  # the CLI is still open: let it tear the fabric down
            term.type("exit")
            try:
                _wait("the fabric to stop", term.dead, 120)
            except AssertionError:
                pass
        term.kill()


def test_status_row_leaves_pingall_and_the_prompt_intact(tmux_cli: tuple[Tmux, Path]) -> None:
    term, log = tmux_cli

    def alive() -> None:
        assert not term.dead(), log.read_text()[-2000:]

    def show() -> str:
        return "\n".join(term.screen())

    _wait("the CLI's prompt", lambda: any(row.rstrip() == PROMPT.rstrip()
                                          for row in term.screen()), 300, alive, show)
    term.type("live on")
    _wait("the live view's status row", lambda: "Mb/s" in term.screen()[-1], 60, alive, show)
    term.type("pingall 3")  # reachability is test_fabric_habits' (24/24); here: the screen
    results = re.compile(r"^\*\*\* Results: \d+% dropped \(\d+/24 received\)$")

    def done() -> list[str] | None:
        rows = term.screen()
        at = [i for i, r in enumerate(rows) if results.match(r.rstrip())]
        return rows if at and rows[at[-1] + 1].rstrip() == PROMPT.rstrip() else None

    rows = _wait("pingall's results and the next prompt", done, 120, alive)
    assert isinstance(rows, list)
    prefix = re.search(r"run \S+-(\w+):", log.read_text()).group(1)  # type: ignore[union-attr]
    run_dir = Path(re.search(r"results in (\S+)", log.read_text()).group(1))  # type: ignore
    (run_dir / "cli-screen.txt").write_text("\n".join(rows))
    body = [r.rstrip() for r in rows[:-1]]
    start = max(i for i, r in enumerate(body) if r == f"{PROMPT}pingall 3")
    out = body[start + 1:]
    # every line of pingall's output is whole, in order, with nothing written over it
    assert out[0] == "*** Ping: testing reachability over plane 0"
    assert out[5] == "*** Ping: testing reachability over plane 1"
    hosts = [r for r in out if r.startswith("h")]
    assert len(hosts) == 8 and all(PING_ROW.match(r) for r in hosts), out
    assert results.match(out[10]), out
    assert out[11] == PROMPT.rstrip()
    # the status row: the last row only, and it keeps updating
    assert "Mb/s" in rows[-1] and not any("Mb/s" in r for r in body)
    first = rows[-1]
    _wait("a new status", lambda: term.screen()[-1] != first, 60, alive)
    term.type("live off")
    _wait("the status row to clear", lambda: term.screen()[-1].strip() == "" and any(
        "live view off" in r for r in term.screen()), 60, alive)
    term.type("exit")
    _wait("the fabric to stop", term.dead, 180)
    assert "results:" in "\n".join(term.screen())
    assert not _ifaces(prefix)


def test_web_view_shows_a_link_down_and_the_load_of_the_others(tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is installed by make install (Debian's chromium)")
    err = tmp_path / "up.err"
    with open(err, "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mrcnet.cli", "up", "clos-2p", "--web", "--cli",
             "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=e, cwd=REPO)
    assert proc.stdin is not None

    def alive() -> None:
        assert proc.poll() is None, err.read_text()[-2000:]

    try:
        url = _wait("the web view's URL", lambda: re.search(
            r"web view: (http://127\.0\.0\.1:\d+/\?token=\S+)", err.read_text()), 300, alive)
        assert isinstance(url, re.Match)
        run_dir = Path(re.search(r"results in (\S+)", err.read_text()).group(1))  # type: ignore
        with Chromium() as page:
            t0 = time.monotonic()
            page.navigate(url.group(1))
            load_s = time.monotonic() - t0
            page.wait_for("Number(document.body.dataset.updates) >= 1")
            links = len(load("clos-2p").links)
            assert page.evaluate("document.querySelectorAll('.link').length") == links
            proc.stdin.write(b"link p0-leaf0 p0-spine0 down\nrun all-to-all MRC 48MiB\n")
            proc.stdin.flush()
            down = "document.querySelectorAll('.link[data-state=down]')"
            page.wait_for(f"{down}.length === 1 && [...document.querySelectorAll("
                          "'.link[data-state=up]')].filter(l => +l.dataset.load > 0.02)"
                          ".length >= 8", 240)
            shot = page.screenshot(run_dir / "web-view.png")
            link = page.evaluate(f"{down}[0].dataset.link")
            title = page.evaluate(f"(() => {{ const e = {down}[0]; e.dispatchEvent("
                                  "new MouseEvent('mouseenter')); return e.textContent; })()")
            loads = page.evaluate("[...document.querySelectorAll('.link')].map(l => "
                                  "[l.dataset.link, l.dataset.state, +l.dataset.load])")
            listed = page.evaluate("document.querySelector('#down').textContent")
        assert re.fullmatch(r"p0-leaf0:\d+-p0-spine0:\d+", link), link
        assert "DOWN" in title and "p0-leaf0" in listed
        busy = [ln for ln, state, load in loads if state == "up" and load > 0.02]
        assert len(busy) >= 8 and link not in busy
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000
        (run_dir / "web-view.txt").write_text(f"page load {load_s:.3f} s\n")
        proc.stdin.write(b"exit\n")
        proc.stdin.close()
        assert proc.wait(300) == 0, err.read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: mrcnet up tears the fabric down
            proc.wait(120)

"""Where the live view's line goes: lines before the prompt, the terminal's last row at it
(a scroll region above), nothing at a prompt without a terminal unless a workload runs."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios
from collections.abc import Iterator

import pytest

from mrcnet.fabric.livedisplay import LiveDisplay


@pytest.fixture
def tty() -> Iterator[tuple[io.TextIOWrapper, int]]:
    """A pseudo-terminal of 30 rows x 100 columns: (the slave as a text stream, master fd)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    out = open(slave, "w", buffering=1, closefd=True)  # noqa: SIM115
    try:
        yield out, master
    finally:
        out.close()
        os.close(master)


def _read(master: int) -> str:
    os.set_blocking(master, False)
    chunks = []
    while True:
        try:
            chunks.append(os.read(master, 65536))
        except BlockingIOError:
            break
    return b"".join(chunks).decode()


def test_lines_before_the_prompt_then_the_last_row(tty: tuple[io.TextIOWrapper, int]) -> None:
    out, master = tty
    err = io.StringIO()
    live = LiveDisplay(err=err, out=out)
    live("[  1.00 s] before the CLI")
    assert err.getvalue() == "[  1.00 s] before the CLI\n" and _read(master) == ""
    live.open_prompt()
    opened = _read(master)
    # a new line, then the region rows 1..29 with the cursor saved and restored around it
    assert opened.replace("\r\n", "\n") == "\n\x1b7\x1b[1;29r\x1b8\x1b[1A"
    live("[  1.50 s] Mb/s p0= 10.0")
    drawn = _read(master)
    assert drawn == "\x1b7\x1b[30;1H\x1b[2K\x1b[7m[  1.50 s] Mb/s p0= 10.0\x1b[0m\x1b8"
    assert err.getvalue().count("\n") == 1  # nothing more on stderr
    live("x" * 300)
    assert ("x" * 99 + "\x1b[0m") in _read(master)  # cut to the row
    live.set_on(False)
    assert _read(master) == "\x1b7\x1b[r\x1b[30;1H\x1b[2K\x1b8"  # region gone, row cleared
    live("[  2.00 s] off")
    assert _read(master) == "" and err.getvalue().count("\n") == 1
    live.set_on(True)
    assert "\x1b[1;29r" in _read(master)
    live.close_prompt()
    assert _read(master).endswith("\x1b7\x1b[r\x1b[30;1H\x1b[2K\x1b8")


def test_resized_terminal_moves_the_region(tty: tuple[io.TextIOWrapper, int]) -> None:
    out, master = tty
    live = LiveDisplay(err=io.StringIO(), out=out)
    live.open_prompt()
    _read(master)
    fcntl.ioctl(out.fileno(), termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    live("status")
    drawn = _read(master)
    assert "\x1b[1;39r" in drawn and "\x1b[40;1H" in drawn


def test_without_a_terminal_lines_only_while_a_workload_runs() -> None:
    out, err = io.StringIO(), io.StringIO()
    live = LiveDisplay(err=err, out=out)
    live.open_prompt()
    live("at the prompt")
    with live.workload():
        live("during run")
    live("after")
    assert err.getvalue() == "during run\n" and out.getvalue() == ""
    assert live.row is None

"""Where the live view's status line goes, so that it never writes over the CLI.

Before the CLI opens (and in runs without one) each sample is a line on stderr, as a
progress log. At the CLI's prompt it is one of:

- ``StatusRow``, when stdout is a terminal: the terminal's last row is the status area. A
  scroll region (DECSTBM) covers the rows above it, so the prompt, what the user types and
  every command's output scroll there; each sample rewrites the last row between a cursor
  save and restore (DECSC/DECRC), in one write, so the cursor and readline's line are left
  where they were. The region follows the terminal's size and is removed on ``close``.
- nothing at the prompt, lines only while a workload runs (``workload()``), when stdout is
  not a terminal (commands from a pipe or file): no row to keep, and no line between a
  command's output lines.

``live on|off`` in the CLI switches the view (``LiveDisplay.on``).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

ESC = "\x1b"


class StatusRow:
    """The last row of a terminal as a status area (see the module docstring)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.rows = 0
        self.lock = threading.Lock()
        self.last = ""

    def _size(self) -> tuple[int, int]:
        """The terminal's size now (not $COLUMNS/$LINES, which a resize leaves stale)."""
        try:
            size = os.get_terminal_size(self.out.fileno())
        except (OSError, ValueError, AttributeError):
            size = shutil.get_terminal_size((80, 24))
        return size.columns, size.lines

    def _region(self, rows: int) -> str:
        # A new line first, so that the row given up to the status area is an empty one;
        # setting the region homes the cursor, hence the save/restore around it.
        return f"\n{ESC}7{ESC}[1;{rows - 1}r{ESC}8{ESC}[1A"

    def open(self) -> None:
        with self.lock:
            _cols, rows = self._size()
            self.rows = rows
            self.out.write(self._region(rows))
            self.out.flush()

    def show(self, text: str) -> None:
        with self.lock:
            if not self.rows:
                return
            cols, rows = self._size()
            prefix = ""
            if rows != self.rows:  # the terminal was resized: move the region
                prefix = self._region(rows)
                self.rows = rows
            self.last = text[: max(1, cols - 1)]
            self.out.write(f"{prefix}{ESC}7{ESC}[{rows};1H{ESC}[2K{ESC}[7m{self.last}{ESC}[0m"
                           f"{ESC}8")
            self.out.flush()

    def close(self) -> None:
        with self.lock:
            if not self.rows:
                return
            _cols, rows = self._size()
            self.out.write(f"{ESC}7{ESC}[r{ESC}[{rows};1H{ESC}[2K{ESC}8")
            self.out.flush()
            self.rows = 0


class LiveDisplay:
    """The sampler's ``display``: lines, the status row, or nothing (module docstring)."""

    def __init__(self, err: TextIO | None = None, out: TextIO | None = None) -> None:
        self.err = err or sys.stderr
        self.out = out or sys.stdout
        self.on = True
        self.row: StatusRow | None = None
        self.prompt = False  # the CLI is open
        self._workloads = 0

    def __call__(self, text: str) -> None:
        if not self.on:
            return
        if self.row is not None:
            self.row.show(text)
        elif not self.prompt or self._workloads:
            print(text, file=self.err, flush=True)

    def open_prompt(self) -> None:
        """The CLI opens: the status row on a terminal, else lines only during workloads."""
        self.prompt = True
        if self.out.isatty() and self.row is None:
            self.row = StatusRow(self.out)
            if self.on:
                self.row.open()

    def close_prompt(self) -> None:
        if self.row is not None:
            self.row.close()
            self.row = None
        self.prompt = False

    def set_on(self, on: bool) -> None:
        """``live on|off``: the status row appears or goes (its scroll region with it)."""
        if on == self.on:
            return
        self.on = on
        if self.row is not None:
            if on:
                self.row.open()
            else:
                self.row.close()

    @contextmanager
    def workload(self) -> Iterator[None]:
        """Lines are shown while a workload runs (without a status row)."""
        self._workloads += 1
        try:
            yield
        finally:
            self._workloads -= 1

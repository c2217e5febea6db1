"""p4runtime-shell as a client of the switches under test.

p4runtime-shell pins protobuf < 3.21 and p4runtime 1.4.1, so it lives in its own virtual
environment (``.venv-p4shell``, made by ``make install``) and runs as a subprocess
(``agent.py``); ``P4Shell.run`` sends it Python snippets. Tests skip with the reason when
that environment is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
P4SHELL_PYTHON = Path(os.environ.get("MRCNET_P4SHELL_PYTHON",
                                     REPO / ".venv-p4shell" / "bin" / "python"))
AGENT = Path(__file__).resolve().parent / "agent.py"


class P4ShellError(Exception):
    """A snippet raised inside the shell: ``kind`` is the exception class name, ``errors``
    the (canonical code, message) of each failed update, ``code`` a gRPC status name."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(f"{answer['exc']}: {answer['message']}")
        self.kind: str = answer["exc"]
        self.errors: list[tuple[int, str]] = [tuple(e) for e in answer.get("errors", [])]
        self.code: str | None = answer.get("code")
        self.trace: str = answer.get("trace", "")


def require_p4shell() -> None:
    if not P4SHELL_PYTHON.exists():
        pytest.skip(f"p4runtime-shell's venv is missing ({P4SHELL_PYTHON}; make install)")


class P4Shell:
    """One p4runtime-shell process; ``close()`` tears the shell down and waits for it."""

    def __init__(self) -> None:
        require_p4shell()
        self.proc = subprocess.Popen(
            [str(P4SHELL_PYTHON), str(AGENT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, cwd="/")
        first = self._read()
        assert first.get("ready"), first

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"p4runtime-shell agent exited ({self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, code: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"code": code}) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        if "exc" in answer:
            raise P4ShellError(answer)
        return answer["result"]

    def setup(self, addr: str, device_id: int, election_id: tuple[int, int] | None = None,
              p4info: str | None = None) -> None:
        """``sh.setup`` as a user types it: without ``election_id`` the shell's default,
        without ``p4info`` the P4Info is read from the switch."""
        args = [f"device_id={device_id}", f"grpc_addr={addr!r}", "verbose=False"]
        if election_id is not None:
            args.append(f"election_id={election_id!r}")
        if p4info is not None:
            args.append(f"config=sh.FwdPipeConfig({p4info!r}, '/dev/null')")
        self.run(f"sh.setup({', '.join(args)})")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.run("sh.teardown()")
            except (P4ShellError, RuntimeError, BrokenPipeError):
                pass
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

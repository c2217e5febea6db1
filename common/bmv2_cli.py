"""BMv2's Thrift runtime through its own client, ``simple_switch_CLI``.

What P4Runtime does not reach on simple_switch_grpc goes through Thrift: queue rate and depth
(``set_queue_rate``, ``set_queue_depth``) and register writes and reads (PI answers
UNIMPLEMENTED for both). The CLI is BMv2's documented client and brings its own Thrift
bindings, so nothing of BMv2's Python is imported here: commands go to its standard input,
one per line, and its answers are read back.

Tools are found in ``$P4_BIN_DIR`` or on ``PATH`` (common.p4toolchain); BMv2 has no fallback
directory, so a machine without BMv2 on PATH runs the embedded target only.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from common.p4toolchain import find_tool

CLI_TOOL = "simple_switch_CLI"
SWITCH_TOOL = "simple_switch_grpc"
_PROMPT = "RuntimeCmd:"
_FAILED = re.compile(r"^(Error|Invalid|Traceback|thrift\.|Could not)", re.M)
_REGISTER_VALUE = re.compile(r"^\S+\[(\d+)\]\s*=\s*(\d+)\s*$")


class Bmv2CliError(RuntimeError):
    """simple_switch_CLI is missing, could not reach the switch, or refused a command."""


def find_bmv2_tool(name: str, env: Mapping[str, str] | None = None) -> Path | None:
    """``name`` in ``$P4_BIN_DIR`` or on ``PATH`` (no default directory), or None."""
    return find_tool(name, env, fallback=False)


def run_cli(
    thrift_port: int,
    commands: Sequence[str],
    timeout: float = 30.0,
    cli: Path | None = None,
) -> list[str]:
    """Run ``commands`` in one simple_switch_CLI session; returns one answer per command
    (the text it printed for it, prompt removed). Raises Bmv2CliError naming the command
    that failed (an ``Error: ...`` answer, a Thrift exception, or no connection)."""
    tool = cli or find_bmv2_tool(CLI_TOOL)
    if tool is None:
        raise Bmv2CliError(f"{CLI_TOOL} is not on PATH (nor in $P4_BIN_DIR); BMv2's queue "
                           "and register settings need it")
    for cmd in commands:
        if "\n" in cmd or not cmd.strip():
            raise Bmv2CliError(f"bad CLI command {cmd!r}")
    try:
        proc = subprocess.run(
            [str(tool), "--thrift-port", str(thrift_port)],
            input="".join(c + "\n" for c in commands),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise Bmv2CliError(f"{CLI_TOOL} on thrift port {thrift_port}: no answer in "
                           f"{timeout:.0f} s") from None
    answers = _answers(proc.stdout, len(commands))
    for cmd, answer in zip(commands, answers):
        if _FAILED.search(answer):
            raise Bmv2CliError(f"thrift port {thrift_port}: {cmd!r}: {answer.strip()}")
    tail = proc.stderr.strip()
    if proc.returncode != 0 or len(answers) < len(commands):
        done = min(len(answers), len(commands))
        failed = commands[done] if done < len(commands) else commands[-1]
        raise Bmv2CliError(f"thrift port {thrift_port}: {failed!r} failed (exit "
                           f"{proc.returncode}): {tail[-400:] or proc.stdout.strip()[-400:]}")
    return answers[: len(commands)]


def _answers(stdout: str, count: int) -> list[str]:
    """Split the CLI's output at its prompts: the text after prompt *i* answers command *i*
    (the banner before the first prompt is dropped)."""
    parts = stdout.split(_PROMPT)
    return [p.strip() for p in parts[1 : count + 1]]


def register_value(answer: str) -> int:
    """The value in a ``register_read NAME INDEX`` answer (``NAME[INDEX]= VALUE``)."""
    match = _REGISTER_VALUE.match(answer.strip())
    if match is None:
        raise Bmv2CliError(f"unexpected register_read answer {answer!r}")
    return int(match.group(2))

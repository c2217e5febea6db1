"""Run an STF test on BMv2's simple_switch, the way p4c's bmv2stf.py driver does.

simple_switch runs with ``--use-files``: each interface N reads ``pcapN_in.pcap`` and writes
``pcapN_out.pcap``. BMv2 merges its input files by packet timestamp and waits for the next
packet (or the end) of every file before it sends one, so: a port that receives no packet
gets an empty regular file; the others get a FIFO fed by its own writer thread, each packet
stamped with its position in the STF file (BMv2 then runs them in file order). Table and
other commands go through ``simple_switch_CLI`` (one CLI run per run of consecutive
commands, waited for). As with p4c's own driver, a packet sent before a command may be
processed after it when several ports receive packets. After the last packet the driver
waits until every port has its expected packets (or a quiet period) and stops the switch by
the pid it started. Needs no root: there are no network interfaces.
"""

from __future__ import annotations

import errno
import os
import queue
import random
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from common.netns import free_tcp_port
from switch.p4json import program as pm
from switch.stf import keys
from switch.stf.parse import Add, Command, Direct, Expect, Packet, SetDefault
from switch.stf.toolchain import SIMPLE_SWITCH, SIMPLE_SWITCH_CLI, ToolError, require_tool
from switch.stf.verdict import check, interfaces

START_TIMEOUT = 30.0
SETTLE = 0.3  # seconds with no new output before the run is over
DRAIN_TIMEOUT = 5.0
CLI_TIMEOUT = 60.0
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


class FifoWriter(threading.Thread):
    """Writes queued pcap records into one input FIFO (BMv2 reads the FIFOs in turn)."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.q: queue.Queue[bytes | None] = queue.Queue()
        self.error: OSError | None = None

    def run(self) -> None:
        try:
            while (record := self.q.get()) is not None:
                os.write(self.fd, record)
        except OSError as exc:  # simple_switch died
            self.error = exc
        finally:
            os.close(self.fd)


def _open_fifo(path: Path, proc: subprocess.Popen[bytes], deadline: float) -> int:
    """Open ``path`` for writing once simple_switch has opened it for reading."""
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if proc.poll() is not None:
                raise ToolError(f"{SIMPLE_SWITCH} exited (code {proc.returncode})") from None
            if time.monotonic() > deadline:
                raise ToolError(f"{SIMPLE_SWITCH} did not open {path.name}") from None
            time.sleep(0.01)
            continue
        os.set_blocking(fd, True)
        os.write(fd, PCAP_HEADER)
        return fd


def read_pcap(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    data = path.read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack_from("<I", data)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        _s, _u, incl, _orig = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        if off + incl > len(data):
            break
        out.append(data[off : off + incl])
        off += incl
    return out


def cli_commands(prog: pm.Program, cmd: Command) -> list[str]:
    """The simple_switch_CLI lines p4c's driver sends for ``cmd``."""
    if isinstance(cmd, Add):
        table = keys.find_table(prog, cmd.table)
        action = keys.find_action(prog, table, cmd.action)
        parts = keys.key_parts(table, cmd.keys)
        args = keys.action_args(action, cmd.args)
        words = []
        for k, part in zip(table.keys, parts):
            if isinstance(part, tuple):
                sep = {"ternary": "&&&", "lpm": "/", "range": "->"}[k.match_type]
                words.append(f"{part[0]}{sep}{part[1]}")
            else:
                words.append(str(part))
        line = f"table_add {table.name} {action.name} {' '.join(words)} => {' '.join(map(str, args))}"
        if table.match_type in ("ternary", "range"):
            line += f" {keys.bmv2_priority(table, cmd.priority) if cmd.priority is not None else 0}"
        return [line]
    if isinstance(cmd, SetDefault):
        table = keys.find_table(prog, cmd.table)
        action = keys.find_action(prog, table, cmd.action)
        args = keys.action_args(action, cmd.args)
        return [f"table_set_default {table.name} {action.name} {' '.join(map(str, args))}".rstrip()]
    if isinstance(cmd, Direct):
        return [" ".join([cmd.name, *cmd.args])]
    return []


def run(json_path: Path, commands: list[Command], workdir: Path) -> tuple[str, str]:
    """(status, reason) of the STF ``commands`` on simple_switch with program ``json_path``."""
    try:
        received = execute(json_path, commands, workdir)
    except keys.KeyError_ as exc:
        return "fail", str(exc)
    except SwitchFailed as exc:
        return "fail", str(exc)
    why = check(commands, received)
    return ("pass", "") if why is None else ("fail", why)


class SwitchFailed(ToolError):
    """simple_switch died while running the test."""


def execute(json_path: Path, commands: list[Command], workdir: Path,
            switch_args: tuple[str, ...] = ()) -> dict[int, list[bytes]]:
    """Run ``commands`` on simple_switch; the packets each STF interface received, in order.
    ``switch_args`` go after the program (target options, e.g. ``--priority-queues 8``)."""
    switch = require_tool(SIMPLE_SWITCH)
    cli = require_tool(SIMPLE_SWITCH_CLI)
    prog = pm.load_program(json_path.read_bytes())
    ports = sorted(interfaces(commands))
    fed = {c.port for c in commands if isinstance(c, Packet)}
    workdir.mkdir(parents=True, exist_ok=True)
    for p in ports:
        path = workdir / f"pcap{p}_in.pcap"
        if path.exists():
            path.unlink()
        if p in fed:
            os.mkfifo(path)
        else:
            path.write_bytes(PCAP_HEADER)
    thrift = free_tcp_port()
    argv = [str(switch), "--use-files", "0", "--thrift-port", str(thrift),
            "--device-id", str(random.randrange(1, 1 << 20)),
            # relative to its cwd (workdir): a socket path has at most 107 bytes
            "--notifications-addr", "ipc://notifications.ipc"]
    for p in ports:
        argv += ["-i", f"{p}@pcap{p}"]
    argv.append(str(json_path.resolve()))
    if switch_args:
        argv += ["--", *switch_args]
    log = (workdir / "simple_switch.log").open("wb")
    proc = subprocess.Popen(argv, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    writers: dict[int, FifoWriter] = {}
    try:
        deadline = time.monotonic() + START_TIMEOUT
        for p in ports:
            if p in fed:
                writers[p] = FifoWriter(_open_fifo(workdir / f"pcap{p}_in.pcap", proc, deadline))
                writers[p].start()
        _wait_listening(thrift, proc, deadline)
        pending: list[str] = []
        sent_since_cli = False
        seq = 0
        for cmd in commands:
            if isinstance(cmd, Packet):
                if pending:
                    _run_cli(cli, thrift, pending, workdir)
                    pending = []
                seq += 1
                stamp = struct.pack("<II", seq // 1_000_000, seq % 1_000_000)
                size = len(cmd.data)
                writers[cmd.port].q.put(stamp + struct.pack("<II", size, size) + cmd.data)
                sent_since_cli = True
            elif not isinstance(cmd, Expect):
                try:
                    lines = cli_commands(prog, cmd)
                except keys.KeyError_ as exc:
                    raise keys.KeyError_(f"line {cmd.line}: {exc}") from None
                if lines and sent_since_cli and not pending:
                    time.sleep(SETTLE)  # let packets already sent go through first
                    sent_since_cli = False
                pending += lines
        if pending:
            _run_cli(cli, thrift, pending, workdir)
        for writer in writers.values():
            writer.q.put(None)
        for writer in writers.values():
            writer.join(DRAIN_TIMEOUT * 6)
        received = _collect(workdir, ports, commands)
    finally:
        for writer in writers.values():
            writer.q.put(None)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for writer in writers.values():
            writer.join(DRAIN_TIMEOUT)
        log.close()
    if proc.returncode not in (0, -15):
        raise SwitchFailed(f"{SIMPLE_SWITCH} exited with code {proc.returncode} (see {workdir})")
    return received


def _wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while True:
        if proc.poll() is not None:
            raise ToolError(f"{SIMPLE_SWITCH} exited (code {proc.returncode})")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline:
            raise ToolError(f"{SIMPLE_SWITCH} thrift port {port} not listening")
        time.sleep(0.02)


def _run_cli(cli: Path, thrift: int, lines: list[str], workdir: Path) -> None:
    done = subprocess.run([str(cli), "--thrift-port", str(thrift)], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False,
                          cwd=workdir)
    with (workdir / "cli.log").open("a") as f:
        f.write(done.stdout + done.stderr)


def _collect(workdir: Path, ports: list[int], commands: list[Command]) -> dict[int, list[bytes]]:
    want: dict[int, int] = {}
    for c in commands:
        if isinstance(c, Expect):
            want[c.port] = want.get(c.port, 0) + 1
    deadline = time.monotonic() + DRAIN_TIMEOUT
    last: dict[int, int] = {}
    quiet_since = time.monotonic()
    while True:
        got = {p: read_pcap(workdir / f"pcap{p}_out.pcap") for p in ports}
        counts = {p: len(v) for p, v in got.items()}
        if counts != last:
            last, quiet_since = counts, time.monotonic()
        enough = all(counts.get(p, 0) >= n for p, n in want.items())
        now = time.monotonic()
        if (enough and now - quiet_since >= SETTLE) or now > deadline:
            return got
        time.sleep(0.05)

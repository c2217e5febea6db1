"""Mininet node classes for P4Runtime switches: the embedded target and BMv2 simple_switch_grpc.

Both run one switch process in the root namespace on the switch's interfaces (Mininet port
numbers become P4 port numbers) with P4Runtime on 127.0.0.1. ``start`` returns once the
process is alive and its gRPC port accepts connections, or raises ``SwitchStartError`` naming
the log file. ``stop`` is idempotent and removes what the switch created: the process (by its
pid, with its process group), its temporary log directory (unless ``log_dir`` was given, in
which case the log is kept for the user), and, as every Mininet switch, its interfaces.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mininet.node import Switch

from common.bmv2_cli import SWITCH_TOOL, Bmv2CliError, find_bmv2_tool, run_cli
from common.netns import free_tcp_port, stop_process_group, tcp_listening
from switch import bmv2
from switch.bmv2 import Bmv2Queue, bmv2_queue, queue_commands
from switch.traffic import parse_link_spec


class SwitchStartError(RuntimeError):
    """The switch process died or its gRPC port did not open in time; see the named log."""


class GrpcSwitch(Switch):  # type: ignore[misc]
    """Base: a switch implemented by one external process that serves P4Runtime."""

    kind = "switch"

    def __init__(
        self,
        name: str,
        grpc_port: int | None = None,
        device_id: int | None = None,
        log_dir: str | None = None,
        start_timeout: float = 20.0,
        **params: Any,
    ) -> None:
        params.setdefault("inNamespace", False)
        super().__init__(name, **params)
        self.grpc_port = grpc_port
        self.device_id = device_id if device_id is not None else int(self.dpid, 16)
        self.start_timeout = start_timeout
        self._own_log_dir = log_dir is None
        self._log_dir_arg = log_dir
        self.log_dir: Path | None = None
        self.log_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def port_map(self) -> dict[int, str]:
        """P4 port number -> interface name (the loopback control interface excluded)."""
        return {port: intf.name for port, intf in sorted(self.intfs.items()) if intf.name != "lo"}

    def _resolve(self, specs: dict[int | str, str], ports: dict[int, str]) -> list[tuple[int, str]]:
        """Link specs keyed by port number or interface name -> (port number, spec)."""
        by_name = {ifname: n for n, ifname in ports.items()}
        out: list[tuple[int, str]] = []
        for key, spec in specs.items():
            number = by_name.get(key) if isinstance(key, str) else key
            if number is None or number not in ports:
                raise ValueError(f"{self.name}: link spec for unknown port {key!r}")
            out.append((number, spec))
        return out

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        if self._own_log_dir:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        else:
            self.log_dir = Path(str(self._log_dir_arg))
            self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"{self.name}.log"
        if self.grpc_port is None:
            self.grpc_port = free_tcp_port()
        cmd = self.command()
        if self.inNamespace:
            cmd = ["mnexec", "-a", str(self.pid), *cmd]
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self.wait_ready()
            self.configure()
        except BaseException:
            self.stop(deleteIntfs=False)
            raise

    def configure(self) -> None:
        """Called once the process is ready (the BMv2 node applies its queues here)."""

    def wait_ready(self) -> None:
        """Process alive and gRPC port listening, or SwitchStartError naming the log."""
        assert self.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                raise SwitchStartError(
                    f"{self.kind} {self.name} exited with code {self.proc.returncode} during "
                    f"start-up; see {self.log_path}"
                )
            if tcp_listening("127.0.0.1", int(self.grpc_port or 0)):
                return
            if time.monotonic() > deadline:
                raise SwitchStartError(
                    f"{self.kind} {self.name}: gRPC port {self.grpc_port} not listening after "
                    f"{self.start_timeout:.0f} s; see {self.log_path}"
                )
            time.sleep(0.02)

    def _stop_process(self, timeout: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process_group(proc, timeout)

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop the process and remove what it created; safe to call any number of times."""
        self._stop_process()
        if self._own_log_dir and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None
        super().stop(deleteIntfs)


class EmbeddedP4Switch(GrpcSwitch):
    """The project's embedded P4 target (``python -m switch.main``).

    ``links``/``ingress_links`` map a port number or interface name to a link spec
    ("rate=1e9,delay=10e-6,qpkts=64"); ``default_link`` applies to the other ports.
    """

    kind = "embedded switch"

    def __init__(
        self,
        name: str,
        links: dict[int | str, str] | None = None,
        ingress_links: dict[int | str, str] | None = None,
        default_link: str = "",
        python: str = sys.executable,
        extra_args: tuple[str, ...] = (),
        **params: Any,
    ) -> None:
        super().__init__(name, **params)
        self.links = dict(links or {})
        self.ingress_links = dict(ingress_links or {})
        self.default_link = default_link
        self.python = python
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        ports = self.port_map()
        assert self.log_path is not None
        cmd = [
            self.python,
            "-m",
            "switch.main",
            "--name",
            self.name,
            "--grpc-addr",
            self.grpc_address,
            "--device-id",
            str(self.device_id),
            "--log",
            str(self.log_path),
        ]
        for number, ifname in ports.items():
            cmd += ["--port", f"{number}={ifname}"]
        for number, spec in self._resolve(self.links, ports):
            cmd += ["--link", f"{number}:{spec}"]
        for number, spec in self._resolve(self.ingress_links, ports):
            cmd += ["--ingress-link", f"{number}:{spec}"]
        if self.default_link:
            cmd += ["--default-link", self.default_link]
        return cmd + list(self.extra_args)


class Bmv2Switch(GrpcSwitch):
    """BMv2 ``simple_switch_grpc`` without a program (pushed over P4Runtime), when installed.

    ``links`` / ``default_link`` are egress link specs, as for the embedded switch; they become
    BMv2 queue rates and depths per port (``switch.bmv2``), set over Thrift once the switch
    is up. Ingress specs have no BMv2 counterpart (see docs/switch.md).
    """

    kind = "simple_switch_grpc"
    binary = SWITCH_TOOL

    def __init__(
        self,
        name: str,
        thrift_port: int | None = None,
        links: dict[int | str, str] | None = None,
        default_link: str = "",
        **params: Any,
    ) -> None:
        path = find_bmv2_tool(self.binary)
        if path is None:
            raise SwitchStartError(
                f"{self.binary} is not on PATH (nor in $P4_BIN_DIR: BMv2 is not installed on "
                "this machine); use the embedded switch (--switch embedded)"
            )
        super().__init__(name, **params)
        self.binary_path = path
        self.thrift_port = thrift_port
        self.links = dict(links or {})
        self.default_link = default_link
        for spec in (*self.links.values(), default_link):  # ValueError before anything runs
            bmv2_queue(parse_link_spec(spec))
        self.ignored: dict[int, tuple[str, ...]] = {}  # port -> link parameters BMv2 lacks

    @classmethod
    def available(cls) -> bool:
        return find_bmv2_tool(cls.binary) is not None

    def queues(self) -> dict[int, Bmv2Queue]:
        """Port -> BMv2 queue settings of its egress link (ValueError for what BMv2 lacks)."""
        ports = self.port_map()
        specs = {n: self.default_link for n in ports}
        specs.update(dict(self._resolve(self.links, ports)))
        return {n: bmv2_queue(parse_link_spec(spec)) for n, spec in specs.items()}

    def command(self) -> list[str]:
        assert self.log_path is not None and self.log_dir is not None
        if self.thrift_port is None:
            self.thrift_port = free_tcp_port()
        return bmv2.command(
            self.binary_path,
            self.device_id,
            self.port_map(),
            self.grpc_address,
            self.thrift_port,
            self.log_path.with_suffix(""),
        )

    def wait_ready(self) -> None:
        super().wait_ready()
        deadline = time.monotonic() + self.start_timeout
        while not tcp_listening("127.0.0.1", int(self.thrift_port or 0)):
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise SwitchStartError(
                    f"{self.kind} {self.name}: thrift port {self.thrift_port} not listening; "
                    f"see {self.log_path}"
                )
            time.sleep(0.02)

    def configure(self) -> None:
        commands: list[str] = []
        for port, queue in sorted(self.queues().items()):
            commands += queue_commands(port, queue)
            if queue.ignored:
                self.ignored[port] = queue.ignored
        if not commands:
            return
        try:
            run_cli(int(self.thrift_port or 0), commands)
        except Bmv2CliError as exc:
            raise SwitchStartError(f"{self.kind} {self.name}: queue set-up failed: {exc}; "
                                   f"see {self.log_path}") from None

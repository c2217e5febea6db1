"""What every kind of switch node is: the one interface the fabric builder, the labs and the
benchmarks use, so a new kind of switch (another machine, the simulator) is one class.

``SwitchTarget`` is the node as it runs: its life cycle (``start``, ``connected``, ``alive``,
idempotent ``stop``), the P4Runtime address it serves, the switch-map entry the controller
needs to operate it (``endpoint``) and the facts the orchestrator asks instead of testing a
kind's name (``supports_dilation``, ``shapes_host_ingress``, ``has_lag_meter``, ``notes``).
How a switch is *operated* (pipeline config, port state, counters, captures) is the
controller's side of the same kind (controller/drivers/).

``ProcessSwitch`` is a target that is one external process serving P4Runtime: subclasses say
which command line, which TCP ports mean "ready" and what to configure once it is; a
``Launcher`` says where the process runs (this machine by default; a Mininet node, a
namespace or another server by other launchers).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from common.netns import Process, free_tcp_port, tcp_listening
from switch.traffic import parse_link_spec

DEFAULT_START_TIMEOUT = 20.0  # s for one switch to listen (a fabric scales it with its size)


class SwitchStartError(RuntimeError):
    """The switch process died or did not become ready in time; the message names the log."""


Launcher = Callable[[str, Sequence[str], Path], Process]
"""launch(label, argv, log_path) -> a started Process (own session, output to log_path)."""


def local_launcher(label: str, argv: Sequence[str], log_path: Path) -> Process:
    """Start ``argv`` on this machine in its own session (so its children stop with it)."""
    with open(log_path, "ab") as out:
        popen = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    return Process(label, popen, log_path)


class SwitchTarget(ABC):
    """One switch node of a fabric, whatever runs it."""

    kind: ClassVar[str]  # registry name (switch.targets.target_class)
    label: ClassVar[str]  # what messages call it ("embedded switch", "simple_switch_grpc")
    supports_dilation: ClassVar[bool] = True  # can run on a dilated run clock (--tdf)
    shapes_host_ingress: ClassVar[bool] = True  # False: the host NIC shapes host -> switch
    has_lag_meter: ClassVar[bool] = True  # reports whether it kept up (GetTiming)
    takes_run_flags: ClassVar[bool] = False  # accepts ``extra_args``: the run's clock, ...
    takes_captures: ClassVar[bool] = True  # per-port pcap at run time (the controller asks)

    def __init__(self, name: str, device_id: int, ports: Mapping[int, str], *,
                 links: Mapping[int, str] | None = None,
                 ingress_links: Mapping[int, str] | None = None,
                 default_link: str = "") -> None:
        """``ports``: P4 port number -> interface name. ``links`` / ``ingress_links``: link
        specs ("rate=1e9,delay=10e-6,qpkts=64") per port for the egress and the ingress
        direction; ``default_link`` for the ports not named. A spec this kind cannot emulate
        raises ValueError here, before anything runs."""
        self.name = name
        self.device_id = device_id
        self.ports = dict(ports)
        self.links = dict(links or {})
        self.ingress_links = dict(ingress_links or {})
        self.default_link = default_link
        unknown = sorted(set(self.links) - set(self.ports) | set(self.ingress_links)
                         - set(self.ports))
        if unknown:
            raise ValueError(f"{name}: link spec for unknown port(s) {unknown}")
        self.check_links()

    @classmethod
    def available(cls) -> bool:
        """Whether this machine can run the kind (its binaries are installed)."""
        return True

    @classmethod
    def unavailable_reason(cls) -> str:
        return ""

    @classmethod
    def host_shaper(cls, ifname: str, spec: str) -> str | None:
        """For a kind that does not shape host -> switch itself (``shapes_host_ingress``
        False): the shell command, run in the host's namespace, that shapes the host NIC
        ``ifname`` like the ingress link ``spec``; None when nothing needs shaping."""
        return None

    def check_links(self) -> None:
        """Raise ValueError for a link spec the kind cannot emulate (default: parse them)."""
        for spec in (*self.links.values(), *self.ingress_links.values(), self.default_link):
            parse_link_spec(spec)

    def egress_spec(self, port: int) -> str:
        return self.links.get(port, self.default_link)

    def ingress_spec(self, port: int) -> str:
        return self.ingress_links.get(port, "")

    def notes(self) -> list[str]:
        """What this switch does not emulate of its link specs (empty when it does it all)."""
        return []

    @property
    @abstractmethod
    def grpc_address(self) -> str:
        """host:port of its P4Runtime server."""

    @abstractmethod
    def start(self) -> None:
        """Start and wait until ready (SwitchStartError naming the log); rolls back on error."""

    @abstractmethod
    def stop(self) -> None:
        """Stop and remove what the start created; safe to call any number of times."""

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def connected(self) -> bool:
        """Ready for a controller: running and serving P4Runtime."""

    @property
    def pid(self) -> int | None:
        """The process to measure (CPU time), None when the switch has none of its own."""
        return None

    @property
    def log_path(self) -> Path | None:
        return None

    def endpoint(self) -> dict[str, object]:
        """The controller's switch-map entry (controller/drivers parses it for ``kind``)."""
        return {"kind": self.kind, "address": self.grpc_address, "device_id": self.device_id}


class ProcessSwitch(SwitchTarget):
    """A switch that is one external process serving P4Runtime on 127.0.0.1."""

    def __init__(self, name: str, device_id: int, ports: Mapping[int, str], *,
                 grpc_port: int | None = None, log_dir: Path | None = None,
                 start_timeout: float = DEFAULT_START_TIMEOUT,
                 launcher: Launcher | None = None, **kwargs: object) -> None:
        """``log_dir``: where its log goes and stays (None: a temporary directory removed by
        ``stop``). ``launcher``: where the process runs (default: this machine)."""
        super().__init__(name, device_id, ports, **kwargs)  # type: ignore[arg-type]
        self.grpc_port = grpc_port
        self.start_timeout = start_timeout
        self.launcher = launcher or local_launcher
        self._log_dir_arg = log_dir
        self.log_dir: Path | None = None
        self._log_path: Path | None = None
        self.proc: Process | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    @abstractmethod
    def command(self) -> list[str]:
        """The process's argument vector (ports allocated, log path known)."""

    def ready_ports(self) -> list[int]:
        """TCP ports that must accept connections before the switch counts as started."""
        return [int(self.grpc_port or 0)]

    def configure(self) -> None:
        """Called once the process is ready (BMv2 applies its queues here)."""

    def _log_file(self) -> Path:
        assert self.log_dir is not None
        return self.log_dir / f"{self.name}.log"

    def start(self) -> None:
        if self.proc is not None and self.proc.alive():
            return
        if self._log_dir_arg is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        else:
            self.log_dir = Path(self._log_dir_arg)
            self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self._log_file()
        if self.grpc_port is None:
            self.grpc_port = free_tcp_port()
        try:
            argv = self.command()
            self.proc = self.launcher(self.name, argv, self.launch_log())
            self.wait_ready()
            self.configure()
        except BaseException:
            self.stop()
            raise

    def launch_log(self) -> Path:
        """Where the process's standard output and errors go (start-up failures)."""
        assert self.log_dir is not None
        return self.log_dir / f"{self.name}.out"

    def wait_ready(self) -> None:
        """Process alive and every ready port listening, or SwitchStartError naming the log."""
        deadline = time.monotonic() + self.start_timeout
        for port in self.ready_ports():
            while not tcp_listening("127.0.0.1", port):
                if not self.alive():
                    code = self.proc.popen.returncode if self.proc is not None else None
                    raise SwitchStartError(f"{self.label} {self.name} exited with code {code} "
                                           f"during start-up; see {self.launch_log()}")
                if time.monotonic() > deadline:
                    raise SwitchStartError(
                        f"{self.label} {self.name}: port {port} not listening after "
                        f"{self.start_timeout:.0f} s; see {self.launch_log()}")
                time.sleep(0.02)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def connected(self) -> bool:
        return self.alive() and all(tcp_listening("127.0.0.1", p) for p in self.ready_ports())

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.stop()
        if self._log_dir_arg is None and self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None

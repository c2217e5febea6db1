"""Controller process: ``python -m controller.server --unix PATH | --tcp ADDR --token-file F``.

Prints one ``listening on ADDRESS`` line once the socket accepts connections (readiness for
the orchestrator), serves until SIGTERM/SIGINT, then closes agent channels and event streams
and removes its unix socket. ``--tdf``/``--clock-epoch`` (or MRCNET_TDF/MRCNET_CLOCK_EPOCH)
put it on the run's virtual clock (common/vclock.py): ``--cp-delay`` and endpoint-operation
timeouts are then virtual seconds (``Controller.clock``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import grpc

from common import vclock
from common.vclock import RunClock
from controller.auth import AuthError, TokenInterceptor, bind_unix, read_token, tls_credentials
from controller.convergence import Convergence
from controller.core import Controller
from controller.drivers import SwitchEndpoint, parse_endpoint
from controller.fabric import FabricBackend
from controller.service import add_services
from controller.southbound import SouthboundError, SwitchFabric
from topologies.loader import TopologyError, load
from topologies.model import PathMode
from topologies.routes import switch_tables

DEFAULT_WORKERS = 64


@dataclass
class ServerConfig:
    unix: str | None = None
    tcp: str | None = None
    token_file: str | None = None
    tls: tuple[str, str, str] | None = None  # (cert, key, client CA)
    topology: str | None = None
    ports: int | None = None
    max_workers: int = DEFAULT_WORKERS
    switches: str | None = None  # JSON {switch: {"address": "host:port", "device_id": N}}
    mode: str | None = None  # path mode to program (default: the topology's)
    cp_delay: float | None = None  # with --switches: withdraw/restore routes after this delay
    clock: RunClock | None = None  # the run's clock (default: TDF 1, epoch now)


class ControllerServer:
    """A running controller: ``address`` to connect to, ``stop()`` (idempotent)."""

    def __init__(
        self,
        controller: Controller,
        server: grpc.Server,
        address: str,
        unix: Path | None,
        southbound: SwitchFabric | None = None,
        convergence: Convergence | None = None,
    ) -> None:
        self.controller = controller
        self.southbound = southbound
        self.convergence = convergence
        self.server = server
        self.address = address
        self._unix = unix
        self._stopped = False
        self._lock = threading.Lock()

    def stop(self, grace: float = 1.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.controller.close()
        self.server.stop(grace).wait()
        if self.convergence is not None:
            self.convergence.close()
        if self.southbound is not None:
            self.southbound.close()
        if self._unix is not None and self._unix.exists():
            self._unix.unlink()

    def wait(self) -> None:
        self.server.wait_for_termination()


def start(config: ServerConfig, backend: FabricBackend | None = None) -> ControllerServer:
    """Validate the configuration, bind, and start serving. Raises AuthError / TopologyError."""
    if bool(config.unix) == bool(config.tcp):
        raise AuthError("give exactly one of --unix PATH or --tcp HOST:PORT")
    if config.tcp and not (config.token_file or config.tls):
        raise AuthError(
            "--tcp needs --token-file (or --tls-cert/--tls-key/--tls-ca): the operator API is privileged"
        )
    token = read_token(config.token_file) if config.token_file else None
    creds = tls_credentials(*config.tls) if config.tls else None
    topo = load(config.topology) if config.topology else None
    southbound = None
    convergence = None
    if config.switches:
        if topo is None:
            raise AuthError("--switches needs --topology")
        southbound = SwitchFabric(
            topo, read_switch_map(config.switches), PathMode(config.mode) if config.mode else None
        )
        southbound.start()  # raises SouthboundError naming the switch; nothing left connected
        backend = southbound
        if config.cp_delay is not None:
            tables = switch_tables(topo, southbound.mode)
            convergence = Convergence(topo, tables, southbound.clients, config.cp_delay,
                                      config.clock)
            convergence.start()
    controller = Controller(topo, ports=config.ports, backend=backend, clock=config.clock)
    interceptors = [TokenInterceptor(token)] if token else []
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="ctl"),
        interceptors=interceptors,
        maximum_concurrent_rpcs=config.max_workers * 4,
    )
    add_services(server, controller)
    unix_path = None
    if config.unix:
        unix_path = bind_unix(server, config.unix)
        address = f"unix:{unix_path}"
    else:
        assert config.tcp is not None
        port = (
            server.add_secure_port(config.tcp, creds)
            if creds
            else server.add_insecure_port(config.tcp)
        )
        if not port:
            raise AuthError(f"cannot bind {config.tcp}")
        host = config.tcp.rsplit(":", 1)[0]
        address = f"{host}:{port}"
    server.start()
    return ControllerServer(controller, server, address, unix_path, southbound, convergence)


def read_switch_map(path: str) -> dict[str, SwitchEndpoint]:
    """``{"leaf0": {"kind": "...", "address": "127.0.0.1:9559", "device_id": 1, ...}, ...}``
    (what the switch nodes' ``endpoint()`` wrote) -> endpoints; the kind's driver validates
    what else its entries carry (controller/drivers/)."""
    try:
        data = json.loads(Path(path).read_text())
        return {name: parse_endpoint(name, ep) for name, ep in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SouthboundError(f"switch map {path}: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m controller.server", description=__doc__)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--unix", metavar="PATH", help="serve on a unix socket (mode 0600)")
    where.add_argument(
        "--tcp", metavar="HOST:PORT", help="serve on TCP (needs --token-file or TLS)"
    )
    p.add_argument("--token-file", help="file holding the bearer token clients must send")
    p.add_argument("--tls-cert", help="server certificate (PEM) for mutual TLS")
    p.add_argument("--tls-key", help="server private key (PEM)")
    p.add_argument("--tls-ca", help="CA that signs client certificates (PEM)")
    p.add_argument("--topology", help="topology name or YAML file (enables fabric operations)")
    p.add_argument("--ports", type=int, help="NIC ports per host (default: from the topology)")
    p.add_argument("--max-workers", type=int, default=DEFAULT_WORKERS)
    p.add_argument(
        "--switches", metavar="FILE", help="JSON switch map: program and operate these switches"
    )
    p.add_argument("--mode", choices=[m.value for m in PathMode], help="path mode to program")
    p.add_argument("--cp-delay", type=float, default=None, metavar="S",
                   help="with --switches: withdraw/restore routes S seconds after a port change")
    vclock.add_arguments(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tls_parts = (args.tls_cert, args.tls_key, args.tls_ca)
    if any(tls_parts) and not all(tls_parts):
        print("controller: --tls-cert, --tls-key and --tls-ca go together", file=sys.stderr)
        return 2
    try:
        clock = vclock.RunClock.from_args(args)
    except vclock.ClockError as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    config = ServerConfig(
        clock=clock,
        unix=args.unix,
        tcp=args.tcp,
        token_file=args.token_file,
        tls=tls_parts if all(tls_parts) else None,
        topology=args.topology,
        ports=args.ports,
        max_workers=args.max_workers,
        switches=args.switches,
        mode=args.mode,
        cp_delay=args.cp_delay,
    )
    try:
        running = start(config)
    except (AuthError, TopologyError, SouthboundError) as exc:
        print(f"controller: {exc}", file=sys.stderr)
        return 2
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"listening on {running.address}", flush=True)
    try:
        while not done.wait(1.0):
            pass
    finally:
        running.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

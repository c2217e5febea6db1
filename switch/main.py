"""The embedded switch process: ``python -m switch.main --name S --grpc-addr 127.0.0.1:PORT ...``.

Opens the ports, creates the pipeline, starts the P4Runtime server (with the switch admin
service beside it) and runs the data-plane loop in the main thread until SIGTERM/SIGINT.
``--tdf``/``--clock-epoch`` (or MRCNET_TDF/MRCNET_CLOCK_EPOCH) put it on the run's virtual
clock (common/vclock.py): link rates, delays and queue timing are then in virtual seconds.
Readiness, for whoever started the process: the gRPC port accepts connections (the server is
started only after every port is open) and the log says "ready". Exit codes: 0 clean stop,
2 bad arguments, 1 start-up failure (message in the log).
"""

from __future__ import annotations

import argparse
import cProfile
import logging
import os
import random
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from common import vclock
from common.pktring import FRAMES as RING_FRAMES
from common.pktring import MIN_FRAMES as RING_MIN
from common.pktring import NOMINAL_FRAME, check_frames, frames_for
from switch.traffic import MAX_QUEUES, LinkConfig, parse_link_spec

if TYPE_CHECKING:
    from common.proto.p4.v1 import p4runtime_pb2
    from switch.dataplane import Dataplane

log = logging.getLogger("switch")


def _port_arg(text: str) -> tuple[int, str]:
    num, sep, ifname = text.partition("=")
    if not sep or not num.strip().isdecimal() or not ifname.strip():
        raise argparse.ArgumentTypeError(f"expected N=IFNAME, got {text!r}")
    return int(num), ifname.strip()


def _link_arg(text: str) -> tuple[int, LinkConfig]:
    num, sep, spec = text.partition(":")
    if not sep or not num.strip().isdecimal():
        raise argparse.ArgumentTypeError(f"expected N:rate=..,delay=.., got {text!r}")
    try:
        return int(num), parse_link_spec(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _ring_arg(value: str) -> int | None:
    """``--rx-ring``: a number of slots, or ``auto`` (None: sized per port)."""
    if value.strip().lower() == "auto":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: a number of slots or 'auto'") from None


def ring_slots(asked: int | None, egress: LinkConfig, ingress: LinkConfig, tdf: float,
               mtu: int) -> int:
    """The receive ring of one port: ``asked`` slots, or (None) as many as the frames its link
    delivers (the far end's side: the shaped ingress link of a host port, else the link's
    rate) while the process does not read (common/pktring.py ``frames_for``)."""
    if asked is not None:
        return asked
    rate = ingress.rate_bps if ingress.rate_bps > 0 else egress.rate_bps
    return frames_for(rate, tdf, mtu)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m switch.main", description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="switch name (logs, stats)")
    p.add_argument("--grpc-addr", required=True, help="P4Runtime + admin address host:port")
    p.add_argument("--device-id", type=int, default=1, help="P4Runtime device id")
    p.add_argument(
        "--port", type=_port_arg, action="append", default=[], metavar="N=IFNAME", help="a port"
    )
    p.add_argument(
        "--link",
        type=_link_arg,
        action="append",
        default=[],
        metavar="N:SPEC",
        help="egress link of port N: rate=BPS,delay=S,loss=P,qpkts=N,qbytes=N,overhead=B,up=0|1",
    )
    p.add_argument(
        "--ingress-link",
        type=_link_arg,
        action="append",
        default=[],
        metavar="N:SPEC",
        help="ingress (far end -> switch) link of port N, same keys as --link",
    )
    p.add_argument("--default-link", type=parse_link_spec, default=LinkConfig(), metavar="SPEC")
    p.add_argument("--queues", type=int, default=MAX_QUEUES, help="priority queues per port")
    p.add_argument("--seed", type=int, default=None, help="seed of the random loss generator")
    p.add_argument(
        "--json", type=Path, default=None, metavar="FILE",
        help="run this BMv2 JSON (p4c's output) from the start, as if a controller pushed it",
    )
    p.add_argument(
        "--p4info", type=Path, default=None, metavar="FILE",
        help="P4Info (text format) of --json (default: FILE.p4info.txtpb beside it)",
    )
    p.add_argument(
        "--rx-ring", type=_ring_arg, default=None, metavar="SLOTS|auto",
        help="receive ring slots per port (16 KiB each, kernel memory; frames are read "
             "without a system call); default auto: sized per port from its link's rate "
             f"and --tdf (common/pktring.py frames_for, {RING_MIN}-{RING_FRAMES} slots); "
             "0: recvmmsg from the socket",
    )
    p.add_argument("--mtu", type=int, default=NOMINAL_FRAME, metavar="BYTES",
                   help="the fabric's MTU, the frame size --rx-ring auto plans for "
                        f"(default {NOMINAL_FRAME})")
    vclock.add_arguments(p)
    p.add_argument("--lag-tolerance", type=float, default=None, metavar="S",
                   help="lag (virtual seconds) up to which a departure or a received frame "
                        "counts as on time (default: 2 ms of wall time)")
    p.add_argument("--coalesce", type=float, default=0.0, metavar="S",
                   help="wake-up coalescing slack (virtual seconds): while events come "
                        "densely, handle them in rounds at most S apart, each at most S late "
                        "(common/coalesce.py; default 0: one wake-up per event)")
    p.add_argument("--log", default=None, help="log file (default: stderr)")
    p.add_argument("--log-level", default="INFO")
    return p


def _validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    if not args.port:
        parser.error("at least one --port N=IFNAME is needed")
    numbers = [n for n, _ in args.port]
    names = [i for _, i in args.port]
    if len(set(numbers)) != len(numbers) or len(set(names)) != len(names):
        parser.error("port numbers and interfaces must be unique")
    if any(not 0 <= n < 511 for n in numbers):
        parser.error("port numbers must be 0..510 (511 is the drop port)")
    for opt in ("link", "ingress_link"):
        for n, _ in getattr(args, opt):
            if n not in numbers:
                parser.error(f"--{opt.replace('_', '-')} for unknown port {n}")
    if args.rx_ring is not None:
        try:
            check_frames(args.rx_ring)
        except ValueError as exc:
            parser.error(str(exc))
    if not 256 <= args.mtu <= 9000:
        parser.error("--mtu must be 256..9000 bytes")
    if not 1 <= args.queues <= MAX_QUEUES:
        parser.error(f"--queues must be 1..{MAX_QUEUES}")
    if args.lag_tolerance is not None and not args.lag_tolerance > 0:
        parser.error("--lag-tolerance must be > 0 seconds")
    if not 0 <= args.coalesce < 1:
        parser.error("--coalesce must be >= 0 and < 1 second")
    if args.json is not None:
        if not args.json.is_file():
            parser.error(f"--json: no file {args.json}")
        if args.p4info is None:
            args.p4info = args.json.with_name(args.json.stem + ".p4info.txtpb")
        if not args.p4info.is_file():
            parser.error(f"--json needs its P4Info: --p4info FILE (no {args.p4info})")
    elif args.p4info is not None:
        parser.error("--p4info goes with --json")


def _device_config(json_file: Path, p4info_file: Path) -> p4runtime_pb2.ForwardingPipelineConfig:
    """The ForwardingPipelineConfig of ``--json`` / ``--p4info``."""
    from google.protobuf import text_format

    from common.p4schema.compiled import read_p4info
    from common.proto.p4.v1 import p4runtime_pb2

    try:
        info = read_p4info(p4info_file)
    except (text_format.ParseError, UnicodeDecodeError) as exc:
        raise ValueError(f"--p4info {p4info_file}: not a text-format P4Info ({exc})") from None
    config = p4runtime_pb2.ForwardingPipelineConfig()
    config.p4info.CopyFrom(info)
    config.p4_device_config = json_file.read_bytes()
    return config


def _stopper(dp: Dataplane) -> Callable[[int, FrameType | None], None]:
    def _stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        dp.stop()

    return _stop


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _validate(args, parser)
    try:
        clock = vclock.RunClock.from_args(args)
    except vclock.ClockError as exc:
        parser.error(str(exc))
    logging.basicConfig(
        filename=args.log,
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
    )
    # Imported here so argument errors are reported without paying for gRPC.
    from switch.admin import admin_registrar
    from switch.dataplane import Dataplane
    from switch.p4runtime import start_server
    from switch.pipeline import Pipeline
    from switch.pipeline.state import WriteError
    from switch.ports import LinkWatcher, Port, PortError, close_all, open_port
    from switch.traffic import TrafficManager

    pipeline = Pipeline()
    tm = TrafficManager(rng=random.Random(args.seed))
    egress = dict(args.link)
    ingress = dict(args.ingress_link)
    ports: dict[int, Port] = {}
    watcher: LinkWatcher | None = None
    dp: Dataplane | None = None
    server = None
    try:
        for number, ifname in args.port:
            link_out = egress.get(number, args.default_link)
            link_in = ingress.get(number, LinkConfig())
            ports[number] = open_port(number, ifname, ring_frames=ring_slots(
                args.rx_ring, link_out, link_in, clock.tdf, args.mtu))
            tm.add_port(number, link_out, link_in, nqueues=args.queues)
        watcher = LinkWatcher()
        dp = Dataplane(pipeline, tm, ports, watcher, run_clock=clock,
                       lag_tolerance=args.lag_tolerance, coalesce=args.coalesce)
        # Handlers before the gRPC port opens: whoever saw it "ready" may stop it at once.
        signal.signal(signal.SIGTERM, _stopper(dp))
        signal.signal(signal.SIGINT, _stopper(dp))
        # Python runs handlers in the main thread only; when the kernel hands the signal to a
        # gRPC thread, the wake-up byte gets the data-plane loop out of select at once.
        signal.set_wakeup_fd(dp.wakeup_fd, warn_on_full_buffer=False)
        server = start_server(
            pipeline,
            args.grpc_addr,
            args.device_id,
            extra_servicers=[admin_registrar(dp, args.name, args.device_id)],
        )
        dp.port_status_hooks.append(server.notify_port_status)
        if args.json is not None:
            try:
                server.load_pipeline(_device_config(args.json, args.p4info))
            except WriteError as exc:
                raise ValueError(f"--json {args.json}: {exc.message}") from None
            log.info("loaded %s (P4Info %s)", args.json, args.p4info)
    except (PortError, OSError, ValueError) as exc:
        log.error("start-up failed: %s", exc)
        print(f"switch {args.name}: start-up failed: {exc}", file=sys.stderr)
        if server is not None:
            server.stop()
        if dp is not None:
            dp.close()
        else:
            close_all(ports)
            if watcher is not None:
                watcher.close()
        return 1

    log.info(
        "ready: grpc %s (port %d), device %d, ports %s, clock tdf %g",
        args.grpc_addr,
        server.port,
        args.device_id,
        ", ".join(f"{n}={p.ifname}" for n, p in sorted(ports.items())),
        clock.tdf,
    )
    profile_path = os.environ.get("MRCNET_SWITCH_PROFILE")  # developers: cProfile the loop
    profiler = cProfile.Profile() if profile_path else None
    try:
        if profiler is not None:
            profiler.runcall(dp.run)
        else:
            dp.run()
    finally:
        if profiler is not None:
            profiler.dump_stats(f"{profile_path}.{args.name}")
        server.stop()
        dp.close()
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

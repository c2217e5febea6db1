"""The `mrcnet` command: one entry point, subcommands implemented where their code lives.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``. Modules are
imported only when their subcommand runs, so `mrcnet harvest` does not pay for gRPC or scapy.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from mrcnet.modules import load_optional

# subcommand -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "up": ("mrcnet.cmd_up", "bring up a topology, run workloads, inject failures "
           "(needs root: network namespaces, veth links, raw sockets)"),
    "sim": ("mrcnet.cmd_sim", "simulate a packet fabric on a simulated clock: the same "
            "switch programs and transport core, no root, deterministic"),
    "run": ("mrcnet.cmd_run", "run a workload on a running or fresh network (fresh: needs "
            "root)"),
    "ctl": ("controller.cli", "controller client (mrc_ctl operations)"),
    "harvest": ("controller.harvest.cli", "synthesise optical reconfiguration schedules"),
    "pcap": ("hosts.wire.pcapgen", "write sample packets of every MRC type to a pcap"),
    "bench": ("mrcnet.bench", "benchmarks (codec, switch, transport, harvest, ...)"),
    "topo": ("mrcnet.cmd_topo", "generate topology files (clos, fattree, scaleup) or check one"),
    "p4": ("switch.stf.p4cmd", "P4 program tools: p4 stf DIR runs p4c STF tests"),
    "web": ("mrcnet.cmd_web", "the web view of a finished run (or of a topology, --synthetic)"),
}


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("mrcnet")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mrcnet", description="MRC + photonic-scheduling emulation testbed"
    )
    parser.add_argument("--version", action="version", version=f"mrcnet {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module_name)
        if only is None or only == name:
            module = load_optional(module_name)
            if module is not None:
                module.add_arguments(sp)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    wanted = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(only=wanted if wanted in SUBCOMMANDS else "")
    args = parser.parse_args(args_list)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    module = load_optional(args._module)
    if module is None:
        print(f"mrcnet {args.command}: not available in this build", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        # the clean-up has run: a further Ctrl-C or SIGTERM must not turn the exit into a death
        # by signal half-way through reporting it
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        previous = signal.SIG_IGN
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    """SIGTERM (``timeout``, a CI runner, ``kill``) unwinds like Ctrl-C, so every command
    removes the namespaces, links and processes it created on the way out."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())

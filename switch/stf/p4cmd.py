"""``mrcnet p4 ...``: P4 program tools (``mrcnet p4 stf DIR`` runs STF tests, see
switch.stf.cli)."""

from __future__ import annotations

import argparse
import sys

from switch.stf import cli


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="p4_command", metavar="P4_COMMAND")
    stf = sub.add_parser("stf", help="run p4c STF tests on the embedded target and/or BMv2",
                         description=(cli.__doc__ or "").split("\n")[0])
    cli.add_arguments(stf)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "p4_command", None) == "stf":
        return cli.run(args)
    print("usage: mrcnet p4 stf DIR|FILE [--json] [--target embedded|bmv2|both]", file=sys.stderr)
    return 2

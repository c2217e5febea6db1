"""``mrcnet ctl``: the operator's client for the controller (mrc_ctl operations and fabric).

The commands are controller/commands.py's (the fabric CLI's ``ctl`` runs the same ones);
this module adds how to reach the controller: its unix socket (default: the running
fabric's) or TCP with a token or mutual TLS. Examples are in docs/controller.md.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc

from controller.auth import AuthError, read_token
from controller.client import ControllerClient
from controller.commands import UsageError, add_commands, execute

DEFAULT_SOCKET = os.environ.get("MRCNET_CTL_SOCKET", "/run/mrcnet/controller.sock")


def default_socket() -> str:
    """$MRCNET_CTL_SOCKET, else the controller of the newest fabric ``mrcnet up`` runs
    (common.fabric_registry), else /run/mrcnet/controller.sock."""
    if "MRCNET_CTL_SOCKET" in os.environ:
        return os.environ["MRCNET_CTL_SOCKET"]
    from common.fabric_registry import newest_controller

    return newest_controller() or DEFAULT_SOCKET


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--unix", default=None,
        help="controller socket (default: $MRCNET_CTL_SOCKET, else the running fabric's "
             f"controller, else {DEFAULT_SOCKET})"
    )
    parser.add_argument("--tcp", help="controller HOST:PORT (needs --token-file or TLS)")
    parser.add_argument("--token-file", help="bearer token for a TCP controller")
    parser.add_argument("--tls-cert", help="client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="client key (mutual TLS)")
    parser.add_argument("--tls-ca", help="CA of the controller's certificate")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call")
    add_commands(parser)


def _client(args: argparse.Namespace) -> ControllerClient:
    tls = (args.tls_cert, args.tls_key, args.tls_ca)
    if any(tls) and not all(tls):
        raise UsageError("--tls-cert, --tls-key and --tls-ca go together")
    if args.tcp:
        token = read_token(args.token_file) if args.token_file else None
        return ControllerClient(args.tcp, args.timeout, token=token,
                                tls=tls if all(tls) else None)  # type: ignore[arg-type]
    args.unix = args.unix or default_socket()
    return ControllerClient(f"unix:{args.unix}", args.timeout)


def run(args: argparse.Namespace) -> int:
    cmd = getattr(args, "ctl_cmd", None)
    if not cmd:
        print("mrcnet ctl: give a command (see mrcnet ctl --help)", file=sys.stderr)
        return 2
    try:
        client = _client(args)
    except (UsageError, AuthError, OSError) as exc:
        print(f"mrcnet ctl: {exc}", file=sys.stderr)
        return 2
    try:
        return execute(args, client, sys.stdout)
    except UsageError as exc:
        print(f"mrcnet ctl: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        code = exc.code()  # type: ignore[attr-defined]
        details = exc.details()  # type: ignore[attr-defined]
        if code == grpc.StatusCode.UNAVAILABLE and not args.tcp:
            details = f"cannot reach the controller at {args.unix or default_socket()} ({details})"
        print(f"mrcnet ctl: {code.name}: {details}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        client.close()

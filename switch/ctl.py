"""Operate a running switch from a shell (admin service): links, port state, captures.

    python -m switch.ctl 127.0.0.1:PORT link 2 rate=1e9,delay=10e-6,qpkts=128 [--ingress]
    python -m switch.ctl 127.0.0.1:PORT port 2 down|up
    python -m switch.ctl 127.0.0.1:PORT capture 2 /tmp/p2.pcap [--direction both|rx|tx]
    python -m switch.ctl 127.0.0.1:PORT stop-capture 2

Statistics: ``python -m switch.stats``. Errors from the switch are printed with their gRPC
code; the exit status is 1 then, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import grpc

from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc
from switch.traffic import parse_link_spec

_UPDATE_KEYS = {
    "rate": "rate_bps",
    "delay": "delay_s",
    "loss": "loss",
    "qpkts": "qpkts",
    "qbytes": "qbytes",
    "overhead": "overhead",
}
_DIRECTIONS = {"both": pb.BOTH, "rx": pb.RX, "tx": pb.TX}


def link_update(spec: str) -> pb.LinkUpdate:
    """'rate=1e9,delay=1e-5' -> LinkUpdate with exactly those fields set (validated locally)."""
    parse_link_spec(spec)  # raises ValueError with the reason
    update = pb.LinkUpdate()
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "up":
            raise ValueError("use 'port N up|down' for the administrative state")
        field = _UPDATE_KEYS[key]
        setattr(
            update, field, float(value) if field in ("rate_bps", "delay_s", "loss") else int(value)
        )
    return update


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m switch.ctl", description=__doc__.splitlines()[0])
    p.add_argument("address", help="switch gRPC address host:port")
    sub = p.add_subparsers(dest="cmd", required=True)
    link = sub.add_parser("link", help="change link parameters of a port")
    link.add_argument("port", type=int)
    link.add_argument("spec", help="rate=BPS,delay=S,loss=P,qpkts=N,qbytes=N,overhead=B")
    link.add_argument("--ingress", action="store_true", help="the far end -> switch direction")
    port = sub.add_parser("port", help="administrative up/down")
    port.add_argument("port", type=int)
    port.add_argument("state", choices=("up", "down"))
    cap = sub.add_parser("capture", help="start a pcap capture on a port")
    cap.add_argument("port", type=int)
    cap.add_argument("path")
    cap.add_argument("--direction", choices=tuple(_DIRECTIONS), default="both")
    cap.add_argument("--snaplen", type=int, default=0)
    stop = sub.add_parser("stop-capture", help="stop a port's capture")
    stop.add_argument("port", type=int)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    with grpc.insecure_channel(args.address) as channel:
        stub = pb_grpc.SwitchAdminStub(channel)
        try:
            if args.cmd == "link":
                try:
                    update = link_update(args.spec)
                except (ValueError, KeyError) as exc:
                    parser.error(str(exc))
                direction = pb.INGRESS if args.ingress else pb.EGRESS
                info = stub.SetLink(
                    pb.SetLinkRequest(port=args.port, direction=direction, update=update),
                    timeout=10,
                )
                cfg = info.ingress_link if args.ingress else info.egress_link
                print(
                    f"port {info.port} ({info.ifname}): {str(cfg).strip().replace(chr(10), ', ')}"
                )
            elif args.cmd == "port":
                info = stub.SetPortAdmin(
                    pb.SetPortAdminRequest(port=args.port, up=args.state == "up"), timeout=10
                )
                state = "up" if info.admin_up else "down"
                print(
                    f"port {info.port} ({info.ifname}): admin {state}, carrier "
                    f"{'up' if info.carrier_up else 'down'}"
                )
            elif args.cmd == "capture":
                req = pb.StartCaptureRequest(
                    port=args.port,
                    path=args.path,
                    direction=_DIRECTIONS[args.direction],
                    snaplen=args.snaplen,
                )
                cap = stub.StartCapture(req, timeout=10)
                print(f"port {cap.port}: capturing to {cap.path}")
            else:
                cap = stub.StopCapture(pb.StopCaptureRequest(port=args.port), timeout=10)
                if cap.path:
                    print(f"port {cap.port}: {cap.packets} packets written to {cap.path}")
                else:
                    print(f"port {cap.port}: no capture was running")
        except grpc.RpcError as exc:
            print(f"switch at {args.address}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

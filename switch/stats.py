"""Print a switch's port and queue statistics: ``python -m switch.stats 127.0.0.1:PORT [--json]``.

Reads the switch admin service (common/proto/switch_admin.proto) and the program's drop
counters over P4Runtime. Queue rows are shown only for queues that saw traffic or drops, so
the table stays readable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import grpc
from google.protobuf.json_format import MessageToDict

from common.proto import switch_admin_pb2 as pb
from common.proto import switch_admin_pb2_grpc as pb_grpc


def fetch(address: str, ports: Sequence[int] = (), timeout: float = 5.0) -> pb.GetPortsResponse:
    """One GetPorts call; raises grpc.RpcError if the switch does not answer."""
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.SwitchAdminStub(channel)
        return stub.GetPorts(pb.GetPortsRequest(ports=list(ports)), timeout=timeout)


def pipeline_drops(address: str, device_id: int, timeout: float = 5.0) -> dict[str, int]:
    """Drops counted by the P4 program (``MrcIngress.drop_reason``) by reason name; empty when
    the switch runs another program or none yet. A P4Runtime Read needs no arbitration."""
    from common.p4runtime_client import P4RuntimeClient, P4RuntimeError
    from common.p4schema.mrc_switch import DropReason

    client = P4RuntimeClient(address, device_id, timeout=timeout)
    try:
        cells = client.read_counter("MrcIngress.drop_reason")
    except (P4RuntimeError, KeyError, StopIteration):
        return {}
    finally:
        client.channel.close()
    names = {r.value: r.name for r in DropReason}
    return {names.get(i, str(i)): pkts for i, (pkts, _b) in sorted(cells.items()) if pkts}


def as_dict(resp: pb.GetPortsResponse) -> dict[str, Any]:
    return MessageToDict(
        resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _rate(bps: float) -> str:
    if bps <= 0:
        return "unlimited"
    for unit, scale in (("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} b/s"


def format_table(resp: pb.GetPortsResponse, drops: dict[str, int] | None = None) -> str:
    lines = [f"switch {resp.name} (device {resp.device_id})"]
    head = (
        f"{'port':>4} {'ifname':<15} {'state':<9} {'rate':>11} {'rx pkts':>10} {'tx pkts':>10} "
        f"{'tail drop':>9} {'down drop':>9} {'loss':>6} {'trims':>6} {'ecn':>6} {'tx err':>6}"
    )
    lines.append(head)
    for p in resp.ports:
        state = ("up" if p.admin_up else "admdown") + ("" if p.carrier_up else "/nocarr")
        eg = p.egress
        trims = sum(q.trims for q in eg.queues)
        ecn = sum(q.ecn_marks for q in eg.queues)
        lines.append(
            f"{p.port:>4} {p.ifname:<15} {state:<9} {_rate(p.egress_link.rate_bps):>11} "
            f"{p.rx_packets:>10} {p.tx_packets:>10} {eg.tail_drops:>9} {eg.down_drops:>9} "
            f"{eg.loss_drops:>6} {trims:>6} {ecn:>6} {p.tx_errors:>6}"
        )
        for q in eg.queues:
            if q.packets or q.drops or q.depth_pkts:
                lines.append(
                    f"{'':>4}   queue {q.priority}: {q.packets} pkts {q.bytes} B, drops {q.drops}, "
                    f"trims {q.trims}, ecn {q.ecn_marks}, depth {q.depth_pkts} "
                    f"(max {q.max_depth_pkts} pkts / {q.max_depth_bytes} B)"
                )
        if p.capture_path:
            lines.append(f"{'':>4}   capturing to {p.capture_path}")
    extra = {k: v for k, v in resp.counters.items() if v}
    if extra:
        lines.append("counters: " + ", ".join(f"{k}={v}" for k, v in sorted(extra.items())))
    if drops:
        lines.append("pipeline drops: " + ", ".join(f"{k}={v}" for k, v in drops.items()))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m switch.stats", description=__doc__.splitlines()[0]
    )
    parser.add_argument("address", help="switch gRPC address host:port")
    parser.add_argument("--port", type=int, action="append", default=[], help="only these ports")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    try:
        resp = fetch(args.address, args.port)
    except grpc.RpcError as exc:
        print(f"switch at {args.address}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    drops = pipeline_drops(args.address, resp.device_id)
    if args.json:
        print(json.dumps({**as_dict(resp), "pipeline_drops": drops}, indent=2))
    else:
        print(format_table(resp, drops))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m topologies [NAME|FILE]``: validate a topology and explain it.

python -m topologies                       list shipped topologies
python -m topologies clos-2p               summary (or every problem of a bad file; exit 1)
python -m topologies fattree-3t --tables pod0-leaf0 [--mode stev]
python -m topologies fattree-3t --path h0 h2 --ev 0xa0000000 [--plane 0] [--mode stev]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common.units import format_duration, format_rate
from topologies.addressing import host_gid, locator, usid_of
from topologies.evlayout import LayoutError, ev_layout
from topologies.loader import TopologyError, available, load
from topologies.model import FabricKind, PathMode, Topology
from topologies.paths import base_rtt
from topologies.routes import switch_tables
from topologies.trace import TraceError, trace


def summary(topo: Topology) -> str:
    f = topo.fabric
    lines = [
        f"{topo.name} ({topo.source}): {f.kind.value} fabric, {f.planes} plane(s), path mode "
        f"{f.path_mode.value}, MTU {f.mtu}, base RTT {format_duration(base_rtt(topo))}",
    ]
    if topo.description:
        lines.append(f"  {topo.description}")
    for node in topo.nodes:
        extra = ""
        if node.plane is not None:
            extra = f" plane {node.plane} tier {node.tier} uSID {usid_of(topo, node.name).usid:#06x} {locator(topo, node.name)}"
        lines.append(f"  {node.kind.value:6} {node.name}{extra}")
        if f.kind == FabricKind.PACKET and node.plane is None:
            for port in topo.ports(node.name):
                lines.append(f"           port {port}: {host_gid(topo, node.name, port)}")
    for link in topo.links:
        p = link.params
        lines.append(
            f"  link {link.index}: {link} {format_rate(p.rate_bps)} {format_duration(p.delay_s)} "
            f"q={p.queue_packets}pkt/{p.queue_bytes}B loss={p.loss:g}"
        )
    if f.kind == FabricKind.PACKET:
        try:
            fields = ", ".join(
                f"T{x.tier}: bits {x.msb_offset}..{x.msb_offset + x.width - 1} (fan-out {x.fanout})"
                for x in ev_layout(topo).fields
            )
            lines.append(f"  EV layout (from the MSB): {fields or 'no choices'}")
        except LayoutError as exc:
            lines.append(f"  EV layout: impossible ({exc})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m topologies",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topology", nargs="?")
    p.add_argument("--mode", choices=[m.value for m in PathMode])
    p.add_argument("--tables", metavar="SWITCH")
    p.add_argument("--path", nargs=2, metavar=("SRC", "DST"))
    p.add_argument("--ev", type=lambda s: int(s, 0), default=0)
    p.add_argument("--plane", type=int, default=0)
    args = p.parse_args(argv)
    if not args.topology:
        print("\n".join(available()))
        return 0
    try:
        topo = load(args.topology)
    except TopologyError as exc:
        print(exc, file=sys.stderr)
        return 1
    mode = PathMode(args.mode) if args.mode else topo.fabric.path_mode
    try:
        if args.tables:
            tables = switch_tables(topo, mode).get(args.tables)
            if tables is None:
                print(f"no packet-fabric switch {args.tables!r}", file=sys.stderr)
                return 1
            for route in tables.routes:
                print(f"route {route.prefix} ({route.destination}) -> {route.action}")
            for gid, members in tables.ecmp_groups.items():
                print(f"ecmp group {gid}: {[m.peer for m in members]}")
            for gid, values in tables.ev_groups.items():
                print(f"ev group {gid}: { ({v: h.peer for v, h in values.items()}) }")
            for entry in tables.usid_entries:
                print(f"my_usid {entry.prefix} -> {entry.action}")
            for port, cfg in tables.port_config.items():
                print(f"port {port}: {cfg}")
        elif args.path:
            res = trace(
                topo, mode, args.plane, args.path[0], args.path[1], args.ev, ecmp_hash=args.ev
            )
            decap = f" (decap at {res.decap_at})" if res.decap_at else ""
            print(" -> ".join(res.nodes) + decap)
        else:
            print(summary(topo))
    except (LayoutError, TraceError, KeyError) as exc:
        print(f"{topo.name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

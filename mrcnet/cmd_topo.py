"""``mrcnet topo clos|fattree|scaleup ...``: write a validated topology file.

mrcnet topo clos --planes 4 --leaves 16 --spines 8 --hosts-per-leaf 8 -o big.yaml
mrcnet topo fattree --k 4 -o ft4.yaml
mrcnet topo scaleup --gpus 16 --ports 4 -o su.yaml
mrcnet topo check big.yaml [--tables]     validate a file (and build every switch's tables)

The generated data (topologies/generate.py) goes through the same validation as a written
file before anything is written; ``--tables`` also derives the switch tables of every path
mode the file can run. ``-o -`` writes to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="shape", metavar="SHAPE", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("-o", "--output", metavar="FILE",
                       help="file to write (default NAME.yaml here; '-' for stdout)")
        p.add_argument("--name", help="topology name (default: from the shape and sizes)")
        p.add_argument("--rate", default="1Gbps", help="rate of every link (default 1Gbps)")
        p.add_argument("--delay", default=None, help="one-way delay of every link")
        p.add_argument("--tables", action="store_true",
                       help="also build every switch's tables in every path mode (timed)")

    c = sub.add_parser("clos", help="multi-plane two-tier leaf-spine")
    c.add_argument("--planes", type=int, required=True, help="planes (NIC ports per host)")
    c.add_argument("--leaves", type=int, required=True, help="leaves per plane")
    c.add_argument("--spines", type=int, required=True, help="spines per plane")
    c.add_argument("--hosts-per-leaf", type=int, required=True, help="hosts under each leaf")
    c.add_argument("--mode", choices=["ecmp", "stev", "srv6"], default="stev",
                   help="path mode of the file (default stev)")
    common(c)
    f = sub.add_parser("fattree", help="k-ary three-tier fat tree, one plane")
    f.add_argument("--k", type=int, required=True, help="switch radix (even)")
    f.add_argument("--mode", choices=["ecmp", "stev", "srv6"], default="stev",
                   help="path mode of the file (default stev)")
    common(f)
    s = sub.add_parser("scaleup", help="photonic scale-up domain: GPUs into one OCS")
    s.add_argument("--gpus", type=int, required=True, help="number of GPUs")
    s.add_argument("--ports", type=int, required=True, help="optical ports per GPU (d)")
    s.add_argument("--reconfig-delay", default="10us", help="OCS reconfiguration delay")
    common(s)
    k = sub.add_parser("check", help="validate a topology file (name or path)")
    k.add_argument("topology")
    k.add_argument("--tables", action="store_true",
                   help="also build every switch's tables in every path mode (timed)")


def _generate(args: argparse.Namespace) -> dict[str, Any]:
    from topologies import generate

    link = dict(generate.DEFAULT_LINK, rate=args.rate)
    if args.delay:
        link["delay"] = args.delay
    if args.shape == "clos":
        return generate.clos(args.planes, args.leaves, args.spines, args.hosts_per_leaf,
                             path_mode=args.mode, link=link, name=args.name)
    if args.shape == "fattree":
        return generate.fattree(args.k, path_mode=args.mode, link=link, name=args.name)
    return generate.scaleup(args.gpus, args.ports, reconfig_delay=args.reconfig_delay,
                            link=link, name=args.name)


def _tables(topo: Any) -> list[str]:
    from topologies.evlayout import LayoutError
    from topologies.model import FabricKind, PathMode
    from topologies.routes import switch_tables

    if topo.fabric.kind != FabricKind.PACKET:
        return []
    lines = []
    for mode in PathMode:
        t0 = time.perf_counter()
        try:
            tables = switch_tables(topo, mode)
        except LayoutError as exc:
            lines.append(f"  {mode.value}: cannot be encoded ({exc})")
            continue
        routes = sum(len(t.routes) for t in tables.values())
        lines.append(f"  {mode.value}: {len(tables)} switches, {routes} routes in "
                     f"{time.perf_counter() - t0:.2f} s")
    return lines


def _describe(topo: Any) -> str:
    from topologies.model import NodeKind

    n = {k: len(topo.nodes_of(k)) for k in NodeKind}
    return (f"{topo.name}: {topo.fabric.kind.value} fabric, {topo.fabric.planes} plane(s), "
            f"{n[NodeKind.HOST] or n[NodeKind.GPU]} "
            f"{'hosts' if n[NodeKind.HOST] else 'GPUs'}, "
            f"{n[NodeKind.SWITCH] + n[NodeKind.OCS]} switches, {len(topo.links)} links")


def run(args: argparse.Namespace) -> int:
    from topologies.generate import GenerateError
    from topologies.loader import TopologyError, from_dict, load

    try:
        if args.shape == "check":
            topo = load(args.topology)
        else:
            data = _generate(args)
            topo = from_dict(data, source=f"mrcnet topo {args.shape}",
                             default_name=data["name"])
    except (GenerateError, TopologyError) as exc:
        print(f"mrcnet topo: {exc}", file=sys.stderr)
        return 2
    lines = [_describe(topo)]
    if args.tables:
        lines += _tables(topo)
    if args.shape != "check":
        text = yaml.safe_dump(data, sort_keys=False, width=100)
        if args.output == "-":
            sys.stdout.write(text)
            print("\n".join(lines), file=sys.stderr)
            return 0
        out = Path(args.output or f"{data['name']}.yaml")
        out.write_text(f"# {data['description']}\n{text}")
        lines.insert(0, f"wrote {out}")
    print("\n".join(lines))
    return 0

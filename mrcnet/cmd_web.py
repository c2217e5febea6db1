"""``mrcnet web RUN_DIR``: the web view of a finished run (its results replayed in a loop);
``mrcnet web TOPOLOGY --synthetic``: the page on made-up loads of any topology file.

Serves on 127.0.0.1 only and prints the URL with its access token; Ctrl-C stops it. A
running fabric has the same page with ``mrcnet up --web``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a run folder (results/runs/RUN-ID, or 'latest'); with "
                                       "--synthetic a topology name or file")
    parser.add_argument("--synthetic", action="store_true",
                        help="animate TARGET (a topology) with made-up loads")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (default any)")
    parser.add_argument("--speed", type=float, default=1.0,
                        help="replay speed (run seconds per wall second, default 1)")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="wall seconds between updates (default 0.5)")


def _run_dir(target: str) -> Path:
    from mrcnet.fabric.orchestrator import REPO

    if target == "latest":
        runs = sorted(p for p in (REPO / "results" / "runs").glob("2*") if p.is_dir())
        if not runs:
            raise FileNotFoundError("no run under results/runs/ yet")
        return runs[-1]
    return Path(target)


def run(args: argparse.Namespace) -> int:
    from mrcnet.web.server import WebError, WebServer
    from mrcnet.web.sources import ReplaySource, Source, SyntheticSource
    from topologies.loader import TopologyError, load

    source: Source
    try:
        if args.synthetic:
            source = SyntheticSource(load(args.target))
        else:
            source = ReplaySource(_run_dir(args.target), speed=args.speed)
        server = WebServer(source, port=args.port, interval=args.interval)
    except (TopologyError, FileNotFoundError, ValueError, WebError) as exc:
        print(f"mrcnet web: {exc}", file=sys.stderr)
        return 2

    def ready(url: str) -> None:
        print(f"web view: {url}  (Ctrl-C stops)", flush=True)

    try:
        server.serve_forever(ready)
    except WebError as exc:
        print(f"mrcnet web: {exc}", file=sys.stderr)
        return 1
    return 0

"""`mrcnet bench web`: the web view's page on a large fabric, in headless Chromium.

The server (mrcnet/web) serves a synthetic state of a topology (default: the 96-switch
reference fabric, 4 planes x (16 leaves + 8 spines), 32 hosts, 640 links, written by
``mrcnet topo clos``): every link's load changing every update, one link down, queues at
the busiest ports. A fresh headless Chromium (testbed/browser.py) opens the page ``--loads``
times; figures:

- ``load_s``: navigation start to the load event (Navigation Timing), best and worst;
- ``first_snapshot_s``: navigation start to the first snapshot drawn (the page's
  ``mrcnet-first-snapshot`` mark: topology fetched and drawn, event stream open, one update
  applied), best and worst;
- ``update_interval_s``: over ``--updates`` snapshots of one page, the mean and the largest
  gap between two applied updates (the server sends one per 0.5 s);
- ``apply_ms``: the page's time to apply one snapshot to the drawing (mean, max);
- targets: page load (first snapshot) under 2 s and an update at least once a second.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

REFERENCE = (4, 16, 8, 2)  # planes, leaves per plane, spines per plane, hosts per leaf


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topology", default=None,
                        help="topology file (default: the 96-switch reference clos)")
    parser.add_argument("--loads", type=int, default=3, help="page loads (default 3)")
    parser.add_argument("--updates", type=int, default=20,
                        help="updates to time on one page (default 20)")
    parser.add_argument("--screenshot", default=None, help="save a PNG of the page here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _reference(folder: Path) -> Path:
    """What ``mrcnet topo clos --planes 4 --leaves 16 --spines 8 --hosts-per-leaf 2``
    writes."""
    import yaml

    from topologies.generate import clos

    path = folder / "clos-96.yaml"
    path.write_text(yaml.safe_dump(clos(*REFERENCE), sort_keys=False))
    return path


TIMING = """(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const first = performance.getEntriesByName('mrcnet-first-snapshot')[0];
  return {load: nav.loadEventEnd / 1000, first: first ? first.startTime / 1000 : null};
})()"""


def measure(topology: Path, loads: int, updates: int, shot: Path | None) -> dict[str, Any]:
    from mrcnet.web.server import WebServer
    from mrcnet.web.sources import SyntheticSource
    from testbed.browser import Chromium
    from topologies.loader import load

    topo = load(str(topology))
    server = WebServer(SyntheticSource(topo), interval=0.5)
    server.start()
    # the page times its own updates: apply() is wrapped to time each call
    wrap = """(() => { const orig = apply; window.mrcnetApplyMs = [];
      apply = s => { const t = performance.now(); orig(s);
                     window.mrcnetApplyMs.push(performance.now() - t); }; return 1; })()"""
    load_s, first_s = [], []
    try:
        with Chromium() as page:
            for _ in range(loads):
                page.navigate(server.url)
                page.wait_for("Number(document.body.dataset.updates) >= 1", 30)
                t = page.evaluate(TIMING)
                load_s.append(t["load"])
                first_s.append(t["first"])
            page.evaluate(wrap)
            start = int(page.evaluate("window.mrcnetUpdates.length"))
            page.wait_for(f"window.mrcnetUpdates.length >= {start + updates}", 30 + updates)
            stamps = page.evaluate(f"window.mrcnetUpdates.slice({start})")
            apply_ms = page.evaluate("window.mrcnetApplyMs")
            down = page.evaluate("document.querySelectorAll('.link[data-state=down]').length")
            drawn = page.evaluate("document.querySelectorAll('.link').length")
            if shot is not None:
                page.screenshot(shot)
    finally:
        server.stop()
    gaps = [(b - a) / 1000 for a, b in itertools.pairwise(stamps)]
    out = {
        "topology": topo.name, "switches": len(topo.switches), "links": len(topo.links),
        "links_drawn": drawn, "links_down_shown": down,
        "load_s": {"best": round(min(load_s), 3), "worst": round(max(load_s), 3)},
        "first_snapshot_s": {"best": round(min(first_s), 3), "worst": round(max(first_s), 3)},
        "update_interval_s": {"mean": round(sum(gaps) / len(gaps), 3),
                              "max": round(max(gaps), 3)},
        "apply_ms": {"mean": round(sum(apply_ms) / len(apply_ms), 1),
                     "max": round(max(apply_ms), 1)},
        "snapshot_bytes": len(server._latest),
    }
    out["targets_met"] = (out["first_snapshot_s"]["worst"] < 2.0
                          and out["update_interval_s"]["max"] <= 1.0)
    return out


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="mrcnet-bench-web-") as tmp:
        topology = Path(args.topology) if args.topology else _reference(Path(tmp))
        shot = Path(args.screenshot) if args.screenshot else None
        out = measure(topology, args.loads, args.updates, shot)
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:18} {value}")
    return 0 if out["targets_met"] else 1

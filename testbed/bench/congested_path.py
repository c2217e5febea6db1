"""``mrcnet bench congested-path``: one slow spine link, REPS against plain spraying.

clos-2p in Structured-EV mode (an EV's spine bit picks the spine, so a quarter of a QP's EVs
cross each leaf uplink), every link ``--rate`` except ``p0-leaf0 -- p0-spine0`` at a quarter
of it. One QP ``h0 -> h2`` (leaf0 to leaf1: every packet crosses a leaf0 uplink) writes
``--size`` bytes with NSCC, once per load-balancing policy (a fresh fabric each, the policy
is the EV profile's): ``reps`` (recycle EVs that came back unmarked) and ``rotation`` (plain
spraying over all EVs). Per policy:

- ``slow_share``: packets leaf0 sent on the slow uplink / packets it sent on its four uplinks
  (both planes), from the switches' port counters over the transfer; the even share is 0.25;
- ``goodput_bps``: bytes x 8 / the writer's time; ``retransmitted``, ``timeouts``.

Target: with REPS the slow share below a third of the even share (< 0.083) and goodput above
plain spraying's.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from mrcnet.fabric.fidelity import verdict
from testbed.bench import verdicts

SLOW = ("p0-leaf0", "p0-spine0")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--rate", default="20Mbps")
    parser.add_argument("--size", default="16MiB")
    parser.add_argument("--lb", default="reps,rotation", help="comma-separated policies")
    parser.add_argument("--cc", default="nscc", choices=["nscc", "fixed"])
    parser.add_argument("--tdf", type=float, default=1.0,
                        help="time-dilation factor of the run's clock (rates and times virtual)")
    parser.add_argument("--json", action="store_true")


def slow_topology(rate_bps: float, out: Path) -> Path:
    """clos-2p with every link at ``rate_bps`` and the slow link at a quarter of it."""
    from topologies.loader import resolve

    data = yaml.safe_load(resolve("clos-2p").read_text())
    data["link_defaults"]["rate"] = f"{rate_bps:g}bps"
    links = []
    for link in data["links"]:
        a, _, b = str(link).partition(" -- ")
        if {a.split(":")[0], b.split(":")[0]} == set(SLOW):
            links.append({"a": a, "b": b, "rate": f"{rate_bps / 4:g}bps"})
        else:
            links.append(link)
    data["links"] = links
    data["name"] = "clos-2p-slow-spine"
    out.write_text(yaml.safe_dump(data, sort_keys=False))
    return out


def _uplink_packets(fab: Any) -> dict[tuple[str, int], int]:
    from topologies.model import NodeKind

    topo = fab.topo
    out = {}
    for leaf, resp in fab.switch_detail(["p0-leaf0", "p1-leaf0"]).items():
        for p in resp.ports:
            link = topo.link_at(leaf, p.port)
            if link is not None and topo.node(link.other(leaf).node).kind == NodeKind.SWITCH:
                out[(leaf, p.port)] = p.egress.packets
    return out


def measure(lb: str, topo_path: Path, size: int, cc: str, tdf: float = 1.0) -> dict[str, Any]:
    from mrcnet.fabric.orchestrator import Fabric, RunOptions

    fab = Fabric(RunOptions(topology=str(topo_path), mode="stev", rate=None, lb=lb, cc=cc,
                            show=False, tdf=tdf))
    try:
        fab.start()
        assert fab.topo is not None and fab.runner is not None
        slow_port = next(port for port, link in fab.topo.ports(SLOW[0]).items()
                         if link.other(SLOW[0]).node == SLOW[1])
        before = _uplink_packets(fab)
        wl = fab.runner.submit("pair:h0:h2", size, "MRC", timeout=300)
        fab.runner.wait(wl, 330, fab.check_alive)
        after = _uplink_packets(fab)
        summary = wl.summary()
        flow = wl.flows[0]
        seconds = float(flow.writer.get("seconds") or 0.0)
        sent = {k: after[k] - before[k] for k in after}
        total = sum(sent.values())
        stats = flow.writer.get("qp_stats", {})
        return {
            "completed": bool(summary["completed"]),
            "faithful": verdict(summary)["faithful"],
            "slow_share": round(sent[(SLOW[0], slow_port)] / total, 4) if total else None,
            "uplink_packets": {f"{k[0]}:{k[1]}": v for k, v in sorted(sent.items())},
            "goodput_bps": round(size * 8 / seconds) if seconds else 0,
            "retransmitted": int(stats.get("tx_rtx", 0)),
            "timeouts": int(stats.get("timeouts", 0)),
            "results_dir": str(fab.run_dir),
        }
    finally:
        fab.stop()


def run(args: argparse.Namespace) -> int:
    from common.units import parse_rate, parse_size

    size = int(parse_size(args.size))
    out: dict[str, Any] = {"even_share": 0.25, "tdf": args.tdf}
    with tempfile.TemporaryDirectory(prefix="mrcnet-slow-") as tmp:
        topo_path = slow_topology(parse_rate(args.rate), Path(tmp) / "clos-2p-slow.yaml")
        for lb in [x.strip() for x in args.lb.split(",") if x.strip()]:
            print(f"[bench congested-path] {lb} ...", file=sys.stderr, flush=True)
            out[lb] = measure(lb, topo_path, size, args.cc, args.tdf)
    if "reps" in out and "rotation" in out:
        out["targets"] = {
            "reps_slow_share_below_a_third_of_even": (out["reps"]["slow_share"] or 1) < 0.25 / 3,
            "reps_goodput_above_rotation": out["reps"]["goodput_bps"] >
            out["rotation"]["goodput_bps"],
        }
    verdict_runs = {k: v["faithful"] for k, v in out.items()
                    if isinstance(v, dict) and "faithful" in v}
    status = verdicts.conclude("congested-path", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        for lb in (k for k in out if isinstance(out[k], dict) and "slow_share" in out[k]):
            r = out[lb]
            print(f"{lb:9s} slow share {r['slow_share']}  goodput {r['goodput_bps'] / 1e6:.1f} "
                  f"Mb/s  retransmitted {r['retransmitted']}  ({r['results_dir']})")
        print(f"targets: {out.get('targets')}")
    return status

"""``mrcnet bench spray``: permutation goodput as a fraction of the ideal, MRC vs ECMP.

One fabric (default clos-2p in ECMP mode, every link ``--rate``) runs the same permutation
twice: ``shift:2`` (each host writes ``--size`` bytes to a host behind the other leaf and
receives from one; no incast), first with MRC QPs spraying over all their EVs (load balancing
``--lb``), then with RC QPs (one EV each: the ECMP single path, where two flows hashed onto one
spine share it). MRC QPs bind ``--cc`` (NSCC, the run's CC profile, or the fixed
``--window``); RC QPs always use a fixed window (RC acknowledgements carry no CC state), their
own CC profile 2 of ``--rc-window`` bytes: by default 1.5 times the BDP of their one path
(the host link's rate on one plane x the topology's base RTT), so that two flows hashed onto
one spine link queue there below the trim threshold instead of overflowing it. (A window of
many BDPs, e.g. the 128 KiB MRC's fixed window uses, floods that queue and RC's go-back-N
resends the window after every trim: the ECMP baseline then measured 0.06-0.11 of ideal, a
figure of the window, not of ECMP. At 20 Mb/s: 28 KiB, 0 resent, 0.24; 36 KiB (2 BDP), 323
resent and 3 timeouts, 0.22.) An RC QP uses one plane, so its ideal share is 1 / planes; two
flows on one spine link halve it.

fraction = (bytes of all flows x 8 / time until the last flow completed) / ideal, with ideal
= the largest aggregate rate of the permutation over the fabric (max-flow, see
bench_failover.capacity): with non-blocking leaves, every host's own link rate.
``--tdf N`` runs the fabric on a clock N times slower than the wall clock (rates and times
virtual); ``mrc_faithful``/``ecmp_faithful`` are the two rounds' fidelity verdicts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from controller.profile_store import LB_POLICIES
from mrcnet.fabric.fidelity import verdict
from testbed.bench import tdfarg, verdicts
from testbed.bench.failover_goodput import capacity
from topologies.model import Topology


def add_arguments(parser: argparse.ArgumentParser) -> None:
    verdicts.add_strict(parser)
    parser.add_argument("--topology", default="clos-2p")
    parser.add_argument("--mode", default="ecmp")
    parser.add_argument("--rate", default="20Mbps")
    parser.add_argument("--size", default="4MiB", help="bytes per flow")
    # TDF 2: with these defaults (20 Mb/s, 4 MiB flows) every measured run on the 2-core
    # development machine was faithful; at TDF 1, 2 runs of 3 were not (docs/fabric.md)
    tdfarg.add_tdf(parser, "2")
    parser.add_argument("--delay", default=None, help="one-way delay of every link")
    parser.add_argument("--cc", default="nscc", choices=["nscc", "fixed"])
    parser.add_argument("--lb", default="reps", choices=LB_POLICIES)
    parser.add_argument("--window", default="128KiB", help="the fixed window (--cc fixed)")
    parser.add_argument("--rc-window", default="auto",
                        help="the RC baseline's fixed window (default auto: 1.5 x its path's BDP)")
    parser.add_argument("--json", action="store_true")


RC_PROFILE = 2  # the RC baseline's CC profile: a fixed window
RC_WINDOW_BDPS = 1.5
RC_WINDOW_MIN_PACKETS = 4


def rc_window(topo: Topology) -> int:
    """1.5 times the BDP of one RC QP's path (one plane's host link rate x the topology's base
    RTT), in whole MTUs, at least ``RC_WINDOW_MIN_PACKETS``."""
    from topologies.model import NodeKind
    from topologies.paths import base_rtt

    host = next(n.name for n in topo.nodes_of(NodeKind.HOST))
    link = topo.link_at(host, 0)
    assert link is not None
    mtu = topo.fabric.mtu
    bdp = link.params.rate_bps * base_rtt(topo) / 8
    return max(RC_WINDOW_MIN_PACKETS, math.ceil(RC_WINDOW_BDPS * bdp / mtu)) * mtu


def run(args: argparse.Namespace) -> int:
    from common.units import parse_size
    from mrcnet.fabric.orchestrator import Fabric, RunOptions
    from mrcnet.fabric.scenario import collect
    from mrcnet.fabric.workloads import flows_for
    from topologies.model import NodeKind

    size = parse_size(args.size)
    out: dict[str, Any] = {}
    opts = RunOptions(topology=args.topology, mode=args.mode, rate=args.rate,
                      delay=args.delay, cc=args.cc, lb=args.lb,
                      window=int(parse_size(args.window)))
    opts.tdf = tdfarg.resolve(args, opts, "shift:2", int(size), "spray", out)
    fab = Fabric(opts)
    try:
        fab.start()
        assert fab.topo is not None and fab.runner is not None
        hosts = [n.name for n in fab.topo.nodes_of(NodeKind.HOST)]
        window_rc = (rc_window(fab.topo) if args.rc_window == "auto"
                     else int(parse_size(args.rc_window)))
        assert fab.ctl is not None
        fab.ctl.setup_fixed_window(RC_PROFILE, window_rc, fab.topo.fabric.mtu)
        out["rc_window"] = window_rc
        ideal = capacity(fab.topo, flows_for("shift:2", hosts), set())
        summaries = []
        for key, qp in (("mrc", "MRC"), ("ecmp", "RC")):
            print(f"[bench spray] {qp} ...", file=sys.stderr, flush=True)
            # RC acknowledgements carry no CC_STATE: the RC baseline runs its fixed window
            wl = fab.runner.submit("shift:2", size, qp, timeout=300,
                                   cc_profile=RC_PROFILE if qp == "RC" else None)
            fab.runner.wait(wl, 330, fab.check_alive)
            s = wl.summary()
            summaries.append(s)
            makespan = max(float(f["seconds"] or 0) for f in s["per_flow"]) or float("inf")
            rate = len(wl.flows) * size * 8 / makespan
            out[f"{key}_fraction"] = round(rate / ideal, 3) if s["completed"] else 0.0
            out[f"{key}_bps"] = round(rate)
            out[f"{key}_completed"] = bool(s["completed"])
            out[f"{key}_faithful"] = verdict(s)["faithful"]
            out[f"{key}_retransmitted"] = int(s["retransmitted_packets"])
            out[f"{key}_timeouts"] = sum(int(f["timeouts"] or 0) for f in s["per_flow"])
        out["ideal_bps"] = round(ideal)
        out["tdf"] = opts.tdf
        out["cc"], out["lb"] = args.cc, args.lb
        out["results_dir"] = collect(fab, summaries, None)["results_dir"]
    finally:
        fab.stop()
    verdict_runs = {"mrc": out["mrc_faithful"], "ecmp": out["ecmp_faithful"]}
    status = verdicts.conclude("spray", out, verdict_runs, args.strict)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"MRC spraying: {out['mrc_fraction']:.2f} of ideal ({out['mrc_bps'] / 1e6:.1f} "
              f"Mb/s), ECMP single path: {out['ecmp_fraction']:.2f} "
              f"({out['ecmp_bps'] / 1e6:.1f} Mb/s); ideal {ideal / 1e6:.1f} Mb/s; "
              f"results {out['results_dir']}")
    return status

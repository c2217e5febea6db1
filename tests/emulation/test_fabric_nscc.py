"""NSCC on the running fabric: incast trims become NACKs and retransmissions (never an ACK
timeout), and a receiver's own congestion reaches its senders as the CC_STATE penalty.

- incast-8 (8 senders into h8 through one switch, at the topology's own rates): NSCC's first
  windows overflow the receiver's link, the switch trims, the receiver NACKs, the senders
  retransmit; every flow arrives byte-exact and no writer's ACK timer expires;
- a throttled consumer on the receiving host (a thread that holds the interpreter for 20 ms
  at a time, the agent's loop shares the process): frames wait in the socket, the agent's
  receive-queue wait becomes the penalty of its SACKs, the sender's NSCC window shrinks
  while it lasts and comes back with the restore flag; the transfer is byte-exact.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hosts.agent.qlog import read_qlog
from mrcnet.fabric.orchestrator import Fabric, RunOptions
from switch.stats import fetch

pytestmark = pytest.mark.emulation


@pytest.fixture
def incast(run_prefix: str, tmp_path: Path) -> Iterator[Fabric]:
    fab = Fabric(RunOptions(topology="incast-8", rate=None, cc="nscc", prefix=run_prefix,
                            results_root=tmp_path, show=False))
    try:
        fab.start()
        yield fab
    finally:
        fab.stop()
        left = [n for _, n in socket.if_nameindex() if n.startswith(run_prefix)]
        assert not left, left


def _trims(fab: Fabric) -> int:
    assert fab.mn is not None
    resp = fetch(fab.mn.switches["leaf0"].grpc_address)
    return sum(q.trims for p in resp.ports for q in p.egress.queues)


def test_incast_trims_become_nacks_and_retransmissions_never_ack_timeouts(incast: Fabric) -> None:
    fab = incast
    assert fab.runner is not None
    trims0 = _trims(fab)
    wl = fab.runner.submit("incast:h8", 2 << 20, "MRC", timeout=120)
    assert fab.runner.wait(wl, 150, fab.check_alive)
    s = wl.summary()
    assert s["completed"], s["errors"]
    assert s["verified_flows"] == 8  # every sink's SHA-256 is the pattern's
    stats = [f.writer["qp_stats"] for f in wl.flows]
    assert _trims(fab) > trims0  # the receiver's link trimmed
    nacks = sum(st.get("rx_nack_trimmed", 0) + st.get("rx_nack_trimmed_lasthop", 0)
                for st in stats)
    assert nacks > 0 and sum(st["tx_rtx"] for st in stats) >= nacks
    assert [st.get("timeouts", 0) for st in stats] == [0] * 8
    # the incast's congestion is the receiver's own link, so its trims are last-hop trims,
    # and every flow that was told of one reacted to it
    lasthop = [f for f in wl.flows if f.writer["qp_stats"].get("rx_nack_trimmed_lasthop", 0)]
    assert lasthop, [st.get("rx_nack_trimmed_lasthop", 0) for st in stats]
    assert all(f.writer["cc"]["nack_decrease"] + f.writer["cc"]["qa"] > 0 for f in lasthop)


def _samples(run_dir: Path, host: str) -> list[dict[str, Any]]:
    """The recovery:metrics_updated records of ``host``'s workload QP (the one with NSCC)."""
    for path in sorted((run_dir / "qlog").glob(f"{host}-qp*.sqlog")):
        _h, events = read_qlog(path)
        recs = [e["data"] for e in events if e["name"] == "mrc:recovery_metrics_updated"]
        if recs and "penalty" in recs[-1]:
            return recs
    return []


def test_a_throttled_consumer_shrinks_the_senders_window_until_it_recovers(
    incast: Fabric,
) -> None:
    fab = incast
    assert fab.runner is not None
    throttle = {"after": 0.5, "seconds": 1.0, "burst": 0.02, "gap": 0.005}
    wl = fab.runner.submit("pair:h0:h8", 24 << 20, "MRC", timeout=120,
                           extra={"throttle": throttle})
    assert fab.runner.wait(wl, 150, fab.check_alive)
    s = wl.summary()
    assert s["completed"] and s["verified_flows"] == 1, s["errors"]
    cc = wl.flows[0].writer["cc"]
    assert cc["penalised"] >= 1 and cc["restored"] >= 1  # the penalty reached the requester
    # the receiving agent measured its own backlog and announced it
    _h, events = read_qlog(fab.run_dir / "qlog" / "h8-agent.sqlog")
    bp = [e["data"] for e in events if e["name"] == "mrc:backpressure"]
    assert any(d["penalty"] > 0 for d in bp) and any(d["restore"] for d in bp)
    # the sender's window: before the penalty, while penalised, after the restore
    recs = _samples(fab.run_dir, "h0")
    first = next(i for i, r in enumerate(recs) if r["penalty"] > 0)
    last = max(i for i, r in enumerate(recs) if r["penalty"] > 0)
    before = max(r["cwnd"] for r in recs[:first])
    during = min(r["cwnd"] for r in recs[first:last + 1])
    after = max((r["cwnd"] for r in recs[last + 1:]), default=0)
    assert during < before / 2, (before, during)
    assert after >= 0.8 * before, (before, after)
    print(json.dumps({"cwnd_before": before, "cwnd_during": during, "cwnd_after": after,
                      "penalties": [d["penalty"] for d in bp][:20]}))

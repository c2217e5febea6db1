"""A round's queueing delay (mrcnet/fabric/queuedelay.py): the data queues' wait histograms
of every switch port, before and after, and their percentiles; the same figure from the
controller's port details (the emulation) and from in-process traffic managers (the
simulator)."""

from __future__ import annotations

import pytest

from common.proto import switch_admin_pb2 as pb
from mrcnet.fabric import queuedelay
from mrcnet.sim.run import SimOptions, simulate
from switch.traffic import WAIT_BUCKET_S
from topologies.loader import load, resolve

CONTROL_PRIORITY = 7
BEST_EFFORT_PRIORITY = 0


def _details(waits: dict[int, dict[int, int]]) -> dict[str, pb.GetPortsResponse]:
    """One switch, one port, whose egress queue of each priority has the given histogram."""
    resp = pb.GetPortsResponse()
    port = resp.ports.add(port=1)
    for prio, hist in waits.items():
        port.egress.queues.add(priority=prio, wait_hist=hist, wait_bucket_s=WAIT_BUCKET_S)
    port.ingress.queues.add(priority=1, wait_hist={40: 1000})  # a host NIC queue: not counted
    return {"leaf0": resp}


def test_percentiles_are_bucket_upper_edges_of_the_data_queues_only() -> None:
    before = queuedelay.from_details(_details({1: {0: 10}, 2: {}}))
    after = queuedelay.from_details(_details({
        1: {0: 60, 3: 30}, 2: {3: 9, 10: 1},
        CONTROL_PRIORITY: {99: 500}, BEST_EFFORT_PRIORITY: {99: 500}}))
    hist = queuedelay.difference(after, before)
    assert hist == {0: 50, 3: 39, 10: 1}
    s = queuedelay.summary(hist)
    assert s is not None and s["packets"] == 90
    assert s["p50_s"] == pytest.approx(1 * WAIT_BUCKET_S)  # 50 of 90 waited < 1 bucket
    assert s["p90_s"] == pytest.approx(4 * WAIT_BUCKET_S)  # 89 of 90 within bucket 3
    assert s["p99_s"] == pytest.approx(11 * WAIT_BUCKET_S)  # the one in bucket 10
    assert queuedelay.summary({}) is None
    assert queuedelay.percentile({}, 0.99) == 0.0


def test_a_simulated_incast_counts_every_data_packet_its_switch_sent() -> None:
    topo = load(resolve("incast-8"))
    run = simulate(topo, SimOptions(run="incast:h8", size=256 * 1024, cc="nscc", lb="reps"))
    qd = run.results["workloads"][0]["queue_delay"]
    assert qd is not None
    # one switch: every untrimmed data packet waited in its egress queue towards h8 once, and
    # the receiver counts each (new or duplicate) on its own
    rx = run.results["host_counters"]["h8"]
    assert qd["packets"] == rx["rx_data"] + rx["rx_dup"]
    assert run.results["switches"]["trims"] > 0  # 8 senders into one port: a real queue
    assert qd["p99_s"] >= qd["p90_s"] >= qd["p50_s"] >= WAIT_BUCKET_S
    assert qd["p99_s"] > 10 * WAIT_BUCKET_S

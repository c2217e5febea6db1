"""Chaos schedules (mrcnet/fabric/chaos.py): bounded, reproducible, one fault at a time,
exactly one plane outage, every fault undone; and the verdict of a run."""

from __future__ import annotations

import itertools

import pytest

from mrcnet.fabric.chaos import ChaosSpec, chaos_schedule, port_flaps, verdict
from mrcnet.fabric.failures import HostPortEvent, LinkEvent
from topologies.loader import load


@pytest.mark.parametrize("seed", range(20))
def test_schedule_is_sequential_bounded_and_undoes_every_fault(seed: int) -> None:
    topo = load("clos-2p")
    spec = ChaosSpec(duration=15.0, seed=seed)
    events = chaos_schedule(topo, spec)
    assert events == chaos_schedule(topo, spec)  # reproducible
    assert len(events) % 2 == 0 and events[0].at >= spec.start
    pairs = list(zip(events[::2], events[1::2]))
    for down, up in pairs:  # each fault is undone before the next one starts
        assert not down.up and up.up and down.label == up.label and up.at > down.at
        if isinstance(down, HostPortEvent):
            assert isinstance(up, HostPortEvent) and (down.host, down.port) == (up.host, up.port)
        else:
            assert isinstance(up, LinkEvent) and down.links == up.links
    for (_d, up), (nxt, _u) in itertools.pairwise(pairs):
        assert nxt.at >= up.at + spec.gap[0] - 1e-9
    planes = [d for d, _u in pairs if d.label.startswith("plane")]
    assert len(planes) == 1 and len(planes[0].links) == 8
    for d, u in pairs:
        if not d.label.startswith("plane"):
            assert spec.down[0] <= u.at - d.at <= spec.down[1]
    links = [d for d, _u in pairs if isinstance(d, LinkEvent) and len(d.links) == 1]
    assert all({topo.node(n).kind.value for ln in d.links for n in (ln.a.node, ln.b.node)}
               == {"switch"} for d in links)


def test_port_flaps_and_verdict() -> None:
    topo = load("scaleup-ocs")
    flaps = port_flaps(topo, ChaosSpec(duration=0, seed=3), 4)
    assert len(flaps) == 8 and all(isinstance(e, HostPortEvent) for e in flaps)
    assert [e.up for e in flaps] == [False, True] * 4
    res = {"workloads": [{"flows": 12, "verified_flows": 12}], "verified_bytes": 12,
           "qp_errors": 0, "completed": True, "link_events": [{}] * 8, "failure_errors": [],
           "mechanisms": {"rtx_probe": 3, "timeouts": 1}}
    v = verdict(res, flaps)
    assert v["passed"] and v["faults"] == v["faults_applied"] == 4
    assert v["retransmissions"] == {"rtx_probe": 3}
    for bad in ({"qp_errors": 1}, {"completed": False}, {"link_events": [{}] * 6},
                {"workloads": [{"flows": 12, "verified_flows": 11}]}):
        assert not verdict({**res, **bad}, flaps)["passed"], bad

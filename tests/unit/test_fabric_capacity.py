"""Configured capacity of a workload (max concurrent flow), checked against hand computations."""

from __future__ import annotations

import pytest
import yaml

from mrcnet.fabric.capacity import CapacityError, workload_capacity
from mrcnet.fabric.workloads import flows_for
from topologies.loader import loads, resolve

CLOS = """
name: t
fabric: {kind: packet, planes: 1, path_mode: ecmp, mtu: 4096}
link_defaults: {rate: 100Mbps, delay: 5us}
hosts: [h0, h1, h2, h3]
switches:
  - {name: leaf0, plane: 0, tier: 0}
  - {name: leaf1, plane: 0, tier: 0}
  - {name: spine0, plane: 0, tier: 1}
  - {name: spine1, plane: 0, tier: 1}
links:
  - h0:0 -- leaf0:1
  - h1:0 -- leaf0:2
  - h2:0 -- leaf1:1
  - h3:0 -- leaf1:2
  - {a: "leaf0:3", b: "spine0:1", rate: UPLINK}
  - {a: "leaf0:4", b: "spine1:1", rate: UPLINK}
  - {a: "leaf1:3", b: "spine0:2", rate: UPLINK}
  - {a: "leaf1:4", b: "spine1:2", rate: UPLINK}
"""
HOSTS = ["h0", "h1", "h2", "h3"]


def topo(uplink: str = "100Mbps") -> object:
    return loads(CLOS.replace("UPLINK", uplink))


def test_non_blocking_fabric_is_limited_by_the_host_links() -> None:
    t = topo()
    # all-to-all: each host sends 3 flows over one 100 Mb/s link -> 100/3 per flow, 12 flows.
    assert workload_capacity(t, flows_for("all-to-all", HOSTS)) == pytest.approx(400e6)
    assert workload_capacity(t, flows_for("pair:h0:h2", HOSTS)) == pytest.approx(100e6)
    assert workload_capacity(t, flows_for("shift:2", HOSTS)) == pytest.approx(400e6)


def test_oversubscribed_uplinks_limit_cross_leaf_flows() -> None:
    t = topo("25Mbps")
    # shift:2: h0,h1 -> h2,h3 and back; each direction leaf0 -> leaf1 has 2 x 25 Mb/s of
    # uplinks for 2 flows: 25 Mb/s each, 4 flows.
    assert workload_capacity(t, flows_for("shift:2", HOSTS)) == pytest.approx(100e6)
    # all-to-all: 4 cross-leaf flows per direction share 50 Mb/s (12.5 each), and equal
    # rates for all 12 flows (the intra-leaf ones could go faster) -> 12 x 12.5.
    assert workload_capacity(t, flows_for("all-to-all", HOSTS)) == pytest.approx(150e6)


def test_hosts_are_not_transit_nodes() -> None:
    # clos-2p, flow h0 -> h2 (other leaf). Plane 0: everything 1 Gb/s but h2's own link
    # (10 Mb/s); plane 1: everything 1 Gb/s but the leaf uplinks (10 Mb/s each, 2 per leaf).
    # Direct: 10 (plane 0) + 20 (plane 1) = 30 Mb/s. A host relaying (h3: plane 0 in, plane 1
    # out to h2's fast plane-1 link) would reach far more.
    data = yaml.safe_load(resolve("clos-2p").read_text())
    data["link_defaults"]["rate"] = "1Gbps"
    links = []
    for text in data["links"]:
        a, b = (x.strip() for x in text.split("--"))
        link: dict[str, object] = {"a": a, "b": b}
        if a == "h2:0":
            link["rate"] = "10Mbps"
        if a.startswith("p1-leaf") and b.startswith("p1-spine"):
            link["rate"] = "10Mbps"
        links.append(link)
    data["links"] = links
    t = loads(yaml.safe_dump(data))
    assert workload_capacity(t, [("h0", "h2")]) == pytest.approx(30e6)


def test_bad_flows_are_refused() -> None:
    with pytest.raises(CapacityError):
        workload_capacity(topo(), [("h0", "nohost")])
    with pytest.raises(CapacityError):
        workload_capacity(topo(), [("h0", "h0")])
    assert workload_capacity(topo(), []) == 0.0

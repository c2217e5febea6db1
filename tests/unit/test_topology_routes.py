"""Address plan, EV layout and switch tables, checked against independent computations.

Paths are traced through the generated tables (topologies.trace) and compared with networkx
shortest paths and with the switch names the EV fields should select according to the files.
"""

from __future__ import annotations

import ipaddress
import itertools
import math

import networkx as nx
import pytest

from common.classes import TrafficClass
from topologies.addressing import gid_owner, host_gid, locator, mac, usid_of
from topologies.evlayout import LayoutError, ev_layout, srv6_template
from topologies.loader import load, loads, resolve
from topologies.model import NodeKind, PathMode, Topology
from topologies.paths import base_rtt
from topologies.routes import RouteEv, switch_tables
from topologies.trace import trace

PACKET = ["clos-1p", "clos-2p", "fattree-3t"]


def plane_graph(topo: Topology, plane: int) -> nx.Graph:
    g = nx.Graph()
    for link in topo.links:
        nodes = [topo.node(link.a.node), topo.node(link.b.node)]
        if any(n.kind == NodeKind.HOST for n in nodes):
            host_end = link.a if nodes[0].kind == NodeKind.HOST else link.b
            if host_end.port != plane:
                continue
        elif nodes[0].plane != plane:
            continue
        g.add_edge(link.a.node, link.b.node)
    return g


def shortest_len(topo: Topology, plane: int, src: str, dst: str) -> int:
    g = plane_graph(topo, plane)
    # hosts never forward: remove other hosts
    g.remove_nodes_from([h.name for h in topo.hosts if h.name not in (src, dst)])
    return int(nx.shortest_path_length(g, src, dst))


@pytest.mark.parametrize("name", [*PACKET, "scaleup-ocs"])
def test_gids_and_macs_unique_and_invertible(name: str) -> None:
    topo = load(name)
    prefix = ipaddress.IPv6Network((topo.fabric.addressing.gid_prefix, 48))
    gids = {}
    for node in topo.nodes_of(NodeKind.HOST, NodeKind.GPU):
        for port in topo.ports(node.name):
            gid = host_gid(topo, node.name, port)
            assert gid in prefix
            assert (int(gid) >> 64) & 0xFFFF == port  # plane field
            assert gid_owner(topo, gid) == (node.name, port)
            gids[gid] = (node.name, port)
    assert len(gids) == sum(
        len(topo.ports(n.name)) for n in topo.nodes_of(NodeKind.HOST, NodeKind.GPU)
    )
    macs = [mac(topo, n.name, p) for n in topo.nodes for p in topo.ports(n.name)]
    assert len(set(macs)) == len(macs)
    assert all(int(m.split(":")[0], 16) & 0x02 and not int(m.split(":")[0], 16) & 1 for m in macs)


@pytest.mark.parametrize("name", PACKET)
def test_usids_unique_per_plane_and_locators(name: str) -> None:
    topo = load(name)
    for plane in range(topo.fabric.planes):
        sws = topo.switches_in_plane(plane)
        usids = [usid_of(topo, s.name).usid for s in sws]
        assert len(set(usids)) == len(usids)
        for sw in sws:
            net = locator(topo, sw.name)
            assert net.prefixlen == 48
            assert int(net.network_address) >> 96 == topo.fabric.addressing.usid_block + plane
            assert (int(net.network_address) >> 80) & 0xFFFF == usid_of(topo, sw.name).usid
            assert usid_of(topo, sw.name).usid >> 12 == sw.tier + 1  # type: ignore[operator]


def test_base_rtt_clos_2p_by_hand() -> None:
    topo = load("clos-2p")
    per_link = 2 * 5e-6 + (4096 + 64) * 8 / 1e9
    assert base_rtt(topo) == pytest.approx(4 * per_link)  # host-leaf-spine-leaf-host
    fat = load("fattree-3t")
    assert base_rtt(fat) == pytest.approx(6 * per_link)  # inter-pod path: 6 links


@pytest.mark.parametrize("name", PACKET)
@pytest.mark.parametrize("mode", list(PathMode))
def test_every_pair_delivered_on_a_shortest_path(name: str, mode: PathMode) -> None:
    topo = load(name)
    for plane in range(topo.fabric.planes):
        for src, dst in itertools.permutations([h.name for h in topo.hosts], 2):
            want = shortest_len(topo, plane, src, dst)
            for ev in range(8):
                res = trace(
                    topo,
                    mode,
                    plane,
                    src,
                    dst,
                    ev << 13 if mode != PathMode.STEV else ev << 29,
                    ecmp_hash=ev,
                )
                assert res.nodes[0] == src and res.nodes[-1] == dst
                assert len(res.nodes) - 1 == want, res.nodes
                # stays in its plane
                assert all(topo.node(n).plane == plane for n in res.nodes[1:-1])


def test_stev_clos_2p_field_t0_names_the_spine() -> None:
    topo = load("clos-2p")
    layout = ev_layout(topo)
    assert [(f.tier, f.msb_offset, f.width) for f in layout.fields] == [(0, 0, 1)]
    for plane in (0, 1):
        for t0 in (0, 1):
            for entropy in (0, 0x1234, 0x7FFFFFFF):
                ev = layout.compose({0: t0}, 32, entropy)
                res = trace(topo, PathMode.STEV, plane, "h0", "h3", ev, ecmp_hash=entropy)
                assert res.nodes == (
                    "h0",
                    f"p{plane}-leaf0",
                    f"p{plane}-spine{t0}",
                    f"p{plane}-leaf1",
                    "h3",
                )


def test_stev_fattree_three_fields_pick_agg_core_agg() -> None:
    topo = load("fattree-3t")
    layout = ev_layout(topo)
    assert [(f.tier, f.msb_offset, f.width) for f in layout.fields] == [
        (0, 0, 1),
        (1, 1, 1),
        (2, 2, 1),
    ]
    seen = set()
    for a, b, c in itertools.product((0, 1), repeat=3):
        ev = layout.compose({0: a, 1: b, 2: c}, 32, entropy=0xBEEF)
        res = trace(topo, PathMode.STEV, 0, "h0", "h3", ev, ecmp_hash=7)
        assert res.nodes == (
            "h0",
            "pod0-leaf0",
            f"pod0-agg{a}",
            f"core{b}",
            f"pod1-agg{c}",
            "pod1-leaf1",
            "h3",
        )
        seen.add(res.nodes)
    assert len(seen) == 8  # every field combination is a distinct path
    # intra-pod: only T0 matters
    for a in (0, 1):
        ev = layout.compose({0: a, 1: 1, 2: 1}, 32)
        assert trace(topo, PathMode.STEV, 0, "h0", "h1", ev).nodes == (
            "h0",
            "pod0-leaf0",
            f"pod0-agg{a}",
            "pod0-leaf1",
            "h1",
        )


def test_stev_route_entries_shape() -> None:
    topo = load("fattree-3t")
    tables = switch_tables(topo, PathMode.STEV)
    leaf = tables["pod0-leaf0"]
    remote = next(r for r in leaf.routes if r.destination == "h3:0")
    assert isinstance(remote.action, RouteEv)
    assert (remote.action.shift, remote.action.mask) == (31, 1)
    members = leaf.ev_groups[remote.action.group]
    assert [members[v].peer for v in (0, 1)] == ["pod0-agg0", "pod0-agg1"]
    core = tables["core1"]
    down = next(r for r in core.routes if r.destination == "h2:0")
    assert isinstance(down.action, RouteEv) and down.action.shift == 29
    assert [core.ev_groups[down.action.group][v].peer for v in (0, 1)] == ["pod1-agg0", "pod1-agg1"]
    # the next hop MACs are the two ends of the link
    hop = members[1]
    assert hop.smac == mac(topo, "pod0-leaf0", hop.port)
    far = topo.peer("pod0-leaf0", hop.port)
    assert hop.dmac == mac(topo, far.node, far.port)


def test_srv6_fattree_three_usids_and_decap() -> None:
    topo = load("fattree-3t")
    tmpl = srv6_template(topo, 0, "h0", "h2")
    assert len(tmpl.slots) == 3
    assert (
        srv6_template(topo, 0, "h0", "h1").slots
        and len(srv6_template(topo, 0, "h0", "h1").slots) == 1
    )
    for a, b, c in itertools.product((0, 1), repeat=3):
        ev = (a << 15) | (b << 14) | (c << 13) | 0x0123
        usids = tmpl.usids(ev)
        expected = [f"pod0-agg{a}", f"core{b}", f"pod1-agg{c}"]
        assert usids == [usid_of(topo, n).usid for n in expected]
        res = trace(topo, PathMode.SRV6, 0, "h0", "h2", ev)
        assert res.nodes == ("h0", "pod0-leaf0", *expected, "pod1-leaf0", "h2")
        assert res.decap_at == f"pod1-agg{c}"


def test_srv6_same_leaf_needs_no_container() -> None:
    topo = load("clos-2p")
    assert srv6_template(topo, 1, "h0", "h1").slots == ()
    assert trace(topo, PathMode.SRV6, 1, "h0", "h1", 0).nodes == ("h0", "p1-leaf0", "h1")


def test_usid_entries_and_locator_routes() -> None:
    topo = load("clos-2p")
    tables = switch_tables(topo, PathMode.SRV6)
    spine = tables["p0-spine1"]
    actions = {(str(e.prefix), e.action) for e in spine.usid_entries}
    loc = locator(topo, "p0-spine1")
    assert actions == {(str(loc), "shift"), (f"{loc.network_address}/64", "decap")}
    # every other switch of the plane has a locator route; none of the other plane
    dests = {r.destination for r in spine.routes if r.prefix.prefixlen == 48}
    assert dests == {"p0-leaf0", "p0-leaf1", "p0-spine0"}
    assert switch_tables(topo, PathMode.STEV)["p0-spine1"].usid_entries == ()


def test_port_config_last_hop_and_bdp_thresholds() -> None:
    topo = load("clos-2p")
    tables = switch_tables(topo, PathMode.ECMP)
    # every link of clos-2p runs at 1 Gb/s: a BDP of 5.3 packets; trimming uses the least
    # BDP, 12 MTUs, ECN the link's own
    bdp_bytes = 1e9 * base_rtt(topo) / 8
    assert 0.5 * bdp_bytes > 4096 and bdp_bytes < 12 * 4096
    trim_bdp = 12 * 4096
    assert 1.5 * trim_bdp < 32 * 4096 - 4096  # no clamping here
    for name, tab in tables.items():
        for port, cfg in tab.port_config.items():
            facing_host = topo.node(topo.peer(name, port).node).kind == NodeKind.HOST
            assert cfg.last_hop == facing_host
            if facing_host:
                assert cfg.ecn_threshold_bytes == 0  # ECN disabled on last-hop ports
                assert cfg.trim_threshold_bytes == math.ceil(1.5 * trim_bdp)
                assert cfg.trim_dscp == topo.fabric.classes.dscp[TrafficClass.TRIMMED_LASTHOP]
            else:
                assert cfg.ecn_threshold_bytes == math.ceil(0.5 * bdp_bytes)
                assert cfg.trim_threshold_bytes == math.ceil(1.0 * trim_bdp)
                assert cfg.trim_dscp == topo.fabric.classes.dscp[TrafficClass.TRIMMED]
    dscp = {c.dscp: c for c in tables["p0-leaf0"].dscp_classes}
    assert dscp[10].trimmable and not dscp[26].trimmable and dscp[48].priority == 7


def test_port_thresholds_are_clamped_to_the_queue_and_at_least_one_mtu() -> None:
    text = (
        resolve("clos-1p").read_text()
        .replace("base_rtt: auto", "base_rtt: 200us")
        .replace("  - leaf0:3 -- spine0:1",
                 '  - {a: "leaf0:3", b: "spine0:1", rate: 100Gbps, queue_packets: 8}')
        .replace("  - leaf0:4 -- spine1:1",
                 '  - {a: "leaf0:4", b: "spine1:1", rate: 100Gbps, queue_bytes: 20000}')
        .replace("  - leaf1:3 -- spine0:2", '  - {a: "leaf1:3", b: "spine0:2", rate: 1Mbps}')
        .replace("  - leaf1:4 -- spine1:2", '  - {a: "leaf1:4", b: "spine1:2", queue_packets: 1}')
        .replace("  - h1:0 -- leaf0:2", '  - {a: "h1:0", b: "leaf0:2", rate: 0}')
    )  # fmt: skip
    tables = switch_tables(loads(text), PathMode.ECMP)
    got = {
        (sw, port): (cfg.ecn_threshold_bytes, cfg.trim_threshold_bytes, cfg.last_hop)
        for sw, tab in tables.items()
        for port, cfg in tab.port_config.items()
    }
    # 1 Gb/s x 200 us = 25000 B BDP: ECN 0.5 of it; trimming from the least BDP of 12 MTUs
    # (49152 B): trim 1.0, last-hop trim 1.5; default queues 32 packets / 128 KiB = 131072 B,
    # thresholds at most capacity - MTU; 100 Gb/s x 200 us = 2.5 MB: the queue bound.
    want = {
        ("leaf0", 1): (0, 73728, True),
        ("leaf0", 2): (0, 131072 - 4096, True),  # unlimited rate: the queue bound
        ("leaf1", 1): (0, 73728, True),
        ("leaf1", 2): (0, 73728, True),
    }
    for ends, value in (
        ((("leaf0", 3), ("spine0", 1)), (8 * 4096 - 4096,) * 2),  # 8-packet queue
        ((("leaf0", 4), ("spine1", 1)), (20000 - 4096,) * 2),  # 20000-byte queue
        ((("leaf1", 3), ("spine0", 2)), (4096, 49152)),  # 25-byte BDP: ECN one MTU
        ((("leaf1", 4), ("spine1", 2)), (4096, 4096)),  # a one-packet queue: one MTU
    ):
        for end in ends:
            want[end] = (*value, False)
    assert got == want


def test_ecmp_groups_list_all_uplinks() -> None:
    topo = load("clos-1p")
    tab = switch_tables(topo, PathMode.ECMP)["leaf0"]
    assert [[m.peer for m in g] for g in tab.ecmp_groups.values()] == [["spine0", "spine1"]]
    assert tab.ev_groups == {}


def test_two_choices_at_one_tier_is_a_layout_error() -> None:
    # a second link pod1-leaf1 -- pod1-agg1 gives paths into pod 1 a choice at tier 1 going down,
    # after the tier-1 choice going up: one T1 field cannot encode both
    topo = load("fattree-3t")
    assert ev_layout(topo)  # baseline is fine
    text = resolve("fattree-3t").read_text()
    text = text.replace(
        "  - h3:0 -- pod1-leaf1:1", "  - h3:0 -- pod1-leaf1:1\n  - pod1-leaf1:4 -- pod1-agg1:5"
    )
    bad = loads(text)
    with pytest.raises(LayoutError, match="two choices at tier 1"):
        ev_layout(bad)
    with pytest.raises(LayoutError):
        switch_tables(bad, PathMode.STEV)
    # ECMP mode does not need a layout
    assert switch_tables(bad, PathMode.ECMP)


def test_srv6_needs_symmetric_candidates() -> None:
    text = resolve("fattree-3t").read_text().replace("  - pod1-agg1:3 -- core0:4\n", "")
    topo = loads(text)
    # core0 now reaches pod 1 only through pod1-agg0: the choice after the core differs by core
    with pytest.raises(LayoutError, match="differ in structure"):
        srv6_template(topo, 0, "h0", "h3")
    # ECMP still routes every pair
    for src, dst in itertools.permutations(["h0", "h1", "h2", "h3"], 2):
        assert trace(topo, PathMode.ECMP, 0, src, dst, 0, ecmp_hash=1).nodes[-1] == dst

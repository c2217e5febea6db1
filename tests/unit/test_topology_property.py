"""Random leaf-spine fabrics: every generated table set delivers every pair on a shortest path,
and the T0 field of a Structured-EV or SRv6 EV picks spine (value mod spines), in every plane."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from topologies.evlayout import ev_layout, srv6_template
from topologies.loader import loads
from topologies.model import PathMode
from topologies.trace import trace


def leaf_spine(planes: int, leaves: int, spines: int, hosts_per_leaf: int) -> str:
    hosts = [f"h{i}" for i in range(leaves * hosts_per_leaf)]
    lines = [
        f"fabric: {{planes: {planes}, path_mode: stev}}",
        f"hosts: [{', '.join(hosts)}]",
        "switches:",
    ]
    links = []
    for p in range(planes):
        for leaf in range(leaves):
            lines.append(f"  - {{name: p{p}l{leaf}, plane: {p}, tier: 0}}")
        for s in range(spines):
            lines.append(f"  - {{name: p{p}s{s}, plane: {p}, tier: 1}}")
        for i, h in enumerate(hosts):
            leaf, slot = divmod(i, hosts_per_leaf)
            links.append(f"  - {h}:{p} -- p{p}l{leaf}:{slot + 1}")
        for leaf, s in itertools.product(range(leaves), range(spines)):
            links.append(f"  - p{p}l{leaf}:{hosts_per_leaf + s + 1} -- p{p}s{s}:{leaf + 1}")
    return "\n".join([*lines, "links:", *links]) + "\n"


@settings(max_examples=25, deadline=None)
@given(
    planes=st.integers(1, 2),
    leaves=st.integers(2, 3),
    spines=st.integers(1, 4),
    hosts_per_leaf=st.integers(1, 2),
    ev=st.integers(0, 2**32 - 1),
)
def test_random_leaf_spine(
    planes: int, leaves: int, spines: int, hosts_per_leaf: int, ev: int
) -> None:
    topo = loads(leaf_spine(planes, leaves, spines, hosts_per_leaf))
    layout = ev_layout(topo)
    if spines == 1:
        assert layout.fields == ()
    else:
        assert layout.fields[0].tier == 0 and layout.fields[0].fanout == spines
    hosts = [h.name for h in topo.hosts]
    for p in range(planes):
        for i, j in itertools.permutations(range(len(hosts)), 2):
            same_leaf = i // hosts_per_leaf == j // hosts_per_leaf
            want = 2 if same_leaf else 4  # links on the path
            for mode in PathMode:
                e = ev if mode == PathMode.STEV else ev & 0xFFFF
                nodes = trace(topo, mode, p, hosts[i], hosts[j], e, ecmp_hash=ev).nodes
                assert nodes[0] == hosts[i] and nodes[-1] == hosts[j]
                assert len(nodes) - 1 == want
                if mode in (PathMode.STEV, PathMode.SRV6) and not same_leaf and spines > 1:
                    # the T0 field names the spine, modulo the spine count (SRv6: alias uSIDs)
                    t0 = layout.fields[0].extract(e, 32 if mode == PathMode.STEV else 16)
                    assert nodes[2] == f"p{p}s{t0 % spines}"
            if not same_leaf and spines > 1 and spines & (spines - 1) == 0:
                assert len(srv6_template(topo, p, hosts[i], hosts[j]).slots) == 1

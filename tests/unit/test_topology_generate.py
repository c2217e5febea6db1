"""Generated topologies (topologies/generate.py, `mrcnet topo`) of several sizes validate,
produce switch tables and route every host pair; counts are checked against the shapes'
formulas, paths against the tables by the reference tracer."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from mrcnet.cli import main
from topologies.evlayout import LayoutError
from topologies.generate import GenerateError, clos, fattree, scaleup
from topologies.loader import TopologyError, from_dict, load
from topologies.model import NodeKind, PathMode
from topologies.routes import RouteEv, SetNextHop, switch_tables
from topologies.trace import trace


@pytest.mark.parametrize(("planes", "leaves", "spines", "hpl"),
                         [(1, 2, 2, 1), (2, 3, 4, 2), (4, 16, 8, 8)])
def test_clos_sizes_validate_and_produce_tables(planes: int, leaves: int, spines: int,
                                                hpl: int) -> None:
    topo = from_dict(clos(planes, leaves, spines, hpl))
    hosts = leaves * hpl
    assert len(topo.hosts) == hosts
    assert len(topo.switches) == planes * (leaves + spines)
    assert len(topo.links) == planes * (hosts + leaves * spines)
    for mode in PathMode:
        tables = switch_tables(topo, mode)
        assert len(tables) == planes * (leaves + spines)
        for name, t in tables.items():
            host_routes = [r for r in t.routes if ":" in r.destination]
            assert len(host_routes) == hosts, name
            if mode == PathMode.STEV and "leaf" in name and spines > 1:
                remote = [r for r in host_routes if not isinstance(r.action, SetNextHop)]
                assert len(remote) == hosts - hpl
                assert all(isinstance(r.action, RouteEv) for r in remote)


def test_small_clos_routes_every_pair_on_every_plane_through_the_named_spine() -> None:
    topo = from_dict(clos(2, 3, 4, 2))
    names = [h.name for h in topo.hosts]
    for plane, (a, b) in itertools.product(range(2), itertools.permutations(names, 2)):
        for spine in range(4):
            ev = spine << 30  # the leaf's choice: 2 bits from the EV's MSB
            path = trace(topo, PathMode.STEV, plane, a, b, ev).nodes
            assert path[0] == a and path[-1] == b
            if int(a[1:]) // 2 != int(b[1:]) // 2:  # different leaves
                assert path[2] == f"p{plane}-spine{spine}", path


@pytest.mark.parametrize("k", [2, 4, 6])
def test_fattree_sizes_validate_and_route_across_pods(k: int) -> None:
    topo = from_dict(fattree(k))
    half = k // 2
    assert len(topo.hosts) == k ** 3 // 4
    assert len(topo.switches) == k * k + half * half
    assert len(topo.links) == k ** 3 // 4 + k * half * half + k * half * half
    for mode in PathMode:
        assert len(switch_tables(topo, mode)) == len(topo.switches)
    first, last = topo.hosts[0].name, topo.hosts[-1].name
    for mode in (PathMode.ECMP, PathMode.STEV):
        path = trace(topo, mode, 0, first, last, 0).nodes
        tiers = [topo.node(n).tier for n in path[1:-1]]
        assert tiers == [0, 1, 2, 1, 0]  # first and last host sit in different pods
    if k > 2:
        # an aggregation switch reaches only k/2 of the cores, which all share one uSID
        # group (same down cone): SRv6 templates cannot name them, and say so
        with pytest.raises(LayoutError, match="not one whole uSID group"):
            trace(topo, PathMode.SRV6, 0, first, last, 0)


@pytest.mark.parametrize(("gpus", "ports"), [(2, 1), (8, 2), (16, 4)])
def test_scaleup_sizes_validate(gpus: int, ports: int) -> None:
    topo = from_dict(scaleup(gpus, ports))
    assert len(topo.gpus) == gpus and len(topo.nodes_of(NodeKind.OCS)) == 1
    ocs_ports = sorted(topo.ports("ocs0"))
    assert ocs_ports == list(range(1, gpus * ports + 1))
    assert topo.fabric.ocs is not None and topo.fabric.ocs.ports_per_gpu == ports


def test_bad_sizes_are_refused() -> None:
    for bad in (lambda: clos(0, 2, 2, 1), lambda: clos(2, 2, 600, 1), lambda: clos(33, 2, 2, 1),
                lambda: fattree(3), lambda: scaleup(300, 2)):
        with pytest.raises(GenerateError):
            bad()
    with pytest.raises(TopologyError):  # 1 GPU: the loader's own rule
        from_dict(scaleup(1, 2))


def test_mrcnet_topo_writes_a_file_that_loads(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.yaml"
    assert main(["topo", "clos", "--planes", "2", "--leaves", "4", "--spines", "2",
                 "--hosts-per-leaf", "2", "--rate", "10Gbps", "-o", str(out), "--tables"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and "stev: 12 switches" in text
    topo = load(str(out))
    assert topo.links[0].params.rate_bps == 10e9 and len(topo.hosts) == 8
    assert main(["topo", "check", str(out)]) == 0
    assert main(["topo", "fattree", "--k", "5", "-o", str(tmp_path / "x.yaml")]) == 2
    assert "even" in capsys.readouterr().err and not (tmp_path / "x.yaml").exists()

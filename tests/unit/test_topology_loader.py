"""Topology files: shipped files load; bad files give clear errors naming file, node and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from topologies.loader import TopologyError, available, load, loads
from topologies.model import FabricKind, NodeKind, PathMode

SHIPPED = ["clos-1p", "clos-2p", "fattree-3t", "scaleup-ocs"]

BASE = textwrap.dedent(
    """\
    name: tiny
    fabric: {kind: packet, planes: 1, path_mode: ecmp}
    hosts: [h0, h1]
    switches:
      - {name: leaf0, plane: 0, tier: 0}
    links:
      - h0:0 -- leaf0:1
      - h1:0 -- leaf0:2
    """
)


def problems(text: str) -> list[str]:
    with pytest.raises(TopologyError) as info:
        loads(text, source="bad.yaml")
    assert str(info.value).startswith("bad.yaml: ")
    return info.value.problems


def test_shipped_topologies_are_listed_and_load() -> None:
    assert set(SHIPPED) <= set(available())
    for name in SHIPPED:
        topo = load(name)
        assert topo.name == name
        assert topo.source == f"{name}.yaml"


def test_clos_2p_shape() -> None:
    topo = load("clos-2p")
    assert topo.fabric.planes == 2
    assert topo.fabric.path_mode == PathMode.STEV
    assert len(topo.hosts) == 4
    for plane in (0, 1):
        sws = topo.switches_in_plane(plane)
        assert sorted(s.tier for s in sws) == [0, 0, 1, 1]
    for host in topo.hosts:
        # one NIC port per plane, port p cabled to a plane-p leaf
        assert sorted(topo.ports(host.name)) == [0, 1]
        for port in (0, 1):
            peer = topo.node(topo.peer(host.name, port).node)
            assert (peer.plane, peer.tier) == (port, 0)


def test_scaleup_ocs_shape() -> None:
    topo = load("scaleup-ocs")
    assert topo.fabric.kind == FabricKind.CIRCUIT
    assert topo.fabric.ocs is not None and topo.fabric.ocs.ports_per_gpu == 2
    assert len(topo.gpus) == 8
    ocs = topo.nodes_of(NodeKind.OCS)
    assert len(ocs) == 1 and len(topo.ports(ocs[0].name)) == 16


def test_minimal_file_loads_with_defaults() -> None:
    topo = loads(BASE)
    link = topo.links[0]
    assert link.params.rate_bps == 1e9
    assert link.params.delay_s == pytest.approx(5e-6)
    assert link.params.queue_bytes == 128 * 1024


def test_per_link_parameters_override_defaults() -> None:
    text = BASE.replace(
        "  - h1:0 -- leaf0:2",
        "  - {a: 'h1:0', b: 'leaf0:2', rate: 100Mbps, delay: 1ms, loss: 1%, queue_packets: 8}",
    )
    topo = loads(text)
    params = topo.links[1].params
    assert params.rate_bps == pytest.approx(1e8)
    assert params.delay_s == pytest.approx(1e-3)
    assert params.loss == pytest.approx(0.01)
    assert params.queue_packets == 8
    assert topo.links[0].params.rate_bps == 1e9


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("h1:0 -- leaf0:2", "h1:0 -- leaf9:2"),
            "links[1] (h1:0 -- leaf9:2): unknown node 'leaf9'",
        ),
        (("h1:0 -- leaf0:2", "h1:0 -- leaf0:1"), "port leaf0:1 already used by links[0]"),
        (("planes: 1", "planes: 0"), "fabric.planes: impossible plane count 0"),
        (("planes: 1", "planes: 40"), "fabric.planes: impossible plane count 40"),
        (("planes: 1", "planes: 2"), "no switch is in plane 1"),
        (("path_mode: ecmp", "path_mode: magic"), "fabric.path_mode: 'magic' is not one of"),
        (("hosts: [h0, h1]", "hosts: [h0, h0]"), "duplicate node name 'h0'"),
        (("tier: 0", "tier: 1"), "hosts attach to tier-0 switches; leaf0 is tier 1"),
        (("h1:0 -- leaf0:2", "h1:0 -- leaf0:0"), "switch port 'leaf0:0' outside 1..510"),
        (("h1:0 -- leaf0:2", "h1:x -- leaf0:2"), "port of 'h1:x' is not an integer"),
        (("h1:0 -- leaf0:2", "h1:0 -- h1:1"), "a link must join two different nodes"),
        (("name: tiny", "name: tiny\nbogus: 1"), "unknown field 'bogus'"),
        (("h1:0 -- leaf0:2", "{a: 'h1:0', b: 'leaf0:2', rate: 1Gbs}"), "rate: unknown rate unit"),
        (("h1:0 -- leaf0:2", "{a: 'h1:0', b: 'leaf0:2', loss: 1.5}"), "loss: 1.5 outside [0, 1)"),
        (("h1:0 -- leaf0:2", "{a: 'h1:0', b: 'leaf0:2', queue_bytes: 100}"), "below the MTU"),
        (("h1:0 -- leaf0:2", "h1:0 -- h0:1"), "hosts cannot be linked directly"),
    ],
)
def test_bad_files_name_the_problem(edit: tuple[str, str], expected: str) -> None:
    old, new = edit
    assert old in BASE
    found = problems(BASE.replace(old, new))
    assert any(expected in p for p in found), found


def test_missing_host_port_is_reported() -> None:
    text = (
        BASE.replace("planes: 1", "planes: 2").replace(
            "  - {name: leaf0, plane: 0, tier: 0}",
            "  - {name: leaf0, plane: 0, tier: 0}\n  - {name: leafb, plane: 1, tier: 0}",
        )
        + "  - h0:1 -- leafb:1\n"
    )
    found = problems(text)
    assert any("hosts (h1): NIC port(s) 1 not connected" in p for p in found), found


def test_cross_plane_and_tier_skipping_links_rejected() -> None:
    text = textwrap.dedent(
        """\
        fabric: {planes: 2}
        hosts: [h0]
        switches:
          - {name: a0, plane: 0, tier: 0}
          - {name: b0, plane: 1, tier: 0}
          - {name: c0, plane: 0, tier: 2}
        links:
          - h0:0 -- a0:1
          - h0:1 -- b0:1
          - a0:2 -- b0:2
          - a0:3 -- c0:1
        """
    )
    found = problems(text)
    assert any(
        "links[2] (a0:2 -- b0:2): link joins plane 0 (a0) and plane 1 (b0)" in p for p in found
    )
    assert any("links[3] (a0:3 -- c0:1): switch links join adjacent tiers" in p for p in found)


def test_host_port_in_wrong_plane_rejected() -> None:
    text = textwrap.dedent(
        """\
        fabric: {planes: 2}
        hosts: [h0]
        switches:
          - {name: a0, plane: 0, tier: 0}
          - {name: b0, plane: 1, tier: 0}
        links:
          - h0:0 -- b0:1
          - h0:1 -- a0:1
        """
    )
    found = problems(text)
    assert any("host port h0:0 is plane 0 but switch b0 is in plane 1" in p for p in found)


def test_partitioned_plane_rejected() -> None:
    text = BASE.replace(
        "  - {name: leaf0, plane: 0, tier: 0}",
        "  - {name: leaf0, plane: 0, tier: 0}\n  - {name: leaf1, plane: 0, tier: 0}",
    ).replace("h1:0 -- leaf0:2", "h1:0 -- leaf1:1")
    found = problems(text)
    assert any("plane 0" in p and "partitioned" in p for p in found), found


def test_all_problems_reported_at_once() -> None:
    text = BASE.replace("h0:0 -- leaf0:1", "h0:0 -- nope:1").replace(
        "h1:0 -- leaf0:2", "h1:0 -- nada:2"
    )
    found = problems(text)
    assert sum("unknown node" in p for p in found) == 2


def test_circuit_fabric_rules() -> None:
    text = textwrap.dedent(
        """\
        fabric: {kind: circuit, ocs: {ports_per_gpu: 2, reconfig_delay: 1us}}
        gpus: [g0, g1]
        switches: [{name: o, kind: ocs}]
        links:
          - g0:0 -- o:1
          - g0:1 -- o:2
          - g1:0 -- o:3
          - g1:2 -- o:4
        """
    )
    found = problems(text)
    assert any("GPU port g1:2 outside 0..1" in p for p in found), found
    assert any("gpus (g1): port(s) 1 not connected" in p for p in found), found


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    found = problems("fabric: [unclosed\n")
    assert "invalid YAML" in found[0] and "line" in found[0]
    with pytest.raises(TopologyError, match="no such topology file; shipped topologies: clos-1p"):
        load("no-such-topology")
    missing = tmp_path / "x.yaml"
    with pytest.raises(TopologyError, match="cannot read"):
        load(missing)


def test_thresholds_must_be_ordered() -> None:
    text = BASE.replace(
        "path_mode: ecmp}", "path_mode: ecmp, thresholds: {ecn_bdp: 1.2, trim_bdp: 1.0}}"
    )
    found = problems(text)
    assert any("ecn_bdp < trim_bdp" in p for p in found), found


def test_class_overrides_are_validated() -> None:
    text = BASE.replace("path_mode: ecmp}", "path_mode: ecmp, classes: {dscp: {CONTROL: 10}}}")
    found = problems(text)
    assert any("distinct" in p for p in found), found
    text = BASE.replace("path_mode: ecmp}", "path_mode: ecmp, classes: {dscp: {GOLD: 3}}}")
    assert any("fabric.classes.dscp.GOLD: unknown class" in p for p in problems(text))


def test_command_line_summary_path_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from topologies.__main__ import main

    assert main(["fattree-3t"]) == 0
    out = capsys.readouterr().out
    assert "T0: bits 0..0 (fan-out 2), T1: bits 1..1 (fan-out 2), T2: bits 2..2 (fan-out 2)" in out
    assert main(["fattree-3t", "--mode", "stev", "--path", "h0", "h2", "--ev", str(0b011 << 29)]) == 0
    assert capsys.readouterr().out.strip() == "h0 -> pod0-leaf0 -> pod0-agg0 -> core1 -> pod1-agg1 -> pod1-leaf0 -> h2"
    bad = tmp_path / "broken.yaml"
    bad.write_text(BASE.replace("h1:0 -- leaf0:2", "h1:0 -- leaf0:1"))
    assert main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("broken.yaml: 1 problem(s):") and "port leaf0:1 already used by links[0]" in err

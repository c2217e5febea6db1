"""OCS circuits -> cross-connects, with degree and port conflicts rejected."""

from __future__ import annotations

import pytest

from topologies.circuits import CircuitError, cross_connects, parse_circuit
from topologies.loader import load


def test_ring_maps_to_cabled_ports() -> None:
    topo = load("scaleup-ocs")
    ring = [parse_circuit(f"g{i}:0 -> g{(i + 1) % 8}:1") for i in range(8)]
    xc = cross_connects(topo, ring)
    # GPU g port k is OCS port 2g + k + 1 (per the file's cabling)
    assert xc == {2 * i + 1: 2 * ((i + 1) % 8) + 2 for i in range(8)}


@pytest.mark.parametrize(
    ("circuits", "message"),
    [
        (["g0:0 -> g1:0", "g0:0 -> g2:0"], "g0:0 already transmits"),
        (["g0:0 -> g1:0", "g2:0 -> g1:0"], "g1:0 already receives"),
        (["g0:0 -> g0:1"], "cannot be connected to itself"),
        (["g0:5 -> g1:0"], "GPU g0 has no port 5"),
        (["g9:0 -> g1:0"], "'g9' is not a GPU"),
        (["ocs0:1 -> g1:0"], "'ocs0' is not a GPU"),
    ],
)
def test_conflicts_rejected(circuits: list[str], message: str) -> None:
    topo = load("scaleup-ocs")
    with pytest.raises(CircuitError, match=message):
        cross_connects(topo, [parse_circuit(c) for c in circuits])


def test_parse_errors_and_wrong_fabric() -> None:
    for bad in ("g0:0 g1:0", "g0 -> g1:0", "g0:x -> g1:0"):
        with pytest.raises(CircuitError):
            parse_circuit(bad)
    with pytest.raises(CircuitError, match="not a circuit fabric"):
        cross_connects(load("clos-2p"), [])

"""Control-plane shape of p4/ocs.p4 (optical circuit switch: a port cross-connect).

Reconfiguration is controller-driven, drop then connect: the entries of the input ports whose
circuit changes are first set to ``OcsIngress.dark`` (frames dropped, counted in
``OcsIngress.dark_drops[in_port]``), then, after the reconfiguration delay, to
``OcsIngress.connect(port)`` or deleted (docs/switch.md has the exact protocol).
"""

from __future__ import annotations

from common.p4schema.model import (
    Action,
    ActionRef,
    Counter,
    MatchField,
    Param,
    Program,
    Table,
)

PORTS = 512

ACTIONS = (
    Action("OcsIngress.drop"),
    Action("OcsIngress.connect", (Param("port", 9),)),
    Action("OcsIngress.dark"),
)

TABLES = (
    Table(
        "OcsIngress.cross_connect",
        (MatchField("standard_metadata.ingress_port", 9, "exact"),),
        (ActionRef("OcsIngress.connect"), ActionRef("OcsIngress.dark"), ActionRef("OcsIngress.drop")),
        size=PORTS,
        default_action="OcsIngress.drop",
    ),
)

COUNTERS = (
    Counter("OcsIngress.rx_port", PORTS),
    Counter("OcsIngress.dark_drops", PORTS),
    Counter("OcsEgress.tx_port", PORTS),
)

PROGRAM = Program(
    name="ocs",
    actions=ACTIONS,
    tables=TABLES,
    counters=COUNTERS,
)

"""Control-plane shape of p4/ocs.p4 (optical circuit switch: a port cross-connect).

``OcsIngress.dark_until`` holds, per port, the ingress timestamp (microseconds of the switch's
clock) until which the port is dark; the embedded target sets it for every port a
cross_connect write touches to now + ``OcsIngress.reconfig_delay_us[0]`` (see docs/switch.md).
"""

from __future__ import annotations

from common.p4schema.model import (
    Action,
    ActionRef,
    Counter,
    MatchField,
    Param,
    Program,
    Register,
    Table,
)

PORTS = 512

ACTIONS = (
    Action("NoAction"),
    Action("OcsIngress.drop"),
    Action("OcsIngress.connect", (Param("port", 9),)),
)

TABLES = (
    Table(
        "OcsIngress.cross_connect",
        (MatchField("standard_metadata.ingress_port", 9, "exact"),),
        (ActionRef("OcsIngress.connect"), ActionRef("OcsIngress.drop")),
        size=PORTS,
        default_action="OcsIngress.drop",
    ),
)

COUNTERS = (
    Counter("OcsIngress.rx_port", PORTS),
    Counter("OcsIngress.dark_drops", PORTS),
    Counter("OcsEgress.tx_port", PORTS),
)

REGISTERS = (
    Register("OcsIngress.dark_until", PORTS, 48),
    Register("OcsIngress.reconfig_delay_us", 1, 32),
)

PROGRAM = Program(
    name="ocs",
    actions=ACTIONS,
    tables=TABLES,
    counters=COUNTERS,
    registers=REGISTERS,
)

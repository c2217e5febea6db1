"""Control-plane shape of p4/mrc_switch.p4 (the MRC fabric switch).

Index conventions shared by the P4 source, the embedded target and the controller:
per-(port, class) and per-(port, queue) counters and registers use index ``port * 8 + n``
(v1model ports are 9 bits, so arrays hold 512 * 8 cells); ``drop_reason`` is indexed by
DropReason.
"""

from __future__ import annotations

from enum import IntEnum

from common.classes import BEST_EFFORT_CLASS_ID, BEST_EFFORT_PRIORITY, DscpClass
from common.p4schema.model import (
    Action,
    ActionProfile,
    ActionRef,
    Counter,
    MatchField,
    Param,
    Program,
    Register,
    Table,
)

PORTS = 512  # v1model bit<9> port space
PORT_CELLS = PORTS * 8
DROP_PORT = 511

# Egress thresholds (set_port_params) compare the bytes queued at enqueue; 0 disables.
THRESHOLD_BITS = 32
# The BMv2 build of mrc_switch.p4 has no byte depth: it counts each queued packet as this
# many bytes (the default fabric MTU). The embedded target uses the real byte depth.
BMV2_QDEPTH_CELL_BYTES = 4096


class DropReason(IntEnum):
    """Index of MrcIngress.drop_reason: why the pipeline dropped a packet."""

    PARSE_ERROR = 1  # truncated header / garbage
    BAD_LENGTH = 2  # IPv6 payload length or UDP length inconsistent with the frame
    NOT_IPV6 = 3  # non-IPv6 EtherType
    HOP_LIMIT = 4  # hop limit exhausted
    NO_ROUTE = 5  # route miss or explicit drop action
    EV_MISS = 6  # structured-EV field value with no uplink entry
    PORT_DOWN = 7  # chosen egress port is down (port_down register)
    # 8 is unused: traffic-manager tail drops happen outside the program (admin stats)
    USID_ERROR = 9  # SRv6 container exhausted with no segment left to load


DROP_REASONS = 16

_PORT = Param("port", 9)
_NEXTHOP = Action("MrcIngress.set_nexthop", (_PORT, Param("smac", 48), Param("dmac", 48)))

ACTIONS = (
    Action("NoAction", annotations=('@noWarn("unused")',)),  # as core.p4 declares it
    Action("MrcIngress.drop"),
    _NEXTHOP,
    Action("MrcIngress.route_ecmp", (Param("group", 16),)),
    Action(
        "MrcIngress.route_ev",
        (Param("group", 16), Param("shift", 5), Param("mask", 16), Param("fallback", 16)),
    ),
    Action("MrcIngress.usid_shift"),
    Action("MrcIngress.usid_decap"),
    Action(
        "MrcIngress.set_class",
        (Param("class_id", 3), Param("priority", 3), Param("trimmable", 1)),
    ),
    Action(
        "MrcEgress.set_port_params",
        (
            Param("ecn_threshold_bytes", THRESHOLD_BITS),
            Param("trim_threshold_bytes", THRESHOLD_BITS),
            Param("last_hop", 1),
            Param("trim_dscp", 6),
            Param("trim_priority", 3),
        ),
    ),
)

_DEFAULT_ONLY_NOACTION = ActionRef("NoAction", "DEFAULT_ONLY")

TABLES = (
    Table(
        "MrcIngress.my_usid",
        (MatchField("hdr.ipv6.dst_addr", 128, "lpm"),),
        (
            ActionRef("MrcIngress.usid_shift"),
            ActionRef("MrcIngress.usid_decap"),
            _DEFAULT_ONLY_NOACTION,
        ),
        size=64,
    ),
    Table(
        "MrcIngress.ipv6_route",
        (MatchField("hdr.ipv6.dst_addr", 128, "lpm"),),
        (
            ActionRef("MrcIngress.set_nexthop"),
            ActionRef("MrcIngress.route_ecmp"),
            ActionRef("MrcIngress.route_ev"),
            ActionRef("MrcIngress.drop"),
        ),
        size=1024,
        default_action="MrcIngress.drop",
    ),
    Table(
        "MrcIngress.ecmp",
        (MatchField("meta.next_group", 16, "exact"),),
        (ActionRef("MrcIngress.set_nexthop"), ActionRef("MrcIngress.drop"), _DEFAULT_ONLY_NOACTION),
        size=1024,
        implementation="MrcIngress.ecmp_selector",
        selector_fields=(
            "hdr.ipv6.src_addr",
            "hdr.ipv6.dst_addr",
            "hdr.ipv6.flow_label",
            "hdr.ipv6.next_hdr",
            "meta.l4_sport",
            "meta.l4_dport",
        ),
    ),
    Table(
        "MrcIngress.ev_uplink",
        (MatchField("meta.ev_group", 16, "exact"), MatchField("meta.ev_field", 16, "exact")),
        (ActionRef("MrcIngress.set_nexthop"), ActionRef("MrcIngress.drop")),
        size=4096,
        default_action="MrcIngress.drop",
    ),
    Table(
        "MrcIngress.dscp_class",
        (MatchField("meta.dscp", 6, "exact"),),
        (ActionRef("MrcIngress.set_class"), _DEFAULT_ONLY_NOACTION),
        size=64,
    ),
    Table(
        "MrcEgress.port_config",
        (MatchField("standard_metadata.egress_port", 9, "exact"),),
        (ActionRef("MrcEgress.set_port_params"), _DEFAULT_ONLY_NOACTION),
        size=PORTS,
    ),
)

ACTION_PROFILES = (ActionProfile("MrcIngress.ecmp_selector", ("MrcIngress.ecmp",), size=1024),)

COUNTERS = (
    Counter("MrcIngress.rx_port_class", PORT_CELLS),
    Counter("MrcIngress.drop_reason", DROP_REASONS),
    Counter("MrcEgress.tx_port_class", PORT_CELLS),
    Counter("MrcEgress.tx_port_queue", PORT_CELLS),
    Counter("MrcEgress.trim_port_queue", PORT_CELLS),
    Counter("MrcEgress.ecn_port_queue", PORT_CELLS),
)

REGISTERS = (
    Register("MrcIngress.port_down", PORTS, 1),
    Register("MrcEgress.max_qdepth", PORT_CELLS, 19),
)

PROGRAM = Program(
    name="mrc_switch",
    actions=ACTIONS,
    tables=TABLES,
    action_profiles=ACTION_PROFILES,
    counters=COUNTERS,
    registers=REGISTERS,
)


def dscp_default_write() -> tuple[str, str, dict[str, int]]:
    """(table, action, params) of the ``dscp_class`` default action: a DSCP no MRC class uses
    is best effort (common.classes.BEST_EFFORT_CLASS_ID, lowest queue, never trimmed)."""
    return (
        "MrcIngress.dscp_class",
        "MrcIngress.set_class",
        {"class_id": BEST_EFFORT_CLASS_ID, "priority": BEST_EFFORT_PRIORITY, "trimmable": 0},
    )


def dscp_class_write(
    row: DscpClass,
) -> tuple[str, dict[str, int | tuple[int, int]], str, dict[str, int]]:
    """(table, match, action, params) that installs one DSCP classification row.

    The one definition of the ``dscp_class`` entry: the controller's table programs and the
    test and benchmark labs all write the rows of common.classes.dscp_classes through it.
    """
    return (
        "MrcIngress.dscp_class",
        {"meta.dscp": row.dscp},
        "MrcIngress.set_class",
        {"class_id": row.class_id, "priority": row.priority, "trimmable": int(row.trimmable)},
    )

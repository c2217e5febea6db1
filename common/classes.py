"""MRC traffic classes: one definition of DSCP codepoints and switch priorities.

MRC names the classes; the numeric codepoints are operator configuration (see
docs/wire-format.md). These defaults are what topologies use unless a topology file overrides
them, and what the switch programs (via the controller) and host agents agree on. The
switch's ``dscp_class`` table maps each codepoint to a ``DscpClass`` row (``dscp_classes``);
common.p4schema.mrc_switch.dscp_class_write turns a row into the table write.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class TrafficClass(Enum):
    """The six MRC classes. Control classes are never trimmed and ride the highest queues."""

    TRIMMABLE = "TRIMMABLE"  # first transmissions of data; may be trimmed by switches
    NO_TRIM = "NO_TRIM"  # data that must not be trimmed (mandatory class)
    TRIMMABLE_RETX = "TRIMMABLE_RETX"  # retransmissions: above first transmissions
    TRIMMED = "TRIMMED"  # header of a packet trimmed mid-path (mandatory)
    TRIMMED_LASTHOP = "TRIMMED_LASTHOP"  # header of a packet trimmed at the last hop
    CONTROL = "CONTROL"  # SACK/NACK/ACK/probe and endpoint responses (mandatory)


@dataclass(frozen=True)
class ClassMap:
    """DSCP codepoint and egress priority (0..7, 7 served first) of every class."""

    dscp: dict[TrafficClass, int]
    priority: dict[TrafficClass, int]

    def class_of(self, dscp: int) -> TrafficClass | None:
        for cls, value in self.dscp.items():
            if value == dscp:
                return cls
        return None

    def validate(self) -> None:
        values = list(self.dscp.values())
        if len(set(values)) != len(values):
            raise ValueError("DSCP codepoints of MRC classes must be distinct")
        for cls in TrafficClass:
            if cls not in self.dscp or cls not in self.priority:
                raise ValueError(f"class {cls.value} has no DSCP or priority")
            if not 0 <= self.dscp[cls] <= 63:
                raise ValueError(f"DSCP of {cls.value} must be 0..63, got {self.dscp[cls]}")
            if not 0 <= self.priority[cls] <= 7:
                raise ValueError(f"priority of {cls.value} must be 0..7")


CLASS_IDS: dict[TrafficClass, int] = {cls: i for i, cls in enumerate(TrafficClass)}
"""Class id of each class in the switch (index of its per-(port, class) counters)."""

TRIMMABLE_CLASSES = frozenset({TrafficClass.TRIMMABLE, TrafficClass.TRIMMABLE_RETX})

BEST_EFFORT_CLASS_ID = len(TrafficClass)
"""Class id of traffic that is not MRC (any DSCP no MRC class uses: the hosts' kernel traffic,
ping, iperf3): the switch's ``dscp_class`` default action, so its per-class counters never mix
with an MRC class's."""
BEST_EFFORT_PRIORITY = 0
"""Egress queue of best-effort traffic: below every MRC class, never trimmed."""


@dataclass(frozen=True)
class DscpClass:
    """One row of the switch's DSCP classification: codepoint -> class id, queue, trimmable."""

    dscp: int
    traffic_class: TrafficClass
    class_id: int
    priority: int
    trimmable: bool

    @classmethod
    def of(cls, classes: ClassMap, traffic_class: TrafficClass) -> DscpClass:
        return cls(
            classes.dscp[traffic_class],
            traffic_class,
            CLASS_IDS[traffic_class],
            classes.priority[traffic_class],
            traffic_class in TRIMMABLE_CLASSES,
        )


def dscp_classes(classes: ClassMap) -> tuple[DscpClass, ...]:
    """The classification rows of every class, in TrafficClass order."""
    return tuple(DscpClass.of(classes, c) for c in TrafficClass)


DEFAULT_CLASSES = ClassMap(
    dscp={
        TrafficClass.TRIMMABLE: 10,  # AF11
        TrafficClass.NO_TRIM: 26,  # AF31
        TrafficClass.TRIMMABLE_RETX: 18,  # AF21
        TrafficClass.TRIMMED: 40,  # CS5
        TrafficClass.TRIMMED_LASTHOP: 41,
        TrafficClass.CONTROL: 48,  # CS6
    },
    priority={
        TrafficClass.TRIMMABLE: 1,
        TrafficClass.NO_TRIM: 1,
        TrafficClass.TRIMMABLE_RETX: 2,
        TrafficClass.TRIMMED: 6,
        TrafficClass.TRIMMED_LASTHOP: 6,
        TrafficClass.CONTROL: 7,
    },
)

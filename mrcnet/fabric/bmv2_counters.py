"""The live view's figures of one BMv2 switch, which has no admin service.

The embedded target reports per-port bytes and per-queue drops, trims and ECN marks in its
admin statistics. For simple_switch_grpc the same figures come from:

- bytes sent per port: the kernel's transmit counter of the switch's interface
  (``/sys/class/net/IF/statistics/tx_bytes``: what BMv2 handed to the link);
- trims and ECN marks: the program's ``trim_port_queue`` and ``ecn_port_queue`` counters
  (P4Runtime Read of the switch's own ports' cells, in one request);
- drops: traffic-manager drops are not counted by BMv2, so they are derived from the
  program's counters: packets that passed the ingress checks (``rx_port_class``) minus those
  the program dropped after them (``drop_reason`` HOP_LIMIT .. USID_ERROR) minus those that
  reached egress (``tx_port_class``). Packets still queued at the moment of the read are
  included; once the switch is idle the figure is exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.p4runtime_client import P4RuntimeClient
from common.p4schema.mrc_switch import DropReason
from common.proto.p4.v1 import p4runtime_pb2

QUEUES = 8
# drop reasons counted after rx_port_class (the ingress checks before it count separately)
AFTER_CLASS = (DropReason.HOP_LIMIT, DropReason.NO_ROUTE, DropReason.EV_MISS,
               DropReason.PORT_DOWN, DropReason.USID_ERROR)
PER_PORT = ("MrcIngress.rx_port_class", "MrcEgress.tx_port_class",
            "MrcEgress.trim_port_queue", "MrcEgress.ecn_port_queue")


@dataclass(frozen=True)
class SwitchFigures:
    """What the live view sums over switches."""

    egress_bytes: Mapping[int, int]  # port -> bytes sent on it since the start
    drops: int
    trims: int
    ecn: int


def tx_bytes(ifname: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{ifname}/statistics/tx_bytes").read_text())
    except (OSError, ValueError):
        return 0


class Bmv2Counters:
    """Reads one BMv2 switch's figures (P4Runtime reads need no arbitration)."""

    def __init__(self, address: str, device_id: int, ifnames: Mapping[int, str],
                 timeout: float = 2.0) -> None:
        self.ifnames = dict(ifnames)
        self.client = P4RuntimeClient(address, device_id, timeout=timeout)
        ids = self.client.program.id
        cells = [p * QUEUES + q for p in sorted(self.ifnames) for q in range(QUEUES)]
        self._entities = [
            p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
                counter_id=ids(name), index=p4runtime_pb2.Index(index=cell)))
            for name in PER_PORT for cell in cells
        ] + [
            p4runtime_pb2.Entity(counter_entry=p4runtime_pb2.CounterEntry(
                counter_id=ids("MrcIngress.drop_reason"), index=p4runtime_pb2.Index(index=r)))
            for r in AFTER_CLASS
        ]
        self._names = {ids(name): name for name in (*PER_PORT, "MrcIngress.drop_reason")}

    def read(self) -> SwitchFigures:
        totals = dict.fromkeys(self._names.values(), 0)
        for entity in self.client.read(self._entities):
            c = entity.counter_entry
            totals[self._names[c.counter_id]] += c.data.packet_count
        passed = totals["MrcIngress.rx_port_class"] - totals["MrcIngress.drop_reason"]
        drops = max(0, passed - totals["MrcEgress.tx_port_class"])
        return SwitchFigures({p: tx_bytes(i) for p, i in self.ifnames.items()}, drops,
                             totals["MrcEgress.trim_port_queue"],
                             totals["MrcEgress.ecn_port_queue"])

    def close(self) -> None:
        self.client.close()

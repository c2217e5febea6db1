"""The controller's driver of BMv2 ``simple_switch_grpc``.

- Pipeline: the push carries p4c's BMv2 JSON of the program as ``p4_device_config``.
- Port state: BMv2 turns no port change into a register or a port-status message, so the
  controller keeps it (controller/drivers/bmv2_ports.py: ``port_down`` written over Thrift,
  port events from its own state and from the interfaces' carrier), one keeper for every
  BMv2 switch of the fabric (``open_group``).
- Figures (BMv2 has no admin service):
  - bytes sent per port: the kernel's transmit counter of the switch's interface
    (``/sys/class/net/IF/statistics/tx_bytes``: what BMv2 handed to the link);
  - trims and ECN marks: the program's ``trim_port_queue`` and ``ecn_port_queue`` counters
    (one P4Runtime Read of the switch's own ports' cells over the controller's session);
  - drops: BMv2 counts no traffic-manager drops, so they are derived from the program's
    counters: packets that passed the ingress checks (``rx_port_class``) minus those the
    program dropped after them (``drop_reason`` HOP_LIMIT .. USID_ERROR) minus those that
    reached egress (``tx_port_class``). Packets still queued at the moment of the read are
    included; once the switch is idle the figure is exact.
- No lag meter (``timing`` is None) and no captures at run time (simple_switch_grpc's own
  ``--pcap`` is the way).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from common.bmv2_cli import Bmv2CliError
from common.p4runtime_client import P4RuntimeClient, P4RuntimeError
from common.p4schema.mrc_switch import DropReason
from common.proto.p4.v1 import p4runtime_pb2
from controller.drivers.base import DriverError, SwitchDriver, SwitchFigures
from controller.drivers.bmv2_ports import Bmv2Ports, Bmv2PortState, CliRunner

QUEUES = 8
# drop reasons counted after rx_port_class (the ingress checks before it count separately)
AFTER_CLASS = (DropReason.HOP_LIMIT, DropReason.NO_ROUTE, DropReason.EV_MISS,
               DropReason.PORT_DOWN, DropReason.USID_ERROR)
PER_PORT = ("MrcIngress.rx_port_class", "MrcEgress.tx_port_class",
            "MrcEgress.trim_port_queue", "MrcEgress.ecn_port_queue")


def tx_bytes(ifname: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{ifname}/statistics/tx_bytes").read_text())
    except (OSError, ValueError):
        return 0


class Bmv2Driver(SwitchDriver):
    kind = "bmv2"
    cli: CliRunner | None = None  # how Thrift commands reach the switches (tests record)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keeper: Bmv2PortState | None = None  # shared by the group, once it opens
        self._entities: list[p4runtime_pb2.Entity] = []
        self._names: dict[int, str] = {}

    @classmethod
    def parse_extras(cls, name: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        ifnames = {int(k): str(v) for k, v in dict(entry.get("ports", {})).items()}
        thrift = int(entry.get("thrift_port") or 0)
        if not thrift or not ifnames:
            raise ValueError(f"{name}: a bmv2 switch needs thrift_port and ports")
        return {"thrift_port": thrift, "ifnames": ifnames}

    @property
    def ifnames(self) -> dict[int, str]:
        return dict(self.endpoint.extras["ifnames"])

    def device_config(self, client: P4RuntimeClient) -> bytes:
        return client.bmv2_device_config()

    def open(self, client: P4RuntimeClient) -> None:
        super().open(client)
        if client.program.name != "mrc_switch":
            return  # the figures below are mrc_switch.p4's counters
        ids = client.program.id
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

    @classmethod
    def open_group(cls, drivers: Sequence[SwitchDriver]) -> None:
        mine = [d for d in drivers if isinstance(d, Bmv2Driver) and d.client is not None]
        if not mine:
            return
        keeper_ports = {d.name: Bmv2Ports(int(d.endpoint.extras["thrift_port"]), d.ifnames,
                                          d.client.port_events)  # type: ignore[union-attr]
                        for d in mine}
        state = Bmv2PortState(keeper_ports) if cls.cli is None else Bmv2PortState(
            keeper_ports, cls.cli)
        for d in mine:
            d.keeper = state
        state.start()

    @classmethod
    def close_group(cls, drivers: Sequence[SwitchDriver]) -> None:
        for d in drivers:
            if isinstance(d, Bmv2Driver) and d.keeper is not None:
                d.keeper.close()  # idempotent: the group shares one keeper
                d.keeper = None

    def set_port_admin(self, port: int, up: bool) -> None:
        if self.keeper is None:
            raise DriverError(f"{self.name}: port state not started")
        try:
            self.keeper.set_admin(self.name, port, up)
        except (Bmv2CliError, RuntimeError, KeyError) as exc:
            raise DriverError(f"{self.name}: port {port}: {exc}") from None

    def figures(self, detail: bool = False) -> SwitchFigures:
        if self.client is None:
            raise DriverError(f"{self.name}: not connected")
        totals = dict.fromkeys(self._names.values(), 0)
        try:
            entities = self.client.read(self._entities) if self._entities else []
        except P4RuntimeError as exc:
            raise DriverError(f"{self.name}: counter read failed: {exc}") from None
        for entity in entities:
            c = entity.counter_entry
            totals[self._names[c.counter_id]] += c.data.packet_count
        passed = totals.get("MrcIngress.rx_port_class", 0) - totals.get(
            "MrcIngress.drop_reason", 0)
        drops = max(0, passed - totals.get("MrcEgress.tx_port_class", 0))
        return SwitchFigures({p: tx_bytes(i) for p, i in self.ifnames.items()}, drops,
                             totals.get("MrcEgress.trim_port_queue", 0),
                             totals.get("MrcEgress.ecn_port_queue", 0))

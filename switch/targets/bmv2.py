"""BMv2 ``simple_switch_grpc`` as a switch node: its command line, its link model, its class.

One simple_switch_grpc per switch, started without a program (``--no-p4``; the controller
pushes p4c's JSON as ``p4_device_config`` with the P4Info), with 8 strict-priority queues per
port (``--priority-queues 8``, so ``standard_metadata.priority`` selects the queue, 7 served
first, as on the embedded target), and its own device id, gRPC and Thrift ports. No nanomsg
notifications address is given: simple_switch_grpc captures its notifications itself and
opens no nanomsg socket (given one, it logs that it ignores it).

BMv2's link model is a rate and a depth per (port, priority) queue, both in packets; this
module maps the embedded target's link specs (``switch.traffic.LinkConfig``) onto it:

- rate: ``rate_bps / (8 * CELL_BYTES)`` packets per second on every priority queue of the
  port (at least 1; 0 stays unlimited). Each priority queue is paced on its own, so queues of
  different priorities that are busy at once together exceed the port's rate; a frame of
  any size uses one packet slot.
- depth: ``qpkts`` packets per queue; with ``qbytes`` the smaller of that and
  ``qbytes // CELL_BYTES`` (at least 1); 0 and 0 = BMv2's queue capacity of 64 packets
  cannot be unlimited, so ``UNLIMITED_DEPTH`` packets are used.
- delay: BMv2 has no propagation delay; it is not applied (``ignored`` names it).
- loss: BMv2 has no random loss: a spec with loss > 0 is refused (ValueError).
- ingress shaping: none on BMv2 (the fabric builder shapes host links at the host side:
  ``host_shaper_command``).

CELL_BYTES is the byte size the BMv2 build of mrc_switch.p4 assumes per queued packet
(``BMV2_QDEPTH_CELL_BYTES``), so rate, depth and the ECN/trim thresholds use one unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.bmv2_cli import SWITCH_TOOL, Bmv2CliError, find_bmv2_tool, run_cli
from common.netns import free_tcp_port
from common.p4schema.mrc_switch import BMV2_QDEPTH_CELL_BYTES
from switch.targets.base import ProcessSwitch, SwitchStartError
from switch.traffic import MAX_QUEUES, LinkConfig, parse_link_spec

CELL_BYTES = BMV2_QDEPTH_CELL_BYTES
PRIORITY_QUEUES = MAX_QUEUES
TBF_BURST = 2 * 9000  # bytes: a host shaper's bucket holds the largest frame (MTU + header)
UNLIMITED_DEPTH = 1 << 16  # "unlimited" queue depth in packets (BMv2 needs a number)
LOG_LEVEL = "warn"  # BMv2 logs every packet at 'trace' (its default): far too slow


@dataclass(frozen=True)
class Bmv2Queue:
    """What one link direction becomes on BMv2: per (port, priority) queue settings."""

    rate_pps: int  # 0 = unlimited
    depth_pkts: int
    ignored: tuple[str, ...]  # parameters of the spec BMv2 cannot apply (documented)


def bmv2_queue(config: LinkConfig) -> Bmv2Queue:
    """Map an egress link config onto BMv2's queue rate and depth (see the module doc)."""
    if config.loss > 0:
        raise ValueError(f"BMv2 cannot emulate random loss (loss={config.loss:g}); "
                         "use the embedded switch")
    rate = 0 if config.rate_bps == 0 else max(1, round(config.rate_bps / (8 * CELL_BYTES)))
    depths = [d for d in (config.qpkts, config.qbytes // CELL_BYTES if config.qbytes else 0)
              if d]
    if config.qbytes and config.qbytes < CELL_BYTES:
        depths.append(1)
    depth = max(1, min(depths)) if depths else UNLIMITED_DEPTH
    ignored = []
    if config.delay_s:
        ignored.append(f"delay={config.delay_s:g}")
    if config.overhead:
        ignored.append(f"overhead={config.overhead}")
    return Bmv2Queue(rate, depth, tuple(ignored))


def queue_commands(port: int, queue: Bmv2Queue) -> list[str]:
    """simple_switch_CLI commands that apply ``queue`` to every priority queue of ``port``."""
    return [f"set_queue_rate {queue.rate_pps} {port}", f"set_queue_depth {queue.depth_pkts} {port}"]


def command(
    binary: Path | str,
    device_id: int,
    ports: Mapping[int, str],
    grpc_address: str,
    thrift_port: int,
    log_file: Path,
) -> list[str]:
    """simple_switch_grpc's argument vector (``log_file`` without suffix: BMv2 adds .txt)."""
    cmd = [str(binary), "--device-id", str(device_id)]
    for number, ifname in sorted(ports.items()):
        cmd += ["-i", f"{number}@{ifname}"]
    cmd += [
        "--thrift-port", str(thrift_port),
        "--log-file", str(log_file),
        "--log-flush",
        "--log-level", LOG_LEVEL,
        "--no-p4",
        "--",
        "--grpc-server-addr", grpc_address,
        "--priority-queues", str(PRIORITY_QUEUES),
    ]
    return cmd


def log_path(log_file: Path) -> Path:
    """Where BMv2 writes the log named by ``--log-file`` (it appends ``.txt``)."""
    return log_file.with_name(log_file.name + ".txt")



def host_shaper_command(ifname: str, spec: str) -> str | None:
    """The shell command that shapes a host's NIC egress like the switch ingress spec
    ``spec`` (rate in bit/s; queue = qbytes, else qpkts full cells), or None when the link
    has no rate. Run inside the host's namespace."""
    link = parse_link_spec(spec)
    if link.rate_bps <= 0:
        return None
    limit = link.qbytes or link.qpkts * CELL_BYTES or 1 << 24
    return (f"tc qdisc replace dev {ifname} root tbf rate {int(link.rate_bps)}bit "
            f"burst {TBF_BURST} limit {max(limit, TBF_BURST)}")


class Bmv2Switch(ProcessSwitch):
    """BMv2 ``simple_switch_grpc`` without a program (the controller pushes p4c's JSON).

    Egress link specs become BMv2 queue rates and depths per port, set over Thrift once the
    switch is up; what BMv2 cannot apply (delay, overhead) is listed by ``notes()``; random
    loss is refused when the node is made. Ingress specs are shaped at the host
    (``shapes_host_ingress`` is False; ``host_shaper_command``). BMv2 runs on the wall clock
    and keeps no lag meter.
    """

    kind = "bmv2"
    label = f"BMv2 {SWITCH_TOOL}"
    supports_dilation = False
    shapes_host_ingress = False
    has_lag_meter = False
    takes_captures = False  # simple_switch_grpc writes pcaps with its own --pcap only

    def __init__(self, *args: Any, thrift_port: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.thrift_port = thrift_port
        self.ignored: dict[int, tuple[str, ...]] = {}  # port -> link parameters BMv2 lacks

    @classmethod
    def available(cls) -> bool:
        return find_bmv2_tool(SWITCH_TOOL) is not None

    @classmethod
    def unavailable_reason(cls) -> str:
        return (f"{SWITCH_TOOL} is not on PATH (nor in $P4_BIN_DIR: BMv2 is not installed on "
                "this machine); use the embedded switch")

    @classmethod
    def host_shaper(cls, ifname: str, spec: str) -> str | None:
        return host_shaper_command(ifname, spec)

    def check_links(self) -> None:
        for spec in (*self.links.values(), self.default_link):
            bmv2_queue(parse_link_spec(spec))  # ValueError for random loss

    def queues(self) -> dict[int, Bmv2Queue]:
        """Port -> BMv2 queue settings of its egress link."""
        return {n: bmv2_queue(parse_link_spec(self.egress_spec(n))) for n in self.ports}

    def notes(self) -> list[str]:
        ignored = sorted({p for q in self.queues().values() for p in q.ignored})
        if not ignored:
            return []
        return [f"BMv2 does not emulate {', '.join(ignored)} (link delay / overhead); "
                "see docs/switch.md"]

    def _log_file(self) -> Path:
        assert self.log_dir is not None
        return log_path(self.log_dir / self.name)

    def command(self) -> list[str]:
        binary = find_bmv2_tool(SWITCH_TOOL)
        if binary is None:
            raise SwitchStartError(self.unavailable_reason())
        while self.thrift_port is None or self.thrift_port == self.grpc_port:
            self.thrift_port = free_tcp_port()
        assert self.log_dir is not None
        return command(binary, self.device_id, self.ports, self.grpc_address,
                       self.thrift_port, self.log_dir / self.name)

    def ready_ports(self) -> list[int]:
        return [int(self.grpc_port or 0), int(self.thrift_port or 0)]

    def configure(self) -> None:
        commands: list[str] = []
        for port, queue in sorted(self.queues().items()):
            commands += queue_commands(port, queue)
            if queue.ignored:
                self.ignored[port] = queue.ignored
        if not commands:
            return
        try:
            run_cli(int(self.thrift_port or 0), commands)
        except Bmv2CliError as exc:
            raise SwitchStartError(f"{self.label} {self.name}: queue set-up failed: {exc}; "
                                   f"see {self.log_path}") from None

    def endpoint(self) -> dict[str, object]:
        """The controller keeps BMv2's port state (controller/drivers/bmv2.py): it needs the
        Thrift port and the interface of every P4 port."""
        return {**super().endpoint(), "thrift_port": self.thrift_port,
                "ports": {str(n): ifname for n, ifname in sorted(self.ports.items())}}

"""BMv2 ``simple_switch_grpc`` as a switch target: its command line and its link model.

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
- ingress shaping: none on BMv2 (the fabric builder shapes host links at the host side).

CELL_BYTES is the byte size the BMv2 build of mrc_switch.p4 assumes per queued packet
(``BMV2_QDEPTH_CELL_BYTES``), so rate, depth and the ECN/trim thresholds use one unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.p4schema.mrc_switch import BMV2_QDEPTH_CELL_BYTES
from switch.traffic import MAX_QUEUES, LinkConfig

CELL_BYTES = BMV2_QDEPTH_CELL_BYTES
PRIORITY_QUEUES = MAX_QUEUES
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


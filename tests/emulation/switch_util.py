"""Helpers of the switch emulation tests: packet builders (scapy), programming, the lab."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from common.bmv2_cli import CLI_TOOL, SWITCH_TOOL, find_bmv2_tool
from common.classes import DEFAULT_CLASSES, TrafficClass, dscp_classes
from common.netns import NetKit
from common.p4runtime_client import P4RuntimeClient
from common.p4schema.mrc_switch import BMV2_QDEPTH_CELL_BYTES, dscp_class_write
from controller.drivers import SwitchDriver, driver_class, parse_endpoint
from testbed.switch_lab import STOP_MARK, SWITCH_KINDS, Lab, SwitchProcess

HOST_MAC = "02:00:00:00:00:01"
SWITCH_MAC = "02:00:00:00:ff:01"
WRITE_ONLY = 0xCA
SEND_LIKE = 0x04  # an opcode without extension headers: BTH only
TRIM_DSCP = DEFAULT_CLASSES.dscp[TrafficClass.TRIMMED]
TRIM_PRIO = DEFAULT_CLASSES.priority[TrafficClass.TRIMMED]
# The pipeline's class ids: the index of each class in TrafficClass order.


def ip6int(text: str) -> int:
    return int(ipaddress.IPv6Address(text))


def mac_int(text: str) -> int:
    return int(text.replace(":", ""), 16)


def bth(opcode: int, dest_qp: int = 0x123, psn: int = 1) -> bytes:
    """12-byte BTH: opcode, flags, pkey, reserved, dest QP, ack_req and PSN."""
    return struct.pack("!BBHI I", opcode, 0, 0xFFFF, dest_qp & 0xFFFFFF, (1 << 31) | psn)


def mrc_frame(
    dst: str,
    src: str = "fd00::1",
    sport: int = 49152,
    dscp: int = 0,
    ecn: int = 0,
    flow_label: int = 0,
    hlim: int = 64,
    opcode: int = WRITE_ONLY,
    psn: int = 1,
    size: int = 512,
    payload: bytes = b"",
) -> bytes:
    """Ethernet/IPv6/UDP 4791/MRC frame of ``size`` bytes (payload padded with zeros).

    Write opcodes carry METH (4 B) and RETH (16 B) after the BTH, as the P4 parser expects."""
    hdr = bth(opcode, psn=psn)
    if 0xC6 <= opcode <= 0xCB:
        hdr += struct.pack("!I", 0) + struct.pack("!QII", 0x1000, 0x42, 4096)
    base = (
        Ether(src=HOST_MAC, dst=SWITCH_MAC)
        / IPv6(src=src, dst=dst, tc=(dscp << 2) | ecn, fl=flow_label, hlim=hlim)
        / UDP(sport=sport, dport=4791)
    )
    body = hdr + payload
    pad = size - len(base) - len(body)
    return bytes(base / (body + bytes(max(0, pad))))


def mark_frame(dst: str, **kw: int) -> bytes:
    """A forwardable frame that tells the sniffer to stop (sent last on a path)."""
    return mrc_frame(dst, payload=STOP_MARK, size=200, **kw)  # type: ignore[arg-type]


def parse(frame: bytes) -> Ether:
    return Ether(frame)


def dscp_of(frame: bytes) -> int:
    return int(parse(frame)[IPv6].tc) >> 2


def ecn_of(frame: bytes) -> int:
    return int(parse(frame)[IPv6].tc) & 3


def psn_of(frame: bytes) -> int:
    """PSN of the (first) BTH after UDP."""
    udp = parse(frame)[UDP]
    return int.from_bytes(bytes(udp.payload)[9:12], "big")


def driver_for(sw: SwitchProcess) -> SwitchDriver:
    """The controller's driver of the switch's kind (controller/drivers/), not yet open."""
    assert sw.target is not None
    return driver_class(sw.kind)(sw.name, parse_endpoint(sw.name, sw.target.endpoint()))


def connect(sw: SwitchProcess) -> P4RuntimeClient:
    """A primary P4Runtime session with the mrc_switch pipeline pushed (with the device
    config the switch's kind needs, as the controller pushes it)."""
    client = P4RuntimeClient(sw.address, sw.device_id)
    assert client.connect(), f"not primary on {sw.name} (log {sw.log})"
    client.push_pipeline(device_config=driver_for(sw).device_config(client))
    return client


def nexthop(port: int, dmac: str = HOST_MAC) -> dict[str, int]:
    return {"port": port, "smac": mac_int(SWITCH_MAC), "dmac": mac_int(dmac)}


def route(client: P4RuntimeClient, prefix: str, plen: int, port: int) -> None:
    client.insert(
        "MrcIngress.ipv6_route",
        {"hdr.ipv6.dst_addr": (ip6int(prefix), plen)},
        "MrcIngress.set_nexthop",
        nexthop(port),
    )


def install_classes(client: P4RuntimeClient) -> None:
    """dscp_class entries of the default MRC class map."""
    for row in dscp_classes(DEFAULT_CLASSES):
        client.insert(*dscp_class_write(row))


def port_params(
    client: P4RuntimeClient,
    port: int,
    ecn_bytes: int = 0,
    trim_bytes: int = 0,
    last_hop: bool = False,
    modify: bool = False,
) -> None:
    """Program MrcEgress.port_config of ``port``: thresholds in bytes queued, 0 = disabled."""
    op = client.modify if modify else client.insert
    op(
        "MrcEgress.port_config",
        {"standard_metadata.egress_port": port},
        "MrcEgress.set_port_params",
        {
            "ecn_threshold_bytes": ecn_bytes,
            "trim_threshold_bytes": trim_bytes,
            "last_hop": int(last_hop),
            "trim_dscp": TRIM_DSCP,
            "trim_priority": TRIM_PRIO,
        },
    )


BMV2_MISSING = "BMv2 is not installed: simple_switch_grpc is not on PATH nor in $P4_BIN_DIR"


def bmv2_available() -> bool:
    return find_bmv2_tool(SWITCH_TOOL) is not None and find_bmv2_tool(CLI_TOOL) is not None


@pytest.fixture(params=SWITCH_KINDS)
def switch_kind(request: pytest.FixtureRequest) -> str:
    """Each test that takes it runs on the embedded target and on BMv2 (skipped with a reason
    where BMv2 is not installed), as Mininet's test_nets.py repeats cases per switch class."""
    kind = str(request.param)
    if kind == "bmv2" and not bmv2_available():
        pytest.skip(BMV2_MISSING)
    return kind


# Seconds between frames sent to a BMv2 switch in a test that sends more than its 32-frame
# receive ring holds (docs/switch.md, deviations): 500 frames/s leaves BMv2 64 ms of slack.
BMV2_PACING = 0.002


def queued_bytes_unit(kind: str, frame_bytes: int) -> int:
    """Bytes one queued frame adds to the depth the ECN and trim thresholds are compared with:
    its real size on the embedded target, a full cell on BMv2 (enq_qdepth x 4096)."""
    return BMV2_QDEPTH_CELL_BYTES if kind == "bmv2" else frame_bytes


@pytest.fixture
def lab(run_prefix: str, tmp_path: Path) -> Iterator[Lab]:
    kit = NetKit(run_prefix)
    try:
        yield Lab(kit, tmp_path)
    finally:
        kit.close()

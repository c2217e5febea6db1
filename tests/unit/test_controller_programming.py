"""Switch tables -> P4Runtime writes: checked against common/p4schema, then applied over real
P4Runtime to embedded-switch pipelines, and packets walked hop by hop through them must take
exactly the path topologies.trace predicts (ECMP, Structured EV, SRv6)."""

from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import re
import struct
from collections.abc import Callable, Iterator

import pytest
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import ICMPv6EchoRequest, IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from common.classes import BEST_EFFORT_CLASS_ID, BEST_EFFORT_PRIORITY
from common.evbits import usid_container
from common.p4runtime_client import P4RuntimeClient
from controller.programming import ProgramError, TableWrite, apply, check, program_for
from switch.p4runtime import P4RuntimeServer, start_server
from switch.pipeline import EgressPacket, Pipeline
from topologies.addressing import host_gid, mac
from topologies.evlayout import srv6_template
from topologies.loader import load
from topologies.model import NodeKind, PathMode, Topology
from topologies.paths import attached_switch
from topologies.routes import switch_tables
from topologies.trace import trace

PACKET = ["clos-1p", "clos-2p", "fattree-3t"]


@pytest.mark.parametrize("name", PACKET)
@pytest.mark.parametrize("mode", list(PathMode))
def test_programs_fit_the_schema(name: str, mode: PathMode) -> None:
    for sw, tables in switch_tables(load(name), mode).items():
        prog = program_for(tables)
        by_table: dict[str, int] = {}
        for e in prog.entries:
            if not e.default:
                by_table[e.table] = by_table.get(e.table, 0) + 1
        assert by_table["MrcIngress.ipv6_route"] == len(tables.routes)
        assert by_table.get("MrcIngress.ev_uplink", 0) == sum(
            len(v) for v in tables.ev_groups.values()
        )
        assert by_table.get("MrcIngress.my_usid", 0) == len(tables.usid_entries)
        assert by_table["MrcEgress.port_config"] == len(tables.port_config)
        assert by_table["MrcIngress.dscp_class"] == 6
        (default,) = [e for e in prog.entries if e.default]
        assert (default.table, default.action, default.params) == (
            "MrcIngress.dscp_class", "MrcIngress.set_class",
            {"class_id": BEST_EFFORT_CLASS_ID, "priority": BEST_EFFORT_PRIORITY, "trimmable": 0})
        assert [g.group_id for g in prog.groups] == sorted(tables.ecmp_groups), sw


def test_bad_writes_are_caught() -> None:
    prog = program_for(switch_tables(load("clos-2p"), PathMode.STEV)["p0-leaf0"])
    route = next(
        e
        for e in prog.entries
        if e.table == "MrcIngress.ipv6_route" and e.action == "MrcIngress.set_nexthop"
    )
    cases = [
        (dataclasses.replace(route, params={**route.params, "port": 600}), "does not fit 9 bits"),
        (dataclasses.replace(route, table="MrcIngress.nope"), "no such table"),
        (dataclasses.replace(route, match={"hdr.ipv6.dst_addr": 5}), "needs (value, prefix_len)"),
        (dataclasses.replace(route, action="MrcIngress.usid_shift", params={}), "not allowed"),
        (
            TableWrite("MrcIngress.dscp_class", {"meta.dscp": 64}, "MrcIngress.set_class", {}),
            "does not fit 6 bits",
        ),
    ]
    for bad, message in cases:
        prog.entries.append(bad)
        with pytest.raises(ProgramError, match=re.escape(message)):
            check(prog)
        prog.entries.pop()


def test_port_config_thresholds_are_bytes_end_to_end() -> None:
    """routes' byte thresholds are written as ecn/trim_threshold_bytes, and a pipeline
    programmed over P4Runtime with them acts on the bytes queued, never on the packet count."""
    topo = load("clos-1p")
    tables = switch_tables(topo, PathMode.ECMP)["leaf0"]
    cfg = tables.port_config
    prog = program_for(tables)
    writes = {
        e.match["standard_metadata.egress_port"]: e
        for e in prog.entries
        if e.table == "MrcEgress.port_config"
    }
    for port, c in cfg.items():
        assert writes[port].params["ecn_threshold_bytes"] == c.ecn_threshold_bytes
        assert writes[port].params["trim_threshold_bytes"] == c.trim_threshold_bytes
        assert writes[port].params["last_hop"] == int(c.last_hop)
    # a caller still using the packet-count names fails loudly
    stale = dataclasses.replace(
        writes[1], params={"ecn_threshold": 3, "trim_threshold": 4, "last_hop": 1,
                           "trim_dscp": 0, "trim_priority": 6},
    )  # fmt: skip
    with pytest.raises(ProgramError, match="takes"):
        check(dataclasses.replace(prog, entries=[stale]))

    pipe = Pipeline()
    server = start_server(pipe, "127.0.0.1:0", 1)
    try:
        with P4RuntimeClient(f"127.0.0.1:{server.port}", 1, election_id=1) as client:
            client.push_pipeline()
            apply(client, prog)

        def send(dst: str, nbytes: Callable[[int], int], packets: int = 0) -> EgressPacket:
            raw = bytearray(build(topo, PathMode.ECMP, 0, "h0", dst, 0x42))
            raw[15] |= 0x10  # ECT(1)
            out = pipe.process(bytes(raw), 1, 0.0, lambda p, q: (packets, nbytes(p)))
            assert len(out) == 1
            return out[0]

        up = send("h2", lambda p: 0)
        assert not cfg[up.port].last_hop and not up.ecn_marked and not up.trimmed
        def ecn(port: int) -> int:
            return cfg[port].ecn_threshold_bytes

        def trim(port: int) -> int:
            return cfg[port].trim_threshold_bytes

        assert not send("h2", lambda p: ecn(p) - 1, packets=1000).ecn_marked
        marked = send("h2", ecn, packets=1)
        assert marked.ecn_marked and not marked.trimmed
        assert Ether(marked.data)[IPv6].tc & 3 == 3
        assert not send("h2", lambda p: trim(p) - 1, packets=1000).trimmed
        assert send("h2", trim, packets=1).trimmed
        # last hop (h1 on leaf0 port 2): ECN disabled, trimming from the last-hop threshold
        assert cfg[2].last_hop and cfg[2].ecn_threshold_bytes == 0
        below = send("h1", lambda p: trim(p) - 1)
        assert below.port == 2 and not below.ecn_marked and not below.trimmed
        assert send("h1", trim).trimmed
        # not MRC (the hosts' kernel traffic: ICMPv6, TCP; DSCP 0): best effort, never trimmed
        for l4 in (ICMPv6EchoRequest(), TCP(dport=5201)):
            raw = bytes(Ether(dst=mac(topo, "leaf0", 1)) / IPv6(
                src=str(host_gid(topo, "h0", 0)), dst=str(host_gid(topo, "h2", 0))) / l4)
            (be,) = pipe.process(raw, 1, 0.0, lambda p, q: (1000, trim(p) * 2))
            assert be.priority == BEST_EFFORT_PRIORITY and not be.trimmed
        assert pipe.state is not None
        rx = pipe.state.counter("MrcIngress.rx_port_class")
        assert rx.packets[1 * 8 + BEST_EFFORT_CLASS_ID] == 2
    finally:
        server.stop()


class PipelineFabric:
    """One embedded pipeline + P4Runtime server per switch, programmed with program_for."""

    def __init__(self, topo: Topology, mode: PathMode) -> None:
        self.topo = topo
        self.pipes: dict[str, Pipeline] = {}
        self.servers: list[P4RuntimeServer] = []
        for sw, tables in switch_tables(topo, mode).items():
            pipe = Pipeline()
            server = start_server(pipe, "127.0.0.1:0", 1)
            self.servers.append(server)
            with P4RuntimeClient(f"127.0.0.1:{server.port}", 1, election_id=1) as client:
                client.push_pipeline()
                apply(client, program_for(tables))
            self.pipes[sw] = pipe

    def close(self) -> None:
        for server in self.servers:
            server.stop()

    def walk(self, plane: int, src: str, frame: bytes, dst: str) -> list[str]:
        sw, port = attached_switch(self.topo, src, plane)
        path = [src]
        for _ in range(16):
            path.append(sw)
            out = self.pipes[sw].process(frame, port, 0.0, lambda p, q: (0, 0))
            assert len(out) == 1, f"{sw} dropped the packet (path {path})"
            peer = self.topo.peer(sw, out[0].port)
            frame = out[0].data
            # the destination MAC is the next hop's port MAC
            assert Ether(frame).dst == mac(self.topo, peer.node, peer.port)
            if self.topo.node(peer.node).kind == NodeKind.HOST:
                path.append(peer.node)
                assert peer.node == dst
                assert IPv6(bytes(Ether(frame).payload)).dst == str(host_gid(self.topo, dst, plane))
                return path
            sw, port = peer.node, peer.port
        raise AssertionError(f"loop {path}")


def mrc_payload() -> bytes:
    bth = struct.pack(
        "!BBHB3sB3s", 0xCA, 0, 0xFFFF, 0, (0x10).to_bytes(3, "big"), 0, (1).to_bytes(3, "big")
    )
    return (
        bth
        + struct.pack("!HH", 1, 2)
        + struct.pack("!QII", 0x1000, 0x77, 256)
        + bytes(256)
        + b"\x11\x22\x33\x44"
    )


def build(topo: Topology, mode: PathMode, plane: int, src: str, dst: str, ev: int) -> bytes:
    sgid, dgid = str(host_gid(topo, src, plane)), str(host_gid(topo, dst, plane))
    sport, flow = (ev & 0xFFFF, (ev >> 16) & 0xFFFF) if mode == PathMode.STEV else (ev & 0xFFFF, 0)
    inner = (
        IPv6(src=sgid, dst=dgid, tc=10 << 2, fl=flow)
        / UDP(sport=sport, dport=4791, chksum=0)
        / Raw(mrc_payload())
    )
    sw, port = attached_switch(topo, src, plane)
    eth = Ether(src=mac(topo, src, plane), dst=mac(topo, sw, port))
    if mode == PathMode.SRV6:
        tmpl = srv6_template(topo, plane, src, dst)
        if tmpl.slots:
            outer = IPv6(
                src=sgid, dst=str(ipaddress.IPv6Address(usid_container(tmpl, ev))), tc=10 << 2, nh=41
            )
            return bytes(eth / outer / inner)
    return bytes(eth / inner)


@pytest.fixture(params=[PathMode.STEV, PathMode.SRV6, PathMode.ECMP], ids=lambda m: m.value)
def fattree(request: pytest.FixtureRequest) -> Iterator[tuple[PipelineFabric, PathMode]]:
    fab = PipelineFabric(load("fattree-3t"), request.param)
    try:
        yield fab, request.param
    finally:
        fab.close()


def test_packets_follow_the_predicted_paths(fattree: tuple[PipelineFabric, PathMode]) -> None:
    fab, mode = fattree
    topo = fab.topo
    for src, dst in itertools.permutations(["h0", "h1", "h2", "h3"], 2):
        for choice in range(8):
            ev = choice << 29 if mode == PathMode.STEV else choice << 13 | 0x42
            got = fab.walk(0, src, build(topo, mode, 0, src, dst, ev), dst)
            want = list(trace(topo, mode, 0, src, dst, ev).nodes)
            if mode == PathMode.ECMP:
                assert len(got) == len(want)  # the switch's own hash picks among equal paths
            else:
                assert got == want, (src, dst, choice)

"""SetForwardingPipelineConfig with p4_device_config = BMv2 JSON: the embedded target runs
exactly the pushed program. A hand-made program with a ternary table (no p4c needed), the
refusals (unsupported feature, P4Info not describing the JSON), the BMv2 build of
mrc_switch behaving differently from the embedded build, and, where p4c exists, an edited
copy of p4/mrc_switch.p4 (another ECN rule, an extra table) changing the behaviour."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from common.classes import DEFAULT_CLASSES, TrafficClass
from common.p4runtime_client import P4RuntimeClient, P4RuntimeError
from common.p4schema import compiled
from common.p4schema.bytestrings import encode
from common.p4schema.model import Action, ActionRef, MatchField, Param, Program, Table
from common.proto.p4.config.v1 import p4info_pb2
from common.proto.p4.v1 import p4runtime_pb2
from switch.p4runtime import start_server
from switch.pipeline import Pipeline
from switch.stf.toolchain import P4C, compile_p4, find_tool
from tests.unit.p4json_programs import Builder, assign, extract, field, param, to_port
from tests.unit.pipeline_helpers import frame, ip6

ROOT = Path(__file__).resolve().parents[2]
DEVICE = 7
SetReq = p4runtime_pb2.SetForwardingPipelineConfigRequest


def ternary_program() -> tuple[bytes, Program]:
    b = Builder()
    b.header_type("h_t", [("k", 16), ("out", 16)])
    b.header("h", "h_t")
    b.state("start", [extract("h")])
    b.order = ["h"]
    set_id = b.action("ingress.set", [assign(field("h", "out"), param(0))], [("v", 16)])
    noop = b.action("NoAction", [])
    b.table("ingress", "ingress.t", [("ternary", ["h", "k"])], [set_id, noop], noop)
    b.chain("ingress", ["ingress.t", b.call("ingress", "fwd", [to_port(1)])])
    program = Program(
        "ternary_test",
        actions=(Action("NoAction"), Action("ingress.set", (Param("v", 16),))),
        tables=(Table("ingress.t", (MatchField("h.k", 16, "ternary"),),
                      (ActionRef("ingress.set"), ActionRef("NoAction")), 1024, "NoAction"),),
    )
    return json.dumps(b.json()).encode(), program


@pytest.fixture
def switch() -> Iterator[tuple[Pipeline, str]]:
    pipe = Pipeline()
    server = start_server(pipe, "127.0.0.1:0", DEVICE)
    try:
        yield pipe, f"127.0.0.1:{server.port}"
    finally:
        server.stop()


def push(client: P4RuntimeClient, info: p4info_pb2.P4Info, device: bytes) -> None:
    req = SetReq(device_id=DEVICE, action=SetReq.VERIFY_AND_COMMIT)
    req.election_id.low = client.election_id
    req.config.p4info.CopyFrom(info)
    req.config.p4_device_config = device
    try:
        client.stub.SetForwardingPipelineConfig(req, timeout=10)
    except grpc.RpcError as exc:
        raise P4RuntimeError(exc.code(), str(exc.details())) from None


def ternary_entry(program: Program, value: int, mask: int, priority: int,
                  out: int) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=program.id("ingress.t"), priority=priority)
    fm = te.match.add(field_id=1)
    fm.ternary.value, fm.ternary.mask = encode(value), encode(mask)
    te.action.action.action_id = program.id("ingress.set")
    te.action.action.params.add(param_id=1, value=encode(out))
    return te


def test_a_pushed_program_runs_with_p4runtime_priorities(switch: tuple[Pipeline, str]) -> None:
    pipe, addr = switch
    device, program = ternary_program()
    with P4RuntimeClient(addr, DEVICE, election_id=1) as client:
        client.program = program
        push(client, program.render_p4info(), device)
        entries = [ternary_entry(program, 0x1200, 0xFF00, 10, 1),
                   ternary_entry(program, 0x1234, 0xFFFF, 20, 2)]
        client.write([client.update(p4runtime_pb2.Update.INSERT, table_entry=te)
                      for te in entries])

        def out(k: int) -> int:
            res = pipe.process(k.to_bytes(2, "big") + b"\0\0", 0, 0.0, lambda p, q: (0, 0))
            return int.from_bytes(res[0].data[2:4], "big")

        assert out(0x1234) == 2  # both match: priority 20 wins (P4Runtime: higher wins)
        assert out(0x1299) == 1 and out(0x1334) == 0
        read = p4runtime_pb2.ReadRequest(device_id=DEVICE)
        read.entities.add().table_entry.table_id = 0
        got = [e.table_entry for r in client.stub.Read(read, timeout=10) for e in r.entities]
        assert sorted((e.priority, e.match[0].ternary.value) for e in got) == [
            (10, b"\x12\x00"), (20, b"\x12\x34")]
        cfg = client.get_pipeline()
        assert cfg.p4_device_config == device


def test_refusals_name_the_feature_or_the_difference(switch: tuple[Pipeline, str]) -> None:
    _, addr = switch
    device, program = ternary_program()
    with P4RuntimeClient(addr, DEVICE, election_id=1) as client:
        bad = json.loads(device)
        bad["extern_instances"] = [{"name": "x", "id": 0, "type": "my_extern"}]
        with pytest.raises(P4RuntimeError) as exc:
            push(client, program.render_p4info(), json.dumps(bad).encode())
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "unsupported: extern instances" in str(exc.value)
        info = program.render_p4info()
        info.tables[0].match_fields[0].bitwidth = 8
        with pytest.raises(P4RuntimeError) as exc:
            push(client, info, device)
        assert "does not match the device config" in str(exc.value) and "h.k" in str(exc.value)
        with pytest.raises(P4RuntimeError) as exc:
            push(client, program.render_p4info(), b"{not json")
        assert exc.value.code == grpc.StatusCode.INVALID_ARGUMENT


def ecn_marked(pipe: Pipeline, depth: tuple[int, int]) -> bool:
    res = pipe.process(frame(dscp=DEFAULT_CLASSES.dscp[TrafficClass.TRIMMABLE], ecn=1), 1, 0.0,
                       lambda p, q: depth)
    return res[0].ecn_marked and Ether(res[0].data)[IPv6].tc & 3 == 3


def program_mrc(client: P4RuntimeClient, ecn_bytes: int = 4000) -> None:
    cls = TrafficClass.TRIMMABLE
    client.insert("MrcIngress.dscp_class", {"meta.dscp": DEFAULT_CLASSES.dscp[cls]},
                  "MrcIngress.set_class",
                  {"class_id": 1, "priority": DEFAULT_CLASSES.priority[cls], "trimmable": 0})
    client.insert("MrcIngress.ipv6_route", {"hdr.ipv6.dst_addr": (ip6("2001:db8:2::"), 48)},
                  "MrcIngress.set_nexthop", {"port": 2, "smac": 0x0200000000AA, "dmac": 0x02})
    client.insert("MrcEgress.port_config", {"standard_metadata.egress_port": 2},
                  "MrcEgress.set_port_params",
                  {"ecn_threshold_bytes": ecn_bytes, "trim_threshold_bytes": 0, "last_hop": 0,
                   "trim_dscp": 0, "trim_priority": 0})


def test_the_bmv2_build_of_mrc_switch_thresholds_in_packet_cells(
    switch: tuple[Pipeline, str]
) -> None:
    """The same P4Info with p4c's BMv2 JSON (enq_qdepth x 4096 bytes) instead of the built-in
    embedded build (the real bytes queued): 3 queued 500-byte packets reach a 4000-byte ECN
    threshold only in the BMv2 build."""
    pipe, addr = switch
    info = compiled.load_p4info("mrc_switch")
    with P4RuntimeClient(addr, DEVICE, election_id=1) as client:
        client.push_pipeline()  # empty device config: the embedded build
        program_mrc(client)
        assert not ecn_marked(pipe, (3, 1500)) and ecn_marked(pipe, (1, 4000))
        push(client, info, compiled.json_path("mrc_switch").read_bytes())
        program_mrc(client)
        assert ecn_marked(pipe, (3, 1500)) and not ecn_marked(pipe, (0, 9000))


EXTRA_TABLE = """
    action set_dscp(bit<6> dscp) { hdr.ipv6.dscp = dscp; }
    table dscp_rewrite {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_dscp; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }
"""


def edited_copy(tmp: Path) -> tuple[bytes, p4info_pb2.P4Info]:
    """p4/mrc_switch.p4 with ECN at half the threshold and an extra egress table, compiled
    for the embedded target."""
    text = (ROOT / "p4" / "mrc_switch.p4").read_text()
    rule = "meta.enq_qdepth_bytes >= meta.ecn_threshold_bytes"
    assert text.count(rule) == 1
    text = text.replace(rule, "meta.enq_qdepth_bytes + meta.enq_qdepth_bytes >= "
                              "meta.ecn_threshold_bytes")
    text, n = re.subn(r"(    table port_config \{)", EXTRA_TABLE + r"\1", text, count=1)
    assert n == 1
    text, n = re.subn(r"(        tx_port_class\.count\()", "        dscp_rewrite.apply();\n\\1",
                      text, count=1)
    assert n == 1
    src = tmp / "mrc_edited.p4"
    src.write_text(text)
    out = compile_p4(src, tmp / "mrc_edited.json", defines=("MRC_EMBEDDED_TARGET",),
                     p4info=tmp / "mrc_edited.p4info.txtpb")
    info = text_format.Parse((tmp / "mrc_edited.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    return out.read_bytes(), info


@pytest.mark.skipif(find_tool(P4C) is None, reason=f"needs p4c ({P4C})")
def test_an_edited_copy_of_mrc_switch_changes_what_the_target_does(
    switch: tuple[Pipeline, str], tmp_path: Path
) -> None:
    pipe, addr = switch
    device, info = edited_copy(tmp_path)
    with P4RuntimeClient(addr, DEVICE, election_id=1) as client:
        client.push_pipeline()
        program_mrc(client)
        assert not ecn_marked(pipe, (1, 2500))  # the original: 2500 < 4000 bytes
        from switch.pipeline.binding import program_from_p4info

        edited = program_from_p4info(info, "mrc_edited")
        client.program = edited
        push(client, info, device)
        program_mrc(client)
        assert ecn_marked(pipe, (1, 2500))  # edited: 2 x 2500 >= 4000
        assert not ecn_marked(pipe, (1, 1999))
        client.insert("MrcEgress.dscp_rewrite", {"standard_metadata.egress_port": 2},
                      "MrcEgress.set_dscp", {"dscp": 33})
        res = pipe.process(frame(), 1, 0.0, lambda p, q: (0, 0))
        assert Ether(res[0].data)[IPv6].tc >> 2 == 33

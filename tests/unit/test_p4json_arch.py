"""The v1model architecture around the pipelines (simple_switch.cpp) and v1model externs in
the p4json engine: drop, clone I2E/E2E with field lists, resubmit, recirculate, multicast,
truncate, digests, exit, counters, registers, meters, hash(), checksums, queue metadata."""

from __future__ import annotations

import zlib

from switch.p4json import hashes
from switch.p4json.engine import Engine
from tests.unit.p4json_programs import Builder, assign, extract, field, hexstr, op, prim

SM = "standard_metadata"
# h: a(8) b(8) itype(8) x(8) rid(16) q(16) = 8 bytes
H_FIELDS = [("a", 8), ("b", 8), ("itype", 8), ("x", 8), ("rid", 16), ("q", 16)]


def base(egress: list[dict[str, object]] | None = None) -> Builder:
    """Parse h; egress reports instance_type, scalars.x, egress_rid and enq_qdepth into h."""
    b = Builder()
    b.header_type("h_t", H_FIELDS)  # type: ignore[arg-type]
    b.header("h", "h_t")
    b.state("start", [extract("h")])
    b.order = ["h"]
    b.scalar("x", 8)
    b.field_lists.append({"id": 1, "name": "keep_x", "elements": [field("scalars", "x")]})
    report = [
        assign(field("h", "itype"), field(SM, "instance_type")),
        assign(field("h", "x"), field("scalars", "x")),
        assign(field("h", "rid"), field(SM, "egress_rid")),
        assign(field("h", "q"), field(SM, "enq_qdepth")),
        *(egress or []),
    ]
    b.chain("egress", [b.call("egress", "report", report)])
    return b


def to(port: int) -> dict[str, object]:
    return assign(field(SM, "egress_spec"), hexstr(port, 9))


def frame(a: int = 1, b: int = 2) -> bytes:
    return bytes([a, b]) + bytes(6) + b"PAYLOAD"


def fields(data: bytes) -> dict[str, int]:
    return {"a": data[0], "b": data[1], "itype": data[2], "x": data[3],
            "rid": int.from_bytes(data[4:6], "big"), "q": int.from_bytes(data[6:8], "big")}


def test_mark_to_drop_in_ingress_and_in_egress() -> None:
    b = base()
    b.chain("ingress", [b.call("ingress", "drop", [to(1), prim("mark_to_drop",
                                                             {"type": "header", "value": SM})])])
    assert Engine(b.json()).process(frame(), 0) == []
    b = base(egress=[prim("mark_to_drop", {"type": "header", "value": SM})])
    b.chain("ingress", [b.call("ingress", "fwd", [to(1)])])
    engine = Engine(b.json())
    assert engine.process(frame(), 0) == [] and engine.stats.dropped == 1


def test_ingress_clone_reparses_the_original_and_keeps_its_field_list() -> None:
    b = base()
    b.chain("ingress", [b.call("ingress", "clone", [
        to(1),
        assign(field("scalars", "x"), hexstr(0x77, 8)),
        assign(field("h", "a"), hexstr(0x55, 8)),
        prim("clone_ingress_pkt_to_egress", hexstr(5), hexstr(1)),
    ])])
    engine = Engine(b.json())
    engine.mirroring_add(5, 7)
    outs = engine.process(frame(a=9), 0)
    by_port = {o.port: fields(o.data) for o in outs}
    assert set(by_port) == {1, 7}
    assert by_port[1]["a"] == 0x55 and by_port[1]["itype"] == 0 and by_port[1]["x"] == 0x77
    clone = by_port[7]
    assert clone["a"] == 9 and clone["itype"] == 1 and clone["x"] == 0x77  # re-parsed; x kept
    assert all(o.data.endswith(b"PAYLOAD") for o in outs)
    engine.mirroring_delete(5)
    assert [o.port for o in engine.process(frame(), 0)] == [1]


def test_egress_clone_copies_the_packet_after_egress() -> None:
    b = base(egress=[
        assign(field("h", "b"), op("+", field("h", "b"), hexstr(1, 8))),
        prim("clone_egress_pkt_to_egress", hexstr(6), hexstr(1)),
    ])
    # only the original clones (clones would clone again): condition on instance_type
    eg = b.tables["egress"][0]
    cond = b.conditional("egress", "first", op("==", field(SM, "instance_type"), hexstr(0)),
                         eg["name"], None)
    b.init["egress"] = cond
    b.chain("ingress", [b.call("ingress", "fwd", [to(1)])])
    engine = Engine(b.json())
    engine.mirroring_add(6, 4)
    outs = {o.port: fields(o.data) for o in engine.process(frame(b=10), 0)}
    assert outs[1]["b"] == 11 and outs[1]["itype"] == 0
    assert outs[4]["b"] == 11 and outs[4]["itype"] == 0  # the clone skips "report"
    assert outs[4]["x"] == 0  # metadata reset, field list values kept (x was 0)


def test_resubmit_reruns_ingress_with_preserved_fields() -> None:
    b = base()
    first = b.call("ingress", "again", [assign(field("scalars", "x"), hexstr(3, 8)),
                                        prim("resubmit", hexstr(1))])
    second = b.call("ingress", "fwd", [to(2), assign(field("h", "b"), field(SM, "instance_type"))])
    cond = b.conditional("ingress", "is_resubmit",
                         op("==", field(SM, "instance_type"), hexstr(6)), second, first)
    b.init["ingress"] = cond
    outs = [(o.port, fields(o.data)) for o in Engine(b.json()).process(frame(), 0)]
    assert len(outs) == 1 and outs[0][0] == 2
    got = outs[0][1]
    assert got["b"] == 6 and got["x"] == 3  # second pass: RESUBMIT, x preserved
    assert got["itype"] == 0  # unicast copies enter egress as NORMAL


def test_recirculate_feeds_the_deparsed_packet_back() -> None:
    b = base()
    recirc = b.call("egress", "recirc", [assign(field("h", "a"), hexstr(0xAB, 8)),
                                         prim("recirculate", hexstr(1))])
    report = b.tables["egress"][0]["name"]
    cond = b.conditional("egress", "once", op("==", field("h", "b"), hexstr(0, 8)),
                         recirc, report)
    b.init["egress"] = cond
    fwd = b.call("ingress", "fwd", [to(3), assign(field("h", "b"), field(SM, "instance_type"))])
    b.init["ingress"] = fwd
    outs = Engine(b.json()).process(frame(a=1, b=0), 0)
    assert len(outs) == 1 and outs[0].port == 3
    got = fields(outs[0].data)
    assert got["a"] == 0xAB and got["b"] == 4  # deparsed packet back in ingress as RECIRC


def test_multicast_replicates_with_egress_rid() -> None:
    b = base()
    b.chain("ingress", [b.call("ingress", "mc", [
        assign(field(SM, "mcast_grp"), hexstr(9, 16))])])
    engine = Engine(b.json())
    engine.mc_group_create(9)
    n1 = engine.mc_node_create(10, [2, 3])
    n2 = engine.mc_node_create(11, [5])
    engine.mc_node_associate(9, n1)
    engine.mc_node_associate(9, n2)
    outs = [(o.port, fields(o.data)["rid"], fields(o.data)["itype"])
            for o in engine.process(frame(), 0)]
    assert outs == [(2, 10, 5), (3, 10, 5), (5, 11, 5)]


def test_truncate_exit_and_digest() -> None:
    b = base()
    b.learn_lists.append({"id": 1, "name": "learn_ab",
                          "elements": [field("h", "a"), field("h", "b")]})
    first = b.call("ingress", "first", [to(1), prim("truncate", hexstr(5)),
                                        prim("generate_digest", hexstr(0), hexstr(1)),
                                        prim("exit"), assign(field("h", "b"), hexstr(0xEE, 8))])
    never = b.call("ingress", "never", [to(2)])
    b.chain("ingress", [first, never])
    engine = Engine(b.json())
    outs = engine.process(frame(a=4, b=5), 0)
    assert len(outs) == 1 and outs[0].port == 1
    assert outs[0].data == bytes([4, 0xEE, 0, 0, 0])  # primitives after exit still run
    assert list(engine.digests) == [("learn_ab", (4, 0xEE))]


def test_counters_registers_and_hash() -> None:
    b = base()
    b.counters.append({"name": "c", "id": 0, "size": 4, "is_direct": False})
    b.registers.append({"name": "r", "id": 0, "size": 2, "bitwidth": 8})
    b.calculations.append({"name": "calc", "id": 0, "algo": "crc32",
                           "input": [field("h", "a"), field("h", "b")]})
    acc = b.scalar("acc", 8)
    b.chain("ingress", [b.call("ingress", "work", [
        to(1),
        prim("count", {"type": "counter_array", "value": "c"}, hexstr(2)),
        prim("register_read", acc, {"type": "register_array", "value": "r"}, hexstr(1)),
        prim("register_write", {"type": "register_array", "value": "r"}, hexstr(1),
             {"type": "expression", "value": op("+", acc, hexstr(3))}),
        prim("register_read", field("h", "x"), {"type": "register_array", "value": "r"},
             hexstr(1)),
        prim("register_write", {"type": "register_array", "value": "r"}, hexstr(9), hexstr(1)),
        prim("modify_field_with_hash_based_offset", field("h", "rid"), hexstr(3),
             {"type": "calculation", "value": "calc"}, hexstr(1000)),
    ])])
    b.tables["egress"].clear()
    b.init["egress"] = None
    engine = Engine(b.json())
    for i in range(100):
        out = engine.process(frame(a=i, b=2 * i), 0)
        got = fields(out[0].data)
        assert got["x"] == (3 * (i + 1)) & 0xFF
        assert got["rid"] == zlib.crc32(bytes([i, 2 * i])) % 1000 + 3
    c = engine.counters["c"]
    assert list(c.packets) == [0, 0, 100, 0] and list(c.bytes) == [0, 0, 100 * len(frame()), 0]
    assert list(engine.registers["r"].cells) == [0, 44]  # 300 & 0xFF; index 9 out of range: ignored


def test_checksum_verify_and_conditional_update() -> None:
    b = base()
    b.calculations.append({"name": "ck", "id": 0, "algo": "csum16",
                           "input": [field("h", "a"), field("h", "b"), field("h", "itype")]})
    cond = op("!=", field("h", "a"), hexstr(0, 8))
    b.checksums.append({"name": "v", "id": 0, "target": ["h", "rid"], "type": "generic",
                        "calculation": "ck", "verify": True, "update": False, "if_cond": cond})
    b.checksums.append({"name": "u", "id": 1, "target": ["h", "q"], "type": "generic",
                        "calculation": "ck", "verify": False, "update": True, "if_cond": cond})
    b.chain("ingress", [b.call("ingress", "fwd", [
        to(1), assign(field("h", "x"), field(SM, "checksum_error"))])])
    b.tables["egress"].clear()
    b.init["egress"] = None
    engine = Engine(b.json())
    good = hashes.csum16(bytes([7, 8, 0]))
    data = bytes([7, 8, 0, 0]) + good.to_bytes(2, "big") + bytes(2)
    got = fields(engine.process(data, 0)[0].data)
    assert got["x"] == 0 and got["q"] == good  # verified; updated
    bad = fields(engine.process(bytes([7, 8, 0, 0, 0, 1, 0, 0]), 0)[0].data)
    assert bad["x"] == 1
    skipped = fields(engine.process(bytes([0, 8, 0, 0, 0, 1, 0, 9]), 0)[0].data)
    assert skipped["x"] == 0 and skipped["q"] == 9  # condition false: neither runs


def test_queue_metadata_comes_from_the_traffic_manager_at_enqueue() -> None:
    b = base()
    b.chain("ingress", [b.call("ingress", "fwd", [
        to(6), assign(field(SM, "priority"), hexstr(3, 8))])])
    engine = Engine(b.json())
    asked = []

    def qdepth(port: int, prio: int) -> tuple[int, int]:
        asked.append((port, prio))
        return (17, 17 * 100)

    out = engine.process(frame(), 0, qdepth=qdepth)
    assert asked == [(6, 3)]
    assert out[0].priority == 3 and fields(out[0].data)["q"] == 17


def test_meter_marks_yellow_then_red_as_the_rate_is_exceeded() -> None:
    b = base()
    b.meters.append({"name": "m", "id": 0, "type": "packets", "rate_count": 2, "size": 1,
                     "is_direct": False})
    b.chain("ingress", [b.call("ingress", "meter", [
        to(1), prim("execute_meter", {"type": "meter_array", "value": "m"}, hexstr(0),
                    field("h", "x"))])])
    b.tables["egress"].clear()
    b.init["egress"] = None
    now = [0.0]
    engine = Engine(b.json(), clock=lambda: now[0])
    assert fields(engine.process(frame(), 0)[0].data)["x"] == 0  # unconfigured: green
    # 1 packet/ms committed (burst 2), 2 packets/ms peak (burst 3)
    engine.meters["m"].cells[0].set_rates([(0.001, 2), (0.002, 3)], now[0])
    colors = [fields(engine.process(frame(), 0)[0].data)["x"] for _ in range(4)]
    assert colors == [0, 0, 1, 2]
    now[0] += 0.01  # 10 ms later the buckets are full again
    assert fields(engine.process(frame(), 0)[0].data)["x"] == 0

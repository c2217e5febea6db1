"""Parser semantics of the p4json engine (BMv2 src/bm_sim/parser.cpp): select values and
masks, lookahead, parser errors seen by ingress, header stacks, varbits, verify, advance."""

from __future__ import annotations

from switch.p4json.engine import Engine
from tests.unit.p4json_programs import Builder, assign, extract, field, hexstr, op, to_port

# h: tag(8) len(8); s[]: 1-byte elements; v: fixed 8 + varbit; out: error code
TRANS_DEFAULT = {"type": "default", "value": None, "mask": None, "next_state": None}


def parser_program() -> Engine:
    b = Builder()
    b.header_type("h_t", [("tag", 8), ("len", 8)])
    b.header_type("e_t", [("x", 8)])
    b.header_type("v_t", [("n", 8), ("data", "*")], max_length=9)
    b.header_type("o_t", [("err", 32), ("count", 8), ("last", 8), ("la", 16)])
    b.header("h", "h_t")
    b.stack("s", "e_t", 3)
    b.header("v", "v_t")
    b.header("o", "o_t")
    la = b.scalar("la", 16)

    def go(value: str, nxt: str, mask: str | None = None) -> dict[str, object]:
        return {"type": "hexstr", "value": value, "mask": mask, "next_state": nxt}

    b.state("start", [
        extract("h"),
        {"op": "set", "parameters": [la, {"type": "lookahead", "value": [0, 16]}]},
    ], key=[field("h", "tag")], transitions=[
        go("0x10", "stack", "0xf0"),  # 0x1?: a stack of h.len elements
        go("0x20", "varbit"),
        go("0x30", "verify"),
        go("0x40", "skip"),
        {**TRANS_DEFAULT, "next_state": None},
    ])
    b.state("stack", [{"op": "extract", "parameters": [{"type": "stack", "value": "s"}]}],
            key=[{"type": "stack_field", "value": ["s", "x"]}],
            transitions=[go("0x00", None), {**TRANS_DEFAULT, "next_state": "stack"}])  # type: ignore[arg-type]
    b.state("varbit", [{"op": "extract_VL", "parameters": [
        {"type": "regular", "value": "v"},
        {"type": "expression", "value": op("<<", field("h", "len"), hexstr(3))},
    ]}])
    b.state("verify", [{"op": "verify", "parameters": [
        op("==", field("h", "len"), hexstr(7, 8)), hexstr(5)]}])
    b.state("skip", [{"op": "advance", "parameters": [hexstr(16)]}],
            key=[{"type": "lookahead", "value": [0, 8]}],
            transitions=[go("0xaa", "stack"), TRANS_DEFAULT])
    b.order = ["h", "s[0]", "s[1]", "s[2]", "v", "o"]
    prims = [
        to_port(1),
        {"op": "add_header", "parameters": [{"type": "header", "value": "o"}]},
        assign(field("o", "err"), field("standard_metadata", "parser_error")),
        assign(field("o", "count"), op("size_stack", None, {"type": "header_stack", "value": "s"})),
        assign(field("o", "la"), la),
    ]
    tname = b.call("ingress", "report", prims)
    b.chain("ingress", [tname])
    return Engine(b.json(), clock=lambda: 0.0)


ENGINE = parser_program()


def report(frame: bytes, emitted: int) -> tuple[bytes, int, int, int]:
    """Output headers (``emitted`` bytes before o), then o's fields."""
    out = ENGINE.process(frame, 0, 0.0)
    assert len(out) == 1
    data = out[0].data
    o = data[emitted : emitted + 8]
    return data[:emitted], int.from_bytes(o[0:4], "big"), o[4], int.from_bytes(o[6:8], "big")


def test_masked_select_and_stack_loop_until_a_zero_element() -> None:
    head, err, count, la = report(bytes([0x17, 0, 5, 6, 0, 9]), 5)
    assert (err, count) == (0, 3)
    assert head == bytes([0x17, 0, 5, 6, 0])
    assert la == 0x0506  # lookahead of 16 bits after h, without consuming them


def test_stack_overflow_is_stack_out_of_bounds_and_keeps_what_was_parsed() -> None:
    head, err, count, _ = report(bytes([0x11, 0, 1, 2, 3, 4, 0]), 5)
    assert err == 3 and count == 3  # StackOutOfBounds; three elements valid
    assert head == bytes([0x11, 0, 1, 2, 3])


def test_truncated_header_is_packet_too_short_and_not_valid() -> None:
    head, err, count, _ = report(bytes([0x12, 0, 7, 8]), 4)
    assert err == 1 and count == 2  # PacketTooShort at the third element
    assert head == bytes([0x12, 0, 7, 8])
    out = ENGINE.process(bytes([0x12]), 0, 0.0)[0].data
    assert out[:4] == (1).to_bytes(4, "big")  # h itself too short: only o is emitted
    # a lookahead past the end is PacketTooShort too (BMv2 checks it), h stays valid
    head, err, count, _ = report(bytes([0x12, 0, 7]), 2)
    assert (head, err, count) == (bytes([0x12, 0]), 1, 0)


def test_varbit_length_from_a_field_and_its_limits() -> None:
    head, err, _, _ = report(bytes([0x20, 3, 9, 1, 2, 3, 0xEE]), 6)
    assert err == 0 and head == bytes([0x20, 3, 9, 1, 2, 3])
    assert ENGINE.process(bytes([0x20, 3, 9, 1, 2, 3, 0xEE]), 0, 0.0)[0].data.endswith(b"\xee")
    _, err, _, _ = report(bytes([0x20, 9]) + bytes(12), 2)
    assert err == 4  # HeaderTooShort: 1 + 9 bytes > max_length 9
    _, err, _, _ = report(bytes([0x20, 2, 1]), 2)
    assert err == 1  # PacketTooShort


def test_verify_sets_the_given_error() -> None:
    assert report(bytes([0x30, 7, 0, 0]), 2)[1] == 0
    assert report(bytes([0x30, 6, 0, 0]), 2)[1] == 5


def test_advance_skips_bytes_and_lookahead_selects() -> None:
    head, err, count, _ = report(bytes([0x40, 0, 0xAA, 0xBB, 0xAA, 0]), 4)
    assert err == 0 and count == 2 and head == bytes([0x40, 0, 0xAA, 0])
    _, err, _, _ = report(bytes([0x40, 0, 1]), 2)
    assert err == 1  # advance past the end

"""Expression semantics of the p4json engine: BMv2's arbitrary-precision values truncated on
write, signed fields, saturating and two's complement casts, shifts, ?:, booleans.

One hand-made program computes every operator into its own result field of a header; the
packet's output bytes are unpacked independently and compared with plain Python arithmetic.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from switch.p4json.engine import Engine
from tests.unit.p4json_programs import assign, field, hexstr, one_header, op, to_port

INPUTS = [("a", 16), ("b", 16), ("c", 4), ("pad", 4), ("s", 8, True), ("t", 8, True)]
RESULTS = [
    ("r_add", 16), ("r_sub", 16), ("r_mul", 32), ("r_shl", 16), ("r_shr", 16), ("r_and", 16),
    ("r_or", 16), ("r_xor", 16), ("r_not", 16), ("r_mod", 16), ("r_div", 16), ("r_lt", 8),
    ("r_ge", 8), ("r_eq", 8), ("r_tcm", 8, True), ("r_usat", 8), ("r_sat", 8, True),
    ("r_cond", 16), ("r_sshr", 8, True), ("r_bool", 8), ("r_neg", 16), ("r_wide", 8),
    ("r_sadd", 8, True),
]
FIELDS = INPUTS + RESULTS


def _program() -> Engine:
    b = one_header(FIELDS)  # type: ignore[arg-type]
    a, bb, c, s, t = (field("h", n) for n in ("a", "b", "c", "s", "t"))

    def r(name: str) -> dict[str, object]:
        return field("h", name)

    def b2d(cond: object) -> object:
        return op("b2d", None, cond)

    prims = [
        to_port(1),
        assign(r("r_add"), op("+", a, bb)),
        assign(r("r_sub"), op("-", a, bb)),
        assign(r("r_mul"), op("*", a, bb)),
        assign(r("r_shl"), op("<<", a, c)),
        assign(r("r_shr"), op(">>", a, c)),
        assign(r("r_and"), op("&", a, bb)),
        assign(r("r_or"), op("|", a, bb)),
        assign(r("r_xor"), op("^", a, bb)),
        assign(r("r_not"), op("~", None, a)),
        assign(r("r_mod"), op("%", a, bb)),
        assign(r("r_div"), op("/", a, bb)),
        assign(r("r_lt"), b2d(op("<", a, bb))),
        assign(r("r_ge"), b2d(op(">=", a, bb))),
        assign(r("r_eq"), b2d(op("==", a, bb))),
        assign(r("r_tcm"), op("two_comp_mod", a, hexstr(8))),
        assign(r("r_usat"), op("usat_cast", op("-", a, bb), hexstr(8))),
        assign(r("r_sat"), op("sat_cast", op("+", s, t), hexstr(8))),
        assign(r("r_cond"), op("?", a, bb, cond=op(">", a, bb))),
        assign(r("r_sshr"), op(">>", s, hexstr(2))),
        assign(r("r_bool"), b2d(op("or", op("and", op("d2b", None, c), op("not", None,
                                                                            op("==", s, t))),
                                    op("<", s, t)))),
        assign(r("r_neg"), op("-", None, a)),
        assign(r("r_wide"), op(">>", op("<<", a, hexstr(100)), hexstr(100))),
        assign(r("r_sadd"), op("+", s, t)),
    ]
    tname = b.call("ingress", "compute", prims)
    b.chain("ingress", [tname])
    return Engine(b.json(), clock=lambda: 0.0)


ENGINE = _program()
LAYOUT = [(f[0], f[1], len(f) > 2 and bool(f[2])) for f in FIELDS]  # type: ignore[misc]
TOTAL = sum(w for _, w, _ in LAYOUT)


def pack(values: dict[str, int]) -> bytes:
    acc = 0
    for name, width, _signed in LAYOUT:
        acc = acc << width | (values.get(name, 0) & ((1 << width) - 1))
    return acc.to_bytes(TOTAL // 8, "big")


def unpack(data: bytes) -> dict[str, int]:
    acc = int.from_bytes(data[: TOTAL // 8], "big")
    out, pos = {}, TOTAL
    for name, width, signed in LAYOUT:
        pos -= width
        v = (acc >> pos) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        out[name] = v
    return out


def wrap(v: int, width: int, signed: bool = False) -> int:
    v &= (1 << width) - 1
    if signed and v >> (width - 1):
        v -= 1 << width
    return v


def sat(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 15),
       st.integers(-128, 127), st.integers(-128, 127))
def test_operators_match_python_arithmetic_truncated_on_write(
    a: int, b: int, c: int, s: int, t: int
) -> None:
    frame = pack({"a": a, "b": b, "c": c, "s": s, "t": t})
    out = ENGINE.process(frame, 0, 0.0)
    assert len(out) == 1 and out[0].port == 1
    got = unpack(out[0].data)
    want = {
        "r_add": wrap(a + b, 16), "r_sub": wrap(a - b, 16), "r_mul": wrap(a * b, 32),
        "r_shl": wrap(a << c, 16), "r_shr": a >> c, "r_and": a & b, "r_or": a | b,
        "r_xor": a ^ b, "r_not": wrap(~a, 16), "r_mod": a % b if b else 0,
        "r_div": a // b if b else 0, "r_lt": int(a < b), "r_ge": int(a >= b),
        "r_eq": int(a == b), "r_tcm": wrap(a, 8, True), "r_usat": sat(a - b, 0, 255),
        "r_sat": sat(s + t, -128, 127), "r_cond": a if a > b else b,
        "r_sshr": s >> 2,  # floor: BMv2's GMP shift of a negative value
        "r_bool": int((c != 0 and s != t) or s < t), "r_neg": wrap(-a, 16),
        "r_wide": wrap(a, 8),  # no intermediate truncation: << 100 then >> 100 is identity
        "r_sadd": wrap(s + t, 8, True),
    }
    for name, value in want.items():
        assert got[name] == value, (name, got[name], value)
    # inputs pass through untouched
    assert (got["a"], got["b"], got["c"], got["s"], got["t"]) == (a, b, c, s, t)


def test_payload_after_the_header_is_kept() -> None:
    frame = pack({"a": 1, "b": 2}) + b"payload bytes"
    out = ENGINE.process(frame, 0, 0.0)
    assert out[0].data.endswith(b"payload bytes")
    assert len(out[0].data) == len(frame)

"""The p4json C backend (switch/p4json/cgen.py, cbackend.py) against the Python reference.

Each test runs the same program on two engines, ``backend="python"`` (the generated Python,
the reference) and ``backend="c"``, with the same control-plane state, and requires equal
outputs (port, priority, bytes, truncation) and equal counters and registers after every
packet. Programs the C backend does not do must fall back to Python with the reason named.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import cext
from hosts.wire.enums import EvMode
from hosts.wire.ev_placement import ev_to_fields
from switch.p4json import cbackend
from switch.p4json.engine import Engine
from switch.p4json.errors import ConfigError
from switch.pipeline import Pipeline
from tests.unit.p4json_programs import (
    assign,
    c_backend_missing,
    field,
    hexstr,
    one_header,
    op,
    to_port,
)
from tests.unit.pipeline_helpers import (
    MRC,
    OCS,
    add,
    add_ecmp_group,
    add_route,
    call,
    frame,
    ip6,
    nexthop,
    srv6_frame,
)

ROOT = Path(__file__).resolve().parents[2]
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


WHY_NOT = c_backend_missing()
HAVE_C = WHY_NOT == ""
needs_c = pytest.mark.skipif(not HAVE_C, reason=f"C backend unavailable: {WHY_NOT}")


def clone_state(src: Engine, dst: Engine) -> None:
    """Copy tables, defaults, profiles, registers and port status from ``src`` to ``dst``."""
    for name, table in src.tables.items():
        other = dst.tables[name]
        if not other.immutable:
            other.clear()
            for e in sorted(table.entries.values(), key=lambda e: e.seq):
                other.add(e.key, e.priority, e.action, e.args, member=e.member, group=e.group)
        other.default = table.default
    for name, prof in src.profiles.items():
        mine = dst.profiles[name]
        mine.members = dict(prof.members)
        mine.groups = {g: list(m) for g, m in prof.groups.items()}
        mine.port_up = dict(prof.port_up)
        mine.rebuild()
    for name, reg in src.registers.items():
        dst.registers[name].cells[:] = reg.cells


def observable(engine: Engine) -> tuple[Any, ...]:
    counters = {n: (list(c.packets), list(c.bytes)) for n, c in engine.counters.items()}
    registers = {n: list(r.cells) for n, r in engine.registers.items()}
    return counters, registers


def same(c_engine: Engine, py_engine: Engine, frame_bytes: bytes, port: int,
         qdepth: Callable[[int, int], tuple[int, int]] | None = None, now: float = 0.0) -> list[Any]:
    got = c_engine.process(frame_bytes, port, now, qdepth)
    want = py_engine.process(frame_bytes, port, now, qdepth)
    assert [(o.port, o.priority, o.data, o.truncated) for o in got] == \
        [(o.port, o.priority, o.data, o.truncated) for o in want]
    assert observable(c_engine) == observable(py_engine)
    assert c_engine.stats.errors == py_engine.stats.errors == 0
    return got


def pair(source: Any, **kw: Any) -> tuple[Engine, Engine]:
    c_engine = Engine(source, backend="c", clock=lambda: 0.0, **kw)
    py_engine = Engine(source, backend="python", clock=lambda: 0.0, **kw)
    assert c_engine.backend == "c" and py_engine.backend == "python"
    return c_engine, py_engine


# ------------------------------------------------------------------ expressions
WIDE = [("a", 16), ("b", 16), ("c", 8), ("w", 64), ("x", 64), ("y", 100), ("z", 128)]
OUTS = [("o_sub", 16), ("o_mid", 16), ("o_shl", 16), ("o_shr", 64), ("o_mul", 128),
        ("o_ymul", 100), ("o_cmp", 8), ("o_div", 64), ("o_mod", 16), ("o_sat", 8),
        ("o_not", 128), ("o_cond", 64), ("o_neg", 100), ("o_xor", 128), ("o_bool", 4)]


def _expr_program() -> Any:
    b = one_header(WIDE + OUTS)  # type: ignore[arg-type]
    a, bb, c, w, x, y, z = (field("h", n) for n, _ in WIDE)

    def r(name: str) -> Any:
        return field("h", name)

    def b2d(e: Any) -> Any:
        return op("b2d", None, e)

    prims = [
        to_port(1),
        assign(r("o_sub"), op("-", a, bb)),  # negative, truncated on write
        assign(r("o_mid"), op(">>", op("+", a, bb), hexstr(1))),  # 17-bit sum, exact shift
        assign(r("o_shl"), op("<<", a, c)),  # run-time shift up to 255
        assign(r("o_shr"), op(">>", w, c)),
        assign(r("o_mul"), op("*", w, x)),  # 128-bit product: exact
        assign(r("o_ymul"), op("*", y, y)),  # 200 bits, truncated to 100
        assign(r("o_cmp"), b2d(op("<", op("+", w, x), z))),  # 65-bit sum compared exactly
        assign(r("o_div"), op("/", w, op("&", x, hexstr(0xFF, 64)))),  # / 0 -> 0 as BMv2
        assign(r("o_mod"), op("%", a, op("&", bb, hexstr(0x7, 16)))),
        assign(r("o_sat"), op("usat_cast", op("&", op("+", a, bb), hexstr(0x1FFFF, 32)),
                              hexstr(8))),
        assign(r("o_not"), op("~", None, z)),
        assign(r("o_cond"), op("?", w, x, cond=op(">=", a, bb))),
        assign(r("o_neg"), op("-", None, y)),
        assign(r("o_xor"), op("^", z, op("<<", w, hexstr(64)))),
        assign(r("o_bool"), b2d(op("or", op("and", op("d2b", None, op("&", c, hexstr(1, 8))),
                                                  op("not", None, op("==", a, bb))),
                                   op("!=", y, hexstr(0, 100))))),
    ]
    b.call("ingress", "compute", prims)
    b.chain("ingress", ["tbl_compute"])
    return b.json()


def _pack(values: dict[str, int]) -> bytes:
    acc, total = 0, 0
    for name, width in WIDE + OUTS:
        acc = acc << width | (values.get(name, 0) & ((1 << width) - 1))
        total += width
    return acc.to_bytes(total // 8, "big")


if HAVE_C:  # only build what the tests use
    EXPR_C, EXPR_PY = pair(_expr_program())


@needs_c
@PROPS
@given(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF), st.integers(0, 255),
       st.integers(0, (1 << 64) - 1), st.integers(0, (1 << 64) - 1),
       st.integers(0, (1 << 100) - 1), st.integers(0, (1 << 128) - 1))
def test_expressions_in_c_equal_the_reference(a: int, b: int, c: int, w: int, x: int, y: int,
                                               z: int) -> None:
    data = _pack({"a": a, "b": b, "c": c, "w": w, "x": x, "y": y, "z": z})
    out = same(EXPR_C, EXPR_PY, data, 0)
    assert len(out) == 1 and out[0].port == 1


@needs_c
def test_unprovable_exact_values_run_in_python() -> None:
    # (a - b) may be negative: comparing it needs the exact (unbounded) value
    b = one_header([("a", 8), ("b", 8), ("r", 8)])
    b.call("ingress", "cmp", [to_port(1), assign(field("h", "r"), op(
        "b2d", None, op("<", op("-", field("h", "a"), field("h", "b")), hexstr(3, 8))))])
    b.chain("ingress", ["tbl_cmp"])
    engine = Engine(b.json(), backend="auto")
    assert engine.backend == "python" and "may not fit 128 bits" in engine.backend_reason
    with pytest.raises(ConfigError, match="not eligible for C"):
        Engine(b.json(), backend="c")
    # the Python form still computes it exactly: 1 - 5 = -4 < 3
    assert engine.process(bytes([1, 5, 0]), 0)[0].data[2] == 1


@needs_c
def test_unsupported_features_fall_back_with_the_reason() -> None:
    b = one_header([("a", 8)])
    b.call("ingress", "mc", [assign(field("standard_metadata", "mcast_grp"), hexstr(1, 16))])
    b.chain("ingress", ["tbl_mc"])
    engine = Engine(b.json(), backend="auto")
    assert engine.backend == "python" and "multicast" in engine.backend_reason


@needs_c
def test_pure_python_switch_turns_the_c_backend_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cext.PURE_ENV, "1")
    engine = Engine(_expr_program(), backend="auto")
    assert engine.backend == "python" and cext.PURE_ENV in engine.backend_reason


@needs_c
def test_modules_are_cached_by_source_and_arrays_stay_pinned(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cbackend.CACHE_ENV, str(tmp_path))
    b = one_header([("a", 8)])
    b.registers.append({"name": "r", "id": 0, "size": 4, "bitwidth": 8})
    b.call("ingress", "w", [to_port(1), {"op": "register_write", "parameters": [
        {"type": "register_array", "value": "r"}, hexstr(2), field("h", "a")]}])
    b.chain("ingress", ["tbl_w"])
    first = Engine(b.json(), backend="c")
    built = sorted(tmp_path.glob("_p4dp_*.so"))
    assert len(built) == 1 and sorted(tmp_path.glob("_p4dp_*.c"))
    stamp = built[0].stat().st_mtime_ns
    second = Engine(b.json(), backend="c")  # same source: the cached module, not rebuilt
    assert built[0].stat().st_mtime_ns == stamp and not list(tmp_path.glob("*.tmp*"))
    first.process(bytes([7]), 0)
    second.process(bytes([9]), 0)
    assert list(first.registers["r"].cells) == [0, 0, 7, 0]
    assert list(second.registers["r"].cells) == [0, 0, 9, 0]  # each engine its own cells
    first.registers["r"].reset()  # in place: allowed
    assert list(first.registers["r"].cells) == [0] * 4
    with pytest.raises(BufferError):  # the C state holds the buffer: no resizing under it
        first.registers["r"].cells.append(0)  # type: ignore[attr-defined]


@needs_c
def test_compile_errors_are_reported_not_raised(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="compiling _p4dp_broken failed"):
        cbackend.build("_p4dp_broken", "this is not C", tmp_path)
    assert not list(tmp_path.iterdir()) or all(p.suffix != ".so" for p in tmp_path.iterdir())


# ------------------------------------------------------------------ built-in programs
@needs_c
@pytest.mark.parametrize("path", ["switch/programs/mrc_switch.json", "p4/mrc_switch.json",
                                  "p4/ocs.json"])
def test_builtin_programs_run_in_c(path: str) -> None:
    engine = Engine((ROOT / path).read_bytes(), backend="auto")
    assert engine.backend == "c", engine.backend_reason


def _mrc_state() -> tuple[Engine, Engine]:
    """The embedded mrc_switch with routes, ECMP, EV uplinks, classes, ports, uSIDs (C),
    and a Python engine with a copy of that state."""
    pipe = Pipeline()
    state = pipe.commit(MRC)
    add_route(state, "2001:db8:2::", 48, nexthop(2))
    add_route(state, "2001:db8:3::", 64, nexthop(3))
    add_route(state, "2001:db8::", 32, call("MrcIngress.route_ev", 5, 16, 0xFF, 7))
    add_route(state, "fd00:0:0:2::", 64, nexthop(4))
    add_route(state, "fc00:0:200::", 48, nexthop(5))
    add_route(state, "fc00:0:600::", 48, nexthop(6))
    add_ecmp_group(state, 7, [8, 9, 10], watch=True)
    for value in range(4):
        add(state, "MrcIngress.ev_uplink", (5, value), nexthop(11 + value))
    add(state, "MrcIngress.ev_uplink", (5, 9), call("MrcIngress.drop"))
    add(state, "MrcIngress.my_usid", ((ip6("fc00:0:100::"), 48),), call("MrcIngress.usid_shift"))
    add(state, "MrcIngress.my_usid", ((ip6("fc00:0:700::"), 48),), call("MrcIngress.usid_decap"))
    for dscp, cls, prio, trim in ((10, 1, 1, 1), (26, 2, 1, 0), (46, 5, 7, 0), (0, 0, 0, 0)):
        add(state, "MrcIngress.dscp_class", (dscp,), call("MrcIngress.set_class", cls, prio, trim))
    for port, last in ((2, 0), (3, 1), (4, 0), (8, 0), (9, 1)):
        add(state, "MrcEgress.port_config", (port,),
            call("MrcEgress.set_port_params", 4000, 10000, last, 40 if last else 8, 6))
    pipe.set_port_oper_status(9, False)
    engine = pipe.engine
    assert engine is not None and engine.backend == "c", engine and engine.backend_reason
    ref = Engine(engine.prog, backend="python", clock=lambda: 0.0, origin=0.0)
    clone_state(engine, ref)
    return engine, ref


def _mrc_frames() -> list[bytes]:
    from testbed.bench import switch_throughput as sb

    out = [sb.mrc_frame(ipaddress.IPv6Address("fd00:0:0:2::1").packed, payload=256)]
    for dst in ("2001:db8:2::1", "2001:db8:3::1", "2001:db8:77::1", "2001:db9::1"):
        for dscp in (10, 26, 46, 0):
            out.append(frame(dst=dst, dscp=dscp, payload=300, sport=4000 + dscp))
    for ev in (0x00010000, 0x00050000, 0x12060034, 0x00090000):  # uplink, ECMP x2, drop
        sport, fl = ev_to_fields(EvMode.STRUCTURED, ev)
        out.append(frame(dst="2001:db8:77::1", sport=sport, flow_label=fl))
    out.append(frame(opcode=0xC9, tsh=True))
    out.append(srv6_frame("fc00:0:100:200:300::"))
    out.append(srv6_frame("fc00:0:100::", segments=["fc00:0:600::", "fc00:0:500::"],
                          segments_left=1))
    out.append(srv6_frame("fc00:0:700::"))
    return out


if HAVE_C:
    MRC_C, MRC_PY = _mrc_state()
    MRC_FRAMES = _mrc_frames()


def mutated(base: list[bytes]) -> st.SearchStrategy[bytes]:
    edits = st.lists(st.tuples(st.integers(0, 159), st.integers(0, 255)), max_size=4)

    def apply(args: tuple[bytes, list[tuple[int, int]], int]) -> bytes:
        raw, changes, cut = args
        data = bytearray(raw)
        for pos, value in changes:
            if pos < len(data):
                data[pos] = value
        return bytes(data[:cut] if cut < len(data) else data)

    return st.tuples(st.sampled_from(base), edits, st.integers(0, 5000)).map(apply)


@needs_c
@PROPS
@given(mutated(MRC_FRAMES if HAVE_C else [b""]), st.integers(0, 15),
       st.integers(0, 0x7FFFF), st.integers(0, 1 << 34), st.integers(0, 1 << 40))
def test_mrc_switch_in_c_equals_the_reference(raw: bytes, port: int, pkts: int, nbytes: int,
                                              now_us: int) -> None:
    same(MRC_C, MRC_PY, raw, port, lambda p, q: (pkts, nbytes), now_us * 1e-6)


@needs_c
@PROPS
@given(st.binary(max_size=200), st.integers(0, 15))
def test_mrc_switch_in_c_equals_the_reference_on_garbage(raw: bytes, port: int) -> None:
    same(MRC_C, MRC_PY, raw, port)


@needs_c
def test_ocs_in_c_equals_the_reference() -> None:
    pipe = Pipeline()
    state = pipe.commit(OCS)
    engine = pipe.engine
    assert engine is not None and engine.backend == "c", engine and engine.backend_reason
    tables = [t for t in engine.tables.values() if not t.immutable and t.spec.keys]
    assert tables, "ocs has a circuit table"
    for t in tables:  # every action of every table, on a few ports
        ids = sorted(t.actions)
        for port in range(6):
            aid = ids[port % len(ids)]
            args = [port + 1 for _ in t.actions[aid].params]
            key = tuple(port if k == "exact" else (port, (1 << w) - 1)
                        for k, w in zip(t.kinds, t.widths))
            t.add(key, 1, aid, args)
    del state
    ref = Engine(engine.prog, backend="python", clock=lambda: 0.0, origin=0.0)
    clone_state(engine, ref)
    raws = [bytes(range(64)), bytes(14), bytes(3000), b""] + [frame(payload=n) for n in (0, 900)]
    for raw in raws:
        for port in range(7):
            same(engine, ref, raw, port)


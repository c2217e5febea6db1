"""The C fast path (hosts/wire/_fastwire.c) against the Python reference, differentially.

``FAST.try_*`` run the C code alone (NotImplemented where it hands over to Python); the
``*_py`` functions of hosts.wire.codec are the reference. Valid packets must be handled in C
with byte-identical output, strictly equal objects (same types, not only ==) and equal side
effects; anything else must end exactly as the reference ends (same result or same WireError).
"""

from __future__ import annotations

import copy
import enum
import os
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import cext
from hosts.wire import codec, fastpath, icrc
from hosts.wire import layout as L
from hosts.wire.enums import Opcode
from hosts.wire.errors import WireError
from hosts.wire.headers import Bth, Meth, Reth, Seth
from hosts.wire.packet import Frame, MrcPacket
from hosts.wire.samples import plain_frame, sample_packets, srv6_frame
from hosts.wire.stacks import STACK_KEYS
from tests.unit.test_wire_fuzz import SEEDS, frames, mutated, packets

FAST = codec.FAST
needs_c = pytest.mark.skipif(
    FAST is None, reason=f"C fast path not loaded: {fastpath.why_missing()}"
)
PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ helpers
def strict_equal(a: Any, b: Any, where: str = "") -> None:
    """Equal values of identical types, recursively through the slot dataclasses."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if is_dataclass(a):
        for f in fields(a):
            strict_equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, memoryview):
        assert a.obj is b.obj and bytes(a) == bytes(b) and a.format == b.format, where
        assert a.readonly == b.readonly, where
    elif isinstance(a, tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            strict_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
        if isinstance(a, enum.Enum):
            assert a is b, where


def outcome(fn: Any, *args: Any, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kw)
    except WireError as exc:
        return "error", (exc.reason, exc.offset)


def same_outcome(a: tuple[str, Any], b: tuple[str, Any]) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1] == b[1]
    else:
        strict_equal(a[1], b[1], "result")


def clone(obj: Any) -> Any:
    """Deep copy of a packet or frame that keeps the (never mutated) payload object itself."""
    if isinstance(obj, MrcPacket):
        payload = obj.payload
        obj.payload = b""
        try:
            out = copy.deepcopy(obj)
        finally:
            obj.payload = payload
        out.payload = payload
        return out
    return copy.deepcopy(obj)


def garbage(n: int) -> bytearray:
    return bytearray((i * 37 + 11) & 0xFF for i in range(n))


def encode_both(frame: Frame, pkt: MrcPacket, size: int, offset: int) -> None:
    """C and reference write the same bytes and leave the packet in the same state."""
    fc, pc = clone(frame), clone(pkt)
    fp, pp = clone(frame), clone(pkt)
    bc, bp = garbage(size), garbage(size)
    assert FAST is not None
    n_c = FAST.try_encode_frame(fc, pc, memoryview(bc), offset)
    assert n_c is not NotImplemented, "a valid packet was handed to Python"
    n_p = codec.encode_frame_py(fp, pp, memoryview(bp), offset)
    assert n_c == n_p and bc == bp
    strict_equal(pc, pp, "pkt")
    strict_equal(fc, fp, "frame")


# ------------------------------------------------------------------ the extension is in use
def test_extension_in_use_when_built() -> None:
    """When the module is built and not disabled, the public functions are the C ones."""
    if os.environ.get(cext.PURE_ENV, "") not in ("", "0"):
        assert codec.BACKEND == "python" and codec.FAST is None
        pytest.skip("MRCNET_PURE_PYTHON is set")
    ext = next(e for e in cext.discover() if e.module == fastpath.MODULE)
    if not ext.target.exists():
        pytest.skip(f"{ext.module} is not built (python -m common.cext)")
    assert not ext.stale(), f"{ext.target.name} is older than {ext.source.name}: rebuild it"
    assert codec.BACKEND == "c" and FAST is not None
    import hosts.wire as wire

    assert wire.encode_frame is FAST.encode_frame and wire.decode_frame is FAST.decode_frame
    assert wire.encode_packet is FAST.encode_packet and wire.decode_packet is FAST.decode_packet
    before = FAST.stats()
    data = wire.build_frame(plain_frame(), sample_packets()[0])
    wire.decode_frame(data)
    after = FAST.stats()
    assert after["encode_frame"][0] == before["encode_frame"][0] + 1
    assert after["decode_frame"][0] == before["decode_frame"][0] + 1
    assert after["decode_frame"][1] == before["decode_frame"][1]  # no fallback


def test_pure_python_switch() -> None:
    """MRCNET_PURE_PYTHON=1 runs the reference alone, and it works."""
    code = (
        "from hosts.wire import codec, build_frame, decode_frame\n"
        "from hosts.wire.samples import plain_frame, sample_packets\n"
        "assert codec.BACKEND == 'python' and codec.FAST is None\n"
        "assert decode_frame is codec.decode_frame_py\n"
        "p = sample_packets()[0]\n"
        "assert bytes(decode_frame(build_frame(plain_frame(), p))[1].payload) == p.payload\n"
    )
    env = {**os.environ, cext.PURE_ENV: "1"}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)


# ------------------------------------------------------------------ valid packets
@st.composite
def wide_int(draw: st.DrawFn) -> object:
    """Any integer-like value the encoder must take modulo 2**width."""
    return draw(
        st.one_of(
            st.integers(-(1 << 70), 1 << 70),
            st.booleans(),
            st.sampled_from(list(Opcode)),
        )
    )


@st.composite
def wild_packets(draw: st.DrawFn) -> MrcPacket:
    """Valid packets whose integer fields hold out-of-range values, bools and IntEnums."""
    pkt = draw(packets())
    for attr in ("bth", *L.MRC_HEADERS):
        hdr = getattr(pkt, attr)
        if hdr is None:
            continue
        for f in fields(hdr):
            if f.name != "opcode" and draw(st.booleans()):
                setattr(hdr, f.name, draw(wide_int()))
    if draw(st.booleans()):
        pkt.bth.pad = draw(st.integers(-5, 5))
        pkt.bth.tsh = draw(st.sampled_from([True, False, 0, 1, 7]))  # type: ignore[assignment]
    return pkt


@st.composite
def payloads(draw: st.DrawFn) -> object:
    data = draw(st.binary(max_size=2100))  # > 256 bytes: the CRC is handed to zlib(-ng)
    wrap = draw(st.sampled_from(["bytes", "bytearray", "memoryview", "slice"]))
    if wrap == "bytearray":
        return bytearray(data)
    if wrap == "memoryview":
        return memoryview(data)
    if wrap == "slice":
        return memoryview(b"xy" + data + b"z")[2 : 2 + len(data)]
    return data


@needs_c
@PROPS
@given(frames(), wild_packets(), payloads(), st.integers(0, 9))
def test_encode_frame_equals_reference(
    frame: Frame, pkt: MrcPacket, payload: object, offset: int
) -> None:
    if pkt.bth.opcode in L.PAYLOAD_OPCODES:
        pkt.payload = payload  # type: ignore[assignment]
    size = offset + codec.frame_len(frame, pkt) + 7
    encode_both(frame, pkt, size, offset)


@needs_c
@PROPS
@given(frames(), packets(), payloads(), st.booleans())
def test_decode_frame_equals_reference(
    frame: Frame, pkt: MrcPacket, payload: object, verify: bool
) -> None:
    if pkt.bth.opcode in L.PAYLOAD_OPCODES:
        pkt.payload = payload  # type: ignore[assignment]
    data = codec.build_frame(frame, pkt)
    for form in (data, bytearray(data), memoryview(data), memoryview(b"??" + data)[2:]):
        assert FAST is not None
        got = FAST.try_decode_frame(form, verify_icrc=verify)
        assert got is not NotImplemented, "a valid frame was handed to Python"
        strict_equal(got, codec.decode_frame_py(form, verify_icrc=verify), "decoded")
    assert FAST is not None
    got = FAST.try_decode_frame(data)  # default: verify
    strict_equal(got, codec.decode_frame_py(data), "decoded")


@needs_c
@PROPS
@given(wild_packets(), payloads(), st.integers(0, 9))
def test_packet_codec_equals_reference(pkt: MrcPacket, payload: object, offset: int) -> None:
    assert FAST is not None
    if pkt.bth.opcode in L.PAYLOAD_OPCODES:
        pkt.payload = payload  # type: ignore[assignment]
    pc, pp = clone(pkt), clone(pkt)
    size = offset + codec.packet_len(pkt) + 3
    bc, bp = garbage(size), garbage(size)
    end = FAST.try_encode_packet(pc, bc, offset)
    assert end is not NotImplemented
    assert end == codec.encode_packet_py(pp, bp, offset) and bc == bp
    strict_equal(pc, pp, "pkt")
    got = FAST.try_decode_packet(bc, offset, end)
    assert got is not NotImplemented
    strict_equal(got, codec.decode_packet_py(bc, offset, end), "decoded")


@needs_c
@pytest.mark.parametrize("index", range(len(sample_packets())))
@pytest.mark.parametrize("shape", ["plain", "srv6", "srh"])
def test_samples_in_c(index: int, shape: str) -> None:
    """Every sample packet in every frame shape is handled in C, both ways."""
    frame = {"plain": plain_frame(), "srv6": srv6_frame(0), "srh": srv6_frame(2)}[shape]
    pkt = sample_packets()[index]
    encode_both(frame, pkt, codec.frame_len(frame, pkt), 0)
    data = codec.build_frame(frame, pkt)
    assert FAST is not None
    strict_equal(FAST.try_decode_frame(data), codec.decode_frame_py(data), "decoded")


@needs_c
@pytest.mark.parametrize("size", [4096, 9000, 65535 - 100, 70000])
@pytest.mark.parametrize("shape", ["plain", "srh"])
def test_large_payloads_equal_reference(size: int, shape: str) -> None:
    """Jumbo payloads (zlib runs the CRC without the GIL above 5 KiB) and payloads whose
    lengths overflow the 16-bit IPv6/UDP length fields: both encoders refuse those, and a
    frame whose lengths a sender wrapped modulo 2**16 is rejected by both decoders."""
    frame = plain_frame() if shape == "plain" else srv6_frame(2)
    pkt = clone(sample_packets()[0])
    pkt.payload = bytes(garbage(size))
    if codec.frame_len(frame, pkt) - L.ETH.size - L.IPV6.size > 0xFFFF:
        for encode in (codec.encode_frame, codec.encode_frame_py):
            with pytest.raises(WireError, match="packet too large"):
                encode(clone(frame), clone(pkt), bytearray(codec.frame_len(frame, pkt)))
        pkt.payload = bytes(garbage(size - 0x10000))  # same length fields, modulo 2**16
        small = codec.build_frame(frame, pkt)
        data = small[:-4] + bytes(garbage(0x10000)) + small[-4:]
    else:
        encode_both(frame, pkt, codec.frame_len(frame, pkt), 0)
        data = codec.build_frame(frame, pkt)
    assert FAST is not None
    for form in (data, bytearray(data), memoryview(b"??" + data)[2:]):
        same_outcome(outcome_any(FAST.decode_frame, form), outcome_any(codec.decode_frame_py, form))
    if outcome_any(codec.decode_frame_py, data)[0] == "ok":  # a valid frame: decoded in C
        strict_equal(FAST.try_decode_frame(data), codec.decode_frame_py(data), "decoded")
    else:  # lengths wrapped: the reference rejects it, C alone must not accept it
        assert FAST.try_decode_frame(data) is NotImplemented


@needs_c
def test_trimmed_frames_in_c() -> None:
    for shape in (plain_frame(), srv6_frame(1)):
        pkt = sample_packets()[9]
        data = bytearray(codec.build_frame(shape, pkt))
        from hosts.wire.pcapgen import trim

        cut = trim(bytes(data))
        assert FAST is not None
        got = FAST.try_decode_frame(cut)
        assert got is not NotImplemented and got[1].trimmed
        strict_equal(got, codec.decode_frame_py(cut), "trimmed")


@needs_c
def test_icrc_equals_reference() -> None:
    """C's header CRC, and the ICRC it writes, equal zlib and icrc.compute_icrc."""
    assert FAST is not None
    for n in (0, 1, 7, 8, 9, 60, 255, 256, 257, 4096):
        data = bytes((i * 131 + n) & 0xFF for i in range(n))
        for start in (0, 1, 0xFFFFFFFF, icrc.ICRC_SEED):
            assert FAST.crc32(data, start) == zlib.crc32(data, start)
    for size in (0, 200, 300, 4096):
        pkt = MrcPacket(
            Bth(opcode=Opcode.WRITE_ONLY), meth=Meth(), reth=Reth(), payload=bytes(size)
        )
        buf = bytearray(codec.frame_len(plain_frame(), pkt))
        n = FAST.try_encode_frame(plain_frame(), pkt, buf)
        assert icrc.read_icrc(buf, n - 4) == icrc.compute_icrc(buf, L.ETH.size, n - 4)


@needs_c
def test_bad_icrc_and_side_effects_fall_back() -> None:
    assert FAST is not None
    data = bytearray(codec.build_frame(plain_frame(), sample_packets()[8]))
    data[200] ^= 1
    assert FAST.try_decode_frame(bytes(data)) is NotImplemented  # the reference raises
    with pytest.raises(WireError, match="ICRC"):
        codec.decode_frame(bytes(data))
    assert FAST.try_decode_frame(bytes(data), verify_icrc=False) is not NotImplemented
    pkt = clone(sample_packets()[8])
    pkt.bth.pad, pkt.bth.tsh = 3, True
    encode_both(plain_frame(), pkt, 2000, 0)


# ------------------------------------------------------------------ anything else
@needs_c
@FUZZ
@given(st.one_of(mutated(), st.binary(max_size=300)), st.booleans())
def test_arbitrary_bytes_end_like_reference(data: bytes, verify: bool) -> None:
    assert FAST is not None
    c = outcome(codec.decode_frame, data, verify_icrc=verify)
    same_outcome(c, outcome(codec.decode_frame_py, data, verify_icrc=verify))
    handled = outcome(FAST.try_decode_frame, data, verify_icrc=verify)
    if handled[1] is not NotImplemented:  # C never accepts what the reference rejects
        same_outcome(handled, c)  # (SRv6 outer-header errors come from the reference's helper)


@needs_c
@FUZZ
@given(
    st.one_of(st.sampled_from([s[62:-4] for s in SEEDS[:18]]), st.binary(max_size=200)),
    st.integers(-3, 220),
    st.one_of(st.none(), st.integers(-3, 2200)),
)
def test_arbitrary_packet_bytes_end_like_reference(
    data: bytes, offset: int, end: int | None
) -> None:
    same_outcome(
        outcome(codec.decode_packet, data, offset, end),
        outcome(codec.decode_packet_py, data, offset, end),
    )


BAD_VALUES: list[tuple[str, str, object]] = [
    ("frame", "dscp", "x"),
    ("frame", "udp_sport", 1.5),
    ("frame", "eth_dst", b"\x00" * 5),
    ("frame", "ip_src", bytearray(16)),
    ("frame", "ip_dst", "fd00::1"),
    ("bth", "psn", 2.0),
    ("bth", "pad", 1.0),
    ("bth", "se", None),
    ("bth", "opcode", 0x1C6),
    ("bth", "opcode", 4),
    ("meth", "msn", "7"),
    ("reth", "va", [1]),
    ("pkt", "payload", "text"),
    ("pkt", "payload", 5),
    ("pkt", "payload", memoryview(bytes(8)).cast("H")),
    ("pkt", "meth", None),
    ("pkt", "reth", Seth()),
    ("pkt", "tseth", Meth()),
]


SRV6_BAD_VALUES: list[tuple[str, object]] = [
    ("dscp", "x"),
    ("hop_limit", 2.5),
    ("src", bytes(15)),
    ("dst", bytearray(16)),
    ("segments", [bytes(16)]),
    ("segments", (bytes(16), bytes(17))),
    ("segments", (bytearray(16),)),
    ("segments", (bytes(16),) * 128),
    ("segments_left", None),
]


@needs_c
@pytest.mark.parametrize(("name", "value"), SRV6_BAD_VALUES)
def test_bad_srv6_outer_values_end_like_reference(name: str, value: object) -> None:
    frame = srv6_frame(2)
    assert frame.srv6 is not None
    object.__setattr__(frame.srv6, name, value)
    pkt = clone(sample_packets()[-3])
    pkt.bth.pad = 2
    assert FAST is not None
    assert FAST.try_encode_frame(clone(frame), clone(pkt), bytearray(5000)) is NotImplemented
    fc, pc, fp, pp = clone(frame), clone(pkt), clone(frame), clone(pkt)
    bc, bp = bytearray(5000), bytearray(5000)
    same_outcome(
        outcome(codec.encode_frame, fc, pc, bc), outcome(codec.encode_frame_py, fp, pp, bp)
    )
    assert bc == bp
    strict_equal(pc, pp, "pkt")


@needs_c
@pytest.mark.parametrize(("where", "name", "value"), BAD_VALUES)
@pytest.mark.parametrize("shape", ["plain", "srv6"])
def test_bad_types_end_like_reference(where: str, name: str, value: object, shape: str) -> None:
    """Values C does not take go to the reference: the same WireError (or the same bytes)."""
    base_frame = plain_frame() if shape == "plain" else srv6_frame(1)
    pkt = clone(sample_packets()[8])
    pkt.bth.pad = 3  # must stay untouched when C hands over
    target = {"frame": base_frame, "pkt": pkt, "bth": pkt.bth, "meth": pkt.meth, "reth": pkt.reth}
    setattr(target[where], name, value)
    assert FAST is not None
    fc, pc = clone(base_frame), clone(pkt)
    assert FAST.try_encode_frame(fc, pc, bytearray(3000)) is NotImplemented
    strict_equal(pc, pkt, "untouched")
    fp, pp = clone(base_frame), clone(pkt)
    bc, bp = bytearray(3000), bytearray(3000)
    c = outcome(codec.encode_frame, fc, pc, bc)
    same_outcome(c, outcome(codec.encode_frame_py, fp, pp, bp))
    assert bc == bp
    strict_equal(pc, pp, "pkt")
    if where != "frame":
        same_outcome(
            outcome(codec.encode_packet, clone(pkt), bytearray(3000)),
            outcome(codec.encode_packet_py, clone(pkt), bytearray(3000)),
        )


class _ShiftingInt(int):
    """An int whose ``<<`` is not int's: the reference shifts field values with ``<<`` (the
    top field of a word goes unmasked), so C must not read such a value itself."""

    def __lshift__(self, other: int) -> int:
        return (int(self) << other) ^ 1


@needs_c
@pytest.mark.parametrize("shape", ["plain", "srh"])
def test_int_subclass_operators_the_reference_uses(shape: str) -> None:
    """Every integer field of every sample set to an int subclass with its own ``<<``: C and
    reference write the same bytes (C hands such a value over)."""
    assert FAST is not None
    for base in sample_packets():
        for hdr in fields(base):
            header = getattr(base, hdr.name)
            if not is_dataclass(header):
                continue
            for f in fields(header):
                value = getattr(header, f.name)
                if type(value) is not int:
                    continue
                frames, packets = [], []
                for _ in range(2):
                    pkt = clone(base)
                    setattr(getattr(pkt, hdr.name), f.name, _ShiftingInt(value))
                    frames.append(plain_frame() if shape == "plain" else srv6_frame(2))
                    packets.append(pkt)
                bc, bp = garbage(2000), garbage(2000)
                got = outcome_any(FAST.encode_frame, frames[0], packets[0], bc)
                want = outcome_any(codec.encode_frame_py, frames[1], packets[1], bp)
                assert got == want and bc == bp, f"{hdr.name}.{f.name}"
    srv6 = srv6_frame(2)
    assert srv6.srv6 is not None
    srv6.srv6.segments_left = _ShiftingInt(1)
    srv6.srv6.flow_label = _ShiftingInt(0x12345)
    ref = clone(srv6)
    bc, bp = garbage(2000), garbage(2000)
    pkt = sample_packets()[0]
    assert outcome_any(FAST.encode_frame, srv6, clone(pkt), bc) == outcome_any(
        codec.encode_frame_py, ref, clone(pkt), bp
    )
    assert bc == bp


def test_encode_bad_types_are_wire_errors() -> None:
    """With either backend, a value of a wrong type is a WireError, never another exception."""
    for where, name, value in BAD_VALUES:
        for frame in (plain_frame(), srv6_frame(1)):
            pkt = clone(sample_packets()[8])
            target = {
                "frame": frame,
                "pkt": pkt,
                "bth": pkt.bth,
                "meth": pkt.meth,
                "reth": pkt.reth,
            }
            setattr(target[where], name, value)
            try:
                codec.encode_frame(frame, pkt, bytearray(3000))
            except WireError:
                pass
    frame = srv6_frame(1)
    assert frame.srv6 is not None
    frame.srv6.dscp = "x"  # type: ignore[assignment]
    with pytest.raises(WireError, match="SRv6 outer"):
        codec.encode_frame(frame, sample_packets()[8], bytearray(3000))


@needs_c
def test_unusual_arguments_go_to_the_reference() -> None:
    assert FAST is not None
    pkt = sample_packets()[-1]
    data = codec.build_frame(plain_frame(), pkt)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((data,), {"verify_icrc": 1}),
        ((data, True), {}),
        ((), {"data": data}),
        ((data,), {"verify": True}),
    ]
    for args, kw in calls:
        assert FAST.try_decode_frame(*args, **kw) is NotImplemented
        same_outcome(
            outcome_any(codec.decode_frame, *args, **kw),
            outcome_any(codec.decode_frame_py, *args, **kw),
        )
    buf = bytearray(200)
    assert FAST.try_encode_frame(plain_frame(), pkt, buf, -1) is NotImplemented
    assert FAST.try_encode_frame(plain_frame(), pkt, buf, offset=0) is NotImplemented
    assert FAST.try_encode_frame(plain_frame(), pkt, bytes(200)) is NotImplemented
    with pytest.raises(WireError):
        codec.encode_frame(plain_frame(), pkt, bytes(200))  # type: ignore[arg-type]
    assert codec.encode_frame(plain_frame(), pkt, buf, offset=3) == len(data)
    assert buf[3 : 3 + len(data)] == data
    assert codec.decode_packet(data, offset=62, end=len(data) - 4).bth.opcode is pkt.bth.opcode


def outcome_any(fn: Any, *args: Any, **kw: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(*args, **kw)
    except Exception as exc:  # any exception type: compared by type and text
        return "error", (type(exc).__name__, str(exc))


@needs_c
def test_payload_aliasing_the_output_buffer() -> None:
    """A payload that is a view of the very buffer being written gives the reference's bytes."""
    pkt = clone(sample_packets()[8])
    bc, bp = garbage(3000), garbage(3000)
    pc, pp = clone(pkt), clone(pkt)
    pc.payload = memoryview(bc)[40:1063]
    pp.payload = memoryview(bp)[40:1063]
    assert FAST is not None
    n = FAST.try_encode_frame(plain_frame(), pc, bc, 0)
    assert n == codec.encode_frame_py(plain_frame(), pp, bp, 0) and bc == bp


@needs_c
def test_decoded_addresses_may_be_shared_but_are_right() -> None:
    """C reuses the bytes object of an address that repeats; values follow the wire."""
    a = codec.build_frame(plain_frame(), sample_packets()[0])
    b = codec.build_frame(plain_frame(ip_src=bytes(range(16))), sample_packets()[0])
    fa = codec.decode_frame(a)[0]
    fb = codec.decode_frame(b)[0]
    fa2 = codec.decode_frame(a)[0]
    assert fb.ip_src == bytes(range(16)) and fa.ip_src == fa2.ip_src == plain_frame().ip_src
    strict_equal(fa2, codec.decode_frame_py(a)[0], "frame")


def test_programs_cover_every_stack() -> None:
    """One program per (table, opcode, TSETH) and fields taken from the same plans as Python."""
    progs = fastpath.programs()
    assert len(progs) == 3 * len(STACK_KEYS)
    for prog in progs:
        if prog.table == fastpath.TABLE_ETH:
            stack = codec._ETH_STACKS.build(prog.key)
            assert stack is not None and stack.size == prog.size


@needs_c
def test_configure_rejects_programs_that_would_leave_the_stack() -> None:
    """C validates every program (offsets, widths, slots) instead of trusting its input."""
    assert FAST is not None
    refs: dict[str, Callable[..., Any]] = {
        "encode_frame": codec.encode_frame_py,
        "decode_frame": codec.decode_frame_py,
        "encode_packet": codec.encode_packet_py,
        "decode_packet": codec.decode_packet_py,
    }
    good = fastpath.config(refs)
    victim = good["programs"][0]
    ops = victim[-1]

    def corrupt(index: int, value: object) -> dict[str, Any]:
        op = list(ops[0])
        op[index] = value
        prog = (*victim[:-1], (tuple(op), *ops[1:]))
        return {**good, "programs": [prog]}

    bad = [
        corrupt(0, victim[3]),  # word starts at the end of the stack
        corrupt(1, 3),  # no 3-byte words
        corrupt(2, 60),  # shift beyond the word
        corrupt(3, 65),  # width beyond 64 bits
        corrupt(4, 9),  # unknown kind
        corrupt(5, 7),  # object index out of range
        corrupt(6, "no_such_slot"),
        corrupt(10, 99),  # unknown register
        {**good, "programs": [victim, victim]},  # duplicate
        {**good, "mask": b"\xff"},
    ]
    try:
        for config in bad:
            with pytest.raises((ValueError, TypeError)):
                FAST.configure(config)
    finally:
        FAST.configure(good)
    data = codec.build_frame(plain_frame(), sample_packets()[0])
    assert FAST.try_decode_frame(data) is not NotImplemented


def _references() -> dict[str, Callable[..., Any]]:
    return {
        "encode_frame": codec.encode_frame_py,
        "decode_frame": codec.decode_frame_py,
        "encode_packet": codec.encode_packet_py,
        "decode_packet": codec.decode_packet_py,
    }


@needs_c
def test_configure_is_refused_while_a_call_runs() -> None:
    """The crc32 callable is Python code run in the middle of a call: reconfiguring from there
    (or from another thread while zlib runs without the GIL) would free the program the call
    is executing. configure() must refuse, and the running call must finish correctly."""
    assert FAST is not None
    good = fastpath.config(_references())
    refused: list[str] = []

    def reconfiguring_crc32(data: memoryview, value: int = 0) -> int:
        try:
            FAST.configure(good)
        except RuntimeError as exc:
            refused.append(str(exc))
        return zlib.crc32(data, value)

    pkt = sample_packets()[0]
    data = codec.build_frame(plain_frame(), pkt)
    try:
        FAST.configure({**good, "crc32": reconfiguring_crc32})
        buf = bytearray(len(data))
        assert FAST.try_encode_frame(plain_frame(), clone(pkt), buf) == len(data)
        assert buf == data
        strict_equal(FAST.try_decode_frame(bytes(data)), codec.decode_frame_py(data), "decoded")
    finally:
        FAST.configure(good)
    assert len(refused) == 2, refused
    assert FAST.try_decode_frame(data) is not NotImplemented


@needs_c
def test_crc32_callable_cannot_keep_a_view_of_raw_memory() -> None:
    """The crc32 callable gets a view into the caller's buffer. One it keeps must pin that
    buffer like any memoryview (a view of raw memory would read freed memory once the
    bytearray is resized), and must be read-only."""
    assert FAST is not None
    good = fastpath.config(_references())
    kept: list[memoryview] = []

    def keeping_crc32(data: memoryview, value: int = 0) -> int:
        kept.append(data)
        return zlib.crc32(data, value)

    pkt = sample_packets()[0]
    data = bytearray(codec.build_frame(plain_frame(), pkt))
    out = bytearray(len(data) + 8)
    try:
        FAST.configure({**good, "crc32": keeping_crc32})
        decoded = FAST.try_decode_frame(data)
        assert FAST.try_encode_frame(plain_frame(), clone(pkt), out, 8) == len(data)
    finally:
        FAST.configure(good)
    assert decoded is not NotImplemented and len(kept) == 2
    del decoded
    for view, owner in zip(kept, (data, out)):
        assert view.readonly and view.obj is owner
        with pytest.raises(BufferError):
            owner.clear()  # pinned: its memory stays valid while the view lives
        assert bytes(view) in bytes(owner)
    del view
    kept.clear()
    data.clear()
    out.clear()


def test_unconfigured_module_is_an_error_not_a_result() -> None:
    """Before configure() the entry points have no reference to hand over to: they must raise,
    not return NotImplemented as if it were a decoded frame."""
    ext = next(e for e in cext.discover() if e.module == fastpath.MODULE)
    if not ext.target.exists():
        pytest.skip(f"{ext.module} is not built")
    code = (  # loaded by path: importing hosts.wire would configure it
        "import importlib.util as u\n"
        f"spec = u.spec_from_file_location('_fastwire', {str(ext.target)!r})\n"
        "m = u.module_from_spec(spec)\n"
        "for call in (lambda: m.decode_frame(b''), lambda: m.encode_packet(1, 2),\n"
        "             lambda: m.decode_packet(b''), lambda: m.encode_frame(1, 2, 3)):\n"
        "    try:\n"
        "        r = call()\n"
        "    except RuntimeError:\n"
        "        continue\n"
        "    raise SystemExit(f'returned {r!r}')\n"
        "assert m.try_decode_frame(b'') is NotImplemented\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ 16-bit length limits
def _jumbo_write(payload_len: int) -> MrcPacket:
    return MrcPacket(
        Bth(opcode=Opcode.WRITE_MIDDLE, dest_qp=7, psn=1),
        meth=Meth(rqmsn=0, msn=1),
        reth=Reth(va=0x1000, rkey=9, dma_len=payload_len),
        payload=bytes(payload_len),
    )


@pytest.mark.parametrize("make_frame", [plain_frame, srv6_frame], ids=["plain", "srv6"])
def test_packets_the_16_bit_lengths_cannot_describe_raise_in_both_backends(
    make_frame: Callable[..., Frame],
) -> None:
    """Before: the IPv6/UDP lengths wrapped modulo 2**16 and the frame was unreadable."""
    frame = make_frame()
    # the largest payload whose every 16-bit length (UDP, inner and outer IPv6 payload) fits
    overhead = codec.frame_len(frame, _jumbo_write(0)) - L.ETH.size - L.IPV6.size
    fits = (0xFFFF - overhead) & ~3
    buf = bytearray(codec.frame_len(frame, _jumbo_write(fits + 4)))
    for encode in ([codec.encode_frame_py] + ([FAST.try_encode_frame] if FAST else [])):
        n = encode(clone(frame), _jumbo_write(fits), memoryview(buf), 0)
        assert n == codec.frame_len(frame, _jumbo_write(fits))
        _frame, got = codec.decode_frame(memoryview(buf)[:n])
        assert len(got.payload) == fits
    for encode in (codec.encode_frame, codec.encode_frame_py):
        with pytest.raises(WireError, match="packet too large"):
            encode(clone(frame), _jumbo_write(fits + 4), memoryview(buf), 0)
    if FAST is not None:
        assert FAST.try_encode_frame(clone(frame), _jumbo_write(fits + 4), memoryview(buf),
                                     0) is NotImplemented

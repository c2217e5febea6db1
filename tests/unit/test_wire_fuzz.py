"""Property tests: random and mutated bytes only ever raise WireError; random packets round-trip."""

from __future__ import annotations

from dataclasses import fields

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hosts.wire import (
    Bth,
    EvMode,
    Frame,
    MrcPacket,
    Opcode,
    Srv6Outer,
    WireError,
    build_frame,
    decode_frame,
    decode_packet,
    ev_to_fields,
)
from hosts.wire import layout as L
from hosts.wire.codec import HEADER_CLASSES
from hosts.wire.samples import plain_frame, sample_packets, srv6_frame

FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = [
    build_frame(f, p)
    for f in (plain_frame(), srv6_frame(0), srv6_frame(2))
    for p in sample_packets()
]


def _decode_only_wire_errors(data: bytes, verify: bool) -> None:
    try:
        frame, pkt = decode_frame(data, verify_icrc=verify)
    except WireError as exc:
        assert isinstance(exc.reason, str) and exc.reason
        assert 0 <= exc.offset <= max(len(data), 0) + 64
        return
    assert isinstance(frame, Frame) and isinstance(pkt, MrcPacket)
    assert len(pkt.payload) <= len(data)


@FAST
@given(st.binary(max_size=300), st.booleans())
def test_random_bytes_decode_or_wire_error(data: bytes, verify: bool) -> None:
    _decode_only_wire_errors(data, verify)


@FAST
@given(st.binary(max_size=200), st.integers(0, 220), st.integers(0, 220))
def test_random_bytes_decode_packet(data: bytes, offset: int, end: int) -> None:
    try:
        pkt = decode_packet(data, offset, end)
    except WireError:
        return
    assert isinstance(pkt.bth, Bth)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[i] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del data[i:]
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=20))
        else:
            del data[i : i + draw(st.integers(1, 20))]
    return bytes(data)


@FAST
@given(mutated(), st.booleans())
def test_mutated_frames_decode_or_wire_error(data: bytes, verify: bool) -> None:
    _decode_only_wire_errors(data, verify)


@FAST
@given(st.sampled_from(SEEDS), st.integers(0, 200))
def test_every_truncation_is_handled(data: bytes, cut: int) -> None:
    _decode_only_wire_errors(data[: max(0, len(data) - cut)], True)


def _header_strategy(attr: str) -> st.SearchStrategy[object]:
    layout = L.MRC_HEADERS[attr]
    cls = HEADER_CLASSES[attr]
    kwargs: dict[str, st.SearchStrategy[object]] = {}
    for f in layout.fields:
        if f.kind == "f":
            kwargs[f.name] = st.booleans()
        elif f.kind == "s":
            kwargs[f.name] = st.integers(-(1 << (f.width - 1)), (1 << (f.width - 1)) - 1)
        else:
            kwargs[f.name] = st.integers(0, (1 << f.width) - 1)
    assert [f.name for f in fields(cls)] == list(kwargs)
    return st.builds(cls, **kwargs)


@st.composite
def packets(draw: st.DrawFn) -> MrcPacket:
    op = draw(st.sampled_from(list(L.OPCODE_HEADERS)))
    bth = Bth(
        opcode=op,
        se=draw(st.booleans()),
        m=draw(st.booleans()),
        tver=draw(st.integers(0, 15)),
        pkey=draw(st.integers(0, 0xFFFF)),
        fecn=draw(st.booleans()),
        becn=draw(st.booleans()),
        dest_qp=draw(st.integers(0, (1 << 24) - 1)),
        ack_req=draw(st.booleans()),
        rtx=draw(st.booleans()),
        psn=draw(st.integers(0, (1 << 24) - 1)),
    )
    pkt = MrcPacket(bth)
    for attr in L.OPCODE_HEADERS[op]:
        if attr in L.OPTIONAL_HEADERS and not draw(st.booleans()):
            continue
        setattr(pkt, attr, draw(_header_strategy(attr)))
    if op in L.PAYLOAD_OPCODES:
        pkt.payload = draw(st.binary(max_size=64))
    return pkt


@st.composite
def frames(draw: st.DrawFn) -> Frame:
    mode = draw(st.sampled_from(list(EvMode)))
    ev = draw(st.integers(0, (1 << 32) - 1))
    sport, fl = ev_to_fields(mode, ev)
    frame = Frame(
        eth_dst=draw(st.binary(min_size=6, max_size=6)),
        eth_src=draw(st.binary(min_size=6, max_size=6)),
        ip_src=draw(st.binary(min_size=16, max_size=16)),
        ip_dst=draw(st.binary(min_size=16, max_size=16)),
        dscp=draw(st.integers(0, 63)),
        ecn=draw(st.integers(0, 3)),
        flow_label=fl,
        hop_limit=draw(st.integers(0, 255)),
        udp_sport=sport,
    )
    if mode == EvMode.SRV6:
        nseg = draw(st.integers(0, 3))
        frame.srv6 = Srv6Outer(
            src=draw(st.binary(min_size=16, max_size=16)),
            dst=draw(st.binary(min_size=16, max_size=16)),
            segments=tuple(draw(st.binary(min_size=16, max_size=16)) for _ in range(nseg)),
            segments_left=draw(st.integers(0, nseg)),
            dscp=draw(st.integers(0, 63)),
            ecn=draw(st.integers(0, 3)),
            flow_label=draw(st.integers(0, (1 << 20) - 1)),
            hop_limit=draw(st.integers(0, 255)),
        )
    return frame


@FAST
@given(frames(), packets())
def test_random_packets_round_trip(frame: Frame, pkt: MrcPacket) -> None:
    data = build_frame(frame, pkt)
    frame2, pkt2 = decode_frame(data)
    assert frame2 == frame
    assert bytes(pkt2.payload) == bytes(pkt.payload)
    pkt2.payload = pkt.payload
    assert pkt2 == pkt
    assert pkt2.bth.opcode == Opcode(pkt.bth.opcode)


def test_non_bytes_inputs_are_wire_errors() -> None:
    import array

    for weird in ["text", 5, None, 3.5]:
        try:
            decode_frame(weird)  # type: ignore[arg-type]
        except WireError as exc:
            assert "bytes-like" in exc.reason
        else:
            raise AssertionError("accepted a non-bytes frame")
    wide = array.array("H", SEEDS[0][: len(SEEDS[0]) // 2 * 2])
    frame, _pkt = decode_frame(memoryview(wide), verify_icrc=False)  # cast to bytes, not an error
    assert isinstance(frame, Frame)

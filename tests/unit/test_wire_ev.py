"""EV placement in the headers: inverse pairs, documented bit positions, across the wire."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hosts.wire import EvMode, build_frame, decode_frame, ev_to_fields, fields_to_ev
from hosts.wire.samples import plain_frame, sample_packets


@given(st.integers(0, (1 << 32) - 1))
def test_structured_ev_split_is_documented_and_invertible(ev: int) -> None:
    sport, fl = ev_to_fields(EvMode.STRUCTURED, ev)
    assert sport == ev % 65536  # low 16 bits -> UDP source port
    assert fl == ev // 65536  # high 16 bits -> flow label bits 15..0
    assert fl < (1 << 16)  # flow label bits 19..16 stay zero
    assert fields_to_ev(EvMode.STRUCTURED, sport, fl) == ev


@given(st.integers(0, (1 << 16) - 1), st.sampled_from([EvMode.ECMP, EvMode.SRV6]))
def test_sport_only_modes(ev: int, mode: EvMode) -> None:
    assert ev_to_fields(mode, ev) == (ev, 0)
    assert fields_to_ev(mode, ev, 0xFFFFF) == ev


def test_structured_ev_survives_the_wire() -> None:
    ev = 0xA1B2C3D4
    sport, fl = ev_to_fields(EvMode.STRUCTURED, ev)
    frame, _ = decode_frame(
        build_frame(plain_frame(udp_sport=sport, flow_label=fl), sample_packets()[-1])
    )
    assert fields_to_ev(EvMode.STRUCTURED, frame.udp_sport, frame.flow_label) == ev

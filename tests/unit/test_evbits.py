"""common.evbits: structured-EV subfields, uSID containers from templates, shift-and-forward."""

from __future__ import annotations

import ipaddress

import pytest

from common.evbits import (
    UsidSlot,
    UsidTemplate,
    ev_subfield,
    ev_with_subfield,
    usid_active,
    usid_container,
    usid_end_of_container,
    usid_shift,
)


def test_ev_subfields_msb_first() -> None:
    ev = 0xAB_C_D_1234  # T0 8 bits, T1 4, T2 4, rest 16
    assert ev_subfield(ev, 0, 8) == 0xAB
    assert ev_subfield(ev, 8, 4) == 0xC
    assert ev_subfield(ev, 12, 4) == 0xD
    assert ev_with_subfield(ev, 8, 4, 0x3) == 0xAB_3_D_1234
    with pytest.raises(ValueError):
        ev_subfield(ev, 30, 4)
    with pytest.raises(ValueError):
        ev_with_subfield(ev, 0, 4, 16)


def test_usid_container_from_template_and_ev() -> None:
    # block fc00:0000, then: leaf uplink chosen by EV bits 0-1, spine uSID fixed, dst leaf chosen by
    # EV bits 2-3 placed in the low bits of the uSID, then the destination host uSID.
    tpl = UsidTemplate(
        block=0xFC000000,
        slots=(
            UsidSlot(base=0x0100, ev_shift=0, ev_width=2),
            UsidSlot(base=0x0200),
            UsidSlot(base=0x0300, ev_shift=2, ev_width=2, usid_shift=4),
            UsidSlot(base=0x0400),
        ),
    )
    addr = usid_container(tpl, ev=0b1110)
    assert ipaddress.IPv6Address(addr) == ipaddress.IPv6Address("fc00:0:102:200:330:400::")
    assert usid_active(addr) == 0x0102
    nxt = usid_shift(addr)
    assert ipaddress.IPv6Address(nxt) == ipaddress.IPv6Address("fc00:0:200:330:400::")
    for _ in range(3):
        nxt = usid_shift(nxt)
    assert usid_end_of_container(nxt) and nxt[:4] == addr[:4]


def test_usid_template_limits() -> None:
    with pytest.raises(ValueError):
        UsidTemplate(block=1, slots=tuple(UsidSlot(base=1) for _ in range(7)))
    with pytest.raises(ValueError):
        UsidTemplate(block=1 << 32, slots=())
    with pytest.raises(ValueError):
        UsidTemplate(block=1, slots=(UsidSlot(base=1, ev_width=4, usid_shift=14),))

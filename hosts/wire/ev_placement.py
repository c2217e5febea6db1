"""Where an entropy value travels in the headers, per path mode.

- ECMP (controller mode UDP): the EV is 16 bits and is the UDP source port.
- Structured EV (STEV): a 32-bit EV; low 16 bits in the UDP source port, high 16 bits in the
  low 16 bits of the 20-bit IPv6 flow label (flow-label bits 19..16 are zero).
- SRv6 uSID: the EV's low 16 bits stay in the UDP source port (reflected in SACK/NACK); the
  path is the uSID container built from a per-destination template plus the EV's per-tier
  choices (common.evbits.usid_container).

The arithmetic of EV subfields and uSID templates is common.evbits (shared with topologies);
see docs/wire-format.md.
"""

from __future__ import annotations

from hosts.wire.enums import EvMode


def ev_to_fields(mode: EvMode, ev: int) -> tuple[int, int]:
    """EV -> (udp_sport, flow_label). Non-STEV modes leave the flow label 0."""
    if mode == EvMode.STRUCTURED:
        return ev & 0xFFFF, (ev >> 16) & 0xFFFF
    return ev & 0xFFFF, 0


def fields_to_ev(mode: EvMode, udp_sport: int, flow_label: int = 0) -> int:
    """(udp_sport, flow_label) -> EV; the inverse of ev_to_fields."""
    if mode == EvMode.STRUCTURED:
        return ((flow_label & 0xFFFF) << 16) | (udp_sport & 0xFFFF)
    return udp_sport & 0xFFFF

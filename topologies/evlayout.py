"""Structured-EV field layout and SRv6 uSID templates, derived from a topology.

A *choice point* is a switch with more than one shortest-path next hop toward a destination.
Every choice is made by the switch's tier: tier 0 (leaf) picks its uplink, tier 1 (spine or
aggregation) its uplink or, at the top, the downlink into the destination pod, and so on.
Field ``T<t>`` of the EV holds the index of the next hop chosen at tier t. Fields are packed
from the EV's most significant bit (T0 first), each ``ceil(log2(max fan-out))`` bits wide;
the EV is 32 bits in Structured-EV mode (high 16 bits in the flow label, low 16 in the UDP
source port, see hosts/wire/ev_placement.py) and 16 bits in SRv6 mode (UDP source port). Bits after the
fields are free entropy. A switch maps field value v to next hop ``v mod n``; EV generators
may keep each field below the fan-out. In SRv6 mode a group of n switches that is not a power
of two answers to alias uSIDs (addressing.py), so value v also selects index v mod n there,
as long as v is below the next power of two of n.

SRv6: the container of a (source, destination) pair lists, for each choice point on the way,
the uSID of the chosen switch. The candidates of a choice point are one uSID group (see
addressing.py), so the template slot is ``group base | EV field``. The switch owning the
last uSID decapsulates and routes the inner packet to the destination GID.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from common.evbits import UsidSlot, UsidTemplate, ev_subfield, ev_with_subfield
from topologies.addressing import AddressError, usid_block, usid_of
from topologies.model import Topology
from topologies.paths import attached_switch, next_hops

STEV_BITS = 32
SRV6_EV_BITS = 16


class LayoutError(ValueError):
    """The topology does not admit a Structured-EV layout or SRv6 templates."""


@dataclass(frozen=True, slots=True)
class EvField:
    """One per-tier field: ``width`` bits starting ``msb_offset`` bits below the EV's MSB."""

    tier: int
    msb_offset: int
    width: int
    fanout: int  # largest number of next hops at this tier

    def shift(self, total_bits: int) -> int:
        """Right shift that brings the field to bit 0 of a ``total_bits`` EV."""
        return total_bits - self.msb_offset - self.width

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def extract(self, ev: int, total_bits: int) -> int:
        return ev_subfield(ev, self.msb_offset, self.width, total_bits)

    def insert(self, ev: int, value: int, total_bits: int) -> int:
        try:
            return ev_with_subfield(ev, self.msb_offset, self.width, value, total_bits)
        except ValueError as exc:
            raise ValueError(f"T{self.tier}: {exc}") from None


@dataclass(frozen=True, slots=True)
class EvLayout:
    fields: tuple[EvField, ...]

    def field(self, tier: int) -> EvField | None:
        return next((f for f in self.fields if f.tier == tier), None)

    @property
    def used_bits(self) -> int:
        return sum(f.width for f in self.fields)

    def compose(self, choices: dict[int, int], total_bits: int, entropy: int = 0) -> int:
        """An EV whose field T<t> is ``choices[t]``; the remaining low bits are ``entropy``."""
        free = total_bits - self.used_bits
        ev = entropy & ((1 << free) - 1) if free > 0 else 0
        for tier, value in choices.items():
            fld = self.field(tier)
            if fld is None:
                raise ValueError(f"no T{tier} field in this layout")
            ev = fld.insert(ev, value, total_bits)
        return ev


def _choice_tiers_below(
    topo: Topology, plane: int, dst: str, sw: str, memo: dict[str, frozenset[int]]
) -> frozenset[int]:
    """Tiers at which a choice is made on some path from ``sw`` (inclusive) to ``dst``."""
    if sw in memo:
        return memo[sw]
    table = next_hops(topo, plane, dst)
    hops = table.get(sw, ())
    out: set[int] = set()
    tier = topo.node(sw).tier
    if len(hops) > 1 and tier is not None:
        out.add(tier)
    for hop in hops:
        if hop.peer in table:
            below = _choice_tiers_below(topo, plane, dst, hop.peer, memo)
            if len(hops) > 1 and tier in below:
                raise LayoutError(
                    f"plane {plane}: paths to {dst} make two choices at tier {tier} "
                    f"({sw} and again below {hop.peer}); one EV field per tier cannot encode them"
                )
            out |= below
    memo[sw] = frozenset(out)
    return memo[sw]


@cache
def ev_layout(topo: Topology) -> EvLayout:
    """The per-tier field layout (same for every plane). Raises LayoutError if impossible."""
    fanout: dict[int, int] = {}
    for plane in range(topo.fabric.planes):
        for dst in topo.hosts:
            memo: dict[str, frozenset[int]] = {}
            for sw, hops in next_hops(topo, plane, dst.name).items():
                _choice_tiers_below(topo, plane, dst.name, sw, memo)
                tier = topo.node(sw).tier
                if len(hops) > 1 and tier is not None:
                    fanout[tier] = max(fanout.get(tier, 0), len(hops))
    fields = []
    offset = 0
    for tier in sorted(fanout):
        width = max(1, math.ceil(math.log2(fanout[tier])))
        fields.append(EvField(tier, offset, width, fanout[tier]))
        offset += width
    if offset > SRV6_EV_BITS:
        raise LayoutError(f"EV fields need {offset} bits, more than the {SRV6_EV_BITS} available")
    return EvLayout(tuple(fields))


def _slots_from(
    topo: Topology, plane: int, dst: str, sw: str, layout: EvLayout
) -> tuple[UsidSlot, ...]:
    table = next_hops(topo, plane, dst)
    if sw == dst or sw not in table:
        return ()
    hops = table[sw]
    if len(hops) == 1:
        return _slots_from(topo, plane, dst, hops[0].peer, layout)
    tier = topo.node(sw).tier
    fld = layout.field(tier if tier is not None else -1)
    assert fld is not None
    try:
        assign = [usid_of(topo, h.peer) for h in hops]
    except AddressError as exc:
        raise LayoutError(f"{sw}: next hops toward {dst} are not switches: {exc}") from None
    groups = {a.group for a in assign}
    indexes = [a.index for a in assign]
    if len(groups) != 1 or indexes != list(range(assign[0].group_size)):
        names = ", ".join(h.peer for h in hops)
        raise LayoutError(
            f"plane {plane}: at {sw} toward {dst} the next hops ({names}) are not one whole uSID "
            "group, so an SRv6 template cannot name them by EV bits"
        )
    base = assign[0].usid & ~((1 << 6) - 1)
    slot = UsidSlot(base, ev_shift=fld.shift(SRV6_EV_BITS), ev_width=fld.width)
    tails = {_slots_from(topo, plane, dst, h.peer, layout) for h in hops}
    if len(tails) != 1:
        raise LayoutError(
            f"plane {plane}: paths from the next hops of {sw} toward {dst} differ in structure; "
            "use explicit SRv6 EV lists"
        )
    return (slot, *tails.pop())


@cache
def srv6_template(topo: Topology, plane: int, src: str, dst: str) -> UsidTemplate:
    """The uSID template a host uses to reach ``dst`` through plane ``plane``.

    Its slots name, per choice point on the way, the uSID group of the candidates or'ed with
    the EV field of that tier; no slots means the destination shares the source's leaf.
    """
    layout = ev_layout(topo)
    first, _ = attached_switch(topo, src, plane)
    slots = _slots_from(topo, plane, dst, first, layout)
    if len(slots) > 6:
        raise LayoutError(f"{src} -> {dst}: {len(slots)} uSIDs do not fit one container")
    return UsidTemplate(usid_block(topo, plane), slots)

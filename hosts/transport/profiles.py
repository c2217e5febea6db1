"""EV and CC profiles: plain data the controller distributes and QPs are bound to at INIT.

An EV profile is the universe of entropy values a QP may spray over, each bound to a local
NIC port (plane). Three ways to give it (mrc_ctl EV profile modes):

- EXP: an explicit list of (ev, port) entries;
- GEN: generated from fields {width, init_val, min, max, mask}, ``per_plane`` values per port;
- SRV6: like EXP, plus a per-plane uSID template the agent uses to build the SRv6 path of an EV
  (common.evbits.usid_container); the EV still travels in the UDP source port for reflection.

``active_count`` EVs (0: all) are sprayed over at once; the rest are spares that replace an
active EV of the same plane when it leaves GOOD. ``ev_min_active`` is the least number of
usable EVs the datapath may leave: a datapath demotion (SKIP / ASSUMED_BAD) that would go below
it is not applied (counted instead). Controller DENIED always applies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from common.evbits import UsidTemplate
from hosts.wire import EvMode


class EvProfileMode(Enum):
    EXP = "EXP"
    GEN = "GEN"
    SRV6 = "SRV6"


@dataclass(slots=True, frozen=True)
class EvEntry:
    ev: int
    port: int


@dataclass(slots=True, frozen=True)
class EvGenSpec:
    """Generated EVs: start at init_val, step by one inside [min, max], apply mask, skip dups."""

    width: int = 16
    init_val: int = 0x8000
    min: int = 0x8000
    max: int = 0xFFFF
    mask: int = 0xFFFF


@dataclass(slots=True)
class EvProfile:
    profile_id: int
    mode: EvProfileMode = EvProfileMode.GEN
    path_mode: EvMode = EvMode.ECMP
    entries: list[EvEntry] = field(default_factory=list)  # EXP / SRV6
    gen: EvGenSpec = field(default_factory=EvGenSpec)  # GEN
    per_plane: int = 16  # GEN: EVs per port
    planes: int = 1  # GEN: number of ports
    usid_templates: dict[int, UsidTemplate] = field(default_factory=dict)  # SRV6: per plane
    active_count: int = 0
    ev_min_active: int = 1
    control_evs: list[EvEntry] = field(default_factory=list)  # optional EVs for control packets

    def expand(self) -> list[EvEntry]:
        """The profile's EVs in profile order (deterministic). Raises ValueError if empty."""
        if self.mode in (EvProfileMode.EXP, EvProfileMode.SRV6):
            out = list(self.entries)
        else:
            out = []
            g = self.gen
            span = g.max - g.min + 1
            if span <= 0:
                raise ValueError("EV generator: max < min")
            seen: set[int] = set()
            val = g.init_val
            for port in range(self.planes):
                made = 0
                tries = 0
                while made < self.per_plane and tries < span:
                    ev = (g.min + (val - g.min) % span) & g.mask & ((1 << g.width) - 1)
                    val += 1
                    tries += 1
                    if ev in seen:
                        continue
                    seen.add(ev)
                    out.append(EvEntry(ev, port))
                    made += 1
        if not out:
            raise ValueError(f"EV profile {self.profile_id} has no EVs")
        return out


@dataclass(slots=True)
class CcProfile:
    """CC profile: algorithm name and its parameters (interpreted by the CC factory)."""

    profile_id: int
    algorithm: str = "none"
    params: dict[str, float] = field(default_factory=dict)

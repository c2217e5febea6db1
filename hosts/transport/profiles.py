"""EV and CC profiles: plain data the controller distributes and QPs are bound to at INIT.

An EV profile is the universe of entropy values a QP may spray over, each bound to a local
NIC port (plane). Three ways to give it (mrc_ctl EV profile modes):

- EXP: an explicit list of (ev, port) entries;
- GEN: generated from mrc_ctl EV fields (common.evgen), ``per_plane`` distinct values per port
  (common.evgen.gen_per_port; the controller expands its GEN profiles with the same fields);
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
from common.evgen import DEFAULT_GEN, GenField, gen_per_port
from hosts.wire import EvMode


class EvProfileMode(Enum):
    EXP = "EXP"
    GEN = "GEN"
    SRV6 = "SRV6"


@dataclass(slots=True, frozen=True)
class EvEntry:
    ev: int
    port: int


@dataclass(slots=True)
class EvProfile:
    profile_id: int
    mode: EvProfileMode = EvProfileMode.GEN
    path_mode: EvMode = EvMode.ECMP
    entries: list[EvEntry] = field(default_factory=list)  # EXP / SRV6
    gen: tuple[GenField, ...] = DEFAULT_GEN  # GEN: fields, most significant first
    per_plane: int = 16  # GEN: EVs per port
    planes: int = 1  # GEN: number of ports
    usid_templates: dict[int, UsidTemplate] = field(default_factory=dict)  # SRV6: per plane
    active_count: int = 0
    ev_min_active: int = 1
    control_evs: list[EvEntry] = field(default_factory=list)  # optional EVs for control packets
    spray: str = "rotation"  # spraying policy by name (hosts/transport/spray.py SPRAY_POLICIES)

    def expand(self) -> list[EvEntry]:
        """The profile's EVs in profile order (deterministic). Raises ValueError if empty."""
        if self.mode in (EvProfileMode.EXP, EvProfileMode.SRV6):
            out = list(self.entries)
        else:
            for i, f in enumerate(self.gen):
                problem = f.problem()
                if problem:
                    raise ValueError(f"EV profile {self.profile_id} field {i}: {problem}")
            out = [EvEntry(ev, port) for ev, port in gen_per_port(self.gen, self.per_plane,
                                                                 self.planes)]
        if not out:
            raise ValueError(f"EV profile {self.profile_id} has no EVs")
        return out


@dataclass(slots=True)
class CcProfile:
    """CC profile: algorithm name and its parameters (interpreted by the CC factory)."""

    profile_id: int
    algorithm: str = "none"
    params: dict[str, float] = field(default_factory=dict)

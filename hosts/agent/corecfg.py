"""Build the transport core of an agent from its configuration.

The agent's ports become the core's ports (port i = plane i, its GID), the class map and MTU
are passed through, and a default EV profile (id 0, generated, ``evs_per_plane`` EVs on every
plane) is installed so QPs can bind to profile 0 before a controller distributes others.
"""

from __future__ import annotations

from hosts.agent.config import AgentConfig
from hosts.transport import EvProfile, EvProfileMode, HostConfig, HostCore, PortConfig

DEFAULT_EV_PROFILE = 0


def host_config(config: AgentConfig) -> HostConfig:
    return HostConfig(
        ports=[PortConfig(gid=p.gid) for p in config.ports],
        classes=config.classes,
        mtu=config.mtu,
        seed=config.seed,
        default_cc_window=config.cc_window,
        **config.core,  # type: ignore[arg-type]  # names and types checked by parse_core
    )


def default_ev_profile(config: AgentConfig) -> EvProfile:
    return EvProfile(
        profile_id=DEFAULT_EV_PROFILE,
        mode=EvProfileMode.GEN,
        path_mode=config.ev_mode,
        per_plane=config.evs_per_plane,
        planes=len(config.ports),
    )


def build_core(config: AgentConfig) -> HostCore:
    core = HostCore(host_config(config))
    core.set_ev_profile(default_ev_profile(config))
    return core

"""Kinds of switch node, by name: ``target_class("bmv2")``. One class per kind
(switch/targets/base.py says what each provides); the CLI's ``--switch`` lists ``KINDS``."""

from __future__ import annotations

from switch.targets.base import (
    DEFAULT_START_TIMEOUT,
    Launcher,
    ProcessSwitch,
    SwitchStartError,
    SwitchTarget,
    local_launcher,
)
from switch.targets.bmv2 import Bmv2Switch
from switch.targets.embedded import EmbeddedSwitch

_KINDS: dict[str, type[SwitchTarget]] = {}


def register(cls: type[SwitchTarget]) -> type[SwitchTarget]:
    """Make ``cls`` the class of its ``kind`` (a second class for a kind is an error)."""
    if cls.kind in _KINDS and _KINDS[cls.kind] is not cls:
        raise ValueError(f"switch kind {cls.kind!r} is already {_KINDS[cls.kind].__name__}")
    _KINDS[cls.kind] = cls
    return cls


register(EmbeddedSwitch)
register(Bmv2Switch)

DEFAULT_KIND = EmbeddedSwitch.kind


def kinds() -> list[str]:
    """Every registered kind, the default first."""
    return sorted(_KINDS, key=lambda k: (k != DEFAULT_KIND, k))


def target_class(kind: str) -> type[SwitchTarget]:
    """The class of ``kind``; ValueError naming the known kinds."""
    try:
        return _KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown switch kind {kind!r}; known: {', '.join(kinds())}") from None


__all__ = ["DEFAULT_KIND", "DEFAULT_START_TIMEOUT", "Bmv2Switch", "EmbeddedSwitch", "Launcher",
           "ProcessSwitch", "SwitchStartError", "SwitchTarget", "kinds", "local_launcher",
           "register", "target_class"]

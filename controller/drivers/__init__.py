"""Switch drivers by kind (the names of switch/targets/): ``driver_class("bmv2")``.

``parse_endpoint`` turns one entry of the controller's switch map (what a switch node's
``endpoint()`` wrote) into a ``SwitchEndpoint`` of a known kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.drivers.base import DriverError, SwitchDriver, SwitchEndpoint, SwitchFigures
from controller.drivers.bmv2 import Bmv2Driver
from controller.drivers.embedded import EmbeddedDriver

_DRIVERS: dict[str, type[SwitchDriver]] = {d.kind: d for d in (EmbeddedDriver, Bmv2Driver)}
DEFAULT_KIND = EmbeddedDriver.kind  # a switch-map entry that names no kind


def register(cls: type[SwitchDriver]) -> type[SwitchDriver]:
    if cls.kind in _DRIVERS and _DRIVERS[cls.kind] is not cls:
        raise ValueError(f"switch kind {cls.kind!r} already has driver "
                         f"{_DRIVERS[cls.kind].__name__}")
    _DRIVERS[cls.kind] = cls
    return cls


def driver_class(kind: str) -> type[SwitchDriver]:
    try:
        return _DRIVERS[kind]
    except KeyError:
        raise ValueError(f"unknown switch kind {kind!r}; known: "
                         f"{', '.join(sorted(_DRIVERS))}") from None


def parse_endpoint(name: str, entry: Mapping[str, Any]) -> SwitchEndpoint:
    """One switch-map entry -> endpoint (ValueError/KeyError/TypeError on a bad entry).
    ``target`` is the kind's key in switch maps written before the key was ``kind``."""
    kind = str(entry.get("kind", entry.get("target", DEFAULT_KIND)))
    cls = driver_class(kind)
    return SwitchEndpoint(str(entry["address"]), int(entry["device_id"]), kind,
                          cls.parse_extras(name, entry))


__all__ = ["DEFAULT_KIND", "DriverError", "SwitchDriver", "SwitchEndpoint", "SwitchFigures",
           "driver_class", "parse_endpoint", "register"]

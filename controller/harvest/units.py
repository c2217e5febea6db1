"""Quantities on the Harvest command line: parsed by common.units, reported as HarvestError."""

from __future__ import annotations

import math

from common.units import parse_prefixed, parse_seconds

from .model import HarvestError

# The unit names each quantity may carry after its prefix.
UNITS = {"B": ("B",), "bps": ("bps", "b/s", "bit/s")}


def parse_amount(text: str, unit: str, what: str) -> float:
    """Number with optional SI/IEC prefix and optional unit (``UNITS[unit]``): '4GiB', '800G'."""
    try:
        return parse_prefixed(text, UNITS[unit], what)
    except ValueError as exc:
        raise HarvestError(str(exc)) from None


def parse_time(text: str, what: str) -> float:
    """Seconds with optional unit: '500ns', '10us', '1e-3', '2ms'."""
    try:
        return parse_seconds(text, what)
    except ValueError as exc:
        raise HarvestError(str(exc)) from None


def fmt_time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "inf"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds:.3g} s"


def fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.4g} B"

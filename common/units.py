"""Parsing of human-written quantities: rates, durations, sizes, ratios, SI-prefixed amounts.

Two dialects share one number grammar and one splitter (``split_quantity``):

- topology files and the fabric CLIs (``parse_rate``, ``parse_duration``, ``parse_size``,
  ``parse_ratio``): a number (SI base unit: bit/s, seconds, bytes, fraction) or a string with
  a unit, case-insensitive (``1Gbps``, ``10us``, ``128KiB``, ``1%``), never negative;
- scheduler parameters (``parse_prefixed``, ``parse_seconds``): an optional SI or IEC prefix
  (case-sensitive: ``k``/``K`` 1e3, ``M`` 1e6, ``Ki`` 2**10, ...) then an optional unit name
  (``800G``, ``4GiB``, ``500ns``), finite, sign allowed (the caller bounds the value).

Every parser raises ValueError naming the accepted forms.
"""

from __future__ import annotations

import math
import re

_QUANTITY = re.compile(r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ%/]*)")

_RATE = {
    "bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12,
    "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
}  # fmt: skip
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3,
}  # fmt: skip


def split_quantity(text: str) -> tuple[str, float, str] | None:
    """``'1.5 ms'`` -> ``('1.5', 1.5, 'ms')``: the number as written, its value, the unit."""
    m = _QUANTITY.fullmatch(text.strip())
    return None if m is None else (m.group(1), float(m.group(1)), m.group(2))


def _split(value: object, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError(f"expected a {what} such as {example}, got {value!r}")
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        raise ValueError(f"expected a {what} such as {example}, got {value!r}")
    parts = split_quantity(value)
    if parts is None or parts[0][0] in "+-":
        raise ValueError(f"cannot parse {value!r} as a {what} (expected e.g. {example})")
    return parts[1], parts[2]


def parse_rate(value: object) -> float:
    """'1Gbps', '100Mbps', '10G', 1e9 -> bit/s. 0 means unlimited."""
    number, unit = _split(value, "rate", "1Gbps or 100Mbps")
    scale = _RATE.get(unit.lower().replace("bit/s", "bps").replace("b/s", "bps")) if unit else 1.0
    if scale is None:
        raise ValueError(f"unknown rate unit {unit!r} in {value!r} (use bps, Kbps, Mbps, Gbps)")
    return number * scale


def parse_duration(value: object) -> float:
    """'10us', '1.5ms', 2e-6 -> seconds."""
    number, unit = _split(value, "duration", "10us or 1ms")
    scale = _TIME.get(unit.lower()) if unit else 1.0
    if scale is None:
        raise ValueError(f"unknown time unit {unit!r} in {value!r} (use s, ms, us, ns)")
    return number * scale


def parse_size(value: object) -> int:
    """'128KiB', '1MB', 4096 -> bytes (whole number)."""
    number, unit = _split(value, "size", "4096 or 128KiB")
    scale = _SIZE.get(unit.lower()) if unit else 1
    if scale is None:
        raise ValueError(f"unknown size unit {unit!r} in {value!r} (use B, KB, KiB, MB, MiB)")
    result = number * scale
    if not math.isfinite(result) or result != int(result):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(result)


def parse_ratio(value: object) -> float:
    """'1%', 0.01 -> 0.01."""
    number, unit = _split(value, "ratio", "0.01 or 1%")
    if unit == "%":
        return number / 100.0
    if unit:
        raise ValueError(f"unknown ratio unit {unit!r} in {value!r} (use a fraction or %)")
    return number


_PREFIXES = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
             "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}  # fmt: skip
_SECONDS = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}


def _finite(value: float, what: str, text: str) -> float:
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {text!r}")
    return value


def parse_prefixed(text: str, units: tuple[str, ...], what: str) -> float:
    """Number, optional SI/IEC prefix, optional unit out of ``units``: '4GiB', '800G', '1e9'."""
    parts = split_quantity(text)
    if parts is not None:
        _, number, suffix = parts
        for prefix in sorted(_PREFIXES, key=len, reverse=True):
            if suffix.startswith(prefix) and suffix[len(prefix):] in ("", *units):
                return _finite(number * _PREFIXES[prefix], what, text)
    raise ValueError(f"cannot parse {what} {text!r} (examples: 4GiB, 800G, 1e9)")


def parse_seconds(text: str, what: str) -> float:
    """Seconds with an optional unit (s, ms, us, µs, ns, ps): '500ns', '10us', '1e-3'."""
    parts = split_quantity(text)
    if parts is None or parts[2] not in _SECONDS:
        raise ValueError(f"cannot parse {what} {text!r} (examples: 500ns, 10us, 1e-3)")
    return _finite(parts[1] * _SECONDS[parts[2]], what, text)


def format_rate(bps: float) -> str:
    for unit, scale in (("Tbps", 1e12), ("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g}{unit}"
    return f"{bps:g}bps" if bps else "unlimited"


def format_duration(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:g}{unit}"
    return f"{seconds / 1e-9:g}ns"

"""Parsing of human-written quantities in topology files: rates, durations, sizes, ratios.

Each parser accepts a number (SI base unit: bit/s, seconds, bytes, fraction) or a string with
a unit, and raises ValueError with the accepted forms on anything else.
"""

from __future__ import annotations

import re

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_RATE = {
    "bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12,
    "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
}  # fmt: skip
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3,
}  # fmt: skip


def _split(value: object, what: str, example: str) -> tuple[float, str]:
    if isinstance(value, bool):
        raise ValueError(f"expected a {what} such as {example}, got {value!r}")
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        raise ValueError(f"expected a {what} such as {example}, got {value!r}")
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ%/]*)", value.strip())
    if not m:
        raise ValueError(f"cannot parse {value!r} as a {what} (expected e.g. {example})")
    return float(m.group(1)), m.group(2)


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
    if result != int(result):
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

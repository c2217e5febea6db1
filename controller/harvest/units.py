"""Parsing of human quantities on the command line: 4GiB, 800G, 500ns, 10us."""

from __future__ import annotations

import math
import re

from .model import HarvestError

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
       "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_SUB = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}
_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"


def parse_amount(text: str, unit: str, what: str) -> float:
    """Number with optional SI/IEC prefix and optional unit: '4GiB', '800G', '1e9' (unit B, bps)."""
    m = re.fullmatch(_NUM + r"\s*(Ki|Mi|Gi|Ti|[kKMGTP]?)(?:" + unit + r")?", text.strip())
    if not m:
        raise HarvestError(f"cannot parse {what} {text!r} (examples: 4GiB, 800G, 1e9)")
    value = float(m.group(1)) * _SI[m.group(2)]
    if not math.isfinite(value):
        raise HarvestError(f"{what} must be finite, got {text!r}")
    return value


def parse_time(text: str, what: str) -> float:
    """Seconds with optional unit: '500ns', '10us', '1e-3', '2ms'."""
    m = re.fullmatch(_NUM + r"\s*(s|ms|us|µs|ns|ps)?", text.strip())
    if not m:
        raise HarvestError(f"cannot parse {what} {text!r} (examples: 500ns, 10us, 1e-3)")
    value = float(m.group(1)) * _SUB[m.group(2) or ""]
    if not math.isfinite(value):
        raise HarvestError(f"{what} must be finite, got {text!r}")
    return value


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

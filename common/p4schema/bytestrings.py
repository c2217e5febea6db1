"""P4Runtime byte strings: canonical encoding (no leading zero bytes) and width checks."""

from __future__ import annotations


def encode(value: int) -> bytes:
    """Canonical byte string of a non-negative int (b"\\x00" for zero), as servers return."""
    if value < 0:
        raise ValueError("P4Runtime byte strings encode non-negative integers")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def fits(data: bytes, bitwidth: int) -> bool:
    """True when ``data`` is non-empty and its value fits in ``bitwidth`` bits."""
    return bool(data) and int.from_bytes(data, "big") >> bitwidth == 0


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")

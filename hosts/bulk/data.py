"""The data of a bulk transfer and its verification: a reproducible pattern, digests, and the
byte-exact comparison of what landed with what was sent."""

from __future__ import annotations

import hashlib
import random

PATTERN_CHUNK = 16 << 20


def pattern(size: int, seed: int) -> bytearray:
    """The writer's data: reproducible, so anyone can check the sink's buffer independently.

    Drawn in chunks: ``randbytes`` of 256 MiB or more overflows a C int inside ``random``."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += rng.randbytes(min(PATTERN_CHUNK, size - len(out)))
    return out


def digest(buf: bytes | bytearray | memoryview) -> str:
    """SHA-256 (hex) of a buffer: what a sink reports for the data it holds."""
    return hashlib.sha256(buf).hexdigest()


def pattern_digest(size: int, seed: int) -> str:
    """The digest a sink of ``pattern(size, seed)`` must report."""
    return digest(pattern(size, seed))


def first_difference(got: bytes | bytearray | memoryview,
                     want: bytes | bytearray | memoryview) -> int | None:
    """The first offset at which two buffers differ (the shorter one's length when one is a
    prefix of the other), None when they are equal byte for byte."""
    a, b = memoryview(got).cast("B"), memoryview(want).cast("B")
    if a == b:
        return None
    n = min(len(a), len(b))
    lo, hi = 0, n  # the first difference is in [lo, hi], or at n
    while lo < hi:  # halve the range whose halves differ: O(log n) slice compares
        mid = (lo + hi) // 2
        if a[lo:mid + 1] != b[lo:mid + 1]:
            hi = mid
        else:
            lo = mid + 1
    return lo


__all__ = ["PATTERN_CHUNK", "digest", "first_difference", "pattern", "pattern_digest"]

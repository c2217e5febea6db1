"""PSN and timestamp arithmetic shared by requester and responder.

Inside the core PSNs are unbounded integers (no wrap logic in the hot paths); on the wire they
are 24 bits, and received values are unwrapped against a nearby reference PSN.
"""

from __future__ import annotations

PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1
_PSN_HALF = 1 << (PSN_BITS - 1)
MASK64 = (1 << 64) - 1
TS_PER_SECOND = 7_812_500.0  # TSETH ticks: 128 ns
TS_MASK = 0xFFFF
MPR_UNIT = 128  # MPR is given in units of 128 PSNs


def unwrap_psn(wire: int, ref: int) -> int:
    """The unbounded PSN closest to ``ref`` whose low 24 bits are ``wire``."""
    d = (wire - ref) & PSN_MASK
    if d >= _PSN_HALF:
        d -= 1 << PSN_BITS
    return ref + d


def unwrap16(wire: int, ref: int) -> int:
    d = (wire - ref) & 0xFFFF
    if d >= 0x8000:
        d -= 0x10000
    return ref + d


def ts16(now: float) -> int:
    """TSETH timestamp of ``now`` (128 ns units, 16 bits: wraps every 8.4 ms)."""
    return int(now * TS_PER_SECOND) & TS_MASK


def ts_elapsed(now: float, stamp: int) -> float:
    """Seconds from timestamp ``stamp`` to ``now`` (valid for intervals below 8.4 ms)."""
    return ((int(now * TS_PER_SECOND) - stamp) & TS_MASK) / TS_PER_SECOND


def ack_timeout(exponent: int) -> float:
    """Local ACK timeout of mrc.h: 1.024 us * 2**timeout; 0 means no timeout (infinite)."""
    if exponent <= 0:
        return float("inf")
    return 1.024e-6 * (1 << exponent)


def trailing_ones(x: int) -> int:
    return ((x ^ (x + 1)).bit_length()) - 1

"""The hash and checksum algorithms of BMv2 (src/bm_sim/calculations.cpp), bit-exact.

Each function takes the calculation's input bytes (fields packed MSB first, zero padded to a
whole byte at the end, see ``calcinput``) and returns the algorithm's integer output.

- ``crc16`` is CRC-16/ARC (reflected 0x8005, init 0; check value 0xBB3D for b"123456789").
- ``crc32`` is CRC-32/ISO-HDLC (zlib's).
- ``crcCCITT`` is CRC-16/CCITT-FALSE (0x1021, init 0xFFFF, not reflected).
- ``csum16``/``cksum16``: the Internet checksum (ones' complement of the ones' complement sum
  of big-endian 16-bit words, an odd last byte padded with zero).
- ``identity``: the first (at most) 8 bytes as a big-endian integer.
- ``xor16``/``xor32``: XOR of big-endian words, the last one zero padded.
- ``crc8/16/32/64_custom`` with BMv2's default parameters.
- ``round_robin`` / ``round_robin_consistent``: stateful, one counter per calculation.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable

HashFn = Callable[[bytes], int]


def _reflect(value: int, bits: int) -> int:
    out = 0
    for _ in range(bits):
        out = (out << 1) | (value & 1)
        value >>= 1
    return out


def _crc_table(width: int, poly: int) -> tuple[int, ...]:
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    table = []
    for dividend in range(256):
        rem = dividend << (width - 8)
        for _ in range(8):
            rem = ((rem << 1) ^ poly) if rem & top else rem << 1
        table.append(rem & mask)
    return tuple(table)


def _reflected_table(width: int, poly: int) -> tuple[int, ...]:
    """Table for the reflected (LSB-first) form of a CRC with polynomial ``poly``."""
    rpoly = _reflect(poly, width)
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ rpoly if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


def make_crc(width: int, poly: int, init: int, xorout: int, reflected: bool) -> HashFn:
    """A table-driven CRC of BMv2's ``crc_custom`` shape (data and remainder reflected alike)."""
    mask = (1 << width) - 1
    if reflected:
        rtable = _reflected_table(width, poly)
        rinit = _reflect(init, width)

        def crc_reflected(data: bytes) -> int:
            crc = rinit
            for byte in data:
                crc = (crc >> 8) ^ rtable[(crc ^ byte) & 0xFF]
            return (crc ^ xorout) & mask

        return crc_reflected
    table = _crc_table(width, poly)
    shift = width - 8

    def crc_plain(data: bytes) -> int:
        crc = init
        for byte in data:
            crc = table[((crc >> shift) ^ byte) & 0xFF] ^ ((crc << 8) & mask)
        return (crc ^ xorout) & mask

    return crc_plain


crc16 = make_crc(16, 0x8005, 0, 0, True)
crc_ccitt = make_crc(16, 0x1021, 0xFFFF, 0, False)
crc8_custom = make_crc(8, 0x07, 0, 0, False)
crc16_custom = make_crc(16, 0x8005, 0, 0, True)
crc32_custom = make_crc(32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True)
crc64_custom = make_crc(64, 0x1B, 0, 0, True)


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


_LITTLE = sys.byteorder == "little"


def csum16(data: bytes) -> int:
    if len(data) & 1:
        data = bytes(data) + b"\x00"
    # ones' complement sums do not depend on byte order: sum native words, swap at the end
    total = sum(memoryview(data).cast("H")) if data else 0
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    value = ~total & 0xFFFF
    if _LITTLE:
        value = ((value & 0xFF) << 8) | (value >> 8)
    return value


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def _xor(word: int) -> HashFn:
    def xor_hash(data: bytes) -> int:
        out = 0
        for i in range(0, len(data), word):
            chunk = data[i : i + word]
            out ^= int.from_bytes(chunk.ljust(word, b"\x00"), "big")
        return out

    return xor_hash


xor16 = _xor(2)
xor32 = _xor(4)

STATELESS: dict[str, HashFn] = {
    "crc16": crc16,
    "crc32": crc32,
    "crcCCITT": crc_ccitt,
    "csum16": csum16,
    "cksum16": csum16,
    "identity": identity,
    "xor16": xor16,
    "xor32": xor32,
    "crc8_custom": crc8_custom,
    "crc16_custom": crc16_custom,
    "crc32_custom": crc32_custom,
    "crc64_custom": crc64_custom,
}
STATEFUL = ("round_robin", "round_robin_consistent")
SUPPORTED = frozenset(STATELESS) | frozenset(STATEFUL)


class RoundRobin:
    """BMv2's ``round_robin``: 0, 1, 2, ... one per call, whatever the input."""

    def __init__(self) -> None:
        self.next = 0

    def __call__(self, data: bytes) -> int:
        value = self.next
        self.next += 1
        return value


class RoundRobinConsistent:
    """BMv2's ``round_robin_consistent``: a new input gets the next number, a known one its own."""

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}

    def __call__(self, data: bytes) -> int:
        value = self.seen.get(data)
        if value is None:
            value = self.seen[data] = len(self.seen)
        return value


def algorithm(name: str) -> HashFn:
    """A fresh instance of algorithm ``name`` (stateful ones get their own counter)."""
    if name == "round_robin":
        return RoundRobin()
    if name == "round_robin_consistent":
        return RoundRobinConsistent()
    return STATELESS[name]


def deterministic(name: str) -> bool:
    """Whether equal inputs always hash alike (results may then be cached)."""
    return name in STATELESS

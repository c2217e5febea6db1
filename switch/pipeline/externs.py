"""v1model externs the programs use: hash algorithms, counters, registers.

crc16 is CRC-16/ARC (reflected poly 0x8005, init 0, as BMv2's "crc16"; check value 0xBB3D for
b"123456789"), crc32 is zlib.crc32. Inputs are packed MSB first and padded to whole bytes, as
BMv2 does for hash() and action-selector keys.
"""

from __future__ import annotations

import zlib


def _crc16_arc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC16_TABLE = _crc16_arc_table()


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC of ``data`` (table driven)."""
    crc = 0
    table = _CRC16_TABLE
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def pack_fields(fields: list[tuple[int, int]]) -> bytes:
    """Pack (value, bitwidth) pairs MSB first into bytes, zero padded at the end."""
    value = 0
    total = 0
    for v, width in fields:
        value = (value << width) | (v & ((1 << width) - 1))
        total += width
    pad = (-total) % 8
    return (value << pad).to_bytes((total + pad) // 8, "big")


class CounterArray:
    """An indirect counter (packets and bytes per cell)."""

    __slots__ = ("bytes", "packets", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.packets = [0] * size
        self.bytes = [0] * size

    def count(self, index: int, nbytes: int) -> None:
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def reset(self) -> None:
        self.packets = [0] * self.size
        self.bytes = [0] * self.size


class RegisterArray:
    """A register array of ``bitwidth``-bit cells (values are masked on write)."""

    __slots__ = ("bitwidth", "cells", "mask", "size")

    def __init__(self, size: int, bitwidth: int) -> None:
        self.size = size
        self.bitwidth = bitwidth
        self.mask = (1 << bitwidth) - 1
        self.cells = [0] * size

    def read(self, index: int) -> int:
        return self.cells[index] if 0 <= index < self.size else 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.cells[index] = value & self.mask


HASH_ALGORITHMS = {"crc16": crc16_arc, "crc32": crc32}


def v1model_hash(algo: str, base: int, fields: list[tuple[int, int]], max_value: int) -> int:
    """v1model hash(): ``base + H(fields packed MSB first) % max`` (max 0 means no modulo)."""
    h = HASH_ALGORITHMS[algo](pack_fields(fields))
    return base + (h % max_value if max_value else h)

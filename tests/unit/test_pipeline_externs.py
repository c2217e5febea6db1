"""v1model externs: hash algorithms (CRC-16/ARC, CRC-32), field packing, counters, registers."""

from __future__ import annotations

import zlib

from switch.pipeline.externs import (
    CounterArray,
    RegisterArray,
    crc16_arc,
    crc32,
    pack_fields,
    v1model_hash,
)


def test_crc16_is_arc_not_ccitt() -> None:
    assert crc16_arc(b"123456789") == 0xBB3D  # CRC-16/ARC check value
    import binascii

    assert crc16_arc(b"123456789") != binascii.crc_hqx(b"123456789", 0)  # not XMODEM
    assert crc32(b"123456789") == 0xCBF43926 == zlib.crc32(b"123456789")


def test_fields_are_packed_msb_first_and_padded_at_the_end() -> None:
    assert pack_fields([(0x1, 1), (0x7F, 7)]) == b"\xff"
    assert pack_fields([(0x1FF, 9)]) == b"\xff\x80"
    assert pack_fields([(0xABC, 12), (0x3, 4), (0xFF, 8)]) == b"\xab\xc3\xff"
    assert pack_fields([(0x1FF, 4)]) == b"\xf0"  # values are masked to their width


def test_v1model_hash_is_base_plus_hash_mod_max() -> None:
    fields = [(0x20010DB8, 32), (4791, 16)]
    raw = crc16_arc(bytes.fromhex("20010db812b7"))
    assert v1model_hash("crc16", 10, fields, 4) == 10 + raw % 4
    assert v1model_hash("crc32", 0, fields, 0) == zlib.crc32(bytes.fromhex("20010db812b7"))


def test_counters_and_registers_ignore_out_of_range_indices_and_mask_values() -> None:
    c = CounterArray(4)
    c.count(3, 100)
    c.count(4, 100)
    c.count(-1, 100)
    assert (c.packets, c.bytes) == ([0, 0, 0, 1], [0, 0, 0, 100])
    r = RegisterArray(2, 3)
    r.write(1, 0xF)
    r.write(2, 1)
    assert (r.read(1), r.read(2)) == (7, 0)

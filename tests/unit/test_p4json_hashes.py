"""BMv2's hash algorithms in the p4json engine, against independent bitwise definitions, and
how calculation inputs are packed (MSB first at bit granularity, zero padded at the end,
fields of invalid headers left out)."""

from __future__ import annotations

import binascii
import random
import zlib

import pytest

from switch.p4json import hashes
from switch.p4json.engine import Engine
from switch.p4json.runtime import CounterArray, RegisterArray
from tests.unit.p4json_programs import BACKENDS, Builder, extract, field, hexstr, prim, to_port

CHECK = b"123456789"


def crc_bitwise(data: bytes, width: int, poly: int, init: int, xorout: int, refl: bool) -> int:
    """Textbook bit-at-a-time CRC (the Rocksoft model)."""
    top, mask = 1 << (width - 1), (1 << width) - 1
    crc = init
    for byte in data:
        if refl:
            byte = int(f"{byte:08b}"[::-1], 2)
        crc ^= byte << (width - 8)
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & mask if crc & top else (crc << 1) & mask
    if refl:
        crc = int(f"{crc:0{width}b}"[::-1], 2)
    return crc ^ xorout


def csum_reference(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def test_check_values() -> None:
    assert hashes.crc16(CHECK) == 0xBB3D  # CRC-16/ARC, not XMODEM:
    assert hashes.crc16(CHECK) != binascii.crc_hqx(CHECK, 0)
    assert hashes.crc32(CHECK) == 0xCBF43926 == zlib.crc32(CHECK)
    assert hashes.crc_ccitt(CHECK) == 0x29B1  # CRC-16/CCITT-FALSE
    assert hashes.identity(b"\x01\x02") == 0x0102
    assert hashes.identity(bytes(range(10))) == int.from_bytes(bytes(range(8)), "big")


@pytest.mark.parametrize("seed", range(5))
def test_algorithms_match_bitwise_definitions(seed: int) -> None:
    rng = random.Random(seed)
    for n in (0, 1, 2, 3, 7, 8, 40, 101):
        data = rng.randbytes(n)
        assert hashes.crc16(data) == crc_bitwise(data, 16, 0x8005, 0, 0, True)
        assert hashes.crc_ccitt(data) == crc_bitwise(data, 16, 0x1021, 0xFFFF, 0, False)
        assert hashes.crc32(data) == crc_bitwise(data, 32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True)
        assert hashes.crc8_custom(data) == crc_bitwise(data, 8, 0x07, 0, 0, False)
        assert hashes.csum16(data) == csum_reference(data)
        words = [int.from_bytes(data[i:i + 2].ljust(2, b"\0"), "big") for i in range(0, n, 2)]
        x = 0
        for wd in words:
            x ^= wd
        assert hashes.xor16(data) == x


def test_round_robin_counts_and_the_consistent_one_remembers() -> None:
    rr = hashes.algorithm("round_robin")
    assert [rr(b"a"), rr(b"a"), rr(b"b")] == [0, 1, 2]
    rc = hashes.algorithm("round_robin_consistent")
    assert [rc(b"a"), rc(b"b"), rc(b"a")] == [0, 1, 0]
    assert not hashes.deterministic("round_robin") and hashes.deterministic("crc16")


def _packing_engine(backend: str = "python") -> Engine:
    b = Builder()
    b.header_type("h_t", [("a", 1), ("b", 7), ("c", 9), ("d", 7), ("out", 64)])
    b.header_type("g_t", [("x", 8)])
    b.header("h", "h_t")
    b.header("g", "g_t")
    b.state("start", [extract("h")])
    b.order = ["h"]
    b.calculations.append({"name": "pack", "id": 0, "algo": "identity", "input": [
        field("h", "a"), field("h", "b"), field("g", "x"),  # g is never valid: left out
        {"type": "hexstr", "value": "0x5", "bitwidth": 3}, field("h", "c"),
    ]})
    b.chain("ingress", [b.call("ingress", "p", [
        to_port(1),
        prim("modify_field_with_hash_based_offset", field("h", "out"), hexstr(0),
             {"type": "calculation", "value": "pack"}, hexstr(1 << 64, 72)),  # % 2**64: all
    ])])
    return Engine(b.json(), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_calculation_inputs_are_packed_msb_first_and_padded(backend: str) -> None:
    engine = _packing_engine(backend)
    a, bb, c = 1, 0x55, 0x1A5
    head = ((a << 7 | bb) << 9 | c) << 7
    frame = head.to_bytes(3, "big") + bytes(8)
    out = engine.process(frame, 0)[0].data
    bits = (a << 7 | bb) << 3 | 0b101
    bits = bits << 9 | c  # 1 + 7 + 3 + 9 = 20 bits, padded to 24 at the end
    assert int.from_bytes(out[3:11], "big") == bits << 4


def test_counters_and_registers_ignore_out_of_range_indices_and_mask_values() -> None:
    c = CounterArray("c", 4)
    c.count(3, 100)
    c.count(4, 100)
    c.count(-1, 100)
    assert (list(c.packets), list(c.bytes)) == ([0, 0, 0, 1], [0, 0, 0, 100])
    r = RegisterArray("r", 2, 3)
    r.write(1, 0xF)
    r.write(2, 1)
    assert (r.read(1), r.read(2)) == (7, 0)

"""Registered memory regions: keys, virtual addresses, access flags and bounds checks.

A region wraps caller memory (bytearray or writable memoryview) without copying. Addresses are
virtual: each region gets a base VA of its own (page aligned, never overlapping) so the RETH
address of a packet identifies a byte inside exactly one region. Every remote access is checked
against key, access flag and bounds before a single byte is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntFlag


class Access(IntFlag):
    LOCAL_WRITE = 1 << 0
    REMOTE_WRITE = 1 << 1
    REMOTE_READ = 1 << 2  # accepted for API parity; MRC has no Read


ALL_ACCESS = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ
_REMOTE_WRITE = int(Access.REMOTE_WRITE)

_VA_BASE = 0x10_0000_0000
_VA_ALIGN = 1 << 16


@dataclass(slots=True, eq=False)
class MemoryRegion:
    """``buf`` viewed as bytes at virtual addresses [addr, addr + length)."""

    buf: memoryview
    addr: int
    length: int
    lkey: int
    rkey: int
    access: Access
    access_bits: int = 0  # plain-int copy of ``access`` for the per-packet check

    def contains(self, va: int, size: int) -> bool:
        return self.addr <= va and va + size <= self.addr + self.length and size >= 0

    def view(self, va: int, size: int) -> memoryview:
        """Bytes [va, va+size); the caller has checked ``contains``."""
        off = va - self.addr
        return self.buf[off : off + size]


class MemoryTable:
    """All regions of one host, found by lkey (local) or rkey (remote)."""

    def __init__(self) -> None:
        self._by_lkey: dict[int, MemoryRegion] = {}
        self._by_rkey: dict[int, MemoryRegion] = {}
        self._next_key = 0x100
        self._next_va = _VA_BASE

    def register(self, buf: bytearray | memoryview, access: int) -> MemoryRegion:
        view = memoryview(buf).cast("B")
        if view.readonly:
            raise ValueError("memory region must be writable (bytearray or writable memoryview)")
        length = view.nbytes
        lkey = self._next_key
        rkey = self._next_key + 1
        self._next_key += 2
        addr = self._next_va
        self._next_va += (length + _VA_ALIGN) // _VA_ALIGN * _VA_ALIGN + _VA_ALIGN
        mr = MemoryRegion(view, addr, length, lkey, rkey, Access(access), int(access))
        self._by_lkey[lkey] = mr
        self._by_rkey[rkey] = mr
        return mr

    def deregister(self, mr: MemoryRegion) -> None:
        self._by_lkey.pop(mr.lkey, None)
        self._by_rkey.pop(mr.rkey, None)

    def local(self, lkey: int, va: int, size: int) -> MemoryRegion | None:
        mr = self._by_lkey.get(lkey)
        if mr is None or not mr.contains(va, size):
            return None
        return mr

    def remote_write(self, rkey: int, va: int, size: int) -> MemoryRegion | None:
        """The region a remote Write of ``size`` bytes at ``va`` may land in, or None."""
        mr = self._by_rkey.get(rkey)
        if (
            mr is None
            or not mr.access_bits & _REMOTE_WRITE
            or va < mr.addr
            or va + size > mr.addr + mr.length
        ):
            return None
        return mr

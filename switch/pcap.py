"""Per-port packet capture to classic pcap files (nanosecond timestamps, Ethernet link type).

Written by the data-plane thread only while a capture is active, so an idle capture costs
nothing. Timestamps come from ``stamp_ns`` (Unix nanoseconds): the switch passes the run's
clock (``RunClock.unix_ns``: wall-clock time at TDF 1, virtual seconds counted from the
run's start under time dilation), so captures of several switches and hosts line up in
Wireshark.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import BinaryIO

PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
_FILE_HDR = struct.Struct("<IHHiIII")
_REC_HDR = struct.Struct("<IIII")

DIRECTIONS = ("both", "rx", "tx")


class PcapWriter:
    """Appends frames to a pcap file; ``close`` is idempotent."""

    def __init__(self, path: str, snaplen: int = 65535, direction: str = "both",
                 stamp_ns: Callable[[], int] = time.time_ns) -> None:
        if direction not in DIRECTIONS:
            raise ValueError(f"capture direction must be one of {DIRECTIONS}, got {direction!r}")
        if not 0 < snaplen <= 262144:
            raise ValueError(f"snaplen must be 1..262144, got {snaplen}")
        self.path = path
        self.snaplen = snaplen
        self.rx = direction in ("both", "rx")
        self.tx = direction in ("both", "tx")
        self.packets = 0
        self.error = ""
        self._stamp_ns = stamp_ns
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115
        self._file.write(_FILE_HDR.pack(PCAP_MAGIC_NS, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))

    def write(self, frame: bytes | memoryview) -> None:
        f = self._file
        if f is None:
            return
        ns = self._stamp_ns()
        caplen = min(len(frame), self.snaplen)
        try:
            f.write(_REC_HDR.pack(ns // 1_000_000_000, ns % 1_000_000_000, caplen, len(frame)))
            f.write(frame[:caplen])
        except OSError as exc:
            # Disk full or similar: the capture ends, forwarding goes on.
            self.error = str(exc)
            self.close()
            return
        self.packets += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

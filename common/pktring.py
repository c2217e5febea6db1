"""A packet socket's receive ring (PACKET_MMAP, TPACKET_V2): frames read without a syscall.

With ``recvmmsg`` the reader pays, per frame, for taking the frame off the socket's queue,
copying it to user space and freeing the kernel's buffer: measured on the switch flooded
with 4 KiB frames, 46 % of its CPU time. With a ring the kernel copies each frame into a
slot of memory shared with the process as it arrives (in the context of whoever delivered
it) and frees its buffer there; the reader walks the slots, copies each frame into a bytes
object and gives the slot back. ``select``/``poll`` on the socket still say when a frame is
ready, so the ring drops into a loop built on ``recvmmsg``.

The ring is allocated by the kernel when it is set up (``frames`` x ``frame_size`` bytes,
not swappable), so its size is planned per port (``frames_for``): enough slots for what the
port's link can deliver while the process does not read (``STALL_WALL`` seconds of wall
time, e.g. descheduled on a busy machine), at least ``MIN_FRAMES`` (a host's whole window may
come as one burst: its side of the link is shaped by the switch), at most ``FRAMES`` (1024
slots of 16 KiB, 16 MiB). A slot holds one frame of
up to ``frame_size`` minus the 80-byte slot header (frames here are at most the 9000-byte
MTU plus the Ethernet header); a longer frame is cut short by the kernel, which ``recv_bytes``
counts (``truncated``) and never returns. When every slot is full the kernel drops the frame
(``PACKET_STATISTICS``: ``kernel_drops``), as it drops on a full socket buffer.

The C accelerator (``common._pktio.ring_recv``) walks the ring; ``_recv_py`` is the
pure-Python reference (the same slots, the same order), used without the extension or with
``MRCNET_PURE_PYTHON=1``.
"""

from __future__ import annotations

import mmap
import socket
import struct
import time

from common import pktio

SOL_PACKET = 263
PACKET_RX_RING = 5
PACKET_STATISTICS = 6
PACKET_VERSION = 10
TPACKET_V2 = 1
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
HEADER_BYTES = 80  # struct tpacket2_hdr + sockaddr_ll + alignment before the frame's bytes
FRAME_SIZE = 16384  # one slot: a 9000-byte MTU frame with room to spare
FRAMES = 1024
MAX_FRAMES = 1 << 20  # slots per ring a command line may ask for
BLOCK_SIZE = 65536  # kernel allocation unit: 4 slots, so slot i is at i * FRAME_SIZE
STALL_WALL = 0.05  # wall seconds of arrivals a ring absorbs while its reader does not run
MIN_FRAMES = 128  # 2 MiB: a whole window of 4 KiB frames (or its ACKs) in one burst
NOMINAL_FRAME = 4096  # bytes per frame when sizing (the default MTU; ACKs are few per frame)


def frames_for(rate_bps: float, tdf: float = 1.0, frame_bytes: int = NOMINAL_FRAME) -> int:
    """Ring slots for a port whose link delivers ``rate_bps`` (virtual; 0: unlimited) on a
    clock ``tdf`` times slower than the wall clock (see the module docstring)."""
    if rate_bps <= 0:
        return FRAMES  # an unlimited link: as fast as the far end sends
    per_wall_second = rate_bps / 8 / frame_bytes / max(tdf, 1.0)
    wanted = int(per_wall_second * STALL_WALL) + 1
    return min(FRAMES, max(MIN_FRAMES, wanted))


def ring_bytes(frames: int, frame_size: int = FRAME_SIZE) -> int:
    """Kernel memory a ring of ``frames`` slots takes (whole blocks, as ``RxRing`` asks)."""
    if frames <= 0:
        return 0
    per_block = BLOCK_SIZE // frame_size
    return -(-frames // per_block) * BLOCK_SIZE


def check_frames(frames: int) -> int:
    """``frames`` when it is a ring size a command line may ask for (0: no ring)."""
    if not 0 <= frames <= MAX_FRAMES:
        raise ValueError(f"--rx-ring {frames}: 0..{MAX_FRAMES} slots per port")
    return frames


# struct tpacket2_hdr: status, len, snaplen, mac, net, sec, nsec (then vlan fields, padding)
_HDR = struct.Struct("=IIIHHII")
_STATS = struct.Struct("=II")  # struct tpacket_stats: packets, drops (reset when read)


class RxRing:
    """The receive ring of one AF_PACKET socket (set up before the socket is bound)."""

    def __init__(self, sock: socket.socket, frames: int = FRAMES,
                 frame_size: int = FRAME_SIZE, c_ext: bool | None = None) -> None:
        if frames < 1 or frame_size % 16 or not HEADER_BYTES < frame_size <= BLOCK_SIZE \
                or BLOCK_SIZE % frame_size:
            raise ValueError(f"ring of {frames} x {frame_size} bytes: frame size must divide "
                             f"{BLOCK_SIZE}, be a multiple of 16 and above {HEADER_BYTES}")
        per_block = BLOCK_SIZE // frame_size
        blocks = -(-frames // per_block)
        self.frames = blocks * per_block
        self.frame_size = frame_size
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        req = struct.pack("=IIII", BLOCK_SIZE, blocks, frame_size, self.frames)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        self._sock = sock
        self.map = mmap.mmap(sock.fileno(), blocks * BLOCK_SIZE, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        self.head = 0  # the next slot the kernel fills (it fills them in order)
        self.newest = 0.0  # receive time of the newest frame read (CLOCK_REALTIME)
        self.truncated = 0  # frames longer than a slot (dropped)
        self.kernel_drops = 0  # frames the kernel dropped on a full ring
        self.supported = True  # receive timestamps, as common.rxstamp.RxStamp has them
        c = pktio._c
        self._c = c if c_ext is None else (c if c_ext else None)
        if c_ext and c is None:
            raise RuntimeError(f"common._pktio unavailable: {pktio.why_pure()}")

    @property
    def size_bytes(self) -> int:
        """Kernel memory the ring holds."""
        return len(self.map)

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv_bytes(self, limit: int) -> list[bytes]:
        """Up to ``limit`` frames that arrived, oldest first, each its own bytes object."""
        if self.map.closed:
            raise OSError(9, "ring is closed")
        if self._c is not None:
            frames, self.head, newest, cut = self._c.ring_recv(
                self.map, self.head, self.frame_size, self.frames, limit)
        else:
            frames, newest, cut = self._recv_py(limit)
        if newest:
            self.newest = newest
        if cut:
            self.truncated += cut
        return frames  # type: ignore[no-any-return]

    def _recv_py(self, limit: int) -> tuple[list[bytes], float, int]:
        """The reference walk: slot by slot from ``head`` while the kernel has handed them
        over; each frame copied out, each slot given back."""
        ring, size, nslots = self.map, self.frame_size, self.frames
        frames: list[bytes] = []
        newest, cut = 0.0, 0
        while len(frames) < limit:
            off = self.head * size
            status, length, snap, mac, _net, sec, nsec = _HDR.unpack_from(ring, off)
            if not status & TP_STATUS_USER:
                break
            if snap < length or mac + snap > size:
                cut += 1
            else:
                frames.append(ring[off + mac:off + mac + snap])
            newest = sec + nsec * 1e-9
            struct.pack_into("=I", ring, off, TP_STATUS_KERNEL)
            self.head = (self.head + 1) % nslots
        return frames, newest, cut

    def age(self) -> float:
        """Wall seconds since the newest frame read arrived (0.0 before the first)."""
        if not self.newest:
            return 0.0
        age = time.time() - self.newest
        return age if age > 0.0 else 0.0

    def read_drops(self) -> int:
        """Add the kernel's drop count since the last read (it resets) to ``kernel_drops``."""
        raw = self._sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _STATS.size)
        self.kernel_drops += _STATS.unpack(raw)[1]
        return self.kernel_drops

    def close(self) -> None:
        """Unmap the ring (idempotent); the socket is its owner's to close."""
        if not self.map.closed:
            self.map.close()

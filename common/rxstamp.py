"""Kernel receive timestamps of a packet socket: how long a frame waited before it was read.

A frame waiting in a socket's receive queue is work that is due: in the emulated network it
arrived when the kernel queued it. ``SIOCGSTAMPNS`` returns the kernel's timestamp of the
last frame the socket handed to user space (after a batch: its newest frame), a lower bound
of how late the batch was read. The first ``SIOCGSTAMPNS`` call on a socket turns the kernel's
receive timestamps on (it answers ENOENT while no frame has been read since); cmsg
timestamps (SO_TIMESTAMPNS) are not used, so recvmmsg needs no control buffers. Timestamps
are CLOCK_REALTIME: compare them with ``time.time()``. Sockets that have no timestamps
(socketpairs in tests) are detected once and never asked again.
"""

from __future__ import annotations

import errno
import fcntl
import struct
import time

SIOCGSTAMPNS = 0x8907
_TIMESPEC = struct.Struct("qq")


class RxStamp:
    """Receive timestamps of one socket (``fd``); ``supported`` is False when it has none."""

    __slots__ = ("_buf", "fd", "supported")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buf = bytearray(_TIMESPEC.size)
        try:
            fcntl.ioctl(fd, SIOCGSTAMPNS, self._buf, True)
            self.supported = True
        except OSError as exc:
            self.supported = exc.errno == errno.ENOENT  # on now, no frame stamped yet

    def newest(self) -> float | None:
        """Unix time at which the kernel received the last frame read from the socket."""
        if not self.supported:
            return None
        try:
            fcntl.ioctl(self.fd, SIOCGSTAMPNS, self._buf, True)
        except OSError:
            return None
        sec, nsec = _TIMESPEC.unpack_from(self._buf)
        return sec + nsec * 1e-9

    def age(self) -> float:
        """Wall seconds since the last frame read was received (0.0 without a timestamp)."""
        stamp = self.newest()
        if stamp is None:
            return 0.0
        age = time.time() - stamp
        return age if age > 0.0 else 0.0

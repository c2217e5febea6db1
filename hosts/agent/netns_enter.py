"""Open sockets inside another network namespace from the current process.

A socket belongs to the namespace of the thread that created it, and stays there. The agent
can therefore run in the application's process (library use) and still own NIC ports that
live in a host namespace: ``in_netns(name)`` switches the calling thread into the named
namespace (``/var/run/netns/NAME``, as created by ``ip netns add``) for the duration of the
block and switches back afterwards. Python 3.11 has no ``os.setns``, so libc's is used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterator
from contextlib import contextmanager

CLONE_NEWNET = 0x40000000
NETNS_RUN_DIR = "/var/run/netns"

_libc: ctypes.CDLL | None = None


def _setns(fd: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Run the block with the calling thread in network namespace ``name`` (None: no change)."""
    if not name:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(os.path.join(NETNS_RUN_DIR, name), os.O_RDONLY)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)

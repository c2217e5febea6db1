"""NIC ports: one AF_PACKET socket per host interface, preallocated receive buffers.

Per-packet cost matters here (about 30k packets/s per direction for 1 Gb/s of 4 KiB packets),
so the port never allocates on the hot path: ``recv_batch`` drains the socket into a fixed
ring of buffers until EAGAIN (or the batch limit) and returns how many frames it got; the
caller reads them as ``views[i][:lengths[i]]`` before the next call reuses the buffers.
Both directions go through ``common.pktio``: one recvmmsg per ``recv_batch`` and one sendmmsg
per ``send_batch`` when its C accelerator is built (else one recv/send per frame, the
reference). ``send`` transmits one frame from a buffer the caller encoded into.

The socket ignores its own transmissions (PACKET_IGNORE_OUTGOING) and only takes IPv6
EtherType frames. ``rx_stamp`` (common/rxstamp.py) tells how long the last batch read had
waited in the socket (the agent's lag meter counts it). Send failures (ENOBUFS, EAGAIN, a downed link) are counted drops: MRC
recovers lost packets, so the loop never blocks on a full transmit queue.
"""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from common.pktio import Buffer, RxBuffers, SendError, send_batch
from common.rxstamp import RxStamp
from hosts.agent.netns_enter import in_netns
from hosts.agent.sockfilter import attach_mrc_filter

ETH_P_IPV6 = 0x86DD
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
PACKET_STATISTICS = 6  # struct tpacket_stats {unsigned tp_packets, tp_drops}; reset on read
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
MAX_FRAME = 9216  # jumbo frames: veths are created with MTU 9000


@dataclass(slots=True)
class PortCounters:
    rx_frames: int = 0
    rx_bytes: int = 0
    tx_frames: int = 0
    tx_bytes: int = 0
    tx_drops: int = 0  # send failed (queue full, link down): the transport recovers
    rx_errors: int = 0  # recv failed with something other than EAGAIN
    rx_sock_drops: int = 0  # frames the kernel dropped because the socket buffer was full


class NicPort:
    """One host interface opened for raw Ethernet I/O (non-blocking)."""

    def __init__(
        self,
        ifname: str,
        netns: str | None = None,
        batch: int = 64,
        sock_buf: int = 32 << 20,
        mrc_only: bool = True,
    ) -> None:
        self.ifname = ifname
        self.counters = PortCounters()
        with in_netns(netns):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IPV6))
            try:
                sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
                for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF),
                                     (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, force, sock_buf)
                    except PermissionError:
                        sock.setsockopt(socket.SOL_SOCKET, plain, sock_buf)
                if mrc_only:
                    attach_mrc_filter(sock)  # the kernel's own IPv6 traffic stays out
                sock.bind((ifname, ETH_P_IPV6))
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
        self._setup(sock, batch)

    @classmethod
    def from_socket(cls, sock: socket.socket, ifname: str, batch: int = 64) -> NicPort:
        """Wrap an already open datagram socket (tests use a socketpair instead of a NIC)."""
        port = cls.__new__(cls)
        port.ifname = ifname
        port.counters = PortCounters()
        sock.setblocking(False)
        port._setup(sock, batch)
        return port

    def _setup(self, sock: socket.socket, batch: int) -> None:
        self.sock = sock
        self._rx = RxBuffers(batch, MAX_FRAME)
        self.views = self._rx.views  # writable memoryviews of MAX_FRAME bytes, one per slot
        self.lengths = self._rx.lengths
        self.batch = batch
        self._send = sock.send
        self.rx_stamp = RxStamp(sock.fileno())  # how long the last batch waited (agent lag)

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv_batch(self, limit: int | None = None) -> int:
        """Receive up to ``limit`` (default: the batch size) frames; return how many arrived.

        Frame i is ``views[i][:lengths[i]]`` and is valid until the next call. A frame longer
        than MAX_FRAME is truncated to it. A receive error (e.g. ENETDOWN while the link
        flaps) counts in ``rx_errors``: nothing to read now.
        """
        stop = self.batch if limit is None else min(limit, self.batch)
        try:
            n = self._rx.recv(self.sock, stop)
        except OSError:
            self.counters.rx_errors += 1
            return 0
        if n:
            self.counters.rx_frames += n
            self.counters.rx_bytes += sum(self.lengths[:n])
        return n

    def send(self, frame: bytes | bytearray | memoryview) -> bool:
        """Transmit one frame; a failure is a counted drop, never an exception."""
        try:
            self._send(frame)
        except OSError as exc:
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.ENXIO,
                                 errno.EINTR, errno.EMSGSIZE):
                raise
            self.counters.tx_drops += 1
            return False
        self.counters.tx_frames += 1
        self.counters.tx_bytes += len(frame)
        return True

    def send_batch(self, frames: Sequence[Buffer], lengths: Sequence[int] | None = None) -> int:
        """Transmit ``frames`` in order (``lengths[i]`` bytes of frame i when given) with one
        sendmmsg; return how many went out. As for ``send``, a frame refused with ENOBUFS,
        EAGAIN, ENETDOWN, ENXIO or EMSGSIZE is a counted drop (``tx_drops``) and the rest of
        the batch is still sent; other errors (EBADF: port closed) raise OSError after the
        counters took what was sent."""
        try:
            result = send_batch(self.sock, frames, lengths)
        except SendError as exc:
            self._count_sent(exc.result.sent, exc.result.sent_bytes, len(exc.result.failed))
            raise
        self._count_sent(result.sent, result.sent_bytes, len(result.failed))
        return result.sent

    def _count_sent(self, sent: int, nbytes: int, dropped: int) -> None:
        c = self.counters
        c.tx_frames += sent
        c.tx_bytes += nbytes
        c.tx_drops += dropped

    def read_kernel_stats(self) -> None:
        """Add the kernel's drop count (PACKET_STATISTICS, reset by reading) to the counters."""
        if self.sock.family != socket.AF_PACKET:
            return
        try:
            raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        except OSError:
            return
        self.counters.rx_sock_drops += int.from_bytes(raw[4:8], sys.byteorder)

    def close(self) -> None:
        self.sock.close()

"""Pluggable fast-loss detectors (the MRC "fast-loss detection hook").

A detector sees, per SACK, the highest transmit sequence number (txseq: the order in which the
requester put packets on the wire, retransmissions included) among the newly acknowledged
packets, and is asked, oldest transmission first, whether an unacknowledged transmission is
lost. The default is a reordering threshold in packets: a transmission is lost once
``threshold`` transmissions sent after it have been delivered (RACK-like, but counted in
packets, and by transmission order so a lost retransmission is detected the same way). The
threshold adapts upwards when retransmissions prove spurious (DSACK-like: a SACK triggered by
a duplicate arrival).
"""

from __future__ import annotations

from typing import Protocol


class LossDetector(Protocol):
    def on_acked(self, max_txseq: int) -> None:
        """Newly acknowledged packets included one sent as transmission ``max_txseq``."""
        ...

    def is_lost(self, txseq: int) -> bool:
        """Is the (still unacknowledged) transmission ``txseq`` lost?"""
        ...

    def on_spurious(self) -> None:
        """A retransmission turned out to be unnecessary (the responder saw a duplicate)."""
        ...


class ReorderThreshold:
    """Packet-count threshold that doubles (up to ``max_threshold``) on each spurious
    retransmission, so a path with deeper reordering than configured stops causing them."""

    def __init__(self, threshold: int, max_threshold: int = 1 << 30) -> None:
        if threshold < 1:
            raise ValueError("reorder threshold must be at least 1 packet")
        self.threshold = threshold
        self.max_threshold = max(threshold, max_threshold)
        self.max_acked = -1
        self.spurious = 0

    def on_spurious(self) -> None:
        self.spurious += 1
        self.threshold = min(self.threshold * 2, self.max_threshold)

    def on_acked(self, max_txseq: int) -> None:
        if max_txseq > self.max_acked:
            self.max_acked = max_txseq

    def is_lost(self, txseq: int) -> bool:
        return self.max_acked - txseq >= self.threshold

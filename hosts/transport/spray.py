"""Spraying policies: which usable EV carries the next packet of a QP.

``EvManager`` (ev.py) keeps the EV states and hands a policy the usable EVs (indices into the
profile's EV list) whenever that set changes; the policy picks one per packet. The default,
``FixedRotation``, walks a seeded pseudo-random permutation of all EVs round-robin over the
usable ones; ``HostConfig.spray_factory(n_evs, seed)`` may supply another.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol


class SprayPolicy(Protocol):
    """Chooses the next EV among the usable ones (indices into the profile's EV list)."""

    def rebuild(self, usable: Sequence[int]) -> None:
        """The usable set changed (kept in the policy's own order)."""
        ...

    def pick(self, avoid: int) -> tuple[int, bool]:
        """Next usable index (not ``avoid`` when possible) or -1; and whether a round ended."""
        ...


class FixedRotation:
    """A seeded permutation of all EVs, walked round-robin over the usable ones."""

    def __init__(self, n: int, seed: int) -> None:
        order = list(range(n))
        random.Random(seed).shuffle(order)
        self._rank = {idx: pos for pos, idx in enumerate(order)}
        self._ring: list[int] = []
        self._pos = 0

    def rebuild(self, usable: Sequence[int]) -> None:
        current = self._ring[self._pos] if self._ring and self._pos < len(self._ring) else None
        self._ring = sorted(usable, key=self._rank.__getitem__)
        self._pos = 0
        if current is not None:
            # continue after the EV we were at, so a rebuild does not restart the round
            rank = self._rank[current]
            for i, idx in enumerate(self._ring):
                if self._rank[idx] >= rank:
                    self._pos = i
                    break

    def pick(self, avoid: int) -> tuple[int, bool]:
        ring = self._ring
        n = len(ring)
        if n == 0:
            return -1, False
        pos = self._pos
        if pos >= n:
            pos = 0
        idx = ring[pos]
        pos += 1
        wrapped = pos >= n
        if idx == avoid and n > 1:
            if wrapped:
                pos = 0
            idx = ring[pos]
            pos += 1
            wrapped = wrapped or pos >= n
        self._pos = 0 if wrapped else pos
        return idx, wrapped

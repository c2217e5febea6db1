"""Waiting for completions: gather them from a CQ until enough arrived, one failed, or the
time is up. Times are seconds of the caller's ``clock`` (the run's clock in an agent)."""

from __future__ import annotations

from collections.abc import Callable

from hosts.api import CQ, Completion, WcStatus

WAIT_SLICE_S = 1.0  # longest single wait: a deadline is checked at least this often


def collect(cq: CQ, count: int, *, clock: Callable[[], float], timeout: float) -> list[Completion]:
    """Up to ``count`` completions from ``cq``, oldest first; fewer when one of them failed
    (no more are waited for) or ``timeout`` passed first."""
    got: list[Completion] = []
    deadline = clock() + timeout
    while len(got) < count:
        left = deadline - clock()
        if left <= 0:
            break
        batch = cq.wait(1, min(WAIT_SLICE_S, left))
        batch += cq.poll(count - len(got) - len(batch))
        got += batch
        if any(wc.status != WcStatus.SUCCESS for wc in batch):
            break
    return got


__all__ = ["WAIT_SLICE_S", "collect"]

"""The bulk sink's wait: the WriteImm receive completions of a transfer, in send order with
the immediates the writer's ``Immediates`` puts on them; its data is complete once the last
one arrived (verification: hosts/bulk/data.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hosts.api import CQ, Completion, WcStatus
from hosts.bulk.completions import collect


@dataclass
class Arrival:
    """The receive completions a sink got, how long it waited, and what was wrong."""

    completions: list[Completion] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors


def await_writeimms(cq: CQ, expect: Sequence[int], *, clock: Callable[[], float],
                    timeout: float, start: float | None = None) -> Arrival:
    """Wait for one receive completion per immediate of ``expect``: receive i (wr_id i + 1,
    as ``Endpoint`` posts them) carrying ``expect[i]``. ``seconds`` counts from ``start``
    (default: now) on ``clock``; so does ``timeout``."""
    begin = clock() if start is None else start
    wcs = collect(cq, len(expect), clock=clock, timeout=max(0.0, begin + timeout - clock()))
    return Arrival(wcs, arrival_errors(wcs, expect), clock() - begin)


def arrival_errors(wcs: Sequence[Completion], expect: Sequence[int]) -> list[str]:
    """What is wrong with the receive completions ``wcs`` of a transfer whose immediates
    are ``expect`` (none: all of them, in send order, with their immediates)."""
    want = [(i + 1, v) for i, v in enumerate(expect)]
    if [(wc.wr_id, wc.imm) for wc in wcs] == want:
        return []
    bad = [wc for wc in wcs if wc.status != WcStatus.SUCCESS]
    return [f"WriteImm completions: {len(wcs)}/{len(expect)}"
            + (f", first error {bad[0]!r}" if bad else ", out of send order"
               if len(wcs) == len(expect) else "")]


__all__ = ["Arrival", "arrival_errors", "await_writeimms"]

"""Failure schedules: ``--fail A-B@SECONDS`` / ``--restore A-B@SECONDS``.

``A-B`` names a link by its two nodes (node names may contain '-': every split point is tried
and exactly one must name two linked nodes), or by one endpoint ``node:port``, or by its id
(position in the file). Times are seconds of the run's clock after the workload starts
(virtual seconds under time dilation, common/vclock.py). Link changes go through
the controller (``SetLinkState``: the switch admin service of each switch end), so the switches
report the port change and the controller's convergence logic reacts as it would to a real
failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from common.vclock import RunClock
from topologies.model import Link, Topology


class FailureSpecError(ValueError):
    """A --fail/--restore argument does not name exactly one link, or its time is bad."""


@dataclass(frozen=True)
class LinkEvent:
    at: float  # seconds after the start of the schedule
    link: Link
    up: bool

    @property
    def endpoint(self) -> str:
        return str(self.link.a)

    @property
    def label(self) -> str:
        return f"{self.link.a.node}-{self.link.b.node}"


def find_link(topo: Topology, text: str) -> Link:
    """The link named by ``A-B``, ``node:port`` or a link id."""
    text = text.strip()
    if text.isdigit():
        index = int(text)
        if index >= len(topo.links):
            raise FailureSpecError(f"{text!r}: link ids are 0..{len(topo.links) - 1}")
        return topo.links[index]
    if ":" in text:
        node, _, port = text.rpartition(":")
        link = topo.link_at(node, int(port)) if port.isdigit() and node in _names(topo) else None
        if link is None:
            raise FailureSpecError(f"{text!r}: no link at that node:port")
        return link
    names = _names(topo)
    found: list[Link] = []
    parts = text.split("-")
    for i in range(1, len(parts)):
        a, b = "-".join(parts[:i]), "-".join(parts[i:])
        if a in names and b in names:
            found += [ln for ln in topo.links if {ln.a.node, ln.b.node} == {a, b}]
    if len(found) != 1:
        why = "no link joins" if not found else "several links match"
        raise FailureSpecError(f"{text!r}: {why} two nodes of {topo.name} "
                               "(use A-B with node names, node:port, or a link id)")
    return found[0]


def _names(topo: Topology) -> set[str]:
    return {n.name for n in topo.nodes}


def parse_event(topo: Topology, spec: str, up: bool) -> LinkEvent:
    where, sep, when = spec.rpartition("@")
    if not sep:
        raise FailureSpecError(f"{spec!r}: expected LINK@SECONDS, e.g. p0-leaf0-p0-spine0@2")
    try:
        at = float(when)
    except ValueError:
        raise FailureSpecError(f"{spec!r}: {when!r} is not a number of seconds") from None
    if at < 0:
        raise FailureSpecError(f"{spec!r}: time must be >= 0")
    return LinkEvent(at, find_link(topo, where), up)


def parse_schedule(topo: Topology, fails: list[str], restores: list[str]) -> list[LinkEvent]:
    events = [parse_event(topo, s, False) for s in fails]
    events += [parse_event(topo, s, True) for s in restores]
    return sorted(events, key=lambda e: e.at)


@dataclass
class Scheduler:
    """Runs link events at their times (seconds of the run's clock) in a thread; records when
    each was applied."""

    events: list[LinkEvent]
    apply: Callable[[LinkEvent], None]
    applied: list[tuple[float, LinkEvent]] = field(default_factory=list)  # (run clock, event)
    errors: list[str] = field(default_factory=list)
    clock: RunClock = field(default_factory=RunClock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        clock = self.clock
        t0 = clock.now()

        def run() -> None:
            for ev in self.events:
                if self._stop.wait(max(0.0, clock.to_wall(t0 + ev.at - clock.now()))):
                    return
                try:
                    self.apply(ev)
                    self.applied.append((clock.now(), ev))
                except Exception as exc:
                    self.errors.append(f"{ev.label} {'up' if ev.up else 'down'}: {exc}")

        self._thread = threading.Thread(target=run, name="failures", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)

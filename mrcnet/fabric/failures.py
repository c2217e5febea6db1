"""Failure schedules: ``--fail WHAT@SECONDS`` / ``--restore WHAT@SECONDS``.

``WHAT`` is a link: by its two nodes ``A-B`` (node names may contain '-': every split point is
tried and exactly one must name two linked nodes), by one endpoint ``node:port``, or by its id
(position in the file); or a whole plane, ``plane:P``: every link of plane P's switches, host
links included (the plane's switches fail together; hosts keep their carrier, so they must
find out from the traffic). Times are seconds of the run's clock after the workload starts
(virtual seconds under time dilation, common/vclock.py). Link changes go through the
controller (``SetLinkState``: the switch admin service of each switch end), so the switches
report the port change and the controller's convergence logic reacts as it would to a real
failure. ``HostPortEvent`` (a host's NIC port losing carrier, ``port HOST N``) is for
schedules built in code (chaos runs).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from common.vclock import RunClock
from topologies.model import Link, NodeKind, Topology


class FailureSpecError(ValueError):
    """A --fail/--restore argument does not name exactly one link or plane, or its time is
    bad."""


@dataclass(frozen=True)
class LinkEvent:
    """Links going down or up together (one link, or every link of a plane)."""

    at: float  # seconds after the start of the schedule
    links: tuple[Link, ...]
    up: bool
    label: str

    @classmethod
    def of(cls, at: float, link: Link, up: bool) -> LinkEvent:
        return cls(at, (link,), up, f"{link.a.node}-{link.b.node}")


@dataclass(frozen=True)
class HostPortEvent:
    """NIC port ``port`` of ``host`` loses or regains carrier (its agent sees it)."""

    at: float
    host: str
    port: int
    up: bool

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}"


FabricEvent = LinkEvent | HostPortEvent


def plane_links(topo: Topology, plane: int) -> tuple[Link, ...]:
    """Every link with an end on a switch of ``plane`` (its leaf-spine and host links)."""
    switches = {n.name for n in topo.nodes_of(NodeKind.SWITCH) if n.plane == plane}
    if not switches:
        planes = sorted({n.plane for n in topo.nodes_of(NodeKind.SWITCH) if n.plane is not None})
        raise FailureSpecError(f"plane {plane}: {topo.name} has no switches on it "
                               f"(planes: {', '.join(map(str, planes)) or 'none'})")
    return tuple(ln for ln in topo.links if ln.a.node in switches or ln.b.node in switches)


def find_link(topo: Topology, text: str) -> Link:
    """The link named by ``A-B``, ``node:port`` or a link id."""
    text = text.strip()
    if text.isdecimal():
        index = int(text)
        if index >= len(topo.links):
            raise FailureSpecError(f"{text!r}: link ids are 0..{len(topo.links) - 1}")
        return topo.links[index]
    if ":" in text:
        node, _, port = text.rpartition(":")
        link = topo.link_at(node, int(port)) if port.isdecimal() and node in _names(topo) else None
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
        raise FailureSpecError(f"{spec!r}: expected LINK@SECONDS or plane:P@SECONDS, e.g. "
                               "p0-leaf0-p0-spine0@2")
    try:
        at = float(when)
    except ValueError:
        raise FailureSpecError(f"{spec!r}: {when!r} is not a number of seconds") from None
    if at < 0:
        raise FailureSpecError(f"{spec!r}: time must be >= 0")
    kind, colon, plane = where.partition(":")
    if colon and kind == "plane":
        if not plane.isdecimal():
            raise FailureSpecError(f"{spec!r}: expected plane:P with P a plane number")
        return LinkEvent(at, plane_links(topo, int(plane)), up, f"plane {plane}")
    return LinkEvent.of(at, find_link(topo, where), up)


def parse_schedule(topo: Topology, fails: list[str], restores: list[str]) -> list[LinkEvent]:
    events = [parse_event(topo, s, False) for s in fails]
    events += [parse_event(topo, s, True) for s in restores]
    return sorted(events, key=lambda e: e.at)


@dataclass
class Scheduler:
    """Runs link events at their times (seconds of the run's clock) in a thread; records when
    each was applied."""

    events: list[FabricEvent]
    apply: Callable[[FabricEvent], None]
    applied: list[tuple[float, FabricEvent]] = field(default_factory=list)  # (run clock, event)
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

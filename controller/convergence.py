"""Route withdrawal and restoration after port-status changes, with a control-plane delay.

Switches report port down/up on their P4Runtime stream (common.p4runtime_client
``port_events``). A link counts as down while either end reports it down. ``delay`` seconds
after a change (modelling slow convergence) the controller recomputes, for every switch and
every host route with several next hops (ECMP or Structured-EV routes), which next hops can
still reach the destination over links that are up (``usable``: the link to the next hop is
up and the next hop is the host or has a usable route itself). Where some but not all next
hops remain, the route is rewritten to ``route_ecmp`` over a group of the survivors (groups
are created on demand and kept); where all remain again, the original action is restored.
Routes with one next hop have no alternative and are left alone; SRv6 paths are chosen by the
source (the MRC endpoint steers away from failed EVs), so only hop-by-hop routes change.

The data plane already drops on a down port at once (the ``port_down`` register); what this
module adds is the network-wide repair a real control plane performs later. ``delay`` and the
recorded times are on the run's clock (common/vclock.py). The controller process waits with a
timer thread; the simulator (mrcnet/sim) passes ``later``, ``stamp`` and ``say`` of its own
clock and calls ``port_changed`` where its switches report a port, so the same computation and
writes run on simulated time.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.vclock import RunClock
from topologies.model import NodeKind, Topology
from topologies.routes import NextHop, RouteEcmp, RouteEv, SetNextHop, SwitchTables

log = logging.getLogger("controller.convergence")

ROUTE_TABLE = "MrcIngress.ipv6_route"
SELECTOR = "MrcIngress.ecmp_selector"
FIRST_TEMP_ID = 900  # ids of groups/members created here (above the topology's own)

Later = Callable[[float, Callable[[], object]], None]  # (delay in run seconds, what to call)
Say = Callable[[str, float], None]  # (line, stamp)


def _say(text: str, stamp: float) -> None:
    """One line on stderr (the controller's log) with a Unix-time stamp of the run's clock
    (``RunClock.unix``: wall-clock time at TDF 1) for the results."""
    print(f"convergence t={stamp:.6f} {text}", file=sys.stderr, flush=True)


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


@dataclass
class ConvergenceLog:
    """What happened, for results and tests: (time, switch, port, up) and (time, writes)."""

    port_events: list[tuple[float, str, int, bool]] = field(default_factory=list)
    reconciles: list[tuple[float, int]] = field(default_factory=list)


class Convergence:
    """Watches the switches' port events and rewrites routes after ``delay`` seconds."""

    def __init__(
        self,
        topo: Topology,
        tables: Mapping[str, SwitchTables],
        clients: Mapping[str, Any],  # switch -> P4RuntimeClient (connected, primary)
        delay: float,
        clock: RunClock | None = None,
        *,
        later: Later | None = None,
        stamp: Callable[[], float] | None = None,
        say: Say = _say,
    ) -> None:
        """``delay``: seconds of the run's ``clock`` (default: the wall clock, TDF 1).
        ``later(delay, fn)`` runs ``fn`` that many run seconds from now (default: a timer
        thread), ``stamp()`` is the time recorded and printed (default: ``clock.unix``),
        ``say(line, stamp)`` prints a line (default: stderr, the controller's log)."""
        self.clock = clock or RunClock(1.0)
        self.later: Later = later or self._timer_thread
        self.stamp = stamp or self.clock.unix
        self.say = say
        self.topo = topo
        self.tables = dict(tables)
        self.clients = dict(clients)
        self.delay = max(0.0, delay)
        self.history = ConvergenceLog()
        self._port_down: set[tuple[str, int]] = set()
        self._installed: dict[tuple[str, str], tuple[int, ...]] = {}  # (sw, prefix) -> ports
        self._groups: dict[str, dict[tuple[int, ...], int]] = {}
        self._next_id: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timers: list[threading.Timer] = []
        self.errors: list[str] = []

    def start(self) -> None:
        for name, client in self.clients.items():
            if self.topo.node(name).kind != NodeKind.SWITCH:
                continue
            t = threading.Thread(target=self._watch, args=(name, client), daemon=True,
                                 name=f"conv-{name}")
            t.start()
            self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            for timer in self._timers:
                timer.cancel()
        for t in self._threads:
            t.join(1.0)

    # -- events ------------------------------------------------------------------------------
    def _watch(self, switch: str, client: Any) -> None:
        events: queue.Queue[Any] = client.port_events
        while not self._stop.is_set():
            try:
                ev = events.get(timeout=0.2)
            except queue.Empty:
                continue
            self.port_changed(switch, int(ev.port), bool(ev.up))

    def port_changed(self, switch: str, port: int, up: bool) -> None:
        """Record a port state and schedule a recomputation ``delay`` seconds from now."""
        with self._lock:
            if self._stop.is_set():
                return
            self.history.port_events.append((self.stamp(), switch, port, up))
            if up:
                self._port_down.discard((switch, port))
            else:
                self._port_down.add((switch, port))
            self.later(self.delay, self.reconcile)
        self.say(f"{switch} port {port} {'up' if up else 'down'}; routes recomputed in "
                 f"{self.delay:.3f} s", self.stamp())

    def _timer_thread(self, delay: float, fn: Callable[[], object]) -> None:
        """The default ``later``: a daemon timer thread (``close`` cancels what is pending);
        called with the lock held."""
        timer = threading.Timer(self.clock.to_wall(delay), fn)
        timer.daemon = True
        self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        timer.start()

    # -- computation -------------------------------------------------------------------------
    def _link_up(self, switch: str, port: int) -> bool:
        link = self.topo.link_at(switch, port)
        if link is None:
            return False
        return not any((e.node, e.port) in self._port_down for e in (link.a, link.b))

    def _hops(self, tables: SwitchTables, action: object) -> tuple[NextHop, ...]:
        if isinstance(action, SetNextHop):
            return (action.nexthop,)
        if isinstance(action, RouteEcmp):
            return tables.ecmp_groups.get(action.group, ())
        if isinstance(action, RouteEv):
            if action.fallback:
                return tables.ecmp_groups.get(action.fallback, ())
            return tuple(dict.fromkeys(tables.ev_groups.get(action.group, {}).values()))
        return ()

    def _reaches(self, switch: str, prefix: str, memo: dict[tuple[str, str], bool]) -> bool:
        key = (switch, prefix)
        if key not in memo:
            memo[key] = False  # no loops through a shortest-path DAG, but be safe
            tables = self.tables.get(switch)
            route = None if tables is None else next(
                (r for r in tables.routes if str(r.prefix) == prefix), None)
            if tables is not None and route is not None:
                memo[key] = any(self._usable(switch, h, prefix, memo)
                                for h in self._hops(tables, route.action))
        return memo[key]

    def _usable(self, switch: str, hop: NextHop, prefix: str,
                memo: dict[tuple[str, str], bool]) -> bool:
        if not self._link_up(switch, hop.port):
            return False
        peer = self.topo.node(hop.peer)
        return peer.kind == NodeKind.HOST or self._reaches(hop.peer, prefix, memo)

    def desired(self) -> dict[tuple[str, str], tuple[int, ...]]:
        """(switch, host prefix) -> surviving next-hop ports, for routes that must change."""
        out: dict[tuple[str, str], tuple[int, ...]] = {}
        memo: dict[tuple[str, str], bool] = {}
        for sw, tables in self.tables.items():
            for route in tables.routes:
                if not isinstance(route.action, (RouteEcmp, RouteEv)):
                    continue
                prefix = str(route.prefix)
                hops = self._hops(tables, route.action)
                usable = [h for h in hops if self._usable(sw, h, prefix, memo)]
                if 0 < len(usable) < len(hops):
                    out[(sw, prefix)] = tuple(sorted(h.port for h in usable))
        return out

    # -- writes --------------------------------------------------------------------------------
    def _group_for(self, switch: str, ports: tuple[int, ...]) -> int:
        groups = self._groups.setdefault(switch, {})
        if ports in groups:
            return groups[ports]
        client = self.clients[switch]
        tables = self.tables[switch]
        by_port = {h.port: h for hs in tables.ecmp_groups.values() for h in hs}
        nid = self._next_id.get(switch, FIRST_TEMP_ID)
        gid = nid
        members = []
        for port in ports:
            nid += 1
            hop = by_port[port]
            members.append((nid, "MrcIngress.set_nexthop",
                            {"port": hop.port, "smac": _mac(hop.smac), "dmac": _mac(hop.dmac)}))
        self._next_id[switch] = nid + 1
        client.insert_group(SELECTOR, gid, members)
        client.write([client.update(1, table_entry=client.table_entry(
            "MrcIngress.ecmp", {"meta.next_group": gid}, group_id=gid))])
        groups[ports] = gid
        return gid

    def _restore(self, switch: str, prefix: str) -> None:
        route = next(r for r in self.tables[switch].routes if str(r.prefix) == prefix)
        match = {"hdr.ipv6.dst_addr": (int(route.prefix.network_address), route.prefix.prefixlen)}
        a = route.action
        client = self.clients[switch]
        if isinstance(a, RouteEcmp):
            client.modify(ROUTE_TABLE, match, "MrcIngress.route_ecmp", {"group": a.group})
        elif isinstance(a, RouteEv):
            client.modify(ROUTE_TABLE, match, "MrcIngress.route_ev", {
                "group": a.group, "shift": a.shift, "mask": a.mask, "fallback": a.fallback})

    def reconcile(self) -> int:
        """Bring the switches' routes to what the current link states call for; returns the
        number of routes rewritten."""
        writes = 0
        with self._lock:
            if self._stop.is_set():
                return 0
            want = self.desired()
            for key in sorted(set(self._installed) | set(want)):
                sw, prefix = key
                if self._installed.get(key) == want.get(key):
                    continue
                try:
                    if key in want:
                        gid = self._group_for(sw, want[key])
                        net = next(r.prefix for r in self.tables[sw].routes
                                   if str(r.prefix) == prefix)
                        self.clients[sw].modify(
                            ROUTE_TABLE,
                            {"hdr.ipv6.dst_addr": (int(net.network_address), net.prefixlen)},
                            "MrcIngress.route_ecmp", {"group": gid})
                        self._installed[key] = want[key]
                    else:
                        self._restore(sw, prefix)
                        del self._installed[key]
                    writes += 1
                except Exception as exc:  # a switch refusing must not stop the others
                    self.errors.append(f"{sw} {prefix}: {exc}")
                    log.warning("route update %s %s failed: %s", sw, prefix, exc)
            self.history.reconciles.append((self.stamp(), writes))
        self.say(f"reconciled: {writes} route(s) rewritten, {len(self._installed)} withdrawn "
                 "now", self.stamp())
        return writes

    @property
    def withdrawn(self) -> dict[tuple[str, str], tuple[int, ...]]:
        with self._lock:
            return dict(self._installed)

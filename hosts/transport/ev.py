"""Per-QP entropy-value manager: EV states, spraying rotation, replacement, plane masks.

State rules (mrc-protocol.md, "EV states"):

- GOOD -> SKIP on SACK m=SKIP_ONCE or NACK TRIMMED; SKIP -> GOOD by itself when the rotation
  completes its current round (the EV is skipped for the rest of that round).
- GOOD/SKIP -> ASSUMED_BAD on SACK m=ALWAYS_SKIP or an ACK timeout whose packet was not
  trimmed; ASSUMED_BAD -> GOOD when an EV probe (or a reliability probe answered with m=NONE)
  comes back on it.
- any -> DENIED and DENIED -> GOOD only by the controller (set_state with controller=True).

Datapath demotions that would leave fewer than ``ev_min_active`` usable EVs are refused and
counted in ``refused``. Only ``active_count`` EVs (0 = all) are sprayed over; when an active EV
leaves GOOD, a GOOD spare of the same plane (NIC port) takes its place. EVs whose local port
is down, or whose plane the peer announced down (port status update), are not used at all.
The choice among the usable EVs is the spraying policy's (hosts/transport/spray.py: the fixed
rotation, REPS or the bitmap penalty), which also hears what came back on each EV.

The usable set (GOOD, active, on a usable plane) is kept up to date incrementally: a state
change re-checks only the EVs it touched (the EV itself and a spare that replaced it), and a
policy with ``update_usable`` hears only what joined and left (a QP has up to 512 EVs, and
ECN marks and trims change states thousands of times a second in a congested fabric). A
mask change (port or peer plane up/down) rebuilds the set from scratch, as construction does.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable

from hosts.transport.profiles import EvEntry
from hosts.transport.spray import FixedRotation, PathSignal, SprayPolicy
from hosts.transport.types import EvState

Emit = Callable[[int, EvState, EvState, str], None]
UpdateUsable = Callable[[list[int], list[int]], None]


class EvManager:
    """EV states and choice for one QP. ``emit(index, old, new, reason)`` reports changes."""

    def __init__(
        self,
        entries: list[EvEntry],
        *,
        active_count: int,
        min_active: int,
        seed: int,
        emit: Emit,
        policy: SprayPolicy | None = None,
    ) -> None:
        self.evs = [e.ev for e in entries]
        self.ports = [e.port for e in entries]
        self.states = [EvState.GOOD] * len(entries)
        self.index = {e.ev: i for i, e in enumerate(entries)}
        n = len(entries)
        self.active_count = active_count if 0 < active_count < n else n
        self.active = [False] * n
        self._n_active = 0  # sum(self.active)
        self._activate_initial()
        self.min_active = max(0, min_active)
        self.local_mask = -1  # all ports
        self.remote_mask = -1  # all peer planes
        self.refused = 0
        self.fallbacks = 0
        self._emit = emit
        self._policy: SprayPolicy = policy or FixedRotation(n, seed)
        # a policy that takes changes (spray.py); one without gets the whole set each time
        self._update: UpdateUsable | None = getattr(self._policy, "update_usable", None)
        self._usable: list[int] = []  # ascending
        self._usable_set: set[int] = set()
        self._skipped: list[int] = []
        self.version = 0  # bumped whenever the usable set may have changed
        self.n_bad = 0
        self._rebuild()

    # -- feedback to the spraying policy -----------------------------------------------
    @property
    def wants_deliveries(self) -> bool:
        """The policy wants the EVs of delivered packets (``delivered``)."""
        return self._policy.wants_deliveries

    def delivered(self, indices: list[int], now: float) -> None:
        self._policy.on_delivered(indices, now)

    def signal(self, i: int, signal: PathSignal, now: float) -> None:
        self._policy.on_signal(i, signal, now)

    @property
    def policy(self) -> SprayPolicy:
        return self._policy

    # -- queries ------------------------------------------------------------------------
    def plane_ok(self, port: int) -> bool:
        return bool((self.local_mask >> port) & 1 and (self.remote_mask >> port) & 1)

    def usable(self) -> list[int]:
        return list(self._usable)

    def is_usable(self, i: int) -> bool:
        """EV ``i`` is GOOD, active and on a usable plane (in the rotation)."""
        return i in self._usable_set

    def has_bad(self) -> bool:
        return self.n_bad > 0

    def bad(self) -> list[int]:
        """ASSUMED_BAD EVs on usable planes (candidates for EV probes)."""
        return [
            i
            for i, s in enumerate(self.states)
            if s == EvState.ASSUMED_BAD and self.plane_ok(self.ports[i])
        ]

    # -- choice ---------------------------------------------------------------------------
    def pick(self, avoid: int = -1) -> int:
        """Index of the EV for the next packet, or -1 when no plane is usable at all. A
        retransmission (``avoid``: the EV of the copy it replaces) takes another EV even when
        that one is the only usable EV left: a SKIP, spare or ASSUMED_BAD one (the fallback
        order) may reach the peer where it did not."""
        idx, wrapped = self._policy.pick(avoid)
        if wrapped and self._skipped:
            self._end_round()
        if idx >= 0:
            if idx == avoid >= 0:
                other = self._fallback(avoid)
                if other >= 0:
                    return other
            return idx
        return self._fallback(avoid)

    def good_on_port(self, port: int) -> list[int]:
        """Indices of the GOOD EVs bound to ``port``, in profile order."""
        good = EvState.GOOD
        states = self.states
        return [i for i, p in enumerate(self.ports) if p == port and states[i] == good]

    def pick_on_port(self, port: int) -> int:
        """An EV bound to ``port`` (for control packets that must use a given plane)."""
        best = -1
        for i, p in enumerate(self.ports):
            if p == port:
                if self.states[i] == EvState.GOOD:
                    return i
                if best < 0 and self.states[i] != EvState.DENIED:
                    best = i
        return best

    def _fallback(self, avoid: int) -> int:
        """No GOOD active EV on a usable plane: use any non-DENIED EV on a usable plane
        (SKIP first, then spares, then ASSUMED_BAD), so the QP never stalls while a path may
        still work. Returns -1 only when no usable plane exists."""
        for want in (EvState.SKIP, EvState.GOOD, EvState.ASSUMED_BAD):
            for i, s in enumerate(self.states):
                if s == want and i != avoid and self.plane_ok(self.ports[i]):
                    self.fallbacks += 1
                    return i
        for i, s in enumerate(self.states):
            if s != EvState.DENIED and self.plane_ok(self.ports[i]):
                self.fallbacks += 1
                return i
        return -1

    # -- transitions ----------------------------------------------------------------------
    def set_state(self, i: int, new: EvState, reason: str, *, controller: bool = False) -> bool:
        """Apply a transition; returns False when refused (illegal or below ev_min_active)."""
        old = self.states[i]
        if old == new:
            return False
        if old == EvState.DENIED and not controller:
            return False
        if not controller:
            if new == EvState.GOOD and old == EvState.SKIP:
                pass
            elif new == EvState.GOOD and old != EvState.ASSUMED_BAD:
                return False
            if new in (EvState.SKIP, EvState.ASSUMED_BAD) and old in (
                EvState.GOOD,
                EvState.SKIP,
            ):
                in_use = i in self._usable_set
                if in_use and len(self._usable) - 1 < self.min_active:
                    self.refused += 1
                    return False
            if new == EvState.SKIP and old != EvState.GOOD:
                return False
        self.states[i] = new
        self.n_bad += (new == EvState.ASSUMED_BAD) - (old == EvState.ASSUMED_BAD)
        if new == EvState.SKIP:
            self._skipped.append(i)
        spare = -1
        if new in (EvState.ASSUMED_BAD, EvState.DENIED) and self.active[i]:
            spare = self._replace(i)
        elif new == EvState.GOOD and not self.active[i] and self._n_active < self.active_count:
            self.active[i] = True
            self._n_active += 1
        self._refresh((i, spare) if spare >= 0 else (i,))
        self._emit(i, old, new, reason)
        return True

    def _end_round(self) -> None:
        skipped, self._skipped = self._skipped, []
        back = []
        for i in skipped:
            if self.states[i] == EvState.SKIP:
                self.states[i] = EvState.GOOD
                back.append(i)
                self._emit(i, EvState.SKIP, EvState.GOOD, "skip_round_done")
        self._refresh(back)

    def set_masks(self, local_mask: int | None = None, remote_mask: int | None = None) -> None:
        if local_mask is not None:
            self.local_mask = local_mask
        if remote_mask is not None:
            self.remote_mask = remote_mask
        self._rebuild()

    # -- internals ------------------------------------------------------------------------
    def _activate_initial(self) -> None:
        """Spread the active set evenly over planes, in profile order within a plane."""
        by_port: dict[int, list[int]] = {}
        for i, p in enumerate(self.ports):
            by_port.setdefault(p, []).append(i)
        lists = [by_port[p] for p in sorted(by_port)]
        chosen = 0
        k = 0
        while chosen < self.active_count:
            progressed = False
            for lst in lists:
                if k < len(lst) and chosen < self.active_count:
                    self.active[lst[k]] = True
                    self._n_active += 1
                    chosen += 1
                    progressed = True
            if not progressed:
                break
            k += 1

    def _replace(self, i: int) -> int:
        """Deactivate ``i``; activate the first GOOD spare of its plane (returned, or -1)."""
        self.active[i] = False
        self._n_active -= 1
        port = self.ports[i]
        for j, p in enumerate(self.ports):
            if p == port and not self.active[j] and self.states[j] == EvState.GOOD:
                self.active[j] = True
                self._n_active += 1
                return j
        return -1

    def _wanted(self, i: int) -> bool:
        """EV ``i`` belongs in the usable set (the definition ``_rebuild`` applies to all)."""
        return self.states[i] == EvState.GOOD and self.active[i] and self.plane_ok(self.ports[i])

    def _refresh(self, touched: Iterable[int]) -> None:
        """Bring the usable set up to date after changes to the EVs ``touched`` only."""
        usable, members = self._usable, self._usable_set
        added: list[int] = []
        removed: list[int] = []
        for i in touched:
            want = self._wanted(i)
            if want == (i in members):
                continue
            if want:
                members.add(i)
                insort(usable, i)
                added.append(i)
            else:
                members.discard(i)
                del usable[bisect_left(usable, i)]
                removed.append(i)
        self.version += 1
        if self._update is None:
            self._policy.rebuild(list(usable))
        elif added or removed:
            self._update(added, removed)

    def _rebuild(self) -> None:
        """The usable set from scratch (construction, mask changes)."""
        usable = [i for i in range(len(self.states)) if self._wanted(i)]
        self._usable = usable
        self._usable_set = set(usable)
        self.version += 1
        self._policy.rebuild(list(usable))

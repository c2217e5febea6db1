"""Run-time state of a loaded program: match tables, action profiles, counters, registers,
meters, value sets; the objects the generated code reads and the control plane writes.

Values are plain ints. Table keys are tuples of per-field parts, one per key field:

- exact / valid: ``value``
- lpm: ``(value, prefix_len)`` (value with the host bits cleared)
- ternary (and optional): ``(value, mask)`` (value & mask)
- range: ``(low, high)``

Priorities follow BMv2: a *lower* number wins (JSON const entries, simple_switch_CLI); the
P4Runtime layer converts its own (higher wins). Equal priorities: the older entry wins.
Mutations validate first and raise ``EntryError``; they never leave a table half changed.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import MutableSequence, Sequence
from dataclasses import dataclass

from switch.p4json import program as pm

ActionCall = tuple[int, tuple[int, ...]]  # (JSON action id, argument values)
LOOKUP_CACHE_MAX = 1 << 14


class EntryError(Exception):
    """A rejected control-plane write. ``kind``: exists, missing, full, invalid, const."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Entry:
    """One table entry. ``action``/``args`` for direct tables (also as the pair ``call``,
    which the C backend reads); ``member``/``group`` for indirect ones. ``counter`` is
    [packets, bytes] when the table has direct counters."""

    __slots__ = (
        "action", "args", "call", "counter", "group", "key", "member", "meter", "priority", "ranges",
        "seq", "tag", "ternary",
    )

    def __init__(
        self,
        key: tuple[object, ...],
        priority: int,
        action: int | None,
        args: tuple[int, ...],
        member: int | None = None,
        group: int | None = None,
    ) -> None:
        self.key = key
        self.priority = priority
        self.action = action
        self.args = args
        self.call = (action, args)
        self.member = member
        self.group = group
        self.counter: list[int] | None = None
        self.meter: Meter | None = None
        self.seq = 0
        self.tag: object = None  # the control plane's own record of this entry
        self.ternary: tuple[tuple[int, int, int], ...] = ()  # (field index, mask, value)
        self.ranges: tuple[tuple[int, int, int], ...] = ()  # (field index, low, high)


def prefix_mask(width: int, plen: int) -> int:
    return ((1 << plen) - 1) << (width - plen)


class MatchTable:
    """A match-action table with BMv2's lookup semantics for its match kinds."""

    def __init__(self, spec: pm.Table, actions: dict[int, pm.Action]) -> None:
        self.spec = spec
        self.name = spec.name
        self.kinds = tuple(k.match_type for k in spec.keys)
        self.widths = tuple(k.width for k in spec.keys)
        self.actions = {aid: actions[aid] for aid in spec.action_ids}
        self.size = spec.size
        self.indirect = spec.kind != "simple"
        self.with_counters = spec.with_counters
        self.direct_meter = spec.direct_meter is not None
        self.entries: dict[tuple[object, ...], Entry] = {}
        if any(k in ("ternary", "range") for k in self.kinds):
            self.mode = "ternary"
        elif "lpm" in self.kinds:
            self.mode = "lpm"
        else:
            self.mode = "exact"
        self.single = len(self.kinds) == 1
        self.exact: dict[object, Entry] = {}
        self.lpm_index = self.kinds.index("lpm") if self.mode == "lpm" else -1
        self.by_len: dict[int, dict[object, Entry]] = {}
        self.lens: list[int] = []  # prefix lengths present, longest first (updated in place)
        self.ordered: list[Entry] = []  # ternary mode, best first (updated in place)
        self.cache: dict[object, Entry | None] = {}
        self._seq = itertools.count()
        self.immutable = False
        self.default: ActionCall | None = (
            None if spec.default_action is None else (spec.default_action, spec.default_args)
        )
        self.initial_default = self.default
        self.default_counter = [0, 0]
        for ce in spec.entries:
            key = self.key_from_json(ce.key)
            self.add(key, ce.priority, ce.action_id, ce.args)
        self.immutable = bool(spec.entries)

    # -- keys --------------------------------------------------------------------------------
    def key_from_json(self, match_key: Sequence[pm.Json]) -> tuple[object, ...]:
        if len(match_key) != len(self.kinds):
            raise EntryError("invalid", f"table {self.name}: {len(match_key)} key fields, "
                             f"expected {len(self.kinds)}")
        parts: list[object] = []
        for kind, mk in zip(self.kinds, match_key):
            mt = mk.get("match_type")
            if mt == "optional":
                mt = "ternary"
            if mt != kind:
                raise EntryError("invalid", f"table {self.name}: match type {mt} for a {kind} field")
            if kind == "exact":
                parts.append(pm.parse_hexstr(mk["key"]))
            elif kind == "valid":
                parts.append(1 if mk["key"] else 0)
            elif kind == "lpm":
                parts.append((pm.parse_hexstr(mk["key"]), int(mk["prefix_length"])))
            elif kind == "ternary":
                parts.append((pm.parse_hexstr(mk["key"]), pm.parse_hexstr(mk["mask"])))
            else:
                parts.append((pm.parse_hexstr(mk["start"]), pm.parse_hexstr(mk["end"])))
        return self.normalize(tuple(parts))

    def normalize(self, parts: tuple[object, ...]) -> tuple[object, ...]:
        """Check a key's parts against the field widths; clear masked-out bits."""
        if len(parts) != len(self.kinds):
            raise EntryError("invalid", f"table {self.name}: {len(parts)} key fields, "
                             f"expected {len(self.kinds)}")
        out: list[object] = []
        for kind, width, part in zip(self.kinds, self.widths, parts):
            full = (1 << width) - 1
            if kind in ("exact", "valid"):
                if not isinstance(part, int) or part < 0 or part > full:
                    raise EntryError("invalid", f"table {self.name}: value {part!r} does not fit "
                                     f"{width} bits")
                out.append(part)
                continue
            if not (isinstance(part, tuple) and len(part) == 2):
                raise EntryError("invalid", f"table {self.name}: {kind} key part {part!r}")
            a, b = int(part[0]), int(part[1])
            if a < 0 or a > full:
                raise EntryError("invalid", f"table {self.name}: value {a:#x} does not fit "
                                 f"{width} bits")
            if kind == "lpm":
                if not 0 <= b <= width:
                    raise EntryError("invalid", f"table {self.name}: prefix length {b} not in "
                                     f"0..{width}")
                out.append((a & prefix_mask(width, b), b))
            elif kind == "ternary":
                if b < 0 or b > full:
                    raise EntryError("invalid", f"table {self.name}: mask {b:#x} does not fit "
                                     f"{width} bits")
                out.append((a & b, b))
            else:
                if b < 0 or b > full or a > b:
                    raise EntryError("invalid", f"table {self.name}: range {a}..{b}")
                out.append((a, b))
        return tuple(out)

    def _ident(self, key: tuple[object, ...], priority: int) -> tuple[object, ...]:
        return (*key, priority) if self.mode == "ternary" else key

    # -- index maintenance ---------------------------------------------------------------------
    def _bucket_key(self, key: tuple[object, ...]) -> object:
        if self.mode == "exact":
            return key[0] if self.single else key
        parts = tuple(p[0] if isinstance(p, tuple) else p for p in key)
        return parts[0] if self.single else parts

    def _index(self, entry: Entry) -> None:
        self.cache.clear()
        if self.mode == "exact":
            self.exact[self._bucket_key(entry.key)] = entry
        elif self.mode == "lpm":
            plen = entry.key[self.lpm_index][1]  # type: ignore[index]
            bucket = self.by_len.get(plen)
            if bucket is None:
                bucket = self.by_len[plen] = {}
                self.lens[:] = sorted(self.by_len, reverse=True)
            bucket[self._bucket_key(entry.key)] = entry
        else:
            tern: list[tuple[int, int, int]] = []
            ranges: list[tuple[int, int, int]] = []
            for i, (kind, width, part) in enumerate(zip(self.kinds, self.widths, entry.key)):
                full = (1 << width) - 1
                if isinstance(part, int):
                    tern.append((i, full, part))
                    continue
                assert isinstance(part, tuple)
                a, b = int(part[0]), int(part[1])
                if kind == "lpm":
                    tern.append((i, prefix_mask(width, b), a))
                elif kind == "ternary":
                    if b:
                        tern.append((i, b, a))
                elif a or b != full:
                    ranges.append((i, a, b))
            entry.ternary, entry.ranges = tuple(tern), tuple(ranges)
            self.ordered.append(entry)
            self.ordered.sort(key=lambda e: (e.priority, e.seq))

    def _unindex(self, entry: Entry) -> None:
        self.cache.clear()
        if self.mode == "exact":
            del self.exact[self._bucket_key(entry.key)]
        elif self.mode == "lpm":
            plen = entry.key[self.lpm_index][1]  # type: ignore[index]
            bucket = self.by_len[plen]
            del bucket[self._bucket_key(entry.key)]
            if not bucket:
                del self.by_len[plen]
                self.lens[:] = sorted(self.by_len, reverse=True)
        else:
            self.ordered.remove(entry)

    # -- lookups (the generated code calls these; exact tables it reads ``exact`` directly) ---
    def lookup(self, values: tuple[int, ...]) -> Entry | None:
        """The entry matching per-field key values (``values`` already masked to width)."""
        if self.mode == "exact":
            return self.exact.get(values[0] if self.single else values)
        if self.mode == "lpm":
            return self.lookup_lpm(values[0] if self.single else values)
        return self.lookup_ternary(values)

    def lookup_lpm(self, value: object) -> Entry | None:
        li = self.lpm_index
        width = self.widths[li]
        if self.single:
            for plen in self.lens:
                hit = self.by_len[plen].get(value & prefix_mask(width, plen))  # type: ignore[operator]
                if hit is not None:
                    return hit
            return None
        vals = list(value)  # type: ignore[call-overload]
        raw = vals[li]
        for plen in self.lens:
            vals[li] = raw & prefix_mask(width, plen)
            hit = self.by_len[plen].get(tuple(vals))
            if hit is not None:
                return hit
        return None

    def lookup_ternary(self, values: tuple[int, ...]) -> Entry | None:
        cache = self.cache
        if values in cache:
            return cache[values]
        found = None
        for e in self.ordered:
            for i, m, v in e.ternary:
                if values[i] & m != v:
                    break
            else:
                for i, lo, hi in e.ranges:
                    if not lo <= values[i] <= hi:
                        break
                else:
                    found = e
                    break
        if len(cache) >= LOOKUP_CACHE_MAX:
            cache.clear()
        cache[values] = found
        return found

    # -- control plane -------------------------------------------------------------------------
    def get(self, key: tuple[object, ...], priority: int = 0) -> Entry | None:
        return self.entries.get(self._ident(key, priority))

    def check_action(self, action: int, args: Sequence[int]) -> tuple[int, ...]:
        spec = self.actions.get(action)
        if spec is None:
            raise EntryError("invalid", f"action id {action} is not an action of table {self.name}")
        if len(args) != len(spec.params):
            raise EntryError("invalid", f"action {spec.name} takes {len(spec.params)} "
                             f"argument(s), got {len(args)}")
        out = []
        for p, v in zip(spec.params, args):
            if not 0 <= int(v) < (1 << p.width):
                raise EntryError("invalid", f"argument {p.name}={v} of {spec.name} does not fit "
                                 f"{p.width} bits")
            out.append(int(v))
        return tuple(out)

    def _entry(self, key: tuple[object, ...], priority: int, action: int | None,
               args: Sequence[int], member: int | None, group: int | None) -> Entry:
        """A checked new entry: a member or a group (indirect tables), else an action."""
        if self.indirect:
            if (member is None) == (group is None):
                raise EntryError("invalid", f"indirect table {self.name}: give a member or a group")
            return Entry(key, priority, None, (), member, group)
        if action is None:
            raise EntryError("invalid", f"table {self.name}: an entry needs an action")
        return Entry(key, priority, action, self.check_action(action, args))

    def add(
        self,
        key: tuple[object, ...],
        priority: int,
        action: int | None,
        args: Sequence[int] = (),
        *,
        member: int | None = None,
        group: int | None = None,
    ) -> Entry:
        if self.immutable:
            raise EntryError("const", f"table {self.name} has const entries")
        key = self.normalize(key)
        if self.mode != "ternary":
            priority = 0
        ident = self._ident(key, priority)
        if ident in self.entries:
            raise EntryError("exists", f"table {self.name}: duplicate entry")
        if len(self.entries) >= self.size:
            raise EntryError("full", f"table {self.name} is full ({self.size} entries)")
        entry = self._entry(key, priority, action, args, member, group)
        if self.with_counters:
            entry.counter = [0, 0]
        if self.direct_meter:
            entry.meter = Meter()
        entry.seq = next(self._seq)
        self.entries[ident] = entry
        self._index(entry)
        return entry

    def remove(self, key: tuple[object, ...], priority: int = 0) -> Entry:
        if self.immutable:
            raise EntryError("const", f"table {self.name} has const entries")
        key = self.normalize(key)
        ident = self._ident(key, priority if self.mode == "ternary" else 0)
        entry = self.entries.get(ident)
        if entry is None:
            raise EntryError("missing", f"table {self.name}: no such entry")
        del self.entries[ident]
        self._unindex(entry)
        return entry

    def restore(self, entry: Entry) -> None:
        """Put back an entry returned by ``remove`` (undo), at its old place in the order."""
        self.entries[self._ident(entry.key, entry.priority)] = entry
        self._index(entry)

    def modify(
        self,
        key: tuple[object, ...],
        priority: int,
        action: int | None,
        args: Sequence[int] = (),
        *,
        member: int | None = None,
        group: int | None = None,
    ) -> tuple[Entry, Entry]:
        """Replace an entry's action; returns (old, new). Direct counters are kept."""
        if self.immutable:
            raise EntryError("const", f"table {self.name} has const entries")
        key = self.normalize(key)
        ident = self._ident(key, priority if self.mode == "ternary" else 0)
        old = self.entries.get(ident)
        if old is None:
            raise EntryError("missing", f"table {self.name}: no such entry")
        new = self._entry(old.key, old.priority, action, args, member, group)
        new.counter, new.meter, new.seq = old.counter, old.meter, old.seq
        self._unindex(old)
        self.entries[ident] = new
        self._index(new)
        return old, new

    def clear(self) -> None:
        if self.immutable:
            raise EntryError("const", f"table {self.name} has const entries")
        self.entries.clear()
        self.exact.clear()
        self.by_len.clear()
        self.lens.clear()
        self.ordered.clear()
        self.cache.clear()

    def set_default(self, action: int, args: Sequence[int] = ()) -> ActionCall | None:
        """Set the default action; returns the previous one (for undo)."""
        if self.indirect:
            raise EntryError("invalid", f"cannot set the default action of indirect table {self.name}")
        spec = self.spec
        call = (action, self.check_action(action, args))
        if spec.default_const and spec.default_action is not None and action != spec.default_action:
            raise EntryError("const", f"table {self.name} has a const default action")
        if spec.default_entry_const and self.initial_default is not None and call != self.initial_default:
            raise EntryError("const", f"table {self.name} has a const default entry")
        old = self.default
        self.default = call
        return old

    def reset_default(self) -> ActionCall | None:
        old = self.default
        self.default = self.initial_default
        return old


@dataclass
class GroupMember:
    member: int
    weight: int = 1
    watch_port: int | None = None


class ActionProfile:
    """An action profile (members) with an optional selector (groups).

    A group's candidates, which the selector's hash indexes (``hash % len``), are its members
    by ascending member id, each repeated ``weight`` times; members whose watch port is down
    are left out.
    """

    def __init__(self, spec: pm.ActionProfile) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self.members: dict[int, ActionCall] = {}
        self.groups: dict[int, list[GroupMember]] = {}
        self.choices: dict[int, tuple[ActionCall, ...]] = {}
        self.port_up: dict[int, bool] = {}
        self.refs: dict[tuple[str, int], int] = {}

    def rebuild(self) -> None:
        choices: dict[int, tuple[ActionCall, ...]] = {}
        for gid, members in self.groups.items():
            live: list[ActionCall] = []
            for m in sorted(members, key=lambda m: m.member):
                if m.watch_port is not None and not self.port_up.get(m.watch_port, True):
                    continue
                call = self.members.get(m.member)
                if call is not None:
                    live.extend([call] * max(1, m.weight))
            choices[gid] = tuple(live)
        self.choices = choices

    def set_port_status(self, port: int, up: bool) -> None:
        self.port_up[port] = up
        self.rebuild()


def cells64(size: int) -> array[int]:
    """``size`` zeroed unsigned 64-bit cells (the C backend writes them in place)."""
    return array("Q", bytes(8 * size))


class CounterArray:
    """An indirect counter: packets and bytes per cell (bytes = the packet's received length).
    The generated code adds to ``packets``/``bytes`` in place: never rebind them."""

    __slots__ = ("bytes", "name", "packets", "size")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.packets: MutableSequence[int] = cells64(size)
        self.bytes: MutableSequence[int] = cells64(size)

    def count(self, index: int, nbytes: int) -> None:
        """One packet of ``nbytes`` into cell ``index`` (out of range: ignored, as BMv2)."""
        if 0 <= index < self.size:
            self.packets[index] += 1
            self.bytes[index] += nbytes

    def reset(self) -> None:
        self.packets[:] = cells64(self.size)
        self.bytes[:] = cells64(self.size)


class RegisterArray:
    """A register array of ``width``-bit cells; ``cells`` is read and written in place by the
    generated code."""

    __slots__ = ("cells", "mask", "name", "size", "width")

    def __init__(self, name: str, size: int, width: int) -> None:
        self.name = name
        self.size = size
        self.width = width
        self.mask = (1 << width) - 1
        self.cells: MutableSequence[int] = cells64(size) if width <= 64 else [0] * size

    @property
    def bitwidth(self) -> int:
        return self.width

    def read(self, index: int) -> int:
        return self.cells[index] if 0 <= index < self.size else 0

    def write(self, index: int, value: int) -> None:
        if 0 <= index < self.size:
            self.cells[index] = value & self.mask

    def reset(self) -> None:
        self.cells[:] = cells64(self.size) if self.width <= 64 else [0] * self.size


class Meter:
    """BMv2's two-rate three-colour meter (src/bm_sim/meters.cpp): 0 green, 1 yellow, 2 red.

    Rates are units (packets or bytes) per microsecond, bursts in units; an unconfigured meter
    marks everything green. Tokens are computed against a single time origin, as BMv2 does.
    """

    __slots__ = ("configured", "origin", "rates")

    def __init__(self) -> None:
        self.configured = False
        self.origin = 0.0
        self.rates: list[list[float]] = []  # [info_rate, burst, tokens, tokens_last, color]

    def set_rates(self, configs: Sequence[tuple[float, int]], now: float) -> None:
        """``configs`` as simple_switch_CLI takes them: [(CIR, CBS), (PIR, PBS)]."""
        if len(configs) != 2:
            raise EntryError("invalid", "a meter takes exactly 2 rates (committed, peak)")
        if configs[0][0] > configs[1][0]:
            raise EntryError("invalid", "the committed rate exceeds the peak rate")
        rates = [[float(r), int(b), int(b), 0, i + 1] for i, (r, b) in enumerate(configs)]
        rates.reverse()
        self.rates = rates  # type: ignore[assignment]
        self.configured = True
        self.origin = now

    def reset(self) -> None:
        self.configured = False
        self.rates = []

    def execute(self, now: float, size: int) -> int:
        if not self.configured:
            return 0
        micros = int((now - self.origin) * 1e6)
        color = 0
        for rate in self.rates:
            since = int(micros * rate[0])
            new = since - int(rate[3])
            rate[3] = since
            rate[2] = min(rate[2] + new, rate[1])
            if rate[2] < size:
                color = int(rate[4])
                break
            rate[2] -= size
        return color


class MeterArray:
    def __init__(self, spec: pm.MeterSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.size = spec.size
        self.packets = spec.kind == "packets"
        self.cells = [Meter() for _ in range(spec.size)]

    def execute(self, index: int, now: float, length: int) -> int:
        if not 0 <= index < self.size:
            return 0
        return self.cells[index].execute(now, 1 if self.packets else length)


class ValueSet:
    """A parser value set: values (already masked) the select matches against."""

    def __init__(self, spec: pm.ParseVSet) -> None:
        self.spec = spec
        self.values: set[int] = set()

"""Control-plane state of a committed program: tables, action profiles, counters, registers.

Values are plain ints (the P4Runtime layer translates byte strings). Every mutating operation
validates first, then applies and returns an ``Undo`` callable, so a batch written with
ROLLBACK_ON_ERROR / DATAPLANE_ATOMIC can be rolled back exactly. The data paths read the same
structures (dicts and per-prefix-length dicts), under the Pipeline lock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from google.rpc import code_pb2

from common.p4schema.model import Program, Table
from switch.pipeline.externs import CounterArray, RegisterArray

Undo = Callable[[], None]
MatchKey = tuple[object, ...]  # per field: int (exact) or (value, prefix_len) (lpm)


class WriteError(Exception):
    """A rejected update: google.rpc code + message, as P4Runtime reports per update."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ActionCall:
    """An action and its parameter values (in the action's parameter order)."""

    action_id: int
    params: tuple[int, ...] = ()


@dataclass(slots=True)
class Entry:
    """One table entry: a direct action, or a reference to a profile member or group."""

    key: MatchKey
    action: ActionCall | None = None
    member_id: int | None = None
    group_id: int | None = None
    controller_metadata: int = 0
    metadata: bytes = b""


@dataclass(slots=True)
class GroupMember:
    member_id: int
    weight: int = 1
    watch_port: int | None = None


@dataclass(slots=True)
class Group:
    group_id: int
    members: list[GroupMember]
    max_size: int = 0


def _lpm_part(key: MatchKey) -> tuple[int, int]:
    part = key[0]
    assert isinstance(part, tuple)
    return int(part[0]), int(part[1])


class TableState:
    """A match-action table (exact fields, or one LPM field)."""

    def __init__(self, schema: Table, table_id: int, initial_default: ActionCall) -> None:
        self.schema = schema
        self.table_id = table_id
        self.entries: dict[MatchKey, Entry] = {}
        self.initial_default = initial_default
        self.default = initial_default
        self.is_lpm = any(mf.kind == "lpm" for mf in schema.match_fields)
        self.lpm_width = schema.match_fields[0].bitwidth if self.is_lpm else 0
        self.by_len: dict[int, dict[int, Entry]] = {}
        self.lengths: list[int] = []  # prefix lengths present, longest first
        self.masks = [
            ((1 << plen) - 1) << (self.lpm_width - plen) for plen in range(self.lpm_width + 1)
        ]

    def _index_add(self, entry: Entry) -> None:
        self.entries[entry.key] = entry
        if self.is_lpm:
            value, plen = _lpm_part(entry.key)
            bucket = self.by_len.setdefault(plen, {})
            bucket[value] = entry
            self.lengths = sorted(self.by_len, reverse=True)

    def _index_remove(self, key: MatchKey) -> None:
        del self.entries[key]
        if self.is_lpm:
            value, plen = _lpm_part(key)
            bucket = self.by_len[plen]
            del bucket[value]
            if not bucket:
                del self.by_len[plen]
            self.lengths = sorted(self.by_len, reverse=True)

    def lookup_lpm(self, value: int) -> Entry | None:
        masks = self.masks
        for plen in self.lengths:
            hit = self.by_len[plen].get(value & masks[plen])
            if hit is not None:
                return hit
        return None

    def insert(self, entry: Entry) -> Undo:
        if entry.key in self.entries:
            raise WriteError(
                code_pb2.ALREADY_EXISTS,
                "Match entry exists, use MODIFY if you wish to change action",
            )
        if len(self.entries) >= self.schema.size:
            raise WriteError(code_pb2.RESOURCE_EXHAUSTED, f"Table {self.schema.name} is full")
        self._index_add(entry)
        return lambda: self._index_remove(entry.key)

    def modify(self, entry: Entry) -> Undo:
        old = self.entries.get(entry.key)
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, "Cannot find match entry")
        self._index_remove(entry.key)
        self._index_add(entry)

        def undo() -> None:
            self._index_remove(entry.key)
            self._index_add(old)

        return undo

    def delete(self, key: MatchKey) -> tuple[Entry, Undo]:
        old = self.entries.get(key)
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, "Cannot find match entry")
        self._index_remove(key)
        return old, lambda: self._index_add(old)

    def set_default(self, action: ActionCall | None) -> Undo:
        old = self.default
        self.default = self.initial_default if action is None else action

        def undo() -> None:
            self.default = old

        return undo


class ProfileState:
    """An action profile with selector: members, groups, and the data path's choice lists."""

    def __init__(self, name: str, profile_id: int, size: int, max_group_size: int) -> None:
        self.name = name
        self.profile_id = profile_id
        self.size = size
        self.max_group_size = max_group_size
        self.members: dict[int, ActionCall] = {}
        self.groups: dict[int, Group] = {}
        self.refs: dict[tuple[str, int], int] = {}  # ("member"|"group", id) -> table refs
        self.choices: dict[int, tuple[ActionCall, ...]] = {}  # group -> live members

    def rebuild(self, port_up: dict[int, bool]) -> None:
        """Recompute each group's candidates: members by ascending id, weight copies each,
        members whose watch port is down left out."""
        choices: dict[int, tuple[ActionCall, ...]] = {}
        for gid, group in self.groups.items():
            live: list[ActionCall] = []
            for m in sorted(group.members, key=lambda m: m.member_id):
                if m.watch_port is not None and not port_up.get(m.watch_port, True):
                    continue
                live.extend([self.members[m.member_id]] * max(1, m.weight))
            choices[gid] = tuple(live)
        self.choices = choices

    def ref(self, kind: str, ident: int, delta: int) -> None:
        key = (kind, ident)
        self.refs[key] = self.refs.get(key, 0) + delta
        if self.refs[key] <= 0:
            del self.refs[key]


@dataclass
class ProgramState:
    """All control-plane state of one committed program."""

    program: Program
    tables: dict[int, TableState] = field(default_factory=dict)
    profiles: dict[int, ProfileState] = field(default_factory=dict)
    counters: dict[int, CounterArray] = field(default_factory=dict)
    registers: dict[int, RegisterArray] = field(default_factory=dict)
    table_hooks: list[Callable[[TableState, Entry | None, Entry | None], None]] = field(
        default_factory=list
    )
    port_up: dict[int, bool] = field(default_factory=dict)

    @classmethod
    def build(cls, program: Program) -> ProgramState:
        state = cls(program)
        for t in program.tables:
            tid = program.id(t.name)
            state.tables[tid] = TableState(t, tid, ActionCall(program.id(t.default_action)))
        for p in program.action_profiles:
            pid = program.id(p.name)
            state.profiles[pid] = ProfileState(p.name, pid, p.size, p.max_group_size)
        for c in program.counters:
            state.counters[program.id(c.name)] = CounterArray(c.size)
        for r in program.registers:
            state.registers[program.id(r.name)] = RegisterArray(r.size, r.bitwidth)
        return state

    def table(self, name: str) -> TableState:
        return self.tables[self.program.id(name)]

    def counter(self, name: str) -> CounterArray:
        return self.counters[self.program.id(name)]

    def register(self, name: str) -> RegisterArray:
        return self.registers[self.program.id(name)]

    def profile(self, name: str) -> ProfileState:
        return self.profiles[self.program.id(name)]

    def profile_of(self, table: TableState) -> ProfileState | None:
        impl = table.schema.implementation
        return None if impl is None else self.profiles[self.program.id(impl)]

    def notify(self, table: TableState, old: Entry | None, new: Entry | None) -> None:
        for hook in self.table_hooks:
            hook(table, old, new)

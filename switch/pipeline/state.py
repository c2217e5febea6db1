"""Control-plane state of a committed program: tables, action profiles, counters, registers.

This is the P4Runtime view (P4Info ids, canonical values, controller metadata), kept for
reads and undo; every change is applied at once to the program's engine objects
(``switch.p4json``), which the data path executes. Values are plain ints (the P4Runtime
layer translates byte strings). Every mutating operation validates first, then applies and
returns an ``Undo`` callable, so a batch written with ROLLBACK_ON_ERROR / DATAPLANE_ATOMIC can
be rolled back exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from google.rpc import code_pb2

from common.p4schema.model import Program, Table
from switch.p4json.runtime import ActionProfile as EngineProfile
from switch.p4json.runtime import CounterArray, EntryError, MatchTable, RegisterArray
from switch.p4json.runtime import GroupMember as EngineMember

Undo = Callable[[], None]
MatchKey = tuple[object, ...]
"""Per field: int (exact), (value, prefix_len) (lpm), (value, mask) (ternary, optional),
(low, high) (range)."""
PRIORITY_BASE = 1 << 31  # P4Runtime: higher priority wins; the engine (BMv2): lower wins
PRIORITY_KINDS = ("ternary", "range", "optional")


class WriteError(Exception):
    """A rejected update: google.rpc code + message, as P4Runtime reports per update."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class ActionCall:
    """An action (P4Info id) and its parameter values (in the action's parameter order)."""

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
    priority: int = 0


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


_ENGINE_CODES = {
    "exists": (code_pb2.ALREADY_EXISTS,
               "Match entry exists, use MODIFY if you wish to change action"),
    "missing": (code_pb2.NOT_FOUND, "Cannot find match entry"),
    "full": (code_pb2.RESOURCE_EXHAUSTED, ""),
    "const": (code_pb2.PERMISSION_DENIED, ""),
    "invalid": (code_pb2.INVALID_ARGUMENT, ""),
}


def _write_error(exc: EntryError) -> WriteError:
    code, message = _ENGINE_CODES.get(exc.kind, (code_pb2.INVALID_ARGUMENT, ""))
    return WriteError(code, message or exc.message)


class TableState:
    """A match-action table as P4Runtime sees it, mirrored into the engine's table."""

    def __init__(
        self,
        schema: Table,
        table_id: int,
        initial_default: ActionCall,
        engine: MatchTable | None = None,
        action_ids: dict[int, int] | None = None,
    ) -> None:
        self.schema = schema
        self.table_id = table_id
        self.entries: dict[tuple[object, ...], Entry] = {}
        self.initial_default = initial_default
        self.default = initial_default
        self.engine = engine
        self.action_ids = action_ids or {}  # P4Info action id -> JSON action id
        self.kinds = tuple(mf.kind for mf in schema.match_fields)
        self.needs_priority = any(k in PRIORITY_KINDS for k in self.kinds)

    def ident(self, key: MatchKey, priority: int = 0) -> tuple[object, ...]:
        return (*key, priority) if self.needs_priority else key

    def get(self, key: MatchKey, priority: int = 0) -> Entry | None:
        return self.entries.get(self.ident(key, priority))

    # -- engine mirroring -------------------------------------------------------------------
    def _engine_key(self, key: MatchKey) -> tuple[object, ...]:
        parts: list[object] = []
        for kind, mf, part in zip(self.kinds, self.schema.match_fields, key):
            if kind == "optional":
                # (value, mask): mask all ones = the value, 0 = wildcard (engine: ternary)
                parts.append(part if isinstance(part, tuple) else (part, (1 << mf.bitwidth) - 1))
            else:
                parts.append(part)
        return tuple(parts)

    def _engine_priority(self, priority: int) -> int:
        return PRIORITY_BASE - priority if self.needs_priority else 0

    def _engine_action(self, entry: Entry) -> tuple[int | None, tuple[int, ...]]:
        if entry.action is None:
            return None, ()
        jid = self.action_ids.get(entry.action.action_id)
        if jid is None:
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid action for table")
        return jid, entry.action.params

    def _engine_add(self, entry: Entry) -> None:
        if self.engine is None:
            return
        action, args = self._engine_action(entry)
        try:
            e = self.engine.add(self._engine_key(entry.key), self._engine_priority(entry.priority),
                                action, args, member=entry.member_id, group=entry.group_id)
        except EntryError as exc:
            raise _write_error(exc) from None
        e.tag = entry

    def _engine_remove(self, entry: Entry) -> None:
        if self.engine is not None:
            self.engine.remove(self._engine_key(entry.key), self._engine_priority(entry.priority))

    # -- writes ------------------------------------------------------------------------------
    def insert(self, entry: Entry) -> Undo:
        ident = self.ident(entry.key, entry.priority)
        if ident in self.entries:
            raise WriteError(
                code_pb2.ALREADY_EXISTS,
                "Match entry exists, use MODIFY if you wish to change action",
            )
        if len(self.entries) >= self.schema.size:
            raise WriteError(code_pb2.RESOURCE_EXHAUSTED, f"Table {self.schema.name} is full")
        self._engine_add(entry)
        self.entries[ident] = entry

        def undo() -> None:
            del self.entries[ident]
            self._engine_remove(entry)

        return undo

    def modify(self, entry: Entry) -> Undo:
        ident = self.ident(entry.key, entry.priority)
        old = self.entries.get(ident)
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, "Cannot find match entry")
        self._engine_modify(entry)
        self.entries[ident] = entry

        def undo() -> None:
            self._engine_modify(old)
            self.entries[ident] = old

        return undo

    def _engine_modify(self, entry: Entry) -> None:
        """Replace the engine entry's action (its direct counters and meter stay)."""
        if self.engine is None:
            return
        action, args = self._engine_action(entry)
        try:
            _, new = self.engine.modify(self._engine_key(entry.key),
                                        self._engine_priority(entry.priority), action, args,
                                        member=entry.member_id, group=entry.group_id)
        except EntryError as exc:
            raise _write_error(exc) from None
        new.tag = entry

    def delete(self, key: MatchKey, priority: int = 0) -> tuple[Entry, Undo]:
        ident = self.ident(key, priority)
        old = self.entries.get(ident)
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, "Cannot find match entry")
        self._engine_remove(old)
        del self.entries[ident]

        def undo() -> None:
            self._engine_add(old)
            self.entries[ident] = old

        return old, undo

    def set_default(self, action: ActionCall | None) -> Undo:
        old = self.default
        new = self.initial_default if action is None else action
        self._engine_default(new)
        self.default = new

        def undo() -> None:
            self._engine_default(old)
            self.default = old

        return undo

    def _engine_default(self, call: ActionCall) -> None:
        if self.engine is None or self.engine.indirect:
            return
        if call == self.initial_default:
            self.engine.reset_default()
            return
        jid = self.action_ids.get(call.action_id)
        if jid is None:
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid action for table")
        try:
            self.engine.set_default(jid, call.params)
        except EntryError as exc:
            raise _write_error(exc) from None

    # -- lookups (tests, diagnostics) ---------------------------------------------------------
    def lookup_lpm(self, value: int) -> Entry | None:
        """The entry the data path would match for ``value`` (single-field LPM tables)."""
        if self.engine is None:
            return None
        hit = self.engine.lookup_lpm(value)
        tag = None if hit is None else hit.tag
        return tag if isinstance(tag, Entry) else None


class ProfileState:
    """An action profile (members) with its selector (groups), mirrored into the engine's.

    The data path's candidates for a group are its members by ascending member id, each
    repeated ``weight`` times, members whose watch port is down left out."""

    def __init__(
        self,
        name: str,
        profile_id: int,
        size: int,
        max_group_size: int,
        engine: EngineProfile | None = None,
        action_ids: dict[int, int] | None = None,
    ) -> None:
        self.name = name
        self.profile_id = profile_id
        self.size = size
        self.max_group_size = max_group_size
        self.members: dict[int, ActionCall] = {}
        self.groups: dict[int, Group] = {}
        self.refs: dict[tuple[str, int], int] = {}  # ("member"|"group", id) -> table refs
        self.engine = engine
        self.action_ids = action_ids or {}

    def rebuild(self, port_up: dict[int, bool]) -> None:
        """Push members and groups to the engine and recompute each group's candidates."""
        if self.engine is None:
            return
        eng = self.engine
        eng.members = {
            mid: (self.action_ids.get(call.action_id, -1), call.params)
            for mid, call in self.members.items()
        }
        eng.groups = {
            gid: [EngineMember(m.member_id, m.weight, m.watch_port) for m in group.members]
            for gid, group in self.groups.items()
        }
        eng.port_up = port_up
        eng.rebuild()

    @property
    def choices(self) -> dict[int, tuple[ActionCall, ...]]:
        """Each group's candidates in the data path's order (P4Info action ids)."""
        if self.engine is None:
            return {}
        back = {jid: p4id for p4id, jid in self.action_ids.items()}
        return {gid: tuple(ActionCall(back.get(a, a), args) for a, args in calls)
                for gid, calls in self.engine.choices.items()}

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
    def build(cls, program: Program, binding: object | None = None) -> ProgramState:
        """Fresh state; with a ``switch.pipeline.binding.Binding``, mirrored into its engine."""
        from switch.pipeline.binding import Binding

        b = binding if isinstance(binding, Binding) else None
        state = cls(program)
        for t in program.tables:
            tid = program.id(t.name)
            state.tables[tid] = TableState(
                t, tid, ActionCall(program.id(t.default_action)),
                b.tables.get(tid) if b else None, b.table_actions.get(tid) if b else None,
            )
        for p in program.action_profiles:
            pid = program.id(p.name)
            state.profiles[pid] = ProfileState(
                p.name, pid, p.size, p.max_group_size,
                b.profiles.get(pid) if b else None, b.profile_actions.get(pid) if b else None,
            )
        for c in program.counters:
            cid = program.id(c.name)
            state.counters[cid] = b.counters[cid] if b else CounterArray(c.name, c.size)
        for r in program.registers:
            rid = program.id(r.name)
            state.registers[rid] = b.registers[rid] if b else RegisterArray(r.name, r.size, r.bitwidth)
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

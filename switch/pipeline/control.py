"""Semantic control-plane writes on a ProgramState (after P4Runtime decoding).

Each function validates, applies, notifies hooks and returns an Undo. Reference rules follow
P4Runtime / simple_switch_grpc: a table entry may only point at an existing member or group;
a member used by a group or entry, or a group used by an entry, cannot be deleted.
"""

from __future__ import annotations

from google.rpc import code_pb2

from switch.pipeline.state import (
    ActionCall,
    Entry,
    Group,
    ProfileState,
    ProgramState,
    TableState,
    Undo,
    WriteError,
)

INSERT, MODIFY, DELETE = 1, 2, 3


def _chain(*undos: Undo) -> Undo:
    def undo() -> None:
        for u in reversed(undos):
            u()

    return undo


def _ref_entry(profile: ProfileState | None, entry: Entry | None, delta: int) -> None:
    if profile is None or entry is None:
        return
    if entry.member_id is not None:
        profile.ref("member", entry.member_id, delta)
    if entry.group_id is not None:
        profile.ref("group", entry.group_id, delta)


def table_write(state: ProgramState, kind: int, table: TableState, entry: Entry) -> Undo:
    profile = state.profile_of(table)
    if kind in (INSERT, MODIFY) and profile is not None:
        if entry.member_id is not None and entry.member_id not in profile.members:
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid member / group id")
        if entry.group_id is not None and entry.group_id not in profile.groups:
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid member / group id")
    old = table.entries.get(entry.key)
    if kind == INSERT:
        undo = table.insert(entry)
        new: Entry | None = entry
    elif kind == MODIFY:
        undo = table.modify(entry)
        new = entry
    elif kind == DELETE:
        old, undo = table.delete(entry.key, entry.priority)
        new = None
    else:
        raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid update type")
    _ref_entry(profile, old, -1)
    _ref_entry(profile, new, +1)
    state.notify(table, old, new)

    def unref() -> None:
        _ref_entry(profile, new, -1)
        _ref_entry(profile, old, +1)

    return _chain(undo, unref)


def default_write(state: ProgramState, table: TableState, action: ActionCall | None) -> Undo:
    return table.set_default(action)


def member_write(
    state: ProgramState, kind: int, profile: ProfileState, member_id: int, action: ActionCall
) -> Undo:
    members = profile.members
    old = members.get(member_id)
    if kind == INSERT:
        if old is not None:
            raise WriteError(code_pb2.ALREADY_EXISTS, f"Member {member_id} already exists")
        if len(members) >= profile.size:
            raise WriteError(code_pb2.RESOURCE_EXHAUSTED, f"Action profile {profile.name} is full")
        members[member_id] = action
    elif kind == MODIFY:
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, f"Member {member_id} does not exist")
        members[member_id] = action
    elif kind == DELETE:
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, f"Member {member_id} does not exist")
        if profile.refs.get(("member", member_id)):
            raise WriteError(
                code_pb2.FAILED_PRECONDITION, f"Member {member_id} is still referenced"
            )
        del members[member_id]
    else:
        raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid update type")
    profile.rebuild(state.port_up)

    def undo() -> None:
        if old is None:
            members.pop(member_id, None)
        else:
            members[member_id] = old
        profile.rebuild(state.port_up)

    return undo


def group_write(state: ProgramState, kind: int, profile: ProfileState, group: Group) -> Undo:
    groups = profile.groups
    gid = group.group_id
    old = groups.get(gid)
    if kind in (INSERT, MODIFY):
        seen: set[int] = set()
        for m in group.members:
            if m.member_id not in profile.members:
                raise WriteError(code_pb2.NOT_FOUND, f"Member {m.member_id} does not exist")
            if m.member_id in seen:
                raise WriteError(
                    code_pb2.INVALID_ARGUMENT, f"Duplicate member {m.member_id} in group"
                )
            if m.weight < 1:
                raise WriteError(code_pb2.INVALID_ARGUMENT, "Member weight must be >= 1")
            seen.add(m.member_id)
        max_size = group.max_size or (old.max_size if old else 0)
        total = sum(m.weight for m in group.members)
        if max_size and total > max_size:
            raise WriteError(
                code_pb2.RESOURCE_EXHAUSTED, f"Group {gid} exceeds its max_size {max_size}"
            )
        if profile.max_group_size and group.max_size > profile.max_group_size:
            raise WriteError(code_pb2.INVALID_ARGUMENT, "max_size exceeds the profile's limit")
    if kind == INSERT:
        if old is not None:
            raise WriteError(code_pb2.ALREADY_EXISTS, f"Group {gid} already exists")
        groups[gid] = group
    elif kind == MODIFY:
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, f"Group {gid} does not exist")
        if not group.max_size:
            group.max_size = old.max_size
        groups[gid] = group
    elif kind == DELETE:
        if old is None:
            raise WriteError(code_pb2.NOT_FOUND, f"Group {gid} does not exist")
        if profile.refs.get(("group", gid)):
            raise WriteError(code_pb2.FAILED_PRECONDITION, f"Group {gid} is still referenced")
        del groups[gid]
    else:
        raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid update type")
    for m in old.members if old else ():
        profile.ref("member", m.member_id, -1)
    for m in group.members if kind != DELETE else ():
        profile.ref("member", m.member_id, +1)
    profile.rebuild(state.port_up)

    def undo() -> None:
        for m in group.members if kind != DELETE else ():
            profile.ref("member", m.member_id, -1)
        for m in old.members if old else ():
            profile.ref("member", m.member_id, +1)
        if old is None:
            groups.pop(gid, None)
        else:
            groups[gid] = old
        profile.rebuild(state.port_up)

    return undo


def counter_write(
    state: ProgramState, counter_id: int, index: int | None, packets: int, nbytes: int
) -> Undo:
    counter = state.counters[counter_id]
    cells = range(counter.size) if index is None else [index]
    if index is not None and not 0 <= index < counter.size:
        raise WriteError(code_pb2.OUT_OF_RANGE, f"Counter index {index} out of range")
    if not (0 <= packets < 1 << 64 and 0 <= nbytes < 1 << 64):
        raise WriteError(code_pb2.INVALID_ARGUMENT, "Counter values must be 0 .. 2^64 - 1")
    saved = [(i, counter.packets[i], counter.bytes[i]) for i in cells]
    for i in cells:
        counter.packets[i] = packets
        counter.bytes[i] = nbytes

    def undo() -> None:
        for i, p, b in saved:
            counter.packets[i] = p
            counter.bytes[i] = b

    return undo


def register_write(state: ProgramState, register_id: int, index: int | None, value: int) -> Undo:
    reg = state.registers[register_id]
    if index is not None and not 0 <= index < reg.size:
        raise WriteError(code_pb2.OUT_OF_RANGE, f"Register index {index} out of range")
    if value >> reg.bitwidth:
        raise WriteError(
            code_pb2.INVALID_ARGUMENT, f"Register value does not fit in {reg.bitwidth} bits"
        )
    cells = range(reg.size) if index is None else [index]
    saved = [(i, reg.cells[i]) for i in cells]
    for i in cells:
        reg.cells[i] = value

    def undo() -> None:
        for i, v in saved:
            reg.cells[i] = v

    return undo

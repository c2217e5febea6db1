"""Write (per-update results, atomicity modes) and Read (wildcards) over a ProgramState."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.rpc import code_pb2

import switch.p4runtime.codec as codec
from common.p4schema.bytestrings import decode, encode, fits
from common.proto.p4.v1 import p4runtime_pb2
from switch.p4json.runtime import CounterArray, RegisterArray
from switch.pipeline import Pipeline
from switch.pipeline import control as ctl
from switch.pipeline.state import Entry, ProgramState, Undo, WriteError

log = logging.getLogger(__name__)
Update = p4runtime_pb2.Update
WriteRequest = p4runtime_pb2.WriteRequest
ENTITIES_PER_RESPONSE = 2000


@dataclass(slots=True)
class Result:
    code: int
    message: str = ""


def apply_write_batch(
    pipeline: Pipeline, updates: Sequence[p4runtime_pb2.Update], atomicity: int
) -> list[Result]:
    """Apply updates in order. CONTINUE_ON_ERROR applies what it can; ROLLBACK_ON_ERROR and
    DATAPLANE_ATOMIC stop at the first failure, undo everything and report the others as
    ABORTED (the caller holds the pipeline lock, so the data plane never sees a partial batch)."""
    all_or_none = atomicity in (WriteRequest.ROLLBACK_ON_ERROR, WriteRequest.DATAPLANE_ATOMIC)
    results: list[Result] = []
    undos: list[Undo] = []
    for update in updates:
        try:
            undos.append(apply_update(pipeline, update))
            results.append(Result(code_pb2.OK))
        except WriteError as err:
            results.append(Result(err.code, err.message))
            if all_or_none:
                break
        except Exception as exc:  # a bug must cost one update, never the server
            log.exception("unexpected error applying an update")
            results.append(Result(code_pb2.INTERNAL, f"internal error: {exc}"))
            if all_or_none:
                break
    if all_or_none and len(undos) != len(updates):
        for undo in reversed(undos):
            undo()
        failed = len(results) - 1
        out = [Result(code_pb2.ABORTED, "rolled back: another update of the batch failed")] * len(
            updates
        )
        out[failed] = results[failed]
        return out
    return results


def _kind(update: p4runtime_pb2.Update) -> int:
    if update.type not in (Update.INSERT, Update.MODIFY, Update.DELETE):
        raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid update type")
    return {Update.INSERT: ctl.INSERT, Update.MODIFY: ctl.MODIFY, Update.DELETE: ctl.DELETE}[
        update.type
    ]


def _index(has: bool, msg: p4runtime_pb2.Index) -> int | None:
    if not has:
        return None
    if msg.index < 0:
        raise WriteError(code_pb2.INVALID_ARGUMENT, "A negative number is not a valid index value")
    return msg.index


def apply_update(pipeline: Pipeline, update: p4runtime_pb2.Update) -> Undo:
    state = pipeline.state
    assert state is not None
    kind = _kind(update)
    entity = update.entity
    which = entity.WhichOneof("entity")
    if which == "table_entry":
        te = entity.table_entry
        table = codec.table_of(state, te.table_id)
        if te.is_default_action:
            if kind != ctl.MODIFY:
                verb = "INSERT" if kind == ctl.INSERT else "DELETE"
                raise WriteError(code_pb2.INVALID_ARGUMENT, f"Cannot use {verb} for default entry")
            return ctl.default_write(state, table, codec.decode_default(state, table, te))
        if kind == ctl.MODIFY and not te.HasField("action"):
            raise WriteError(
                code_pb2.INVALID_ARGUMENT, "'action' field must be set for non-default entries"
            )
        if kind == ctl.DELETE:  # as PI: only the key of a DELETE matters
            entry = Entry(key=codec.decode_key(table, te), priority=te.priority)
        else:
            entry = codec.decode_entry(state, table, te, need_action=True)
        return ctl.table_write(state, kind, table, entry)
    if which == "action_profile_member":
        m = entity.action_profile_member
        profile = codec.profile_of(state, m.action_profile_id)
        if kind == ctl.DELETE:
            call = profile.members.get(m.member_id)
            if call is None:
                raise WriteError(code_pb2.NOT_FOUND, f"Member {m.member_id} does not exist")
        else:
            call = codec.decode_member_action(state, profile, m.action)
        return ctl.member_write(state, kind, profile, m.member_id, call)
    if which == "action_profile_group":
        g = entity.action_profile_group
        profile = codec.profile_of(state, g.action_profile_id)
        return ctl.group_write(state, kind, profile, codec.decode_group(g))
    if which == "counter_entry":
        c = entity.counter_entry
        if c.counter_id not in state.counters:
            raise codec.invalid_id()
        if kind != ctl.MODIFY:
            raise WriteError(
                code_pb2.INVALID_ARGUMENT, "Only MODIFY is supported for counter entries"
            )
        index = _index(c.HasField("index"), c.index)
        return ctl.counter_write(
            state, c.counter_id, index, c.data.packet_count, c.data.byte_count
        )
    if which == "register_entry":
        r = entity.register_entry
        reg = state.registers.get(r.register_id)
        if reg is None:
            raise codec.invalid_id()
        if kind != ctl.MODIFY:
            raise WriteError(
                code_pb2.INVALID_ARGUMENT, "Only MODIFY is supported for register entries"
            )
        if r.data.WhichOneof("data") != "bitstring":
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Register data must be a bitstring")
        if not fits(r.data.bitstring, reg.bitwidth):
            raise WriteError(
                code_pb2.INVALID_ARGUMENT,
                f"Bytestring provided does not fit within {reg.bitwidth} bits",
            )
        index = _index(r.HasField("index"), r.index)
        return ctl.register_write(state, r.register_id, index, decode(r.data.bitstring))
    raise WriteError(
        code_pb2.UNIMPLEMENTED, f"{which or 'empty entity'} writes are not supported by this target"
    )


# ---- read ------------------------------------------------------------------------------------


NewEntity = Callable[[], p4runtime_pb2.Entity]


def snapshot(state: ProgramState) -> ProgramState:
    """A read-only copy of the readable state (entries and arrays copied, objects shared:
    writes replace Entry/Group/ActionCall objects, they never mutate them)."""
    snap = ProgramState(state.program)
    for tid, table in state.tables.items():
        t = copy.copy(table)
        t.entries = dict(table.entries)
        snap.tables[tid] = t
    for pid, profile in state.profiles.items():
        p = copy.copy(profile)
        p.members = dict(profile.members)
        p.groups = dict(profile.groups)
        snap.profiles[pid] = p
    for cid, counter in state.counters.items():
        c = CounterArray(counter.name, 0)
        c.size, c.packets, c.bytes = counter.size, list(counter.packets), list(counter.bytes)
        snap.counters[cid] = c
    for rid, reg in state.registers.items():
        r = RegisterArray(reg.name, 0, reg.bitwidth)
        r.size, r.cells = reg.size, list(reg.cells)
        snap.registers[rid] = r
    return snap


def _read_one(state: ProgramState, entity: p4runtime_pb2.Entity, new: NewEntity) -> None:
    """Append every entity matching ``entity`` (wildcards allowed) through ``new()``."""
    which = entity.WhichOneof("entity")
    if which == "table_entry":
        te = entity.table_entry
        tables = (
            list(state.tables.values()) if te.table_id == 0 else [codec.table_of(state, te.table_id)]
        )
        for table in tables:
            if te.is_default_action:
                if table.schema.implementation is None:
                    new().table_entry.CopyFrom(codec.encode_default(table))
                continue
            if te.match:
                key = codec.decode_key(table, te)
                hit = table.get(key, te.priority)
                selected = [] if hit is None else [hit]
            else:
                selected = list(table.entries.values())
            for e in selected:
                new().table_entry.CopyFrom(codec.encode_entry(table, e))
    elif which == "action_profile_member":
        m = entity.action_profile_member
        profiles = (
            list(state.profiles.values())
            if m.action_profile_id == 0
            else [codec.profile_of(state, m.action_profile_id)]
        )
        for profile in profiles:
            for mid, call in sorted(profile.members.items()):
                if m.member_id and mid != m.member_id:
                    continue
                out_m = new().action_profile_member
                out_m.action_profile_id = profile.profile_id
                out_m.member_id = mid
                out_m.action.CopyFrom(codec.encode_action(call))
    elif which == "action_profile_group":
        g = entity.action_profile_group
        profiles = (
            list(state.profiles.values())
            if g.action_profile_id == 0
            else [codec.profile_of(state, g.action_profile_id)]
        )
        for profile in profiles:
            for gid, group in sorted(profile.groups.items()):
                if g.group_id and gid != g.group_id:
                    continue
                new().action_profile_group.CopyFrom(codec.encode_group(profile, group))
    elif which == "counter_entry":
        c = entity.counter_entry
        ids = list(state.counters) if c.counter_id == 0 else [c.counter_id]
        index = _index(c.HasField("index"), c.index)
        for cid in ids:
            counter = state.counters.get(cid)
            if counter is None:
                raise codec.invalid_id()
            if index is not None and index >= counter.size:
                raise WriteError(code_pb2.OUT_OF_RANGE, f"Counter index {index} out of range")
            packets, nbytes = counter.packets, counter.bytes
            for i in range(counter.size) if index is None else (index,):
                out = new().counter_entry
                out.counter_id = cid
                out.index.index = i
                data = out.data
                data.packet_count = packets[i]
                data.byte_count = nbytes[i]
    elif which == "register_entry":
        r = entity.register_entry
        ids = list(state.registers) if r.register_id == 0 else [r.register_id]
        index = _index(r.HasField("index"), r.index)
        for rid in ids:
            reg = state.registers.get(rid)
            if reg is None:
                raise codec.invalid_id()
            if index is not None and index >= reg.size:
                raise WriteError(code_pb2.OUT_OF_RANGE, f"Register index {index} out of range")
            for i in range(reg.size) if index is None else (index,):
                out_r = new().register_entry
                out_r.register_id = rid
                out_r.index.index = i
                out_r.data.bitstring = encode(reg.cells[i])
    else:
        raise WriteError(
            code_pb2.UNIMPLEMENTED, f"{which or 'empty entity'} reads are not supported by this target"
        )


def read_entities(
    pipeline: Pipeline, entities: Sequence[p4runtime_pb2.Entity]
) -> list[p4runtime_pb2.ReadResponse]:
    """All matching entities, in ReadResponse messages of at most ENTITIES_PER_RESPONSE.

    The state is copied under the pipeline lock (sub-millisecond) and encoded outside it, so a
    large wildcard read does not stall the data plane.
    """
    with pipeline.lock:
        live = pipeline.state
        assert live is not None
        state = snapshot(live)
    responses = [p4runtime_pb2.ReadResponse()]

    def new() -> p4runtime_pb2.Entity:
        if len(responses[-1].entities) >= ENTITIES_PER_RESPONSE:
            responses.append(p4runtime_pb2.ReadResponse())
        return responses[-1].entities.add()

    for entity in entities:
        _read_one(state, entity, new)
    return responses

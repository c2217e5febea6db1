"""P4Runtime messages <-> pipeline state values, with simple_switch_grpc's validation rules.

Decoding raises WriteError with the google.rpc code and the message PI (the P4Runtime server of
simple_switch_grpc) uses for the same mistake; encoding produces canonical byte strings.
"""

from __future__ import annotations

from google.rpc import code_pb2

from common.p4schema.bytestrings import decode, encode, fits
from common.p4schema.model import Program, Table
from common.proto.p4.v1 import p4runtime_pb2
from switch.pipeline.state import (
    ActionCall,
    Entry,
    Group,
    GroupMember,
    MatchKey,
    ProfileState,
    ProgramState,
    TableState,
    WriteError,
)

INVALID = code_pb2.INVALID_ARGUMENT


def invalid_id() -> WriteError:
    return WriteError(INVALID, "Invalid P4 id")


def _value(data: bytes, bitwidth: int) -> int:
    if not fits(data, bitwidth):
        raise WriteError(INVALID, f"Bytestring provided does not fit within {bitwidth} bits")
    return decode(data)


def table_of(state: ProgramState, table_id: int) -> TableState:
    table = state.tables.get(table_id)
    if table is None:
        raise invalid_id()
    return table


def decode_key(table: TableState, te: p4runtime_pb2.TableEntry) -> MatchKey:
    schema = table.schema
    fields = {i: mf for i, mf in enumerate(schema.match_fields, start=1)}
    given: dict[int, p4runtime_pb2.FieldMatch] = {}
    if len(te.match) > len(fields):
        raise WriteError(INVALID, "Too many fields in match key")
    for fm in te.match:
        if fm.field_id not in fields:
            raise WriteError(INVALID, "Unknown field in match key")
        given[fm.field_id] = fm
    key: list[object] = []
    for fid, mf in fields.items():
        fm = given.get(fid)
        if mf.kind in ("ternary", "range", "optional"):
            key.append(_decode_wide(mf.kind, mf.bitwidth, fm))
            continue
        if mf.kind == "exact":
            if fm is None:
                raise WriteError(INVALID, "Missing non-ternary field in match key")
            if not fm.HasField("exact"):
                raise WriteError(INVALID, "Invalid match type")
            key.append(_value(fm.exact.value, mf.bitwidth))
        elif mf.kind == "lpm":
            if fm is None:
                key.append((0, 0))
                continue
            if not fm.HasField("lpm"):
                raise WriteError(INVALID, "Invalid match type")
            plen = fm.lpm.prefix_len
            value = _value(fm.lpm.value, mf.bitwidth)
            if plen < 0:
                raise WriteError(INVALID, "Prefix length cannot be < 0")
            if plen > mf.bitwidth:
                raise WriteError(INVALID, "Prefix length cannot be > bitwidth")
            if plen == 0:
                raise WriteError(
                    INVALID,
                    "Invalid reprsentation of 'don't care' LPM match, "
                    "omit match field instead of using a prefix length of 0",
                )
            if value & ((1 << (mf.bitwidth - plen)) - 1):
                raise WriteError(INVALID, "Invalid LPM value, incorrect number of trailing zeros")
            key.append((value, plen))
        else:
            raise WriteError(code_pb2.UNIMPLEMENTED, f"match kind {mf.kind} not supported")
    if table.needs_priority:
        if te.priority <= 0:
            raise WriteError(INVALID, "Ternary, range or optional match requires a priority > 0")
    elif te.priority != 0:
        raise WriteError(INVALID, "Non-zero priority for non-ternary match")
    return tuple(key)


def _decode_wide(kind: str, width: int, fm: p4runtime_pb2.FieldMatch | None) -> tuple[int, int]:
    """A ternary / optional part as (value, mask), a range part as (low, high); a field left
    out is a wildcard (mask 0, or the full range)."""
    full = (1 << width) - 1
    if fm is None:
        return (0, full) if kind == "range" else (0, 0)
    if kind == "ternary":
        if not fm.HasField("ternary"):
            raise WriteError(INVALID, "Invalid match type")
        value, mask = _value(fm.ternary.value, width), _value(fm.ternary.mask, width)
        if mask == 0:
            raise WriteError(INVALID, "Invalid reprsentation of 'don't care' ternary match, "
                             "omit match field instead of using a 0 mask")
        if value & ~mask:
            raise WriteError(INVALID, "Invalid ternary value, bits outside the mask must be 0")
        return (value, mask)
    if kind == "optional":
        if not fm.HasField("optional"):
            raise WriteError(INVALID, "Invalid match type")
        return (_value(fm.optional.value, width), full)
    if not fm.HasField("range"):
        raise WriteError(INVALID, "Invalid match type")
    low, high = _value(fm.range.low, width), _value(fm.range.high, width)
    if low > high:
        raise WriteError(INVALID, "Invalid range match, low > high")
    if (low, high) == (0, full):
        raise WriteError(INVALID, "Invalid reprsentation of 'don't care' range match, "
                         "omit match field instead")
    return (low, high)


def decode_action(
    program: Program, action: p4runtime_pb2.Action, allowed: dict[int, str] | None
) -> ActionCall:
    """Validate an Action against the program (and, for tables, the allowed action ids)."""
    aid = action.action_id
    schema = next((a for a in program.actions if program.ids[a.name] == aid), None)
    if schema is None or aid >> 24 != 0x01:
        raise invalid_id()
    if allowed is not None and aid not in allowed:
        raise WriteError(INVALID, "Invalid action for table")
    widths = {i: p.bitwidth for i, p in enumerate(schema.params, start=1)}
    values: dict[int, int] = {}
    for p in action.params:
        if p.param_id not in widths:
            raise WriteError(INVALID, f"Unknown param id {p.param_id} for action {schema.name}")
        if p.param_id in values:
            raise WriteError(INVALID, f"Duplicate param id {p.param_id}")
        values[p.param_id] = _value(p.value, widths[p.param_id])
    if len(values) != len(widths):
        missing = sorted(set(widths) - set(values))
        raise WriteError(INVALID, f"Missing param(s) {missing} for action {schema.name}")
    return ActionCall(aid, tuple(values[i] for i in sorted(widths)))


def _allowed(program: Program, table: Table) -> dict[int, str]:
    return {program.id(r.name): r.scope for r in table.actions}


def decode_entry(
    state: ProgramState, table: TableState, te: p4runtime_pb2.TableEntry, need_action: bool
) -> Entry:
    """A TableEntry (not the default entry) -> Entry; validates key, action, scope."""
    program = state.program
    key = decode_key(table, te)
    if te.idle_timeout_ns < 0:
        raise WriteError(INVALID, "idle_timeout_ns must be a positive value")
    if te.idle_timeout_ns > 0:
        raise WriteError(
            INVALID,
            "idle_timeout_ns must be set to 0 for tables which do not support idle timeout",
        )
    if te.HasField("counter_data") or te.HasField("meter_config"):
        raise WriteError(INVALID, "Table has no direct counters or meters")
    entry = Entry(key=key, controller_metadata=te.controller_metadata, metadata=te.metadata,
                  priority=te.priority)
    if not te.HasField("action"):
        if need_action:
            raise WriteError(INVALID, "'action' field must be set")
        return entry
    indirect = table.schema.implementation is not None
    which = te.action.WhichOneof("type")
    if indirect and which == "action":
        raise WriteError(INVALID, f"Cannot provide direct action for indirect table {table.table_id}")
    if not indirect and which != "action":
        raise WriteError(
            INVALID, f"Cannot provide indirect action for direct table {table.table_id}"
        )
    if which == "action_profile_member_id":
        entry.member_id = te.action.action_profile_member_id
    elif which == "action_profile_group_id":
        entry.group_id = te.action.action_profile_group_id
    elif which == "action_profile_action_set":
        raise WriteError(code_pb2.UNIMPLEMENTED, "One-shot action selector programming")
    else:
        allowed = _allowed(program, table.schema)
        entry.action = decode_action(program, te.action.action, allowed)
        if allowed[entry.action.action_id] == "DEFAULT_ONLY":
            raise WriteError(
                code_pb2.PERMISSION_DENIED, "Cannot use DEFAULT_ONLY action in table entry"
            )
    return entry


def decode_default(
    state: ProgramState, table: TableState, te: p4runtime_pb2.TableEntry
) -> ActionCall | None:
    """The action of a default-entry MODIFY (None = reset to the program's default)."""
    if te.match:
        raise WriteError(INVALID, "Non-empty key for default entry")
    if te.priority != 0:
        raise WriteError(INVALID, "Non-zero priority for default entry")
    if table.schema.implementation is not None:
        raise WriteError(
            INVALID, f"Cannot set / reset default action for indirect table {table.table_id}"
        )
    if table.schema.const_default_action:
        raise WriteError(
            code_pb2.PERMISSION_DENIED,
            f"Cannot set / reset default action for table {table.table_id} which has a const "
            "default action",
        )
    if not te.HasField("action"):
        return None
    if te.action.WhichOneof("type") != "action":
        raise WriteError(
            INVALID, f"Cannot provide indirect action for direct table {table.table_id}"
        )
    allowed = _allowed(state.program, table.schema)
    call = decode_action(state.program, te.action.action, allowed)
    if allowed[call.action_id] == "TABLE_ONLY":
        raise WriteError(code_pb2.PERMISSION_DENIED, "Cannot use TABLE_ONLY action as default action")
    return call


def profile_of(state: ProgramState, profile_id: int) -> ProfileState:
    profile = state.profiles.get(profile_id)
    if profile is None:
        raise invalid_id()
    return profile


def decode_member_action(
    state: ProgramState, profile: ProfileState, action: p4runtime_pb2.Action
) -> ActionCall:
    program = state.program
    schema = next(p for p in program.action_profiles if p.name == profile.name)
    allowed: dict[int, str] = {}
    for tname in schema.tables:
        allowed.update(_allowed(program, next(t for t in program.tables if t.name == tname)))
    allowed = {aid: scope for aid, scope in allowed.items() if scope != "DEFAULT_ONLY"}
    return decode_action(program, action, allowed)


def decode_group(msg: p4runtime_pb2.ActionProfileGroup) -> Group:
    members = []
    for m in msg.members:
        watch: int | None = None
        which = m.WhichOneof("watch_kind")
        if which == "watch_port" and m.watch_port:
            watch = decode(m.watch_port)
        elif which == "watch" and m.watch:
            watch = m.watch
        members.append(GroupMember(m.member_id, m.weight or 1, watch))
    return Group(msg.group_id, members, msg.max_size)


# ---- encoding (Read) -------------------------------------------------------------------------


def encode_action(call: ActionCall) -> p4runtime_pb2.Action:
    action = p4runtime_pb2.Action(action_id=call.action_id)
    for i, value in enumerate(call.params, start=1):
        action.params.add(param_id=i, value=encode(value))
    return action


def encode_entry(table: TableState, entry: Entry) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=table.table_id, priority=entry.priority)
    for i, (mf, part) in enumerate(zip(table.schema.match_fields, entry.key), start=1):
        if mf.kind == "exact":
            assert isinstance(part, int)
            te.match.add(field_id=i).exact.value = encode(part)
        elif mf.kind in ("ternary", "range", "optional"):
            assert isinstance(part, tuple)
            a, b = int(part[0]), int(part[1])
            full = (1 << mf.bitwidth) - 1
            if (mf.kind == "range" and (a, b) == (0, full)) or (mf.kind != "range" and b == 0):
                continue  # wildcard: the field is left out
            fm = te.match.add(field_id=i)
            if mf.kind == "ternary":
                fm.ternary.value, fm.ternary.mask = encode(a), encode(b)
            elif mf.kind == "optional":
                fm.optional.value = encode(a)
            else:
                fm.range.low, fm.range.high = encode(a), encode(b)
        else:
            assert isinstance(part, tuple)
            value, plen = part
            if plen == 0:
                continue
            fm = te.match.add(field_id=i)
            fm.lpm.value = encode(value)
            fm.lpm.prefix_len = plen
    if entry.action is not None:
        te.action.action.CopyFrom(encode_action(entry.action))
    elif entry.member_id is not None:
        te.action.action_profile_member_id = entry.member_id
    elif entry.group_id is not None:
        te.action.action_profile_group_id = entry.group_id
    te.controller_metadata = entry.controller_metadata
    te.metadata = entry.metadata
    return te


def encode_default(table: TableState) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=table.table_id, is_default_action=True)
    te.action.action.CopyFrom(encode_action(table.default))
    return te


def encode_group(profile: ProfileState, group: Group) -> p4runtime_pb2.ActionProfileGroup:
    msg = p4runtime_pb2.ActionProfileGroup(
        action_profile_id=profile.profile_id, group_id=group.group_id, max_size=group.max_size
    )
    for m in group.members:
        pm = msg.members.add(member_id=m.member_id, weight=m.weight)
        if m.watch_port is not None:
            pm.watch_port = encode(m.watch_port)
    return msg

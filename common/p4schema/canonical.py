"""Canonical forms of a P4Info, so that two files describing one program compare equal.

p4c writes objects in declaration order; P4Runtime identifies them by id, so order carries no
meaning. Two levels:

- ``canonical_order``: every list of objects that carry an id (tables, actions, counters, ...,
  a table's match fields and action refs, an action's params, ...) sorted by id, an action
  profile's table ids sorted; nothing removed. The schema's rendering must equal p4c's file
  byte for byte in this form (tests/unit/test_p4schema.py).
- ``program_content``: ``canonical_order`` without what only documents the program: ``doc``,
  annotations (the ``@defaultonly`` annotation repeats an action ref's ``scope``), source
  locations, ``pkg_info`` other than ``arch``, a table's informational
  ``initial_default_action``, and an empty ``type_info``. The embedded target accepts a pushed
  P4Info whose content equals one of its programs'.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from common.proto.p4.config.v1 import p4info_pb2

DOC_FIELDS = frozenset(
    {"doc", "annotations", "structured_annotations", "annotation_locations", "source_location"}
)
SORTED_SCALAR_LISTS = frozenset({"table_ids"})


def _id_of(item: Message) -> int | None:
    fields = item.DESCRIPTOR.fields_by_name
    if "preamble" in fields:
        return int(item.preamble.id)  # type: ignore[attr-defined]
    if "id" in fields:
        return int(item.id)  # type: ignore[attr-defined]
    return None


def _is_map(field: FieldDescriptor) -> bool:
    return bool(field.message_type is not None and field.message_type.GetOptions().map_entry)


def _walk(msg: Message, strip_docs: bool) -> None:
    for field, value in msg.ListFields():
        if strip_docs and field.name in DOC_FIELDS:
            msg.ClearField(field.name)
            continue
        if field.is_repeated:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                if _is_map(field):
                    entry_value = field.message_type.fields_by_name["value"]
                    if entry_value.type == FieldDescriptor.TYPE_MESSAGE:
                        for key in value:
                            _walk(value[key], strip_docs)
                    continue
                _sort_messages(msg, field, value, strip_docs)
            elif field.name in SORTED_SCALAR_LISTS:
                items = sorted(value)
                msg.ClearField(field.name)
                getattr(msg, field.name).extend(items)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _walk(value, strip_docs)


def _sort_messages(msg: Message, field: FieldDescriptor, value: Any, strip_docs: bool) -> None:
    items: list[Message] = []
    for item in value:
        copy = type(item)()
        copy.CopyFrom(item)
        _walk(copy, strip_docs)
        items.append(copy)
    ids = [_id_of(i) for i in items]
    if all(i is not None for i in ids):
        items = [i for _, i in sorted(zip(ids, items), key=lambda pair: pair[0])]  # type: ignore[arg-type, return-value]
    msg.ClearField(field.name)
    getattr(msg, field.name).extend(items)


def canonical_order(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """A copy of ``info`` with every id-carrying list sorted by id (nothing removed)."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    _walk(out, strip_docs=False)
    return out


def program_content(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """A copy of ``info`` in canonical order, without documentation-only fields."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    _walk(out, strip_docs=True)
    arch = out.pkg_info.arch
    out.ClearField("pkg_info")
    if arch:
        out.pkg_info.arch = arch
    for table in out.tables:
        table.ClearField("initial_default_action")
    if out.HasField("type_info") and not out.type_info.ListFields():
        out.ClearField("type_info")
    return out


def canonical_bytes(info: p4info_pb2.P4Info) -> bytes:
    """Deterministic serialisation of ``canonical_order(info)``."""
    return canonical_order(info).SerializeToString(deterministic=True)


def content_bytes(info: p4info_pb2.P4Info) -> bytes:
    """Deterministic serialisation of ``program_content(info)``."""
    return program_content(info).SerializeToString(deterministic=True)

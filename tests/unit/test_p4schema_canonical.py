"""common.p4schema.canonical: order never matters, content always does."""

from __future__ import annotations

from google.protobuf import text_format

from common.p4schema.canonical import (
    canonical_bytes,
    canonical_order,
    content_bytes,
    program_content,
)
from common.proto.p4.config.v1 import p4info_pb2

INFO = """
pkg_info { arch: "v1model" }
tables {
  preamble { id: 2 name: "C.t2" alias: "t2" }
  match_fields { id: 2 name: "b" bitwidth: 8 match_type: EXACT }
  match_fields { id: 1 name: "a" bitwidth: 9 match_type: EXACT }
  action_refs { id: 20 }
  action_refs { id: 10 annotations: "@defaultonly" scope: DEFAULT_ONLY }
  size: 16
}
tables {
  preamble { id: 1 name: "C.t1" alias: "t1" }
  action_refs { id: 10 }
  size: 8
}
actions { preamble { id: 20 name: "C.a" alias: "a" } params { id: 2 name: "y" bitwidth: 3 }
          params { id: 1 name: "x" bitwidth: 4 } }
actions { preamble { id: 10 name: "NoAction" alias: "NoAction" } }
action_profiles { preamble { id: 30 name: "C.p" alias: "p" } table_ids: 2 table_ids: 1 size: 4 }
"""


def parse(text: str) -> p4info_pb2.P4Info:
    return text_format.Parse(text, p4info_pb2.P4Info())


def test_canonical_order_sorts_every_id_list_and_removes_nothing() -> None:
    info = parse(INFO)
    ordered = canonical_order(info)
    assert [t.preamble.id for t in ordered.tables] == [1, 2]
    assert [m.id for m in ordered.tables[1].match_fields] == [1, 2]
    assert [r.id for r in ordered.tables[1].action_refs] == [10, 20]
    assert ordered.tables[1].action_refs[0].annotations == ["@defaultonly"]
    assert [a.preamble.id for a in ordered.actions] == [10, 20]
    assert [p.name for p in ordered.actions[1].params] == ["x", "y"]
    assert list(ordered.action_profiles[0].table_ids) == [1, 2]
    assert ordered.ByteSize() == info.ByteSize()
    assert canonical_order(ordered) == ordered
    assert info.tables[0].preamble.id == 2  # the input is not modified


def test_order_is_ignored_but_every_content_change_is_seen() -> None:
    base = parse(INFO)
    shuffled = parse(INFO)
    shuffled.tables[0].match_fields[0].CopyFrom(base.tables[0].match_fields[1])
    shuffled.tables[0].match_fields[1].CopyFrom(base.tables[0].match_fields[0])
    first, second = p4info_pb2.Table(), p4info_pb2.Table()
    first.CopyFrom(base.tables[1])
    second.CopyFrom(base.tables[0])
    shuffled.ClearField("tables")
    shuffled.tables.extend([first, second])
    assert shuffled != base
    assert canonical_bytes(shuffled) == canonical_bytes(base)
    assert content_bytes(shuffled) == content_bytes(base)
    for change in (
        lambda i: setattr(i.tables[0], "size", 17),
        lambda i: setattr(i.tables[0].match_fields[0], "bitwidth", 7),
        lambda i: setattr(i.actions[0].params[0], "name", "z"),
        lambda i: i.tables[1].action_refs.add(id=20),
        lambda i: setattr(i.pkg_info, "arch", "psa"),
    ):
        changed = parse(INFO)
        change(changed)
        assert content_bytes(changed) != content_bytes(base)
        assert canonical_bytes(changed) != canonical_bytes(base)


def test_program_content_drops_only_documentation() -> None:
    base = parse(INFO)
    documented = parse(INFO)
    documented.tables[0].preamble.doc.brief = "a table"
    documented.tables[0].preamble.annotations.append('@name("t2")')
    documented.tables[0].action_refs[1].ClearField("annotations")
    documented.pkg_info.name = "build 7"
    documented.type_info.SetInParent()
    documented.tables[0].initial_default_action.action_id = 10
    assert canonical_bytes(documented) != canonical_bytes(base)
    assert content_bytes(documented) == content_bytes(base)
    assert program_content(documented).pkg_info.arch == "v1model"
    assert not program_content(documented).HasField("type_info")

"""common.p4schema: ids, aliases, and the schema against the P4Info p4c wrote (committed)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
from google.protobuf import text_format

from common.p4schema import PROGRAMS, compiled
from common.p4schema.canonical import canonical_bytes, canonical_order
from common.p4schema.compiled import read_p4info
from common.p4schema.model import Prefix, jenkins_one_at_a_time, shortest_unique_suffix

P4_DIR = Path(__file__).resolve().parents[2] / "p4"


def test_jenkins_hash_reference_value() -> None:
    # Published test vector of Bob Jenkins' one-at-a-time hash.
    assert jenkins_one_at_a_time("a") == 0xCA2E9442
    assert jenkins_one_at_a_time("The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_noaction_id_is_the_one_p4c_assigns() -> None:
    # Every p4c-compiled v1model P4Info (e.g. the P4 tutorials) gives NoAction id 21257015.
    programs = [p for p in PROGRAMS.values() if "NoAction" in p.ids]
    assert programs  # mrc_switch's tables default to NoAction
    for program in programs:
        assert program.id("NoAction") == 21257015


def test_name_lookups_find_objects_and_name_near_names_on_a_miss() -> None:
    program = PROGRAMS["mrc_switch"]
    route = program.table("MrcIngress.ipv6_route")
    assert route.name == "MrcIngress.ipv6_route"
    assert [p.name for p in program.action("MrcIngress.set_nexthop").params] == [
        p.name for p in next(a for a in program.actions if a.name == "MrcIngress.set_nexthop").params
    ]
    assert program.id("MrcIngress.ipv6_route") == program.ids["MrcIngress.ipv6_route"]
    with pytest.raises(ValueError, match=r"no table 'MrcIngress.ipv6_rout'.*MrcIngress\.ipv6_route"):
        program.table("MrcIngress.ipv6_rout")
    with pytest.raises(ValueError, match=r"no action 'MrcIngress.set_nexthp'.*MrcIngress\.set_nexthop"):
        program.action("MrcIngress.set_nexthp")
    with pytest.raises(ValueError, match=r"no control-plane object 'zzz'"):
        program.id("zzz")


def test_ids_have_type_prefix_and_are_unique() -> None:
    for program in PROGRAMS.values():
        info = program.render_p4info()
        groups = [
            (Prefix.TABLE, info.tables),
            (Prefix.ACTION, info.actions),
            (Prefix.COUNTER, info.counters),
            (Prefix.REGISTER, info.registers),
            (Prefix.ACTION_PROFILE, info.action_profiles),
        ]
        seen: set[int] = set()
        for prefix, objs in groups:
            for obj in objs:
                assert obj.preamble.id >> 24 == prefix, obj.preamble.name
                assert obj.preamble.id not in seen
                seen.add(obj.preamble.id)


def test_alias_is_shortest_unique_suffix() -> None:
    names = ["A.b.c", "D.e.c", "A.x"]
    assert shortest_unique_suffix("A.b.c", names) == "b.c"
    assert shortest_unique_suffix("A.x", names) == "x"


def test_schema_renders_p4cs_p4info_byte_for_byte_in_canonical_order() -> None:
    """The committed P4Info is p4c's (make p4); the schema must describe exactly it."""
    for name, program in PROGRAMS.items():
        committed = read_p4info(compiled.p4info_path(name))
        rendered = program.render_p4info()
        if canonical_bytes(rendered) != canonical_bytes(committed):
            diff = difflib.unified_diff(
                text_format.MessageToString(canonical_order(committed)).splitlines(),
                text_format.MessageToString(canonical_order(rendered)).splitlines(),
                "p4c", "schema", lineterm="",
            )
            pytest.fail(f"common/p4schema/{name}.py differs from p4c's P4Info:\n" + "\n".join(diff))


def test_to_p4info_is_p4cs_file_as_a_fresh_copy() -> None:
    for name, program in PROGRAMS.items():
        info = program.to_p4info()
        assert info == read_p4info(compiled.p4info_path(name))
        info.tables[0].size += 1
        assert program.to_p4info() == read_p4info(compiled.p4info_path(name))


def test_p4_sources_use_the_schema_names() -> None:
    """Every table, action, counter and register of the schema is declared in the P4 source."""
    for name, program in PROGRAMS.items():
        source = (P4_DIR / f"{name}.p4").read_text()
        objs = [t.name for t in program.tables] + [a.name for a in program.actions]
        objs += [c.name for c in program.counters] + [r.name for r in program.registers]
        objs += [p.name for p in program.action_profiles]
        for full in objs:
            if full == "NoAction":
                continue
            local = full.split(".")[-1]
            assert re.search(rf"\b{re.escape(local)}\b", source), f"{full} missing in {name}.p4"

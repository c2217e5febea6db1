"""common.p4schema: ids, aliases, committed P4Info files, and (where p4c exists) p4c parity."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from common.p4schema import PROGRAMS, generate
from common.p4schema.model import Prefix, jenkins_one_at_a_time, shortest_unique_suffix

P4_DIR = Path(__file__).resolve().parents[2] / "p4"


def test_jenkins_hash_reference_value() -> None:
    # Published test vector of Bob Jenkins' one-at-a-time hash.
    assert jenkins_one_at_a_time("a") == 0xCA2E9442
    assert jenkins_one_at_a_time("The quick brown fox jumps over the lazy dog") == 0x519E91F5


def test_noaction_id_is_the_one_p4c_assigns() -> None:
    # Every p4c-compiled v1model P4Info (e.g. the P4 tutorials) gives NoAction id 21257015.
    for program in PROGRAMS.values():
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
        info = program.to_p4info()
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


def test_committed_p4info_equals_generated() -> None:
    for name in PROGRAMS:
        path = generate.path_for(name)
        assert path.read_text() == generate.render(name), (
            f"{path} is stale: run python -m common.p4schema.generate"
        )


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


def _normalise(info: p4info_pb2.P4Info) -> p4info_pb2.P4Info:
    """Order-independent form: objects sorted by id, documentation-only fields cleared."""
    out = p4info_pb2.P4Info()
    out.CopyFrom(info)
    for kind in ("tables", "actions", "counters", "registers", "action_profiles"):
        objs = sorted(getattr(out, kind), key=lambda o: o.preamble.id)
        copies = [type(o)() for o in objs]
        for dst, src in zip(copies, objs):
            dst.CopyFrom(src)
        out.ClearField(kind)
        getattr(out, kind).extend(copies)
    out.ClearField("type_info")
    out.pkg_info.Clear()
    out.pkg_info.arch = info.pkg_info.arch
    for group in (out.tables, out.actions, out.counters, out.registers, out.action_profiles):
        for obj in group:
            obj.preamble.ClearField("annotations")
            obj.preamble.ClearField("doc")
    for table in out.tables:
        # informational in P4Info; some p4c versions emit it, the target does not need it
        table.ClearField("initial_default_action")
    return out


@pytest.mark.skipif(
    shutil.which("p4c") is None and shutil.which("p4c-bm2-ss") is None,
    reason="p4c is not installed on this machine (not in Debian 12 or PyPI); "
    "the committed P4Info is checked against common/p4schema instead",
)
def test_p4c_p4info_matches_committed(tmp_path: Path) -> None:
    for name in PROGRAMS:
        out = tmp_path / f"{name}.p4info.txtpb"
        source = str(P4_DIR / f"{name}.p4")
        if shutil.which("p4c"):
            cmd = ["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path)]
        else:
            cmd = ["p4c-bm2-ss", "-o", str(tmp_path / f"{name}.json")]
        subprocess.run([*cmd, "--p4runtime-files", str(out), source], check=True)
        compiled = text_format.Parse(out.read_text(), p4info_pb2.P4Info())
        committed = text_format.Parse(generate.path_for(name).read_text(), p4info_pb2.P4Info())
        assert _normalise(compiled) == _normalise(committed)


def test_normalised_form_ignores_object_order_but_not_content() -> None:
    info = PROGRAMS["mrc_switch"].to_p4info()
    shuffled = p4info_pb2.P4Info()
    shuffled.CopyFrom(info)
    tables = list(shuffled.tables)[::-1]
    copies = [p4info_pb2.Table() for _ in tables]
    for dst, src in zip(copies, tables):
        dst.CopyFrom(src)
    shuffled.ClearField("tables")
    shuffled.tables.extend(copies)
    assert _normalise(shuffled) == _normalise(info)
    shuffled.tables[0].size += 1
    assert _normalise(shuffled) != _normalise(info)

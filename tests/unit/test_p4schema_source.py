"""p4/*.p4 declare exactly the control-plane shape of common.p4schema (a p4c-free drift check).

A small structural reader extracts controls, tables (keys, match kinds, actions, default
action, size, implementation), actions with parameter widths, counters, registers and action
selectors from the P4 sources, and compares them with the schema.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from common.p4schema import PROGRAMS
from common.p4schema.model import Program
from common.p4schema.mrc_switch import BMV2_QDEPTH_CELL_BYTES

P4_DIR = Path(__file__).resolve().parents[2] / "p4"


def _blocks(source: str, keyword: str) -> dict[str, str]:
    """name -> body of every `keyword name(...) { body }` (brace matched)."""
    out = {}
    for m in re.finditer(rf"\b{keyword}\s+(\w+)\s*(\([^)]*\))?\s*\{{", source):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        out[m.group(1)] = source[m.end() : i - 1]
    return out


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)


def read_shape(path: Path) -> dict[str, dict[str, object]]:
    source = _strip_comments(path.read_text())
    shape: dict[str, dict[str, object]] = {
        "tables": {}, "actions": {}, "counters": {}, "registers": {}, "profiles": {}
    }
    for control, body in _blocks(source, "control").items():
        for m in re.finditer(r"\baction\s+(\w+)\s*\(([^)]*)\)", body):
            params = tuple(
                (p.split()[-1], int(re.search(r"bit<(\d+)>", p).group(1)))  # type: ignore[union-attr]
                for p in m.group(2).split(",") if p.strip()
            )
            shape["actions"][f"{control}.{m.group(1)}"] = params
        for m in re.finditer(r"counter\(32w(\d+),\s*CounterType\.(\w+)\)\s+(\w+);", body):
            shape["counters"][f"{control}.{m.group(3)}"] = (int(m.group(1)), m.group(2))
        for m in re.finditer(r"register<bit<(\d+)>>\(32w(\d+)\)\s+(\w+);", body):
            shape["registers"][f"{control}.{m.group(3)}"] = (int(m.group(2)), int(m.group(1)))
        for m in re.finditer(r"action_selector\(HashAlgorithm\.(\w+),\s*32w(\d+),\s*32w\d+\)\s+(\w+);",
                             body):
            shape["profiles"][f"{control}.{m.group(3)}"] = (int(m.group(2)), m.group(1))
        for name, tbody in _blocks(body, "table").items():
            key = re.search(r"key\s*=\s*\{([^}]*)\}", tbody)
            fields = [tuple(s.strip() for s in f.split(":")) for f in
                      (key.group(1).split(";") if key else []) if f.strip()]
            actions = re.search(r"actions\s*=\s*\{([^}]*)\}", tbody).group(1)  # type: ignore[union-attr]
            refs = []
            for a in actions.split(";"):
                a = a.strip()
                if a:
                    scope = "DEFAULT_ONLY" if "@defaultonly" in a else "TABLE_AND_DEFAULT"
                    refs.append((a.replace("@defaultonly", "").strip(), scope))
            default = re.search(r"default_action\s*=\s*(\w+)\(", tbody)
            impl = re.search(r"implementation\s*=\s*(\w+)", tbody)
            size = re.search(r"size\s*=\s*(\d+)", tbody)
            shape["tables"][f"{control}.{name}"] = {
                "match": [f for f in fields if f[1] != "selector"],
                "selector": [f[0] for f in fields if f[1] == "selector"],
                "actions": refs,
                "default": default.group(1) if default else "NoAction",
                "implementation": f"{control}.{impl.group(1)}" if impl else None,
                "size": int(size.group(1)) if size else None,
            }
    return shape


def _qualify(program: Program, local: str, control: str) -> str:
    return local if local == "NoAction" else f"{control}.{local}"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_p4_source_declares_the_schema(name: str) -> None:
    program = PROGRAMS[name]
    shape = read_shape(P4_DIR / f"{name}.p4")
    assert set(shape["tables"]) == {t.name for t in program.tables}
    for t in program.tables:
        got = shape["tables"][t.name]
        control = t.name.split(".")[0]
        assert got["match"] == [(mf.name, mf.kind) for mf in t.match_fields], t.name
        assert got["selector"] == list(t.selector_fields), t.name
        assert got["actions"] == [(r.name.split(".")[-1], r.scope) for r in t.actions], t.name
        assert _qualify(program, str(got["default"]), control) == t.default_action, t.name
        assert got["implementation"] == t.implementation, t.name
        assert got["size"] == t.size, t.name
    declared = {a.name: tuple((p.name, p.bitwidth) for p in a.params)
                for a in program.actions if a.name != "NoAction"}
    assert shape["actions"] == declared
    assert shape["counters"] == {c.name: (c.size, "packets_and_bytes") for c in program.counters}
    assert shape["registers"] == {r.name: (r.size, r.bitwidth) for r in program.registers}
    assert shape["profiles"] == {p.name: (p.size, "crc16") for p in program.action_profiles}


def test_mrc_egress_thresholds_compare_bytes_queued() -> None:
    """ECN/trim compare meta.enq_qdepth_bytes (never the packet depth) with the byte thresholds;
    the BMv2 build derives it from enq_qdepth with the schema's cell size."""
    source = _strip_comments((P4_DIR / "mrc_switch.p4").read_text())
    cell = re.search(r"const bit<32> BMV2_QDEPTH_CELL_BYTES = (\d+);", source)
    assert cell is not None and int(cell.group(1)) == BMV2_QDEPTH_CELL_BYTES
    assert re.search(r"struct metadata_t \{[^}]*\bbit<32>\s+enq_qdepth_bytes;", source)
    egress = _blocks(source, "control")["MrcEgress"]
    compared = re.findall(r"([\w.]+)\s*>=\s*meta\.(\w*threshold\w*)", egress)
    assert sorted(c[1] for c in compared) == ["ecn_threshold_bytes", "trim_threshold_bytes"]
    assert {c[0] for c in compared} == {"meta.enq_qdepth_bytes"}
    bmv2 = re.search(r"#ifndef MRC_EMBEDDED_TARGET\s*(.*?)#endif", egress, flags=re.S)
    assert bmv2 is not None and re.fullmatch(
        r"meta\.enq_qdepth_bytes = \(bit<32>\)standard_metadata\.enq_qdepth \* "
        r"BMV2_QDEPTH_CELL_BYTES;\s*",
        bmv2.group(1),
    )

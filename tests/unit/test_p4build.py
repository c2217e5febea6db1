"""make p4 (common/p4build.py): the committed BMv2 JSON and P4Info are what p4c produces from
p4/*.p4, and p4c has nothing to say about the programs beyond one warning it cannot avoid."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from common import p4build, p4toolchain
from common.p4build import Compiled, canonical_json, compile_program, differences, program_names
from common.p4schema import PROGRAMS
from common.p4schema.compiled import json_path, p4info_path

# p4c 1.2.4.8's front end gives every table a default action (NoAction when none is written)
# and its BMv2 back end warns about any default action of a table with an action selector;
# so a v1model program with an action selector cannot compile without this one warning.
UNAVOIDABLE = re.compile(
    r"warning: Target does not support default_action for MrcIngress\.ecmp "
    r"\(due to action profiles\)"
)


def _p4c() -> Path | None:
    return p4toolchain.find_p4c()


needs_p4c = pytest.mark.skipif(
    _p4c() is None, reason="p4c is not installed (" + p4toolchain.missing_message() + ")"
)


def test_every_program_has_committed_outputs_and_a_schema() -> None:
    assert program_names() == sorted(PROGRAMS)
    for name in program_names():
        data = json.loads(json_path(name).read_text())
        assert data["program"] == f"p4/{name}.p4" and "pipelines" in data
        assert p4info_path(name).read_text().startswith("# proto-file: p4/config/v1/p4info.proto")


def test_canonical_json_ignores_where_p4c_ran_and_nothing_else() -> None:
    text = json_path("ocs").read_text()
    data = json.loads(text)

    def repath(node: object, prefix: str) -> object:
        if isinstance(node, dict):
            return {k: (prefix + v if k in ("filename", "program") else repath(v, prefix))
                    for k, v in node.items()}
        if isinstance(node, list):
            return [repath(v, prefix) for v in node]
        return node

    elsewhere = json.dumps(repath(data, "/some/checkout/"))
    assert elsewhere != text and "/some/checkout/p4/ocs.p4" in elsewhere
    assert canonical_json(elsewhere) == canonical_json(text)
    data["pipelines"][0]["tables"][0]["max_size"] += 1
    assert canonical_json(json.dumps(data)) != canonical_json(text)


def test_differences_names_each_stale_output(tmp_path: Path) -> None:
    for name in ("ocs",):
        built = Compiled(name, tmp_path / f"{name}.json", tmp_path / f"{name}.p4info.txtpb", "")
        shutil.copyfile(json_path(name), built.json)
        shutil.copyfile(p4info_path(name), built.p4info)
        assert differences(built) == []
        built.p4info.write_text(built.p4info.read_text().replace("size: 512", "size: 256", 1))
        assert differences(built) == [str(p4info_path(name))]
        shutil.copyfile(p4info_path(name), built.p4info)
        built.json.write_text(built.json.read_text().replace('"max_size" : 512', '"max_size" : 2'))
        assert differences(built) == [str(json_path(name))]


def test_make_p4_without_p4c_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(p4toolchain, "DEFAULT_BIN_DIR", tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("P4C", raising=False)
    monkeypatch.delenv("P4_BIN_DIR", raising=False)
    assert p4build.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert "p4c-bm2-ss not found" in err and "docs/install.md" in err


@needs_p4c
@pytest.mark.parametrize("name", program_names())
def test_committed_outputs_are_what_p4c_produces(name: str, tmp_path: Path) -> None:
    p4c = _p4c()
    assert p4c is not None
    built = compile_program(name, tmp_path, p4c)
    assert differences(built) == [], (
        f"p4/{name}.json or p4/{name}.p4info.txtpb is stale: run make p4 "
        f"({p4toolchain.tool_version(p4c)})"
    )
    warnings = [ln for ln in built.diagnostics.splitlines() if "warning" in ln or "error" in ln]
    assert all(UNAVOIDABLE.search(w) for w in warnings), built.diagnostics
    assert len(warnings) == (1 if name == "mrc_switch" else 0), built.diagnostics


@needs_p4c
def test_make_p4_check_passes_and_a_broken_program_fails(tmp_path: Path) -> None:
    assert p4build.main(["--check"]) == 0
    p4c = _p4c()
    assert p4c is not None
    broken = tmp_path / "broken.p4"
    broken.write_text((p4build.P4_DIR / "ocs.p4").read_text().replace("connect;", "connekt;"))
    with pytest.raises(p4build.CompileError, match="connekt"):
        compile_program("broken", tmp_path, p4c, p4_dir=tmp_path)

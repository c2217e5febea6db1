"""Compile p4/*.p4 with p4c into the committed BMv2 JSON and P4Info (``make p4``).

Usage: python -m common.p4build [--check] [PROGRAM ...]

For every program ``p4/<name>.p4`` p4c's BMv2 back end (``p4c-bm2-ss``, found as
common.p4toolchain says) writes ``p4/<name>.json`` (the BMv2 device config) and
``p4/<name>.p4info.txtpb`` (P4Info, text format). Both are committed, so users without p4c
still have them. ``--check`` compiles into a temporary directory instead and fails when the
committed files differ from what p4c produces, compared canonically: the JSON as parsed data
with source paths reduced to file names (they depend on where p4c ran), the P4Info as parsed
messages in canonical order (common.p4schema.canonical).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.p4schema.canonical import canonical_bytes
from common.p4schema.compiled import P4_DIR, json_path, p4info_path, read_p4info
from common.p4toolchain import ToolchainError, require_p4c, tool_version

REPO = P4_DIR.parent


def program_names(p4_dir: Path = P4_DIR) -> list[str]:
    return sorted(p.stem for p in p4_dir.glob("*.p4"))


@dataclass(frozen=True)
class Compiled:
    name: str
    json: Path
    p4info: Path
    diagnostics: str  # p4c's warnings (stderr); empty for a clean program


class CompileError(Exception):
    """p4c rejected a program; the message holds its diagnostics."""


def compile_program(name: str, out_dir: Path, p4c: Path, p4_dir: Path = P4_DIR) -> Compiled:
    """Run p4c on ``p4_dir/<name>.p4``, writing into ``out_dir``."""
    source = p4_dir / f"{name}.p4"
    try:  # a path relative to the repository, so source_info reads "p4/<name>.p4"
        shown = source.resolve().relative_to(REPO)
        cwd = REPO
    except ValueError:
        shown, cwd = source.resolve(), p4_dir
    out = Compiled(name, json_path(name, out_dir), p4info_path(name, out_dir), "")
    cmd = [str(p4c), "--target", "bmv2", "--arch", "v1model", "--p4v", "16",
           "-o", str(out.json), "--p4runtime-files", str(out.p4info), str(shown)]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise CompileError(f"p4c failed on {source} (exit {proc.returncode}):\n{proc.stderr}")
    return Compiled(name, out.json, out.p4info, proc.stderr.strip())


def canonical_json(text: str) -> Any:
    """BMv2 JSON as data, with the source paths p4c records reduced to file names."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: strip(v) for k, v in node.items()}
            if isinstance(out.get("filename"), str):
                out["filename"] = Path(out["filename"]).name
            return out
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    data = strip(json.loads(text))
    if isinstance(data, dict) and isinstance(data.get("program"), str):
        data["program"] = Path(data["program"]).name
    return data


def differences(built: Compiled, committed_dir: Path = P4_DIR) -> list[str]:
    """Which committed outputs of ``built.name`` differ from the freshly built ones."""
    stale = []
    want_json = json_path(built.name, committed_dir)
    if not want_json.exists() or canonical_json(want_json.read_text()) != canonical_json(
        built.json.read_text()
    ):
        stale.append(str(want_json))
    want_info = p4info_path(built.name, committed_dir)
    if not want_info.exists() or canonical_bytes(read_p4info(want_info)) != canonical_bytes(
        read_p4info(built.p4info)
    ):
        stale.append(str(want_info))
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.p4build", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="compile into a temporary directory and fail if p4/ is stale")
    parser.add_argument("programs", nargs="*", help="program names (default: every p4/*.p4)")
    args = parser.parse_args(argv)
    names = args.programs or program_names()
    unknown = sorted(set(names) - set(program_names()))
    if unknown:
        parser.error(f"no such program under {P4_DIR}: {', '.join(unknown)}")
    try:
        p4c = require_p4c()
    except ToolchainError as exc:
        print(f"make p4: {exc}", file=sys.stderr)
        return 2
    print(f"p4c: {p4c} ({tool_version(p4c)})")
    stale: list[str] = []
    with tempfile.TemporaryDirectory(prefix="p4build-") as tmp:
        for name in names:
            try:
                built = compile_program(name, Path(tmp), p4c)
            except CompileError as exc:
                print(exc, file=sys.stderr)
                return 1
            if built.diagnostics:
                print(built.diagnostics, file=sys.stderr)
            if args.check:
                stale += differences(built)
                continue
            for src, dst in ((built.json, json_path(name)), (built.p4info, p4info_path(name))):
                shutil.copyfile(src, dst)
                print(f"wrote {dst.relative_to(REPO)}")
    if stale:
        print("stale p4c outputs (run make p4): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

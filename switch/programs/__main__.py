"""``python -m switch.programs [--check]``: rebuild (or check) the embedded target's own
builds (programs compiled with defines, see switch.programs)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from switch.programs import OWN_BUILDS, ROOT
from switch.stf.toolchain import ToolError, compile_p4


def build(out_dir: Path) -> dict[str, Path]:
    """Compile every built-in program into ``out_dir`` (run from the repository root, so
    p4c records the sources as p4/NAME.p4)."""
    out: dict[str, Path] = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for b in OWN_BUILDS.values():
            out[b.name] = compile_p4(Path(b.source), out_dir / f"{b.name}.json", defines=b.defines)
    finally:
        os.chdir(cwd)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switch.programs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare, exit 1 if stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            built = build(Path(tmp))
        except ToolError as exc:
            print(f"switch.programs: {exc}", file=sys.stderr)
            return 2
        stale = [n for n, p in built.items() if p.read_bytes() != _committed(n)]
        if args.check:
            for n in stale:
                print(f"stale: {OWN_BUILDS[n].json_path} (run python -m switch.programs)")
            return 1 if stale else 0
        for n, p in built.items():
            OWN_BUILDS[n].json_path.write_bytes(p.read_bytes())
            print(f"wrote {OWN_BUILDS[n].json_path.relative_to(ROOT)}")
    return 0


def _committed(name: str) -> bytes:
    path = OWN_BUILDS[name].json_path
    return path.read_bytes() if path.exists() else b""


if __name__ == "__main__":
    sys.exit(main())

"""Build and load the project's optional C accelerators (`make install` runs ``build``).

Every ``_name.c`` file inside the project's packages is one CPython extension module built
next to its source (``hosts/wire/_fastwire.c`` -> ``hosts.wire._fastwire``). Each one speeds up
a per-packet path whose pure-Python reference stays in the tree: code imports it through
``load`` and falls back to the reference when it is missing, and tests compare the two.

Why a tiny builder instead of setuptools ext_modules: editable installs treat extensions
differently across setuptools versions, while this is one ``cc`` call per file with the
running interpreter's headers, rebuilt only when the source is newer, with errors a user can
read. ``MRCNET_PURE_PYTHON=1`` makes ``load`` return None (run the references alone).

    python -m common.cext            # build what is missing or stale
    python -m common.cext --force    # rebuild everything
    python -m common.cext --check    # build, then import every module (exit 1 on failure)
"""

from __future__ import annotations

import argparse
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "hosts", "switch", "controller", "mrcnet", "topologies")
CFLAGS = ("-O2", "-g0", "-fPIC", "-shared", "-Wall", "-Wextra", "-Wno-unused-parameter",
          "-Werror=implicit-function-declaration", "-std=c11", "-fno-strict-aliasing")
PURE_ENV = "MRCNET_PURE_PYTHON"


@dataclass(frozen=True)
class Extension:
    module: str  # dotted name, e.g. hosts.wire._fastwire
    source: Path
    target: Path

    def stale(self) -> bool:
        return not self.target.exists() or self.target.stat().st_mtime < self.source.stat().st_mtime


def discover(root: Path = ROOT) -> list[Extension]:
    """Every ``_*.c`` file under the project packages, as an extension to build."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    found = []
    for package in PACKAGES:
        for source in sorted((root / package).rglob("_*.c")):
            rel = source.relative_to(root).with_suffix("")
            module = ".".join(rel.parts)
            found.append(Extension(module, source, source.with_name(rel.name + suffix)))
    return found


def compiler() -> list[str]:
    """The C compiler command (``$CC`` or the one Python was built with, else cc)."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    argv = shlex.split(cc)
    if not argv or shutil.which(argv[0]) is None:
        argv = ["cc"]
    if shutil.which(argv[0]) is None:
        raise RuntimeError(
            "no C compiler found (install Debian's gcc: `make install` does it as root)"
        )
    return argv


def build_one(ext: Extension) -> None:
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise RuntimeError(
            f"Python headers not found in {include} (install Debian's python3-dev)"
        )
    tmp = ext.target.with_name(ext.target.name + ".tmp")
    cmd = [*compiler(), *CFLAGS, f"-I{include}", str(ext.source), "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building {ext.module} failed:\n$ {shlex.join(cmd)}\n{proc.stderr}")
    if proc.stderr.strip():
        print(proc.stderr.strip(), file=sys.stderr)
    tmp.replace(ext.target)  # atomic: a running process never maps a half-written file


def build(force: bool = False, quiet: bool = False) -> list[Extension]:
    """Build every stale (or, with ``force``, every) extension; return what was built."""
    built = []
    for ext in discover():
        if force or ext.stale():
            if not quiet:
                print(f"building C accelerator {ext.module}", flush=True)
            build_one(ext)
            built.append(ext)
    return built


def clean() -> None:
    for ext in discover():
        ext.target.unlink(missing_ok=True)


_reasons: dict[str, str] = {}


def load(module: str) -> ModuleType | None:
    """Import a C accelerator, or None (reason in ``why_missing``) to use the Python path."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        _reasons[module] = f"{PURE_ENV} is set"
        return None
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        _reasons[module] = f"not built ({exc}); run `make install` or `python -m common.cext`"
        return None


def why_missing(module: str) -> str:
    return _reasons.get(module, "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.cext", description=__doc__.split("\n")[0])
    parser.add_argument("--force", action="store_true", help="rebuild everything")
    parser.add_argument("--check", action="store_true", help="import every module after building")
    parser.add_argument("--clean", action="store_true", help="remove the built modules")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        return 0
    try:
        build(force=args.force)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.check:
        for ext in discover():
            try:
                importlib.import_module(ext.module)
            except ImportError as exc:
                print(f"error: {ext.module} does not import: {exc}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

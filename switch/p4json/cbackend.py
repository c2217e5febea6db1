"""Build, cache and bind the C form of a program's common path (switch.p4json.cgen).

``load(engine)`` returns ``(fast, reason)``: ``fast`` has the signature and results of the
generated Python ``fast`` and runs in C, bound to the engine's own tables, profiles,
counters and registers (the control plane keeps writing the Python objects; the C code reads
them per packet and updates counter and register cells in place). It is None when the
program is not eligible (``reason`` says why), when there is no C compiler or Python headers,
or when ``MRCNET_PURE_PYTHON`` is set; the engine then runs the Python form.

Modules are cached by the hash of the generated source under ``$MRCNET_CACHE_DIR`` (default
``$XDG_CACHE_HOME/mrcnet/p4json``, else ``~/.cache/mrcnet/p4json``), so a program is compiled
once per machine; concurrent builders each write their own temporary file and rename it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import subprocess
import sysconfig
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from common import cext
from switch.p4json.cexprs import NotEligible
from switch.p4json.cgen import CGen

if TYPE_CHECKING:
    from switch.p4json.engine import Engine

log = logging.getLogger(__name__)
CACHE_ENV = "MRCNET_CACHE_DIR"
_modules: dict[str, ModuleType] = {}


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mrcnet" / "p4json"


def generate(engine: Engine) -> tuple[CGen, str, str]:
    """(generator, module name, C source) of the engine's program, generated once per loaded
    program (engines built from one parse share it); raises NotEligible."""
    hit = engine.prog.derived.get("c")
    if hit is None:
        probe = CGen(engine.prog, "_p4dp")
        probe.source()
        digest = hashlib.sha256(probe.source().encode()).hexdigest()[:20]
        module = f"_p4dp_{digest}"
        gen = CGen(engine.prog, module)
        hit = engine.prog.derived["c"] = (gen, module, gen.source())
    return hit


def build(module: str, source: str, directory: Path | None = None) -> Path:
    """Compile ``source`` as extension ``module`` (cached); the shared object's path."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = directory / f"{module}{suffix}"
    if target.exists():
        return target
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        raise RuntimeError(f"Python headers not found in {include} (install python3-dev)")
    tag = f"{os.getpid()}.{id(source):x}"
    c_file = directory / f"{module}.{tag}.c"
    c_file.write_text(source)
    tmp = directory / f"{module}.{tag}{suffix}"
    cmd = [*cext.compiler(), *cext.CFLAGS, "-Wno-unused-variable", "-Wno-unused-label",
           "-Wno-unused-but-set-variable", f"-I{include}", str(c_file), "-o", str(tmp)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"compiling {module} failed:\n{proc.stderr[-4000:]}")
        tmp.replace(target)
        c_file.replace(directory / f"{module}.c")  # kept for reading / debugging
    finally:
        tmp.unlink(missing_ok=True)
        c_file.unlink(missing_ok=True)
    return target


def import_module(module: str, path: Path) -> ModuleType:
    mod = _modules.get(module)
    if mod is None:
        loader = importlib.machinery.ExtensionFileLoader(module, str(path))
        spec = importlib.util.spec_from_file_location(module, path, loader=loader)
        if spec is None:
            raise ImportError(f"cannot load {path}")
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
        _modules[module] = mod
    return mod


def objects(engine: Engine, gen: CGen) -> tuple[Any, ...]:
    """The engine objects ``new`` binds, in the generator's order."""
    out: list[Any] = []
    for _, kind, name in gen.objects:
        if kind == "counter":
            arr = engine.counters[name]
            out.append((arr.packets, arr.bytes))
        elif kind == "register":
            out.append(engine.registers[name].cells)
        elif kind == "table":
            out.append(engine.tables[name])
        elif kind == "exact":
            out.append(engine.tables[name].exact)
        elif kind == "by_len":
            out.append(engine.tables[name].by_len)
        elif kind == "lens":
            out.append(engine.tables[name].lens)
        elif kind == "profile":
            out.append(engine.profiles[name])
        else:
            raise AssertionError(f"unknown object kind {kind}")
    return tuple(out)


def load(engine: Engine, directory: Path | None = None) -> tuple[Callable[..., Any] | None, str]:
    """The C ``fast`` bound to ``engine``, or (None, why not)."""
    if os.environ.get(cext.PURE_ENV, "") not in ("", "0"):
        return None, f"{cext.PURE_ENV} is set"
    try:
        gen, module, source = generate(engine)
    except NotEligible as exc:
        return None, f"not eligible for C: {exc}"
    try:
        path = build(module, source, directory)
        mod = import_module(module, path)
    except (RuntimeError, OSError, ImportError) as exc:
        return None, f"C backend unavailable: {exc}"
    state = mod.new(objects(engine, gen))
    return partial(mod.fast, state), ""


def main(argv: list[str] | None = None) -> int:
    """Build (into the cache) the C modules of the built-in programs and of given JSONs, or
    remove the cached modules (``--clean``)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m switch.p4json.cbackend",
                                     description=main.__doc__)
    parser.add_argument("json", nargs="*", type=Path, help="BMv2 JSON files")
    parser.add_argument("--builtin", action="store_true",
                        help="the built-in programs (switch.programs), as `make install` does")
    parser.add_argument("--quiet", action="store_true", help="print problems only")
    parser.add_argument("--clean", action="store_true", help="remove the cached modules")
    args = parser.parse_args(argv)
    if args.clean:
        for path in cache_dir().glob("_p4dp_*"):
            path.unlink(missing_ok=True)
        return 0
    from switch.p4json.engine import Engine
    from switch.p4json.errors import ConfigError

    sources: list[tuple[str, bytes]] = [(str(p), p.read_bytes()) for p in args.json]
    if args.builtin:
        from switch.programs import BUILTIN, builtin_json

        sources += [(name, builtin_json(name)) for name in BUILTIN]
    rc = 0
    for name, text in sources:
        try:
            engine = Engine(text, name=name, backend="auto")
        except ConfigError as exc:
            print(f"{name}: refused: {exc}", file=sys.stderr)
            rc = 1
            continue
        if engine.backend == "c":
            if not args.quiet:
                print(f"{name}: C module ready in {cache_dir()}")
        else:
            print(f"{name}: runs in Python: {engine.backend_reason}",
                  file=sys.stderr if args.builtin else sys.stdout)
            if args.builtin and not os.environ.get(cext.PURE_ENV):
                rc = 1
    return rc


if __name__ == "__main__":
    raise SystemExit(main())

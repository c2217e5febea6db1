"""No import cycle among the project's modules.

The graph is built from the source with ``ast`` (nothing is imported): every module of the
packages pyproject's ``[tool.setuptools.packages.find] include`` list names, relative imports
resolved, ``from pkg import name`` counted as an import of ``pkg`` and, when ``pkg.name`` is a
module, of that module too. Imports inside functions and under ``if TYPE_CHECKING:`` count:
a type-only cycle still ties the modules together. A package's ``__init__`` is the module
``pkg``; importing ``pkg.mod`` counts as an import of ``pkg.mod`` only (not of ``pkg``), so a
package that re-exports its modules is not cyclic by itself.
"""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LISTED = 200


def _packages(root: Path) -> list[str]:
    """Top-level packages matching the setuptools include patterns."""
    data = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["packages"]["find"]["include"]
    found = []
    for d in sorted(root.iterdir()):
        if not (d / "__init__.py").is_file():
            continue
        if any(fnmatch.fnmatchcase(d.name, p) for p in patterns):
            found.append(d.name)
    return found


def _modules(root: Path, packages: list[str]) -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package); only directories that are packages."""
    out: dict[str, tuple[Path, bool]] = {}
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root)
            parts = list(rel.with_suffix("").parts)
            # every directory on the way must be a package (regular packages only)
            dirs = (root / Path(*parts[:i]) for i in range(1, len(parts)))
            if not all((d / "__init__.py").is_file() for d in dirs):
                continue
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out[".".join(parts)] = (path, is_pkg)
    return out


def _resolve(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    """Absolute name of a (possibly relative) ``from`` import's module."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _imports(module: str, path: Path, is_pkg: bool, known: set[str]) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            src = _resolve(module, is_pkg, node.level, node.module)
            if src in known:
                yield src
            for alias in node.names:
                sub = f"{src}.{alias.name}"
                if sub in known:
                    yield sub


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = _modules(root, _packages(root))
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        graph[name] = {t for t in _imports(name, path, is_pkg, known) if t != name}
    return graph


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps)


def _cycles(graph: dict[str, set[str]], comp: list[str], limit: int) -> list[list[str]]:
    """Elementary cycles inside one component (each listed once, from its smallest module)."""
    members = set(comp)
    out: list[list[str]] = []
    for start in comp:
        # only cycles whose smallest module is ``start``: each cycle is found exactly once
        allowed = {m for m in members if m >= start}
        path = [start]
        on_path = {start}
        work = [iter(sorted(graph[start] & allowed))]
        while work and len(out) < limit:
            nxt = next(work[-1], None)
            if nxt is None:
                work.pop()
                on_path.discard(path.pop())
                continue
            if nxt == start:
                out.append([*path, start])
            elif nxt not in on_path:
                path.append(nxt)
                on_path.add(nxt)
                work.append(iter(sorted(graph[nxt] & allowed)))
    return out


def find_cycles(graph: dict[str, set[str]], limit: int = MAX_LISTED) -> list[list[str]]:
    cycles: list[list[str]] = []
    for comp in _components(graph):
        cycles.extend(_cycles(graph, comp, limit - len(cycles)))
        if len(cycles) >= limit:
            break
    return cycles


def test_the_graph_sees_the_packages_and_their_imports() -> None:
    graph = import_graph(ROOT)
    tops = {m.split(".")[0] for m in graph}
    assert {"mrcnet", "common", "hosts", "switch", "controller", "topologies"} <= tops
    # a known absolute import and a package __init__'s re-export
    assert "hosts.transport.qp" in graph["hosts.transport.core"]
    assert "hosts.transport.core" in graph["hosts.transport"]


def test_cycle_finder_on_a_small_graph() -> None:
    g = {"a": {"b"}, "b": {"c", "a"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert find_cycles(g) == [["a", "b", "a"], ["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_relative_and_type_checking_imports_are_resolved(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.packages.find]\ninclude = ["pkg*"]\n'
    )
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import mod\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "mod.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..other import X\n"
    )
    (pkg / "other.py").write_text("from pkg.sub import mod\nX = 1\n")
    (tmp_path / "notpkg").mkdir()
    (tmp_path / "notpkg" / "__init__.py").write_text("import pkg\n")
    graph = import_graph(tmp_path)
    assert set(graph) == {"pkg", "pkg.sub", "pkg.sub.mod", "pkg.other"}
    assert graph["pkg"] == {"pkg.sub", "pkg.sub.mod"}
    assert graph["pkg.sub.mod"] == {"pkg.other"}
    assert graph["pkg.other"] == {"pkg.sub", "pkg.sub.mod"}
    assert find_cycles(graph) == [["pkg.other", "pkg.sub.mod", "pkg.other"]]


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph(ROOT))
    listing = "\n".join(" -> ".join(c) for c in cycles)
    more = "+" if len(cycles) >= MAX_LISTED else ""
    assert not cycles, f"import cycles ({len(cycles)}{more}):\n{listing}"

"""docs/architecture.md's layering table says exactly what the import-linter contracts allow.

The contracts in pyproject.toml are the source of truth (`make lint` enforces them); this test
derives, for every package row of the table, the set of project packages the contracts let it
import, and compares it with the table's "may import" column.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONFIG: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
LINTER = CONFIG["tool"]["importlinter"]


def _layers(contract: dict[str, Any]) -> list[tuple[list[str], bool]]:
    """Each layer, top first: (module names, whether its members are independent)."""
    prefixes = [c + "." for c in contract.get("containers", [])] or [""]
    out = []
    for layer in contract["layers"]:
        independent = ":" not in layer
        names = [n.strip() for n in re.split(r"[|:]", layer)]
        out.append(([p + n for p in prefixes for n in names], independent))
    return out


def _covers(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def allowed_imports(module: str) -> set[str]:
    """Project packages ``module`` may import under the contracts (its own package aside).

    The answer is the set of the coarsest names: a whole lower layer, or the siblings inside a
    container when ``module`` is in that container.
    """
    contracts = LINTER["contracts"]
    allowed: set[str] = set()
    for contract in contracts:
        if contract["type"] != "layers":
            continue
        layers = _layers(contract)
        for i, (names, independent) in enumerate(layers):
            mine = [n for n in names if _covers(module, n)]
            if not mine:
                continue
            if not independent:
                allowed |= {n for n in names if n not in mine}
            for lower, _ in layers[i + 1:]:
                allowed |= set(lower)
    # A container's own layers refine what its parent layer grants: inside hosts, the
    # packages of hosts below module's layer (already added) and nothing above it.
    for contract in contracts:
        if contract["type"] != "layers" or not contract.get("containers"):
            continue
        for container in contract["containers"]:
            if _covers(module, container):
                above = []
                for names, _ in _layers(contract):
                    if any(_covers(module, n) for n in names):
                        break
                    above += names
                allowed -= set(above)
                allowed.discard(container)
    for contract in contracts:
        if contract["type"] == "forbidden" and any(
            _covers(module, s) for s in contract["source_modules"]
        ):
            allowed -= set(contract["forbidden_modules"])
    return allowed


def _table() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Packages and layering", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        package = cells[0].strip("`")
        rows[package] = set(re.findall(r"`([a-z_.]+)`", cells[2]))
    return rows


def test_table_rows_equal_what_the_contracts_allow() -> None:
    table = _table()
    assert table, "no layering table found in docs/architecture.md"
    for package, listed in table.items():
        assert listed == allowed_imports(package), package


def test_every_package_is_under_contract_and_in_the_table() -> None:
    packages = {p.rstrip("*") for p in CONFIG["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert set(LINTER["root_packages"]) == packages
    table = _table()
    host_layers = next(c for c in LINTER["contracts"] if c.get("containers") == ["hosts"])
    hosts_rows = {f"hosts.{n}" for names, _ in _layers({"layers": host_layers["layers"]})
                  for n in names}
    assert set(table) == (packages - {"hosts"}) | hosts_rows


def test_the_derivation_reads_the_contracts_as_import_linter_does() -> None:
    # Independent siblings grant nothing to each other; ":" siblings grant each other; a
    # forbidden contract removes a lower layer.
    assert "switch" not in allowed_imports("controller")
    assert "hosts" not in allowed_imports("controller")
    assert "hosts.agent" in allowed_imports("hosts.api")
    assert "hosts.api" not in allowed_imports("hosts.agent")
    assert "hosts.agent" not in allowed_imports("hosts.transport")
    assert "topologies" not in allowed_imports("switch")
    assert "topologies" in allowed_imports("controller")
    assert allowed_imports("common") == set()

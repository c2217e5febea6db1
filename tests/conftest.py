"""Shared pytest fixtures: root detection for emulation tests and per-test name prefixes."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the long soak tests (marker soak)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--slow"):
        soak = pytest.mark.skip(reason="soak test: runs for minutes; use --slow")
        for item in items:
            if "soak" in item.keywords:
                item.add_marker(soak)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="emulation test: needs root (network namespaces, raw sockets)")
    for item in items:
        if "emulation" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run_prefix() -> Iterator[str]:
    """A short prefix unique to this test, for namespaces and interfaces (IFNAMSIZ is 16)."""
    yield "t" + secrets.token_hex(2)

"""Shared pytest fixtures: root detection for emulation tests and per-test name prefixes."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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

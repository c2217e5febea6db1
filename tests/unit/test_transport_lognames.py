"""Structured-log event names (hosts/transport/lognames.py): defined once, documented, and the
only names the core emits."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hosts.transport import LogRecord, QpHintFlag, lognames
from hosts.transport.sim import LinkModel, QpOptions
from tests.unit.transport_util import make_pair

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^(mrc|qp|recovery|transport):[a-z_]+$")
NAMES = {v for k, v in vars(lognames).items() if k.isupper() and isinstance(v, str)}


def test_every_name_is_listed_in_docs_transport() -> None:
    doc = (ROOT / "docs" / "transport.md").read_text()
    assert NAMES and all(NAME.match(n) for n in NAMES)
    missing = sorted(n for n in NAMES if f"`{n}`" not in doc)
    assert not missing, f"not in docs/transport.md: {missing}"


def test_no_event_name_is_spelled_outside_lognames() -> None:
    found = []
    for path in sorted((ROOT / "hosts").rglob("*.py")):
        if path.name == "lognames.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and NAME.match(node.value)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value}")
    assert not found, "\n".join(found)


def test_the_core_emits_only_these_names() -> None:
    p = make_pair(
        512 * 1024,
        LinkModel(delay=5e-6, loss=0.05, trim=0.02, seed=2),
        QpOptions(hint=QpHintFlag.TSETH | QpHintFlag.TRIM_NACK),
        log_packets=True,
    )
    p.write(1, 0, 512 * 1024)
    assert p.run_until_completions(1)
    emitted = {e.name for evs in p.net.events for e in evs if isinstance(e, LogRecord)}
    emitted |= {e.name for e in iter(p.a.next_event, None) if isinstance(e, LogRecord)}
    assert {lognames.PACKET_SENT, lognames.PACKETS_LOST} <= emitted <= NAMES

"""The sink app outlives its data until the writer is done (hosts/apps.py).

A host process exits when its apps return. A sink that returned as soon as its WriteImm
completed took its QP away while the writer could still be waiting for the acknowledgement
of its last Writes; when that acknowledgement was lost, the writer's retransmissions found no
QP and it timed out after having delivered every byte (seen once under load: 62 of 64 WRs
acknowledged, the sink long gone). Two agents with the real transport core, in one process.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from common.netns import wait_until
from hosts import apps
from hosts.api import open_device
from tests.unit.test_agent_loop import Pair

SIZE = 256 << 10


def _run(p: Pair, tmp_path: Path, timeout: float) -> tuple[threading.Thread, threading.Thread]:
    common = {"size": SIZE, "oob_dir": str(tmp_path / "oob"), "timeout": timeout,
              "chunk": 64 << 10}
    sink = threading.Thread(target=apps.sink, args=(open_device(p.b), {
        **common, "name": "s", "peer": "w", "result": str(tmp_path / "s.json")}))
    writer = threading.Thread(target=apps.writer, args=(open_device(p.a), {
        **common, "name": "w", "peer": "s", "seed": 3, "result": str(tmp_path / "w.json")}))
    sink.start()
    writer.start()
    return sink, writer


def test_the_sink_returns_once_the_writer_is_done(tmp_path: Path) -> None:
    p = Pair(real_core=True)
    try:
        sink, writer = _run(p, tmp_path, 30)
        writer.join(30)
        sink.join(10)
        assert not sink.is_alive() and not writer.is_alive()
        assert (tmp_path / "oob" / "w-done.json").exists()
        got = json.loads((tmp_path / "s.json").read_text())
        assert got["sha256"] == hashlib.sha256(apps.pattern(SIZE, 3)).hexdigest()
        assert json.loads((tmp_path / "w.json").read_text())["errors"] == []
    finally:
        p.close()


def test_a_sink_without_word_from_its_writer_stays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_publish = apps.publish_done
    monkeypatch.setattr(apps, "publish_done", lambda oob, name: None)  # a writer that never says
    p = Pair(real_core=True)
    try:
        sink, writer = _run(p, tmp_path, 60.0)
        writer.join(30)
        assert not writer.is_alive()
        wait_until(lambda: (tmp_path / "s.json").exists(), 30, "the sink to have its data")
        assert sink.is_alive()  # ... and it still answers for it
        real_publish(tmp_path / "oob", "w")  # the word it waits for
        sink.join(10)
        assert not sink.is_alive()
    finally:
        p.close()

"""Out-of-band exchange through files (MRC has no connection handshake of its own): a side
publishes a small JSON record under a name in a folder every party can read, written
atomically, and its peers wait for it. The done marker (``publish_done``/``await_done``) tells
a sink its writer has every acknowledgement, so it may release its QP.

Waits are wall-clock guards (``timeout`` seconds), polling the file system every ``poll``
seconds: the parties are processes in other namespaces, the folder is all they share.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

POLL_S = 0.01


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON atomically: a reader never sees a partial file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def publish(folder: Path, name: str, info: dict[str, Any]) -> Path:
    """Publish ``info`` as ``folder/name.json`` (the folder is created when missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    write_json(path, info)
    return path


def await_published(folder: Path, name: str, timeout: float,
                    poll: float = POLL_S) -> dict[str, Any]:
    """The record ``name`` once it is published; ``TimeoutError`` naming the file when it
    is not within ``timeout`` seconds."""
    path = folder / f"{name}.json"
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{name!r} did not publish {path} within {timeout:g} s"
                                   ) from None
            time.sleep(poll)
            continue
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a published record is a JSON object")
        return data


def publish_done(folder: Path, name: str) -> None:
    """Writer ``name`` is finished (every Write completed, or it gave up): its sink may go."""
    publish(folder, f"{name}-done", {})


def await_done(folder: Path, writer_name: str, timeout: float, poll: float = POLL_S) -> bool:
    """Wait (at most ``timeout``) for the writer's ``publish_done``. A sink that has its data
    keeps its QP until then: the writer is still waiting for the acknowledgement of its last
    Writes, and if that was lost it retransmits, which only a QP that still exists answers.
    False when the writer never said it was done."""
    try:
        await_published(folder, f"{writer_name}-done", timeout, poll)
    except TimeoutError:
        return False
    return True


__all__ = ["POLL_S", "await_done", "await_published", "publish", "publish_done", "write_json"]

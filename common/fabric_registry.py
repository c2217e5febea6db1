"""Where running fabrics say how to reach them: ``/run/mrcnet/fabrics/<prefix>.json``.

``mrcnet up`` registers its run (pid, controller socket, switches' gRPC addresses and
device ids, results folder) when the fabric is up and removes the entry when it stops, so
clients find a running fabric without flags: ``mrcnet ctl`` talks to the newest one's
controller. An entry whose process is gone is ignored (and removed when seen).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

REGISTRY = Path(os.environ.get("MRCNET_REGISTRY", "/run/mrcnet/fabrics"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def register(prefix: str, info: dict[str, Any], registry: Path | None = None) -> Path:
    """Write (atomically) the entry of run ``prefix``; ``info`` must hold its ``pid``."""
    root = registry or REGISTRY
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{prefix}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=1))
    tmp.replace(path)
    return path


def unregister(prefix: str, registry: Path | None = None) -> None:
    (registry or REGISTRY).joinpath(f"{prefix}.json").unlink(missing_ok=True)


def running(registry: Path | None = None) -> list[dict[str, Any]]:
    """Entries of live fabrics, oldest first (by ``started``)."""
    root = registry or REGISTRY
    out = []
    for path in sorted(root.glob("*.json")) if root.is_dir() else []:
        try:
            info = json.loads(path.read_text())
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid):
            out.append(info)
        else:
            path.unlink(missing_ok=True)
    return sorted(out, key=lambda i: float(i.get("started", 0)))


def newest_controller(registry: Path | None = None) -> str | None:
    """The controller socket of the newest running fabric, or None."""
    fabrics = running(registry)
    return str(fabrics[-1]["controller"]) if fabrics else None

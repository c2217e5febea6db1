"""``--web`` of ``mrcnet up`` (packet and circuit fabrics): the web view of a started
fabric, its URL printed on stderr."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def start_web(fab: Any, args: argparse.Namespace) -> Any:
    """The running ``WebServer`` of ``fab`` with ``--web``, else None."""
    if not getattr(args, "web", False):
        return None
    from mrcnet.web.server import WebServer
    from mrcnet.web.sources import LiveSource

    server = WebServer(LiveSource(fab), port=getattr(args, "web_port", 0))
    url = server.start()
    print(f"[mrcnet] web view: {url}", file=sys.stderr, flush=True)
    return server

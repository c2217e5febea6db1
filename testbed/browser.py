"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for tests
and benchmarks of the web view: open a page, evaluate JavaScript in it, take a screenshot.

Chromium starts with a fresh ``--user-data-dir`` and the flags that keep it off the network
(no background networking, component updates, sync or first-run pages), on
``--remote-debugging-port=0``; the port it picked is read from ``DevToolsActivePort`` in the
profile. ``close`` stops it by its pid and removes the profile.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--hide-scrollbars", "--remote-debugging-port=0")


class BrowserError(RuntimeError):
    pass


class Chromium:
    """One headless browser with one page (use as a context manager)."""

    def __init__(self, width: int = 1600, height: int = 1000, timeout: float = 60.0) -> None:
        if not Path(CHROMIUM).exists():
            raise BrowserError(f"{CHROMIUM} is missing: 'make install' installs Debian's "
                               "chromium")
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="mrcnet-chromium-"))
        self.log = self.profile.parent / (self.profile.name + ".log")
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self.events: list[dict[str, Any]] = []
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                 f"--window-size={width},{height}", "about:blank"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        try:
            self._run(self._connect(width, height))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(asyncio.wait_for(coro, self.timeout))

    async def _connect(self, width: int, height: int) -> None:
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None:
                raise BrowserError(f"chromium exited ({self.proc.returncode}): "
                                   f"{self.log.read_text(errors='replace')[-500:]}")
            if time.monotonic() > deadline:
                raise BrowserError(f"chromium did not open its DevTools port; log {self.log}")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            targets = await resp.json()
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self._call("Page.enable")
        await self._call("Runtime.enable")
        await self._call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                         deviceScaleFactor=1, mobile=False)

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        ident = next(self._ids)
        await self._ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = await self._ws.receive()
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise BrowserError(f"DevTools connection closed ({msg.type}); log {self.log}")
            data = json.loads(msg.data)
            if data.get("id") == ident:
                if "error" in data:
                    raise BrowserError(f"{method}: {data['error']}")
                return dict(data.get("result", {}))
            if "method" in data:
                self.events.append(data)

    def navigate(self, url: str) -> None:
        """Open ``url`` and wait for its load event."""
        async def go() -> None:
            self.events.clear()
            await self._call("Page.navigate", url=url)
            while not any(e["method"] == "Page.loadEventFired" for e in self.events):
                await self._call("Runtime.evaluate", expression="1")  # drains the events
                await asyncio.sleep(0.02)
        self._run(go())

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        res = self._run(self._call("Runtime.evaluate", expression=expression,
                                   returnByValue=True, awaitPromise=True))
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Evaluate ``expression`` until it is truthy (the page's own state), or raise."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"page never satisfied {expression[:120]!r} in {timeout} s")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> Path:
        res = self._run(self._call("Page.captureScreenshot", format="png"))
        path.write_bytes(base64.b64decode(res["data"]))
        return path

    def close(self) -> None:
        """Idempotent: the DevTools connection, the browser (by its pid), the profile."""
        if self._session is not None:
            session, self._session = self._session, None
            try:
                self._loop.run_until_complete(session.close())
            except Exception:
                pass
        if self.proc.poll() is None:
            from common.netns import stop_process_group

            stop_process_group(self.proc)
        if not self._loop.is_closed():
            self._loop.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        self.log.unlink(missing_ok=True)

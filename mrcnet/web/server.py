"""The web view's HTTP server (aiohttp): the page, its assets, the topology and a server-sent
event stream of snapshots, on 127.0.0.1 only, behind an access token.

Every request must carry the run's token, as ``?token=`` (the URL ``mrcnet`` prints) or as
the cookie the page's first load sets; anything else is refused (403), and so is a request
whose ``Host`` is not the loopback address it listens on (a page elsewhere cannot reach it
by DNS rebinding). The page loads nothing from the internet: d3 comes from the npm package
``make install`` puts under mrcnet/web/js/node_modules (pinned in package-lock.json).

``/api/events`` sends one ``snapshot`` event per ``interval`` (wall seconds, default 0.5)
to every open page; the snapshot is computed once per interval for all of them.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from mrcnet.web.sources import Source

HERE = Path(__file__).resolve().parent
STATIC = HERE / "static"
D3 = HERE / "js" / "node_modules" / "d3" / "dist" / "d3.min.js"
COOKIE = "mrcnet_web_token"
LOOPBACK = "127.0.0.1"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class WebError(RuntimeError):
    """The server cannot start (its assets are missing, the port is taken)."""


class WebServer:
    """Serve ``source`` on 127.0.0.1:``port`` (0: any free port) from a background thread
    (``start``/``stop``) or the calling thread (``serve_forever``)."""

    def __init__(self, source: Source, port: int = 0, interval: float = 0.5,
                 token: str | None = None) -> None:
        if not D3.exists():
            raise WebError(f"{D3} is missing: run 'make install' (it installs the page's "
                           "JavaScript from the npm registry)")
        self.source = source
        self.port = port
        self.interval = interval
        self.token = token or secrets.token_urlsafe(18)
        self.url = ""
        self.snapshots = 0  # computed so far
        self.errors = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._latest: bytes = b""
        self._tick = asyncio.Event()
        self._stopping: asyncio.Event | None = None
        self._producing: asyncio.Task[None] | None = None

    # -- app -----------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/vendor/d3.min.js", self._d3)
        app.router.add_get("/api/topology", self._topology)
        app.router.add_get("/api/snapshot", self._snapshot)
        app.router.add_get("/api/events", self._events)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        host = request.host.rsplit(":", 1)[0].strip("[]")
        if host not in (LOOPBACK, "localhost"):
            return web.Response(status=403, text="forbidden: wrong Host\n")
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return web.Response(status=403, text="forbidden: open the URL mrcnet printed "
                                                 "(it carries the access token)\n")
        return await handler(request)

    async def _index(self, request: web.Request) -> web.StreamResponse:
        resp = web.FileResponse(STATIC / "index.html")
        resp.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
        resp.headers["Cache-Control"] = "no-store"
        return resp

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(path)

    async def _d3(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(D3)

    async def _topology(self, request: web.Request) -> web.StreamResponse:
        topo = await asyncio.to_thread(self.source.topology)
        return web.json_response(topo)

    async def _snapshot(self, request: web.Request) -> web.StreamResponse:
        if not self._latest:
            await self._compute()
        return web.Response(body=self._latest, content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-store"})
        await resp.prepare(request)
        assert self._stopping is not None
        sent = b""
        try:
            while not self._stopping.is_set():
                if self._latest and self._latest is not sent:
                    sent = self._latest
                    await resp.write(b"event: snapshot\ndata: " + sent + b"\n\n")
                tick = self._tick
                try:
                    await asyncio.wait_for(tick.wait(), timeout=self.interval * 4)
                except TimeoutError:
                    await resp.write(b": keep-alive\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    async def _compute(self) -> None:
        try:
            snap = await asyncio.to_thread(self.source.snapshot)
            self._latest = json.dumps(snap, separators=(",", ":")).encode()
            self.snapshots += 1
        except Exception as exc:  # a source that failed once: the page keeps the last one
            self.errors += 1
            self._latest = json.dumps({"error": str(exc)[:300]}).encode()

    async def _producer(self) -> None:
        assert self._stopping is not None
        while not self._stopping.is_set():
            await self._compute()
            tick, self._tick = self._tick, asyncio.Event()
            tick.set()
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=self.interval)
            except TimeoutError:
                pass

    # -- running -------------------------------------------------------------------------
    async def _start(self) -> None:
        self._stopping = asyncio.Event()
        self._tick = asyncio.Event()
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, self.port)
        try:
            await site.start()
        except OSError as exc:
            await self._runner.cleanup()
            raise WebError(f"web view: cannot listen on {LOOPBACK}:{self.port}: {exc}") from exc
        self.port = int(self._runner.addresses[0][1])
        self.url = f"http://{LOOPBACK}:{self.port}/?token={self.token}"
        self._producing = asyncio.get_running_loop().create_task(self._producer())

    async def _stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()
            self._tick.set()
        if self._producing is not None:
            self._producing.cancel()
            try:
                await self._producing
            except (asyncio.CancelledError, Exception):
                pass
            self._producing = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> str:
        """Serve from a daemon thread; returns the URL (with the token)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            try:
                loop.run_until_complete(self._start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="web", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise failure[0]
        return self.url

    def stop(self) -> None:
        """Idempotent: the open pages' streams end, the socket closes."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    def serve_forever(self, on_ready: Callable[[str], None]) -> None:
        """Serve in this thread until KeyboardInterrupt (``mrcnet web``)."""
        async def main() -> None:
            await self._start()
            on_ready(self.url)
            try:
                await asyncio.Event().wait()
            finally:
                await self._stop()

        asyncio.run(main())


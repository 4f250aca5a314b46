"""The collector's HTTP endpoint: ``/v1/clusters`` and ``/v1/stream`` behind a bearer token.

``crdscope watch --headless --serve-view ADDR`` serves its :class:`session.viewstream.ViewHub` here,
in the watch's own event loop (aiohttp), so serving reads the cores where they live and never
copies them across threads.  Every request needs ``Authorization: Bearer <token>``; the token is
compared in constant time and never logged.  Loopback unless ``ADDR`` names a host; TLS with a
certificate and key.  Nothing here sends a request to an API server.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from crdscope.base.errors import ConfigError, CrdscopeError
from crdscope.base.paths import state_dir

from .exporter import parse_listen
from .viewstream import HEARTBEAT_SECONDS, LIVE, ViewHub, heartbeat

if TYPE_CHECKING:
    from .control import ClusterControl

log = logging.getLogger("crdscope.view")

TOKEN_BYTES = 32


def default_token_path() -> Path:
    """Where a collector keeps the token it generated: ``$XDG_STATE_HOME/crdscope/view-token``."""
    return state_dir() / "view-token"


def new_token(path: Path) -> str:
    """A fresh random token written to ``path`` (mode 0600, replacing any older one at once: viewers
    re-read the file as they reconnect, and never see it empty)."""
    token = secrets.token_urlsafe(TOKEN_BYTES)
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        os.replace(staged, path)
    except OSError as exc:
        raise ConfigError(f"cannot write the token to {path}: {exc.strerror or exc}") from None
    return token


def parse_view_listen(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` for ``--serve-view``: loopback unless a host is named (``0.0.0.0:8765``: all)."""
    return parse_listen(text, flag="--serve-view", default_host="127.0.0.1", example=":8765 or 0.0.0.0:8765")


def server_tls(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """A server TLS context from ``--tls-cert``/``--tls-key`` (both or neither)."""
    if cert is None and key is None:
        return None
    if not cert or not key:
        raise ConfigError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot use {cert} and {key} for TLS: {getattr(exc, 'strerror', None) or exc}") from None
    return context


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), token.encode())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ViewServer:
    """Serves a :class:`ViewHub` on ``host:port`` until closed."""

    def __init__(self, hub: ViewHub, host: str, port: int, token: str, *,
                 tls: ssl.SSLContext | None = None) -> None:
        self.hub = hub
        self.host = host
        self.port = port
        self.token = token
        self.tls = tls
        self._runner: web.AppRunner | None = None
        self._streams: set[asyncio.Task[object]] = set()
        #: Cluster name -> its control, when the collector allows viewers control (else none: 403).
        self.controls: dict[str, ClusterControl] = {}

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def start(self) -> None:
        """Listen (a port in use is a one-line :class:`ConfigError`)."""
        app = web.Application(middlewares=[self._authenticate])
        app.router.add_get("/v1/clusters", self._clusters)
        app.router.add_get("/v1/stream", self._stream)
        app.router.add_post("/v1/control", self._control)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.tls, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(f"cannot serve the view on {self.host}:{self.port}: {exc.strerror or exc}") from None
        self._runner = runner
        if runner.addresses:  # the port the system chose for :0
            self.port = int(runner.addresses[0][1])

    async def close(self) -> None:
        """Stop serving: every viewer's stream ends (they reconnect to the next collector)."""
        for task in list(self._streams):
            task.cancel()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not token_matches(request.headers.get("Authorization"), self.token):
            return web.json_response({"error": "a valid bearer token is required"}, status=401,
                                     headers={"WWW-Authenticate": 'Bearer realm="crdscope"'})
        return await handler(request)

    async def _clusters(self, request: web.Request) -> web.Response:
        return web.json_response(self.hub.describe())

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        name = request.query.get("cluster", "")
        channel = self.hub.channel(name)
        if channel is None:
            return web.json_response({"error": f"this collector serves no cluster named {name!r}",
                                      "clusters": list(self.hub.channels)}, status=404)
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", "Cache-Control": "no-store"})
        subscriber = channel.subscribe()
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            await response.prepare(request)
            await self._send(response, channel.header(len(subscriber.history)))
            for chunk in subscriber.history_chunks():
                await self._send(response, chunk)
            await self._send(response, LIVE)
            while not subscriber.dropped:
                data = await subscriber.next_lines(HEARTBEAT_SECONDS)
                if subscriber.dropped:
                    break
                await self._send(response, data or heartbeat())
        except ConnectionError:
            pass  # the viewer left
        finally:
            channel.unsubscribe(subscriber)
            if task is not None:
                self._streams.discard(task)
        return response

    async def _control(self, request: web.Request) -> web.Response:
        from .control import ControlRefusedError

        if not self.controls:
            return web.json_response({"error": "this collector is read-only (start it with --allow-control)"},
                                     status=403)
        name = request.query.get("cluster", "")
        control = self.controls.get(name) if name else next(iter(self.controls.values()))
        if control is None:
            return web.json_response({"error": f"this collector serves no cluster named {name!r}"}, status=404)
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            return web.json_response({"error": "a control request is a JSON object"}, status=400)
        try:
            answer = await control.handle(body)
        except ControlRefusedError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        except CrdscopeError as exc:  # the loader's own refusals (a cluster not named, a bad source)
            return web.json_response({"error": str(exc)}, status=409)
        log.info("control from a viewer on %s: %s", name or "the first cluster", sorted(body))
        return web.json_response(answer)

    async def _send(self, response: web.StreamResponse, data: bytes) -> None:
        started = time.thread_time()
        await response.write(data)
        self.hub.spent(time.thread_time() - started, len(data))


"""``crdscope serve-web``: the attached monitor in a browser, behind the collector's token.

textual-serve runs one app process per browser visit (here ``crdscope attach URL``: a viewer, no
probes) and has no authentication of its own; this server adds it.  Every path (the page, its
static files, the websocket that drives the app) needs the token: ``/?token=T`` once (a
bookmark, a projector), which sets an HttpOnly, SameSite=Strict cookie and redirects to the
page without the token in its address, or ``Authorization: Bearer T``.  No token, no page:
401 and one line, and no app process is started.
"""

from __future__ import annotations

import hmac
import shlex
import ssl
import sys
from pathlib import Path

from aiohttp import web
from textual_serve.server import Server

from crdscope.session.viewserver import Handler, token_matches

COOKIE = "crdscope_view"
REFUSED = ("crdscope: this page needs the collector's token: open it as /?token=TOKEN "
           "(the token is in the collector's --token-file)\n")


def attach_command(url: str, token_file: str | Path, ca_file: str | None = None) -> str:
    """What each browser visit runs: a viewer of the collector (its recording is the collector's)."""
    parts = [sys.executable, "-m", "crdscope.cli.main", "attach", url, "--token-file", str(Path(token_file).resolve()),
             "--no-record"]
    if ca_file:
        parts += ["--ca-file", str(Path(ca_file).resolve())]
    return shlex.join(parts)


class TokenGatedServer(Server):
    """textual-serve's server with every path behind a token."""

    def __init__(self, command: str, host: str, port: int, token: str, *, tls: ssl.SSLContext | None = None,
                 public_url: str | None = None, title: str = "crdscope") -> None:
        scheme = "https" if tls else "http"
        shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
        super().__init__(command, host=host, port=port, title=title,
                         public_url=public_url or f"{scheme}://{shown}:{port}")
        self.token = token
        self.tls = tls

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._gate)
        return app

    @web.middleware
    async def _gate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.query.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return web.Response(status=401, text=REFUSED)
            # The token leaves the address bar (and the history) at once: the cookie carries it.
            kept = request.rel_url.with_query({k: v for k, v in request.query.items() if k != "token"})
            response = web.HTTPFound(str(kept))
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", secure=self.tls is not None)
            return response
        cookie = request.cookies.get(COOKIE, "")
        if (cookie and hmac.compare_digest(cookie.encode(), self.token.encode())) or \
                token_matches(request.headers.get("Authorization"), self.token):
            return await handler(request)
        return web.Response(status=401, text=REFUSED)

    async def on_startup(self, app: web.Application) -> None:
        print(f"serving the monitor in a browser on {self.public_url}/ (open it as {self.public_url}/?token=TOKEN, "
              f"the collector's token): each visit runs {self.command}", flush=True)

    def run(self) -> None:
        """Serve until Ctrl-C or SIGTERM."""
        web.run_app(self._make_app(), host=self.host, port=self.port, ssl_context=self.tls, access_log=None,
                    print=None, handle_signals=True)

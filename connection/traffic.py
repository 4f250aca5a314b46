"""What crdscope itself sends to a cluster: requests and bytes by origin and by path.

A monitor must not change what it measures, so it counts its own cost.  Every
request of a cluster's shared client is counted at the transport
(:class:`connection.cluster.GoawayRetryTransport`) under

* its **origin**: who sent it, from the context variable :data:`REQUEST_ORIGIN`
  (the scheduler sets the probe's name in each probe's task, the shared
  ``/metrics`` scrape sets ``metrics``, the CRD watch ``crd-watch``, the loader
  ``loader``); asyncio tasks copy the context they are created in, so a request
  made by a task a probe starts counts for that probe;
* its **path class**: the method and the path with names replaced by
  placeholders (``GET /openapi/v3/{group-version}``), so counts stay few and
  carry no object names.

Bytes are those of the answer as they come off the connection (compressed, as on the
wire), plus the decoded size of the response headers (an upper bound for HTTP/2's
compressed headers).  A request counts once its headers are written to a connection
(httpcore's ``trace`` extension says when) or once it is answered: one that never got
a connection (refused, no TLS handshake: the server is down or stopped, or cancelled
while waiting) cost the server nothing and is only tallied as ``unsent``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:  # the footprint's samples: read when a footprint is asked for, not by every client
    from crdscope.base.samples.footprint import Tally

#: Who is sending the current request ("other" when nobody said).
REQUEST_ORIGIN: contextvars.ContextVar[str] = contextvars.ContextVar("crdscope_request_origin", default="other")
#: The origin of the built-in loader's requests: they are the install being watched, not the monitor.
LOADER = "loader"
#: The one ``/metrics`` scrape every probe shares, and the one CRD list+watch.
METRICS = "metrics"
CRD_WATCH = "crd-watch"

#: API groups whose paths crdscope reads by name: their resources stay in the path class.
_KNOWN_GROUPS = frozenset({
    "apiextensions.k8s.io", "coordination.k8s.io", "flowcontrol.apiserver.k8s.io",
    "authorization.k8s.io", "apiextensions.crossplane.io", "pkg.crossplane.io",
})
#: Non-resource paths kept as they are.
_FIXED = frozenset({"/api", "/apis", "/version", "/metrics", "/livez", "/readyz", "/healthz",
                    "/openapi/v2", "/openapi/v3"})


def path_class(method: str, path: str) -> str:
    """``METHOD /path`` with names, namespaces and unknown groups replaced by placeholders.

    >>> path_class("GET", "/openapi/v3/apis/ec2.aws.upbound.io/v1beta1")
    'GET /openapi/v3/{group-version}'
    >>> path_class("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b.io")
    'GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}'
    """
    path = path.rstrip("/") or "/"
    if path in _FIXED:
        return f"{method} {path}"
    if path.startswith(("/livez/", "/readyz/")):
        return f"{method} /{path.split('/')[1]}/{{check}}"
    if path.startswith("/openapi/v3/"):
        return f"{method} /openapi/v3/{{group-version}}"
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        head, rest, known = ["api", parts[1]], parts[2:], True
    elif parts[0] == "apis" and len(parts) >= 3:
        known = parts[1] in _KNOWN_GROUPS
        head = ["apis", parts[1], parts[2]] if known else ["apis", "{group}", "{version}"]
        rest = parts[3:]
    elif parts[0] == "apis":
        head, rest, known = ["apis", "{group}"], [], True
    else:
        return f"{method} /{{other}}"
    return f"{method} /" + "/".join(head + _placeholders(rest, resources_known=known))


def _placeholders(rest: list[str], *, resources_known: bool) -> list[str]:
    """``[namespaces, ns, plural, name, sub]`` -> ``[namespaces, {namespace}, plural, {name}, sub]``."""
    out: list[str] = []
    if len(rest) >= 2 and rest[0] == "namespaces":
        out += ["namespaces", "{namespace}"]
        rest = rest[2:]
    for index, part in enumerate(rest):
        if index == 0:
            out.append(part if resources_known else "{resource}")
        elif index == 1:
            out.append("{name}")
        else:
            out.append(part if resources_known else "{subresource}")
    return out


class Counted:
    """One request being counted: its (origin, path) cell, and whether its headers went out."""

    __slots__ = ("cell", "sent")

    def __init__(self, cell: list[int]) -> None:
        self.cell = cell
        self.sent = False


class Traffic:
    """Counts of one cluster's requests: (origin, path class) -> [requests, bytes].

    Shared by every client that talks to the cluster for one monitor (the shared client and
    the one that spreads ``/metrics`` scrapes over replicas).
    """

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], list[int]] = {}
        #: Requests that never reached the server (:meth:`failed`), and those it answered.
        self.unsent = 0
        self.answered = 0

    def begin(self, request: httpx.Request) -> Counted:
        """A request about to be sent: counted once its headers go out (or it is answered)."""
        key = (REQUEST_ORIGIN.get(), path_class(request.method, request.url.path))
        cell = self._counts.get(key)
        if cell is None:
            cell = self._counts[key] = [0, 0]
        counted = Counted(cell)
        chained = request.extensions.get("trace")

        async def trace(event: str, info: dict[str, Any]) -> None:
            # httpcore names it "http11.send_request_headers.started" or "http2.…": the server has it.
            if event.endswith("send_request_headers.started"):
                self._sent(counted)
            if chained is not None:
                await chained(event, info)

        request.extensions = {**request.extensions, "trace": trace}
        return counted

    @staticmethod
    def _sent(counted: Counted) -> None:
        if not counted.sent:  # once: a retry over HTTP/1.1 sends the same request again
            counted.sent = True
            counted.cell[0] += 1

    def count_answer(self, counted: Counted, response: httpx.Response) -> None:
        """Add the answer's headers now and its body as it is read."""
        self._sent(counted)  # a transport that does not trace (a test's) answered it: it was sent
        self.answered += 1
        counted.cell[1] += sum(len(name) + len(value) + 4 for name, value in response.headers.raw)
        response.stream = _CountingStream(response.stream, counted.cell)

    def failed(self, counted: Counted) -> None:
        """A request that ended without an answer: one whose headers never went out (refused, no
        TLS handshake, cancelled while waiting for a connection) is tallied as ``unsent``, since a
        down or stopped server is not loaded by being knocked on; one that went out stays counted."""
        if not counted.sent:
            self.unsent += 1

    def by_origin_and_path(self) -> dict[tuple[str, str], Tally]:
        """Every (origin, path class) with its counts so far (none for paths never sent)."""
        from crdscope.base.samples.footprint import Tally

        return {key: Tally(requests=cell[0], bytes=cell[1]) for key, cell in self._counts.items()
                if cell[0] or cell[1]}

    def total(self, *, exclude: frozenset[str] = frozenset({LOADER})) -> Tally:
        """All requests and bytes so far, except those of the ``exclude`` origins."""
        from crdscope.base.samples.footprint import Tally

        requests = sum(c[0] for (origin, _), c in self._counts.items() if origin not in exclude)
        received = sum(c[1] for (origin, _), c in self._counts.items() if origin not in exclude)
        return Tally(requests=requests, bytes=received)


class _CountingStream(httpx.AsyncByteStream):
    """An answer's body that adds the bytes passing through it to its cell."""

    def __init__(self, inner: httpx.AsyncByteStream | httpx.SyncByteStream, cell: list[int]) -> None:
        self._inner = inner
        self._cell = cell

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:  # type: ignore[union-attr]
            self._cell[1] += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()  # type: ignore[union-attr]


@contextlib.contextmanager
def origin(name: str) -> Iterator[None]:
    """Count the requests made inside this block (and in tasks it starts) as ``name``'s."""
    token = REQUEST_ORIGIN.set(name)
    try:
        yield
    finally:
        REQUEST_ORIGIN.reset(token)

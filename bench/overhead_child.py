"""``python -m bench.overhead_child COUNTS.jsonl crdscope-args...``: crdscope's CLI with a byte meter.

Runs the real ``crdscope`` command line (``tui.cli``) in this process, with every
response its clusters receive counted at the transport (headers plus body bytes as
they come off the connection, before decompression).  On SIGUSR1 it appends one line
``{"requests": n, "bytes": b, "paths": {...}, "path_bytes": {...}}`` to COUNTS.jsonl, so
the benchmark reads the counters at the same moments as the server's metrics and ``/proc``.  The meter costs a few
additions per chunk; nothing else differs from ``crdscope``.
"""

from __future__ import annotations

import json
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field

import httpx


@dataclass
class Tally:
    requests: int = 0
    bytes: int = 0
    #: "GET /path" -> requests, and -> bytes received (query strings dropped)
    paths: Counter = field(default_factory=Counter)
    path_bytes: Counter = field(default_factory=Counter)


TALLY = Tally()


class CountingStream(httpx.AsyncByteStream):
    """A response body that adds what passes through it to :data:`TALLY`."""

    def __init__(self, inner: httpx.AsyncByteStream, path: str) -> None:
        self.inner = inner
        self.path = path

    async def __aiter__(self):
        async for chunk in self.inner:
            TALLY.bytes += len(chunk)
            TALLY.path_bytes[self.path] += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CountingTransport(httpx.AsyncBaseTransport):
    """Counts every response of the transport it wraps."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        path = f"{request.method} {request.url.path}"
        TALLY.requests += 1
        TALLY.paths[path] += 1
        # HTTP/2 compresses headers (HPACK): their decoded size is an upper bound of the wire's.
        headers = sum(len(name) + len(value) + 4 for name, value in response.headers.raw)
        TALLY.bytes += headers
        TALLY.path_bytes[path] += headers
        response.stream = CountingStream(response.stream, path)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def install_meter() -> None:
    """Wrap both transports of every :class:`probes.cluster.Cluster` built from now on."""
    from crdscope.probes import cluster as cluster_module

    original = cluster_module.Cluster.__init__

    def metered(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self.transport.primary = CountingTransport(self.transport.primary)
        self.transport.fallback = CountingTransport(self.transport.fallback)

    cluster_module.Cluster.__init__ = metered


def main() -> None:
    counts_path, arguments = sys.argv[1], sys.argv[2:]

    def report(*_: object) -> None:
        with open(counts_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"requests": TALLY.requests, "bytes": TALLY.bytes,
                                     "paths": dict(TALLY.paths), "path_bytes": dict(TALLY.path_bytes)}) + "\n")

    signal.signal(signal.SIGUSR1, report)
    install_meter()
    from crdscope.tui.cli import cli

    cli(args=arguments, prog_name="crdscope")


if __name__ == "__main__":
    main()

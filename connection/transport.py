"""The one list of exceptions that mean "the request did not get through".

httpx wraps most connection failures as :class:`httpx.TransportError`, but not
all of them: a connection the server closes while httpcore writes an HTTP/2
frame surfaces as a bare :class:`anyio.EndOfStream` (httpcore maps it on read,
not on write), and a dying TLS or TCP connection can surface as an ``ssl`` or
``OSError`` subclass, or as an h2 protocol error.  Every place that sends a
request to a cluster (the loader's applies, every probe) catches
:data:`TRANSPORT_ERRORS` so that all of these become a retry or an error
sample, never a task that dies with an unretrieved exception.
"""

from __future__ import annotations

import anyio
import h2.exceptions
import httpcore
import httpx

#: Everything a request can raise when the connection under it fails or the server goes away.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    # httpx's own (TransportError, timeouts, DecodingError...): what httpx wraps.
    httpx.HTTPError,
    # httpcore's, should one escape unwrapped (a custom transport, a streamed body).
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.TimeoutException,
    # anyio's stream errors httpcore does not map on every path (EndOfStream on an HTTP/2 write).
    anyio.EndOfStream,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    # The HTTP/2 state machine refusing a frame on a connection the server has torn down.
    h2.exceptions.H2Error,
    # ConnectionResetError, BrokenPipeError, ssl.SSLError (SSLEOFError...), TimeoutError.
    OSError,
)


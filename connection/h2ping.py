"""HTTP/2 PING frames on a connection of their own: is the API server alive, without a request?

A kube-apiserver answers a PING at the HTTP/2 layer (Go's ``http2.Server`` acks it in the
connection's own loop): no authentication, no API Priority and Fairness, no request in its
metrics or audit log, a few dozen bytes each way.  A SIGSTOPped server (or a stuck
process, a dead node behind a live address) still accepts TCP connections (the kernel's
backlog) and never answers the TLS handshake or the PING.  :class:`H2Pinger` sends one
PING every ``interval`` seconds on one TLS connection made from the cluster's own TLS
settings and reads, at any moment, how long the server has left it waiting
(:meth:`H2Pinger.status`); the responsiveness probe reads that every half second, so a hang
shows within a few seconds without adding a single API request.

Normal life of the connection: Go's server closes an idle HTTP/2 connection after about
90 s (GOAWAY, then close); PINGs do not count as activity, so the pinger reconnects, which
costs one TLS handshake a minute and a half.  Refused connections are retried with a small
back-off.  A PING that waits longer than ``stall_seconds`` may be this connection's problem
rather than the server's (a NAT or load balancer that dropped it, one frozen replica of
several behind one address): a fresh connection is tried beside it, and if that one
answers it takes over.  Where a PING cannot be sent this way (plain http, a proxy in the
kubeconfig, a server whose TLS does not offer h2 by ALPN, a certificate the kubeconfig does
not trust) the pinger says ``unsupported`` and the probe keeps its ``/livez`` heartbeat.

Everything runs in one asyncio task per cluster (connections are protocol callbacks); the
TLS context, which holds any client certificate, is built in a thread and never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import ssl
import time
from dataclasses import dataclass

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import httpx

from crdscope.base.errors import CrdscopeError
from .kubeconfig import ClusterConfig

log = logging.getLogger("crdscope.h2ping")

#: Seconds between two PINGs (``cadences.responsiveness_ping``).
DEFAULT_INTERVAL = 1.0
#: A PING unanswered this long makes the pinger try a fresh connection beside this one (a few
#: milliseconds is the usual round trip, even on a busy 2-core lab: bench/RESULTS.md, hang).  Well
#: under the finding's threshold (2.5 s): behind a balancer, a frozen replica's connection is
#: replaced by one to a live replica before it reads as "not answering" (freezing each replica of
#: the lab's two in turn, 8 times: the PING waited 1.0 s at most; with 1 s here and one try, 2.0 s).
STALL_SECONDS = 0.5
#: Bound of one connection attempt (TCP, TLS, the first PING's answer) when there is no other
#: connection: a frozen server's handshake then ends and is tried again, on a fresh socket.
CONNECT_TIMEOUT = 10.0
#: A fresh connection tried beside a stalled one gets this long (a TLS handshake takes
#: milliseconds on a LAN), :data:`FRESH_TRIES` times in a row (behind a balancer, another
#: connection may reach another replica), then twice as long after each failure (at most
#: :data:`CONNECT_TIMEOUT`): a handful of attempts while a server stays frozen, then rarer ones.
FRESH_TIMEOUT = 0.5
FRESH_TRIES = 3
#: Refused (or unreachable) connections are retried after this, doubling up to :data:`MAX_RETRY_DELAY`.
RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 5.0

# The states of :attr:`PingStatus.state`.
#: Not started (``cadences.responsiveness_ping`` = 0): the probe's /livez heartbeat instead.
OFF = "off"
#: The first connection is being made (or its TLS settings read).
STARTING = "starting"
#: No connection: one is being opened (after the server closed the last one, or a failure).
CONNECTING = "connecting"
#: Connected; the latest PING was answered (or was sent less than ``stall_seconds`` ago).
ANSWERING = "answering"
#: Connected; a PING has waited for its answer longer than ``stall_seconds``.
WAITING = "waiting"
#: The last connection attempt was refused (nothing listens at the address); retried with back-off.
REFUSED = "refused"
#: The last connection attempt failed otherwise (name not resolved, unreachable, reset).
UNREACHABLE = "unreachable"
#: PINGs cannot be sent this way (``PingStatus.failure`` says why): the /livez heartbeat instead.
UNSUPPORTED = "unsupported"
#: :meth:`H2Pinger.aclose` was called.
CLOSED = "closed"
#: States in which the pinger tells nothing about the server.
NOT_PINGING = frozenset({OFF, UNSUPPORTED, CLOSED})


@dataclass(frozen=True)
class PingStatus:
    """What the pinger knows at one moment."""

    #: One of the state constants of this module (``answering``, ``waiting``, ``refused`` ...).
    state: str
    #: How long the server has left crdscope waiting: the age of the oldest PING not answered or
    #: of a connection still being opened (TCP, TLS), counted from the first of them since the
    #: server last answered; refused attempts in between count too.  0.0: nothing waits; None:
    #: nothing measured (off, unsupported, closed).
    waiting_seconds: float | None
    #: time.monotonic() when that waiting began (None: nothing waits).
    waiting_since: float | None
    #: Round trip of the latest answered PING (None: none answered yet).
    rtt_seconds: float | None
    #: time.monotonic() of the latest answer (None: none yet).
    answered_at: float | None
    #: Why PINGs are unsupported, or the latest connection failure (one line, no credentials).
    failure: str | None
    pings: int
    answers: int
    connections: int


class _Connection(asyncio.Protocol):
    """One HTTP/2 client connection that only sends PINGs (callbacks: no task of its own)."""

    def __init__(self, pinger: H2Pinger) -> None:
        self.pinger = pinger
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.transport: asyncio.Transport | None = None
        #: The ALPN protocol the server chose ("" for none); set once the TLS handshake is done.
        self.alpn: str | None = None
        #: The PING waiting for its answer: (its 8 bytes, time.monotonic() it was sent).
        self.outstanding: tuple[bytes, float] | None = None
        self.answered = asyncio.Event()
        self.lost = asyncio.Event()

    # -- asyncio.Protocol ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        self.alpn = (ssl_object.selected_alpn_protocol() or "") if ssl_object is not None else ""
        if self.alpn != "h2":
            return  # the pinger reads alpn and closes: nothing is sent that the server cannot read
        self.h2.initiate_connection()
        self.ping()  # with the preface: the first answer tells the connection works

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.close(graceful=False)
            return
        for event in events:
            if isinstance(event, h2.events.PingAckReceived):
                self._acked(event.ping_data)
            elif isinstance(event, h2.events.ConnectionTerminated):
                # GOAWAY: Go's server closes idle connections so (about 90 s); normal, not a failure.
                self.lost.set()
        # SETTINGS must be acknowledged (h2 queued the ACK), and a server's own PING answered.
        self._flush()
        if self.lost.is_set():
            self.close(graceful=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()

    # -- used by the pinger ------------------------------------------------------------
    def ping(self) -> None:
        """Send one PING (the pinger sends the next only once this one is answered)."""
        opaque = next(self.pinger._opaque).to_bytes(8, "big")
        now = time.monotonic()
        self.outstanding = (opaque, now)
        self.pinger._sent(now)
        self.h2.ping(opaque)
        self._flush()

    def waited(self, now: float) -> float:
        """How long the outstanding PING has waited (0.0: none)."""
        return now - self.outstanding[1] if self.outstanding is not None else 0.0

    def close(self, *, graceful: bool) -> None:
        """Close the connection: a GOAWAY first when the server is answering, else at once."""
        self.lost.set()
        if self.transport is None or self.transport.is_closing():
            return
        if graceful and self.alpn == "h2":
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.h2.close_connection()
                self._flush()
            self.transport.close()
        else:
            # A frozen peer would hold a TLS close_notify exchange for its whole timeout.
            self.transport.abort()

    def _acked(self, opaque: bytes) -> None:
        if self.outstanding is None or self.outstanding[0] != opaque:
            return  # an answer to a PING given up with an earlier connection state
        sent = self.outstanding[1]
        self.outstanding = None
        self.answered.set()
        self.pinger._answered(self, time.monotonic() - sent)

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


def unsupported_reason(config: ClusterConfig, proxy: str | None) -> str | None:
    """Why PINGs cannot reach this server directly (None: they can be tried)."""
    if proxy:
        return "the connection goes through a proxy (proxy-url or HTTPS_PROXY)"
    if httpx.URL(config.server).scheme != "https":
        return "the server is plain http (no TLS, no HTTP/2 by ALPN)"
    return None


def _reason(exc: BaseException) -> str:
    """One line about a connection failure (never the TLS context or its files)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"name not resolved ({exc.strerror or exc})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"TLS verification failed: {exc.verify_message or type(exc).__name__}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return type(exc).__name__


class H2Pinger:
    """PINGs one API server every ``interval`` seconds on a connection of its own.

    :meth:`start` (from the event loop) starts its one task; :meth:`status` reads where it is;
    :meth:`aclose` stops it and closes its connections.  Expected failures are states.
    """

    def __init__(self, config: ClusterConfig, *, interval: float = DEFAULT_INTERVAL,
                 stall_seconds: float = STALL_SECONDS, connect_timeout: float = CONNECT_TIMEOUT,
                 fresh_timeout: float = FRESH_TIMEOUT, retry_delay: float = RETRY_DELAY,
                 max_retry_delay: float = MAX_RETRY_DELAY, proxy: str | None = None,
                 context: ssl.SSLContext | None = None) -> None:
        self.config = config
        self.interval = interval
        self.stall_seconds = stall_seconds
        self.connect_timeout = connect_timeout
        self.fresh_timeout = fresh_timeout
        self.retry_delay = retry_delay
        self.max_retry_delay = max(retry_delay, max_retry_delay)
        url = httpx.URL(config.server)
        self.host = url.host
        self.port = url.port or 443
        #: The name the server's certificate must carry (``tls-server-name``, else the host).
        self.server_hostname = config.tls_server_name or url.host
        self._context = context
        self._state = OFF if interval <= 0 else STARTING
        self._failure = unsupported_reason(config, proxy)
        if self._failure is not None and self._state != OFF:
            self._state = UNSUPPORTED
        self._conn: _Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._waiting_since: float | None = None
        self._rtt: float | None = None
        self._answered_at: float | None = None
        self._failed_attempts = 0
        self._fresh_at = 0.0
        #: time.monotonic() when the next PING is due (one interval after the last one sent).
        self._next_ping = 0.0
        self._opaque = itertools.count(1)
        self._news: asyncio.Event | None = None
        self.pings = 0
        self.answers = 0
        self.connections = 0

    # -- public ------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """True when PINGs tell about the server (not off, unsupported or closed)."""
        return self._state not in NOT_PINGING

    def start(self) -> None:
        """Start the pinger's task if it is not running (from the event loop; idempotent)."""
        if self._state in (OFF, UNSUPPORTED) or (self._task is not None and not self._task.done()):
            return
        self._state = STARTING
        self._waiting_since, self._failed_attempts, self._fresh_at = None, 0, 0.0
        self._news = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"h2ping {self.config.host}")
        self._task.add_done_callback(self._ended)

    def status(self, now: float | None = None) -> PingStatus:
        """Where the pinger is now (never waits)."""
        now = time.monotonic() if now is None else now
        state = self._state
        conn = self._conn
        if state == ANSWERING and conn is not None and conn.waited(now) >= self.stall_seconds:
            state = WAITING
        measured = state not in NOT_PINGING
        since = self._waiting_since if measured else None
        waiting = (round(max(0.0, now - since), 3) if since is not None else 0.0) if measured else None
        return PingStatus(state=state, waiting_seconds=waiting, waiting_since=since,
                          rtt_seconds=None if self._rtt is None else round(self._rtt, 6),
                          answered_at=self._answered_at if measured else None,
                          failure=self._failure, pings=self.pings, answers=self.answers,
                          connections=self.connections)

    async def wait_settled(self, timeout: float) -> PingStatus:
        """Wait (at most ``timeout``) for a first answer or a failure; the status then."""
        if self._news is not None and self.active:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._news.wait()
        return self.status()

    async def aclose(self) -> None:
        """Stop the task and close every connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._drop()
        if self._state != OFF and self._state != UNSUPPORTED:
            self._state = CLOSED

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A bug must not leave a stale "answering" behind: the heartbeat takes over."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("HTTP/2 PING to %s stopped", self.config.server, exc_info=exc)
        self._unsupported(f"internal error: {type(exc).__name__}")

    # -- the task ----------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            if self._context is None:
                # Reading CA and certificate files (and the system's CAs) is disk work: a thread.
                self._context = await asyncio.to_thread(self._make_context)
        except CrdscopeError as exc:
            self._unsupported(str(exc))
            return
        while True:
            conn = self._conn
            if conn is None or conn.lost.is_set():
                self._drop()
                if self._state not in (REFUSED, UNREACHABLE):  # a retry keeps saying why it retries
                    self._state = CONNECTING if self.connections else STARTING
                conn = await self._attempt(self.connect_timeout, need_answer=False)
                if self._state == UNSUPPORTED:
                    return
                if conn is None:
                    if self._state in (REFUSED, UNREACHABLE):  # failed at once: back off
                        await asyncio.sleep(self._retry_delay())  # a back-off, not a wait for a condition
                    continue
                self._conn = conn
                self._state = ANSWERING
            elif conn.outstanding is None:
                if time.monotonic() >= self._next_ping:
                    conn.ping()
            elif conn.waited(time.monotonic()) >= self.stall_seconds and time.monotonic() >= self._fresh_at:
                await self._try_fresh(conn)
                continue
            await self._pause(conn)

    async def _try_fresh(self, stalled: _Connection) -> None:
        """A PING waits too long: is it the server, or this connection?  A fresh one tells."""
        doublings = max(0, min(self._failed_attempts - FRESH_TRIES + 1, 8))
        timeout = min(self.connect_timeout, self.fresh_timeout * 2.0**doublings)
        # The next try no sooner than this one's timeout: back to back after a timeout (one
        # frozen replica of several: the next connection may reach another), spaced after a
        # failure that came at once.
        self._fresh_at = time.monotonic() + timeout
        fresh = await self._attempt(timeout, need_answer=True)
        if fresh is None or self._state == UNSUPPORTED:
            return
        # The server answers on a new connection: the old one was the trouble (or answered meanwhile).
        stalled.close(graceful=False)
        self._conn = fresh
        self._state = ANSWERING

    async def _attempt(self, timeout: float, *, need_answer: bool) -> _Connection | None:
        """Open a connection (its first PING goes with the preface); None when it failed.

        ``need_answer``: the first PING must be answered within ``timeout`` too (a fresh
        connection beside a stalled one); otherwise a connection made is kept, answered or not.
        """
        loop = asyncio.get_running_loop()
        if self._waiting_since is None:
            self._waiting_since = time.monotonic()
        conn = _Connection(self)
        assert self._context is not None
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(lambda: conn, self.host, self.port, ssl=self._context,
                                             server_hostname=self.server_hostname,
                                             ssl_handshake_timeout=max(timeout, 1.0))
                if conn.alpn != "h2":
                    conn.close(graceful=False)
                    self._unsupported(f"the server's TLS offers no HTTP/2 (ALPN chose {conn.alpn or 'nothing'})")
                    return None
                self.connections += 1
                if need_answer:
                    await conn.answered.wait()
        except TimeoutError:
            conn.close(graceful=False)
            step = "the TLS handshake" if conn.transport is None else "the first PING"
            self._failed(CONNECTING, f"{step} unanswered for {timeout:g} s")
            return None
        except ssl.SSLCertVerificationError as exc:
            conn.close(graceful=False)
            self._unsupported(_reason(exc))
            return None
        except OSError as exc:  # refused, reset, unreachable, a TLS failure (ssl.SSLError)
            conn.close(graceful=False)
            self._failed(REFUSED if isinstance(exc, ConnectionRefusedError) else UNREACHABLE, _reason(exc))
            return None
        except BaseException:  # cancelled (aclose): nothing left open
            conn.close(graceful=False)
            raise
        return conn

    async def _pause(self, conn: _Connection) -> None:
        """Wait until the next PING is due, or until the one waiting reaches ``stall_seconds`` (then
        until the next fresh connection may be tried); at once if the connection is lost."""
        now = time.monotonic()
        if conn.outstanding is None:
            wake = self._next_ping
        else:
            stall_at = conn.outstanding[1] + self.stall_seconds
            wake = stall_at if now < stall_at else self._fresh_at
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.01, wake - now)):
                await conn.lost.wait()

    def _retry_delay(self) -> float:
        doublings = max(0, min(self._failed_attempts - 1, 8))
        return min(self.max_retry_delay, self.retry_delay * 2.0**doublings)

    # -- bookkeeping (called from the task and from protocol callbacks) ------------------
    def _make_context(self) -> ssl.SSLContext:
        from .cluster import ssl_context

        context = ssl_context(self.config)  # the kubeconfig's CA, client certificate, insecure flag
        context.set_alpn_protocols(["h2"])
        return context

    def _sent(self, now: float) -> None:
        self.pings += 1
        self._next_ping = now + self.interval
        if self._waiting_since is None:
            self._waiting_since = now

    def _answered(self, conn: _Connection, rtt: float) -> None:
        was_failing = self._failed_attempts > 0 or self._state in (REFUSED, UNREACHABLE)
        since = self._waiting_since
        self.answers += 1
        self._rtt = rtt
        self._answered_at = time.monotonic()
        self._waiting_since = None
        self._failed_attempts = 0
        self._fresh_at = 0.0
        self._failure = None
        if conn is self._conn or self._conn is None:
            self._state = ANSWERING
        if was_failing and since is not None:
            log.info("HTTP/2 PING to %s answered again after %.1f s", self.config.server, time.monotonic() - since)
        if self._news is not None:
            self._news.set()

    def _failed(self, state: str, reason: str) -> None:
        if self._failed_attempts == 0:
            log.warning("HTTP/2 PING to %s: %s", self.config.server, reason)
        self._failed_attempts += 1
        self._failure = reason
        if self._conn is None or self._conn.lost.is_set():  # beside a stalled connection: still its state
            self._state = state
        if self._news is not None:
            self._news.set()

    def _unsupported(self, reason: str) -> None:
        log.info("HTTP/2 PING to %s unsupported (%s): /livez heartbeats instead", self.config.server, reason)
        self._state = UNSUPPORTED
        self._failure = reason
        self._waiting_since = None
        self._drop()
        if self._news is not None:
            self._news.set()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close(graceful=not conn.lost.is_set() and conn.outstanding is None)

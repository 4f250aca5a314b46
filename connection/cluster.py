"""One configured ``httpx.AsyncClient`` per cluster, and one-line errors about it.

:mod:`connection.kubeconfig` resolves the kubeconfig; this module builds the shared
client (TLS, credentials, HTTP/2, timeouts, User-Agent, a request log of every
answer) and explains failures in one line.
"""

from __future__ import annotations

import json
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import httpx

from crdscope.base.version import USER_AGENT
from .credentials import TokenSource
from .crd_proto import decode_status, is_protobuf
from crdscope.base.errors import ClusterError, ConfigError
from .kubeconfig import (  # noqa: F401 - re-exported: callers know the cluster module
    ClusterConfig, _first_line, kubeconfig_paths, list_contexts, load_config, load_in_cluster_config,
)
from .traffic import Traffic
from .transport import TRANSPORT_ERRORS

#: Explicit timeouts for every request: a frozen API server must not hang a probe.
DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=30.0, pool=10.0)
#: Caps in-flight requests so that a stalled server cannot make them pile up.
DEFAULT_LIMITS = httpx.Limits(max_connections=16, max_keepalive_connections=8)


# --------------------------------------------------------------------------- client


def ssl_context(config: ClusterConfig) -> ssl.SSLContext:
    """The TLS context kubectl would use: CA, client cert, insecure flag."""
    try:
        context = ssl.create_default_context(cafile=config.ca_file) if config.ca_file else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load CA of context '{config.context}': {_first_line(exc)}") from None
    if config.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.cert_file:
        try:
            context.load_cert_chain(config.cert_file, config.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load client certificate of user '{config.user}': {_first_line(exc)}"
            ) from None
    return context


class KubeAuth(httpx.Auth):
    """Adds the current bearer token; on a 401, refreshes once and retries (as client-go)."""

    def __init__(self, source: TokenSource) -> None:
        self.source = source

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        import asyncio

        # Exec plugins and token files touch processes and disks: never on the event loop.
        header = await asyncio.to_thread(self.source.authorization)
        if header:
            request.headers["Authorization"] = header
        response = yield request
        if response.status_code == 401:
            self.source.invalidate()
            fresh = await asyncio.to_thread(self.source.authorization)
            if fresh and fresh != header:
                request.headers["Authorization"] = fresh
                yield request

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        header = self.source.authorization()
        if header:
            request.headers["Authorization"] = header
        yield request


@dataclass(frozen=True)
class Throttled:
    """One 429 received by any crdscope request."""

    timestamp: float
    method: str
    path: str
    retry_after_seconds: float | None
    flow_schema_uid: str | None
    priority_level_uid: str | None


@dataclass
class RequestLog:
    """What every crdscope request to this cluster saw: counts, 429s, APF headers.

    Filled by a response hook on the shared client, so the throttling probe
    reports 429s of the loader and of every probe alike.
    """

    requests: int = 0
    responses_by_status: dict[int, int] = field(default_factory=dict)
    throttled: deque[Throttled] = field(default_factory=lambda: deque(maxlen=1000))
    throttled_total: int = 0
    #: (flow schema uid, priority level uid) -> responses that carried them
    apf_pairs: dict[tuple[str, str], int] = field(default_factory=dict)

    def observe(self, response: httpx.Response) -> None:
        """Record one response (called from the client's response hook)."""
        self.requests += 1
        status = response.status_code
        self.responses_by_status[status] = self.responses_by_status.get(status, 0) + 1
        fs_uid = response.headers.get("X-Kubernetes-PF-FlowSchema-UID")
        pl_uid = response.headers.get("X-Kubernetes-PF-PriorityLevel-UID")
        if fs_uid and pl_uid:
            self.apf_pairs[(fs_uid, pl_uid)] = self.apf_pairs.get((fs_uid, pl_uid), 0) + 1
        if status == 429:
            self.throttled_total += 1
            self.throttled.append(
                Throttled(
                    timestamp=time.time(),
                    method=response.request.method,
                    path=response.request.url.path,
                    retry_after_seconds=parse_retry_after(response.headers.get("Retry-After")),
                    flow_schema_uid=fs_uid,
                    priority_level_uid=pl_uid,
                )
            )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (Kubernetes sends whole seconds)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def effective_proxy(config: ClusterConfig) -> str | None:
    """``proxy-url``, else ``HTTPS_PROXY``/``NO_PROXY`` from the environment, as kubectl does."""
    if config.proxy:
        return config.proxy
    import urllib.request

    url = httpx.URL(config.server)
    proxies = urllib.request.getproxies()
    candidate = proxies.get(url.scheme)
    if not candidate or urllib.request.proxy_bypass(url.host):
        return None
    return candidate


#: :meth:`InFlightRequests.end`'s failure for a request cancelled by its caller.
CANCELLED = "cancelled"


@dataclass(frozen=True)
class InFlightRequest:
    """One request sent and not yet answered (no status line yet)."""

    method: str
    path: str
    started: float  # time.monotonic()


class InFlightRequests:
    """Requests waiting for their answer, and when the server last answered or failed to.

    A frozen server accepts connections and never answers: nothing fails until a
    read timeout, so "how long has the oldest request waited" tells a hang within
    seconds where errors tell it only after the timeout.  Filled by the shared
    client's transport (:class:`GoawayRetryTransport`); read by the responsiveness probe.
    """

    def __init__(self) -> None:
        self._requests: dict[int, InFlightRequest] = {}
        self._next = 0
        #: time.monotonic() of the last answer (any status), of the first transport failure since.
        self.last_answer: float | None = None
        self.failing_since: float | None = None
        self.last_failure: str | None = None

    def begin(self, method: str, path: str) -> int:
        """Register a request being sent; returns the token :meth:`end` takes."""
        self._next += 1
        self._requests[self._next] = InFlightRequest(method, path, time.monotonic())
        return self._next

    def end(self, token: int, failure: str | None = None) -> None:
        """The request got its answer (``failure`` None) or failed in transport.

        A cancelled request (``failure`` :data:`CANCELLED`: a probe stopped, a deadline) says
        nothing about the server either way.
        """
        self._requests.pop(token, None)
        if failure == CANCELLED:
            return
        now = time.monotonic()
        if failure is None:
            self.last_answer, self.failing_since, self.last_failure = now, None, None
        else:
            self.last_failure = failure
            if self.failing_since is None:
                self.failing_since = now

    def oldest(self) -> InFlightRequest | None:
        """The request that has waited longest for its answer, if any."""
        return min(self._requests.values(), key=lambda r: r.started, default=None)

    def __len__(self) -> int:
        return len(self._requests)


#: The HTTP/1.1 fallback is for rare retries only.
FALLBACK_LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=1)


class GoawayRetryTransport(httpx.AsyncBaseTransport):
    """Retry over HTTP/1.1 when httpcore loses an HTTP/2 answer to a GOAWAY.

    kube-apiserver answers unauthenticated HTTP/2 requests and then closes the
    connection (GOAWAY), and ``--goaway-chance`` does so at random; httpcore
    raises ``ConnectionTerminated`` for the stream instead of handing over the
    answer it was given (encode/httpcore discussion #1041), or cuts off the body of
    an answer whose headers arrived.  The request is sent again once over HTTP/1.1,
    where the answer (a 401, say) arrives intact.
    Kubernetes writes crdscope makes (server-side apply, deletes) are idempotent.
    """

    def __init__(self, primary: httpx.AsyncBaseTransport, fallback: httpx.AsyncBaseTransport,
                 traffic: Traffic | None = None) -> None:
        self.primary = primary
        self.fallback = fallback
        self.retries = 0
        self.in_flight = InFlightRequests()
        #: crdscope's own requests and bytes, by origin and path (the monitor's footprint).
        self.traffic = traffic or Traffic()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        token = self.in_flight.begin(request.method, request.url.path)
        cell = self.traffic.begin(request)
        failure: str | None = CANCELLED
        try:
            response = await self._send(request)
            failure = None
            self.traffic.count_answer(cell, response)
            return response
        except TRANSPORT_ERRORS as exc:
            failure = type(exc).__name__
            raise
        finally:
            self.in_flight.end(token, failure)
            if failure is not None:
                self.traffic.failed(cell)

    async def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            response = await self.primary.handle_async_request(request)
            if response.status_code >= 400:
                # The GOAWAY can also cut off the body of an answer whose headers arrived (1 run in
                # 40 of an unauthenticated request on the lab): an error's body is small, so it is
                # read here, where that is still retried, not later by the caller.
                await response.aread()
            return response
        except httpx.RemoteProtocolError as exc:
            if "ConnectionTerminated" not in str(exc):
                raise
            self.retries += 1
            return await self.fallback.handle_async_request(request)

    async def aclose(self) -> None:
        await self.primary.aclose()
        await self.fallback.aclose()


class Cluster:
    """One API server: its config, the shared ``httpx.AsyncClient`` and a request log."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        limits: httpx.Limits = DEFAULT_LIMITS,
        http2: bool = True,
        traffic: Traffic | None = None,
    ) -> None:
        self.config = config
        self.requests = RequestLog()
        self._streaming: Cluster | None = None
        extensions_hook = []
        if config.tls_server_name:
            sni = config.tls_server_name

            async def set_sni(request: httpx.Request) -> None:
                request.extensions["sni_hostname"] = sni

            extensions_hook.append(set_sni)

        async def observe(response: httpx.Response) -> None:
            self.requests.observe(response)

        proxy = effective_proxy(config)
        # Each transport gets its own TLS context: httpcore sets ALPN on the context it is given.
        self.transport = GoawayRetryTransport(
            httpx.AsyncHTTPTransport(verify=ssl_context(config), http2=http2, limits=limits, proxy=proxy),
            httpx.AsyncHTTPTransport(verify=ssl_context(config), http2=False, limits=FALLBACK_LIMITS, proxy=proxy),
            traffic,
        )
        self.client = httpx.AsyncClient(
            base_url=config.server,
            transport=self.transport,
            timeout=timeout,
            trust_env=False,  # proxies are resolved above, as kubectl does
            headers={"User-Agent": USER_AGENT},
            auth=KubeAuth(config.credentials) if config.credentials else None,
            event_hooks={"request": extensions_hook, "response": [observe]},
        )

    @classmethod
    def connect(cls, kubeconfig: str | None = None, context: str | None = None, **kwargs: Any) -> Cluster:
        """Resolve a kubeconfig/context and build the client (no request is sent)."""
        return cls(load_config(kubeconfig, context), **kwargs)

    def streaming_client(self) -> httpx.AsyncClient:
        """A client for long streamed answers (watches): HTTP/1.1 on a connection of its own, its
        requests counted with this cluster's; made on first use, closed with this cluster.

        An install streams every CRD to a CRD watch three times or more (about 190 MB for the
        whole AWS set).  Over HTTP/2 each 16 KB frame goes through h2's Python state machine and
        flow control, which made the watch most of the monitor's CPU during an install, on the
        cores the API server needs (bench/RESULTS.md, footprint); HTTP/1.1 hands the body over
        in big reads.
        """
        if self._streaming is None:
            self._streaming = Cluster(self.config, http2=False, traffic=self.traffic,
                                      limits=httpx.Limits(max_connections=2, max_keepalive_connections=2))
        return self._streaming.client

    @property
    def traffic(self) -> Traffic:
        """What crdscope sent to this cluster, by origin and path (see :mod:`connection.traffic`)."""
        return self.transport.traffic

    @property
    def in_flight(self) -> InFlightRequests:
        """Requests of the shared client waiting for their answer (hang detection)."""
        return self.transport.in_flight

    @property
    def server(self) -> str:
        return self.config.server

    @property
    def context(self) -> str:
        return self.config.context

    async def get_json(self, path: str, **kwargs: Any) -> Any:
        """GET ``path`` and decode JSON, raising :class:`ClusterError` with one line."""
        try:
            response = await self.client.get(path, **kwargs)
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, self.server)) from None
        raise_for_status(response)
        try:
            return response.json()
        except ValueError:
            raise ClusterError(f"{self.server}{path} did not answer JSON") from None

    async def aclose(self) -> None:
        """Close the shared client (and the streaming one, if made)."""
        if self._streaming is not None:
            await self._streaming.aclose()
        await self.client.aclose()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --------------------------------------------------------------------------- errors

#: How :func:`explain` starts a server certificate the kubeconfig's CA does not vouch for.
TLS_VERIFICATION_FAILED = "TLS verification failed"


def failure_exit_code(message: str) -> int:
    """The CLI's exit code for a failed request: 2 when the kubeconfig is wrong (its CA does
    not verify the server: retrying cannot help), 3 for a cluster that fails or is away."""
    return 2 if message.startswith(TLS_VERIFICATION_FAILED) else 3


def explain(exc: BaseException, server: str) -> str:
    """One line describing a transport failure, naming the server."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or _first_line(cause)
            return f"{TLS_VERIFICATION_FAILED} for {server}: {reason}"
        # A handshake cut off by a deadline (SSLWantRead/WriteError) is a timeout, explained below.
        if isinstance(cause, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return f"{server} closed the TLS connection ({_first_line(cause)})"
        if isinstance(cause, ssl.SSLError) and not isinstance(exc, httpx.TimeoutException):
            return f"TLS handshake with {server} failed: {getattr(cause, 'reason', None) or _first_line(cause)}"
        if isinstance(cause, ConnectionRefusedError):
            return f"cannot reach {server}: connection refused"
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.ConnectTimeout):
        return f"cannot reach {server}: connect timed out"
    if isinstance(exc, httpx.PoolTimeout):
        return f"too many requests in flight to {server} (pool timeout)"
    if isinstance(exc, httpx.TimeoutException):
        return f"{server} did not answer in time ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        text = _first_line(exc)
        if "Connection refused" in text or "Errno 111" in text:
            return f"cannot reach {server}: connection refused"
        if "Name or service not known" in text or "nodename nor servname" in text:
            return f"cannot reach {server}: unknown host"
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return f"{TLS_VERIFICATION_FAILED} for {server}: {text.split('] ')[-1]}"
        return f"cannot reach {server}: {text}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{server} closed the connection ({_first_line(exc)})"
    if not isinstance(exc, httpx.HTTPError):  # one httpx did not wrap (see connection.transport)
        return f"connection to {server} failed ({_first_line(exc)})"
    return f"request to {server} failed: {_first_line(exc)}"


def status_message(response: httpx.Response) -> str:
    """The server's own explanation of an error response (a Status object's message).

    Works on streamed responses too: one whose body was consumed chunk by chunk
    (or not read at all) falls back to the reason phrase.
    """
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return response.reason_phrase
    if len(content) <= 65536:
        if is_protobuf(response.headers.get("content-type")):
            try:
                return str(decode_status(content).get("message") or response.reason_phrase)
            except ValueError:
                return response.reason_phrase
        try:
            body = json.loads(content)
            if isinstance(body, dict) and body.get("message"):
                return str(body["message"])
        except ValueError:
            pass
        text = content.decode("utf-8", "replace").strip()
        if text:
            return text.splitlines()[0][:300]
    return response.reason_phrase


def raise_for_status(response: httpx.Response) -> None:
    """Raise :class:`ClusterError` with one clear line for a non-2xx/3xx answer."""
    status = response.status_code
    if status < 400:
        return
    path = response.request.url.path
    if status == 401:
        raise ClusterError(
            f"{response.request.url.scheme}://{response.request.url.netloc.decode()} "
            "rejected our credentials (401 Unauthorized): the token or client certificate "
            "is not accepted"
        )
    if status == 403:
        raise ClusterError(f"forbidden (403): {status_message(response)}")
    raise ClusterError(f"{response.request.method} {path} answered {status}: {status_message(response)}")


async def first_contact(cluster: Cluster, timeout: float = 10.0) -> None:
    """Fail fast on what no retry can fix: a CA that does not verify the server, or refused credentials.

    A server that is down or slow is not an error here: watching it come back is the
    monitor's job, so those cases return and the probes report the outage.
    """
    await _version_answer(cluster, timeout)


async def first_answer(cluster: Cluster, within: float, *, every: float = 1.0,
                       waiting: Callable[[str], None] | None = None) -> str | None:
    """Ask for ``/version`` until the server answers (None), or ``within`` seconds pass: then the last
    reason it did not (one line, as :func:`explain` gives it).

    A refused connection is asked again every ``every`` seconds; a request the server does not
    answer stays the one in flight until the time is up (a stalled server is not polled harder).
    What no retry fixes fails at once, as in :func:`first_contact`.  ``waiting`` is told the first
    reason, once, when the first request gets no answer.
    """
    import asyncio

    deadline = time.monotonic() + within
    while True:
        asked = time.monotonic()
        why = await _version_answer(cluster, max(0.1, deadline - asked))
        if why is None:
            return None
        if waiting is not None:
            waiting(why)
            waiting = None
        left = deadline - time.monotonic()
        if left <= 0:
            return why
        await asyncio.sleep(min(left, max(0.0, every - (time.monotonic() - asked))))


async def _version_answer(cluster: Cluster, timeout: float) -> str | None:
    """One ``/version`` request: None when the server answered, else why not; a CA that does not
    verify the server is a :class:`ConfigError`, refused credentials a :class:`ClusterError`."""
    try:
        response = await cluster.client.get("/version", timeout=timeout)
    except TRANSPORT_ERRORS as exc:
        message = explain(exc, cluster.server)
        if message.startswith(TLS_VERIFICATION_FAILED):
            raise ConfigError(message) from None
        return message
    if response.status_code == 401:
        raise_for_status(response)  # ClusterError with the 401 line
    return None

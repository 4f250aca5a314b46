"""kubeconfig + context -> one configured ``httpx.AsyncClient`` per cluster.

Resolution follows kubectl: ``--kubeconfig`` (one file), else ``KUBECONFIG``
(several files, first definition of a name wins), else ``~/.kube/config``,
else the in-cluster service account.  Parsing and merging are the
``kubernetes`` package's (``KubeConfigMerger``/``KubeConfigLoader``); only the
credentials that change while a monitor runs (token files, exec plugins) are
handled in :mod:`probes.credentials`.
"""

from __future__ import annotations

import atexit
import functools
import datetime as dt
import os
import shutil
import ssl
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from . import USER_AGENT
from .credentials import ExecCredential, StaticToken, TokenFile, TokenSource
from .errors import ClusterError, ConfigError

#: Explicit timeouts for every request: a frozen API server must not hang a probe.
DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=30.0, pool=10.0)
#: Caps in-flight requests so that a stalled server cannot make them pile up.
DEFAULT_LIMITS = httpx.Limits(max_connections=16, max_keepalive_connections=8)

IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@dataclass(frozen=True)
class ClusterConfig:
    """Everything needed to talk to one API server, as kubectl would resolve it."""

    server: str
    context: str
    user: str
    kubeconfig: tuple[str, ...]
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    credentials: TokenSource | None = field(default=None, repr=False, compare=False)
    exec_credential: ExecCredential | None = field(default=None, repr=False, compare=False)

    @property
    def host(self) -> str:
        """``host:port`` of the server, for display and kubectl's cache dir."""
        return httpx.URL(self.server).netloc.decode()


# --------------------------------------------------------------------------- loading


def kubeconfig_paths(explicit: str | None = None) -> list[str]:
    """The kubeconfig files kubectl would read, in precedence order."""
    if explicit:
        return [os.path.expanduser(explicit)]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return [os.path.expanduser(p) for p in env.split(os.pathsep) if p]
    return [os.path.expanduser("~/.kube/config")]


_private_dir: str | None = None


def _private_temp_dir() -> str:
    """A 0700 directory for the certificate files the loader writes from *-data."""
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="crdscope-creds-")
        atexit.register(shutil.rmtree, _private_dir, True)
    return _private_dir


def load_config(kubeconfig: str | None = None, context: str | None = None) -> ClusterConfig:
    """Resolve ``kubeconfig``/``context`` into a :class:`ClusterConfig`.

    Raises :class:`ConfigError` with one line for every way this can go wrong.
    """
    from kubernetes.config.config_exception import ConfigException

    paths = kubeconfig_paths(kubeconfig)
    if kubeconfig and not os.path.exists(paths[0]):
        raise ConfigError(f"kubeconfig {paths[0]} does not exist")
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        if context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return load_in_cluster_config()
        raise ConfigError(
            f"no kubeconfig found (looked at {', '.join(paths)}); "
            "set KUBECONFIG, pass --kubeconfig, or run `crdscope lab up`"
        )
    documents = [_check_yaml(path) for path in existing]
    if context is None:
        # kubectl: the first file that sets current-context wins (the kubernetes
        # package's merger lets the last one win).
        context = next((d.get("current-context") for d in documents if d and d.get("current-context")), None)
    try:
        return _load_from_files(existing, context)
    except ConfigException as exc:
        raise ConfigError(f"invalid kubeconfig: {_first_line(exc)}") from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"invalid kubeconfig {', '.join(existing)}: {_first_line(exc)}") from None


def _check_yaml(path: str) -> dict | None:
    """Parse one kubeconfig file, turning YAML errors into one line with the line number."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"kubeconfig {path}{where}: {problem}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    if document is not None and not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {path} is not a kubeconfig (a YAML mapping)")
    return document


def _load_from_files(paths: list[str], context: str | None) -> ClusterConfig:
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config

    merger = kube_config.KubeConfigMerger(os.pathsep.join(paths))
    merged = merger.config
    if merged is None:
        raise ConfigError(f"kubeconfig {', '.join(paths)} is empty")
    contexts = [c["name"] for c in (merged.value.get("contexts") or [])]
    if context is None:
        context = merged.value.get("current-context") or None
        if not context:
            raise ConfigError(
                "kubeconfig has no current-context; pass --context "
                f"(contexts: {', '.join(contexts) or 'none'})"
            )
    if context not in contexts:
        raise ConfigError(
            f"context '{context}' not found in kubeconfig "
            f"(contexts: {', '.join(contexts) or 'none'})"
        )

    loader = _loader_class()(
        config_dict=merged,
        active_context=context,
        config_base_path=None,
        temp_file_path=_private_temp_dir(),
    )
    configuration = k8s_client.Configuration()
    loader.load_and_set(configuration)
    ctx = loader.current_context["context"]
    server = configuration.host
    if not server or server == "http://localhost":
        raise ConfigError(f"cluster of context '{context}' has no server address")

    credentials: TokenSource | None = loader.exec_credential
    header = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    token_file = loader.token_file
    if credentials is None and token_file:
        credentials = TokenFile(token_file)
    elif credentials is None and header:
        credentials = StaticToken(header)

    cert_file = getattr(configuration, "cert_file", None) or None
    key_file = getattr(configuration, "key_file", None) or None
    if cert_file:
        _check_client_certificate(cert_file, ctx.get("user", ""))
    return ClusterConfig(
        server=server,
        context=context,
        user=str(ctx.get("user", "")),
        kubeconfig=tuple(paths),
        ca_file=configuration.ssl_ca_cert or None,
        cert_file=cert_file,
        key_file=key_file,
        insecure_skip_tls_verify=not configuration.verify_ssl,
        tls_server_name=getattr(configuration, "tls_server_name", None) or None,
        proxy=configuration.proxy or None,
        credentials=credentials,
        exec_credential=loader.exec_credential,
    )


@functools.cache
def _loader_class() -> type:
    from kubernetes.config.kube_config import FileOrData, KubeConfigLoader

    class Loader(KubeConfigLoader):
        """The kubernetes loader, with exec plugins and token files kept refreshable."""

        exec_credential: ExecCredential | None = None
        token_file: str | None = None

        def _load_user_token(self):  # noqa: D401 - overrides a private hook
            user = self._user
            if user and "token" not in user and user.safe_get("tokenFile"):
                base = self._get_base_path(user.path)
                path = user["tokenFile"]
                self.token_file = path if os.path.isabs(path) else os.path.join(base, path)
            return super()._load_user_token()

        def _load_from_exec_plugin(self):  # noqa: D401 - overrides a private hook
            if "exec" not in self._user:
                return None
            base = self._get_base_path(self._cluster.path)
            exec_config = _plain(self._user["exec"])
            self.exec_credential = ExecCredential(
                exec_config,
                base_dir=base,
                cluster=_plain(self._cluster),
                user_name=self._current_context["context"].safe_get("user") or "",
            )
            result = self.exec_credential.result()
            if result.token:
                self.token = f"Bearer {result.token}"
            else:
                self.cert_file = FileOrData(
                    {"client-certificate-data": result.client_certificate_data}, None,
                    data_key_name="client-certificate-data", base64_file_content=False,
                    temp_file_path=self._temp_file_path,
                ).as_file()
                self.key_file = FileOrData(
                    {"client-key-data": result.client_key_data}, None,
                    data_key_name="client-key-data", base64_file_content=False,
                    temp_file_path=self._temp_file_path,
                ).as_file()
            return True

    return Loader


def _plain(node: Any) -> Any:
    value = getattr(node, "value", node)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _check_client_certificate(path: str, user: str) -> None:
    """Fail early and clearly on an expired client certificate (servers say only 401)."""
    from cryptography import x509

    try:
        pem = Path(path).read_bytes()
        certificate = x509.load_pem_x509_certificate(pem)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"client certificate of user '{user}' is unreadable: {_first_line(exc)}") from None
    now = dt.datetime.now(dt.timezone.utc)
    if certificate.not_valid_after_utc < now:
        raise ConfigError(
            f"client certificate of user '{user}' expired on "
            f"{certificate.not_valid_after_utc:%Y-%m-%d %H:%M}Z"
        )
    if certificate.not_valid_before_utc > now:
        raise ConfigError(f"client certificate of user '{user}' is not valid yet")


def load_in_cluster_config(directory: str = IN_CLUSTER_DIR) -> ClusterConfig:
    """The pod's service account, as client-go's ``rest.InClusterConfig``."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    token_path = os.path.join(directory, "token")
    ca_path = os.path.join(directory, "ca.crt")
    if not host or not os.path.exists(token_path):
        raise ConfigError("not running in a cluster and no kubeconfig found; pass --kubeconfig")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    return ClusterConfig(
        server=f"https://{host}:{port}",
        context="in-cluster",
        user="serviceaccount",
        kubeconfig=(),
        ca_file=ca_path if os.path.exists(ca_path) else None,
        credentials=TokenFile(token_path),
    )


def list_contexts(kubeconfig: str | None = None) -> tuple[list[str], str | None]:
    """Context names and the current one, for completion and messages."""
    paths = [p for p in kubeconfig_paths(kubeconfig) if os.path.exists(p)]
    names: list[str] = []
    current = None
    for path in paths:
        document = _check_yaml(path) or {}
        for item in document.get("contexts") or []:
            if item.get("name") not in names:
                names.append(item.get("name"))
        current = current or document.get("current-context")
    return names, current


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


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

    async def async_auth_flow(self, request: httpx.Request):
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

    def sync_auth_flow(self, request: httpx.Request):
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


#: The HTTP/1.1 fallback is for rare retries only.
FALLBACK_LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=1)


class GoawayRetryTransport(httpx.AsyncBaseTransport):
    """Retry over HTTP/1.1 when httpcore loses an HTTP/2 answer to a GOAWAY.

    kube-apiserver answers unauthenticated HTTP/2 requests and then closes the
    connection (GOAWAY), and ``--goaway-chance`` does so at random; httpcore
    raises ``ConnectionTerminated`` for the stream instead of handing over the
    answer it was given (encode/httpcore discussion #1041).  The request is sent
    again once over HTTP/1.1, where the answer (a 401, say) arrives intact.
    Kubernetes writes crdscope makes (server-side apply, deletes) are idempotent.
    """

    def __init__(self, primary: httpx.AsyncBaseTransport, fallback: httpx.AsyncBaseTransport) -> None:
        self.primary = primary
        self.fallback = fallback
        self.retries = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self.primary.handle_async_request(request)
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
    ) -> None:
        self.config = config
        self.requests = RequestLog()
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
        except httpx.HTTPError as exc:
            raise ClusterError(explain(exc, self.server)) from None
        raise_for_status(response)
        try:
            return response.json()
        except ValueError:
            raise ClusterError(f"{self.server}{path} did not answer JSON") from None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> Cluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --------------------------------------------------------------------------- errors


def explain(exc: BaseException, server: str) -> str:
    """One line describing a transport failure, naming the server."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or _first_line(cause)
            return f"TLS verification failed for {server}: {reason}"
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake with {server} failed: {cause.reason or _first_line(cause)}"
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
            return f"TLS verification failed for {server}: {text.split('] ')[-1]}"
        return f"cannot reach {server}: {text}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"{server} closed the connection ({_first_line(exc)})"
    return f"request to {server} failed: {_first_line(exc)}"


def status_message(response: httpx.Response) -> str:
    """The server's own explanation of an error response (a Status object's message)."""
    try:
        body = response.json()
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except ValueError:
        pass
    text = response.text.strip() if response.num_bytes_downloaded < 4096 else ""
    return text.splitlines()[0] if text else response.reason_phrase


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

"""kubeconfig + context -> :class:`ClusterConfig`, resolving exactly what kubectl would.

Resolution follows kubectl: ``--kubeconfig`` (one file), else ``KUBECONFIG``
(several files, first definition of a name wins, first current-context wins),
else ``~/.kube/config``, else the in-cluster service account.  Parsing and
merging are the ``kubernetes`` package's (``KubeConfigMerger``/``KubeConfigLoader``);
only the credentials that change while a monitor runs (token files, exec
plugins) are handled in :mod:`probes.credentials`.
"""

from __future__ import annotations

import atexit
import datetime as dt
import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from .credentials import ExecCredential, StaticToken, TokenFile, TokenSource
from .errors import ConfigError

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

        def _load_user_token(self):
            user = self._user
            if user and "token" not in user and user.safe_get("tokenFile"):
                base = self._get_base_path(user.path)
                path = user["tokenFile"]
                self.token_file = path if os.path.isabs(path) else os.path.join(base, path)
            return super()._load_user_token()

        def _load_from_exec_plugin(self):
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
    now = dt.datetime.now(dt.UTC)
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

"""kubeconfig + context -> :class:`ClusterConfig`, resolving exactly what kubectl would.

Resolution follows kubectl: ``--kubeconfig`` (one file), else ``KUBECONFIG``
(several files, first definition of a name wins, first current-context wins),
else ``~/.kube/config``, else the in-cluster service account.  Plain
kubeconfigs (certificates, tokens, token files, basic auth) are read here
without the ``kubernetes`` package, whose import alone costs a one-shot
command more than a hundred milliseconds; users with an exec plugin or an
auth-provider still go through its ``KubeConfigLoader`` so that those behave
exactly as before.  Credentials that change while a monitor runs (token
files, exec plugins) are handled in :mod:`connection.credentials`.
"""

from __future__ import annotations

import atexit
import base64
import datetime as dt
import functools
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .credentials import ExecCredential, StaticToken, TokenFile, TokenSource
from crdscope.base.errors import ConfigError

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
        import httpx

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
        merged = _merge(existing, documents)
        if merged is not None and not _needs_kubernetes_package(merged, context):
            return _load_plain(existing, merged, context)
        return _load_from_files(existing, context)
    except ConfigError:
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ConfigError(f"invalid kubeconfig {', '.join(existing)}: {_first_line(exc)}") from None
    except Exception as exc:
        # The kubernetes package's ConfigException, caught by name so that a plain
        # kubeconfig never imports the package just to name the class.
        if type(exc).__name__ != "ConfigException":
            raise
        raise ConfigError(f"invalid kubeconfig: {_first_line(exc)}") from None


# --------------------------------------------------------------------------- plain kubeconfigs


@dataclass
class _Merged:
    """kubeconfig files merged as kubectl does: the first definition of a name wins.

    Each entry keeps the file it came from: relative paths resolve against it.
    """

    clusters: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    users: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    contexts: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)


def _merge(paths: list[str], documents: list[dict[str, Any] | None]) -> _Merged | None:
    """Merge the parsed files; None when every file is empty."""
    if not any(documents):
        return None
    merged = _Merged()
    for path, document in zip(paths, documents, strict=True):
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            target = getattr(merged, section)
            for item in (document or {}).get(section) or []:
                name = item["name"]
                if name not in target:
                    target[name] = (item.get(key) or {}, path)
    return merged


def _needs_kubernetes_package(merged: _Merged, context: str | None) -> bool:
    """Exec plugins and auth-providers keep the kubernetes package's behaviour."""
    entry = merged.contexts.get(context or "")
    if entry is None:
        return False
    user = merged.users.get(str(entry[0].get("user") or ""))
    return user is not None and ("exec" in user[0] or "auth-provider" in user[0])


def _load_plain(paths: list[str], merged: _Merged, context: str | None) -> ClusterConfig:
    """A context whose user has no exec plugin or auth-provider, read as the kubernetes package would."""
    contexts = list(merged.contexts)
    if context is None:
        raise ConfigError(
            "kubeconfig has no current-context; pass --context "
            f"(contexts: {', '.join(contexts) or 'none'})"
        )
    if context not in merged.contexts:
        raise ConfigError(
            f"context '{context}' not found in kubeconfig "
            f"(contexts: {', '.join(contexts) or 'none'})"
        )
    ctx = merged.contexts[context][0]
    cluster_name = str(ctx.get("cluster") or "")
    if cluster_name not in merged.clusters:
        raise ConfigError(f"invalid kubeconfig: cluster '{cluster_name}' of context '{context}' is not defined")
    cluster, cluster_path = merged.clusters[cluster_name]
    user_name = str(ctx.get("user") or "")
    user, user_path = merged.users.get(user_name, ({}, cluster_path))
    server = str(cluster.get("server") or "").rstrip("/")
    if not server or server == "http://localhost":
        raise ConfigError(f"cluster of context '{context}' has no server address")

    ca_file = cert_file = key_file = None
    if server.startswith("https"):
        # The kubernetes package resolves all three against the cluster's file.
        base = os.path.abspath(os.path.dirname(cluster_path))
        ca_file = _file_or_data(cluster, "certificate-authority", base)
        cert_file = _file_or_data(user, "client-certificate", base)
        key_file = _file_or_data(user, "client-key", base)
    if cert_file:
        _check_client_certificate(cert_file, user_name)
    return ClusterConfig(
        server=server,
        context=context,
        user=user_name,
        kubeconfig=tuple(paths),
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
        insecure_skip_tls_verify=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        credentials=_plain_credentials(user, user_path),
    )


def _plain_credentials(user: dict[str, Any], user_path: str) -> TokenSource | None:
    """Token, token file or basic auth, in the kubernetes package's order of preference."""
    if user.get("token"):
        return StaticToken(f"Bearer {user['token']}")
    if user.get("tokenFile"):
        base = os.path.abspath(os.path.dirname(user_path))
        path = str(user["tokenFile"])
        path = path if os.path.isabs(path) else os.path.join(base, path)
        if not os.path.isfile(path):
            raise ConfigError(f"token file {path} does not exist")
        return TokenFile(path)
    if "username" in user and "password" in user:
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        return StaticToken(f"Basic {basic}")
    return None


def _file_or_data(section: dict[str, Any], key: str, base: str) -> str | None:
    """A path for ``key`` (relative to ``base``) or a private file holding ``key-data``."""
    data = section.get(f"{key}-data")
    if data:
        content = base64.standard_b64decode(data)
        name = hashlib.sha256(content).hexdigest()[:32]
        path = os.path.join(_private_temp_dir(), name)
        if not os.path.isfile(path):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(content)
        return path
    if section.get(key):
        path = os.path.normpath(os.path.join(base, str(section[key])))
        if not os.path.isfile(path):
            raise ConfigError(f"invalid kubeconfig: file does not exist: {path}")
        return path
    return None


#: libyaml's loader where PyYAML has it: a kubeconfig of many contexts parses tens of times faster
#: than with the pure-Python loader, which still words the errors (:func:`_check_yaml`).
_FAST_LOADER: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = (yaml.CSafeLoader if yaml.__with_libyaml__
                                                                 else yaml.SafeLoader)


def _check_yaml(path: str) -> dict[str, Any] | None:
    """Parse one kubeconfig file, turning YAML errors into one line with the line number."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        try:
            document = yaml.load(text, Loader=_FAST_LOADER)  # a safe loader: libyaml's SafeLoader
        except yaml.YAMLError:
            document = yaml.safe_load(text)  # the same verdict, in the words (and line) people know
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


# --------------------------------------------------------------------------- exec plugins, auth-providers


def _load_from_files(paths: list[str], context: str | None) -> ClusterConfig:
    """A context whose user has an exec plugin or an auth-provider, read by the kubernetes package."""
    from kubernetes import client as k8s_client
    from kubernetes.config import kube_config

    merger = kube_config.KubeConfigMerger(os.pathsep.join(paths))
    merged = merger.config
    if merged is None:
        raise ConfigError(f"kubeconfig {', '.join(paths)} is empty")
    context = _chosen_context(merged.value, context)
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
        credentials=_loaded_credentials(loader, configuration),
        exec_credential=loader.exec_credential,
    )


def _chosen_context(merged: dict[str, Any], context: str | None) -> str:
    """The context asked for (default: the merged current-context), known to the kubeconfig."""
    contexts = [c["name"] for c in (merged.get("contexts") or [])]
    if context is None:
        context = merged.get("current-context") or None
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
    return context


def _loaded_credentials(loader: Any, configuration: Any) -> TokenSource | None:
    """What the kubernetes loader authenticates with: its exec plugin, else a token file (re-read as it
    changes), else the header it set."""
    credentials: TokenSource | None = loader.exec_credential
    header = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    token_file = loader.token_file
    if credentials is None and token_file:
        credentials = TokenFile(token_file)
    elif credentials is None and header:
        credentials = StaticToken(header)
    return credentials


@functools.cache
def _loader_class() -> type:
    from kubernetes.config.kube_config import FileOrData, KubeConfigLoader

    class Loader(KubeConfigLoader):
        """The kubernetes loader, with exec plugins and token files kept refreshable."""

        exec_credential: ExecCredential | None = None
        token_file: str | None = None

        def _load_user_token(self) -> Any:
            user: Any = self._user
            if user and "token" not in user and user.safe_get("tokenFile"):
                base = self._get_base_path(user.path)
                path = user["tokenFile"]
                self.token_file = path if os.path.isabs(path) else os.path.join(base, path)
            return super()._load_user_token()

        def _load_from_exec_plugin(self) -> bool | None:
            user: Any = self._user
            cluster: Any = self._cluster
            context: Any = self._current_context
            if "exec" not in user:
                return None
            base = self._get_base_path(cluster.path)
            exec_config = _plain(user["exec"])
            self.exec_credential = ExecCredential(
                exec_config,
                base_dir=base,
                cluster=_plain(cluster),
                user_name=context["context"].safe_get("user") or "",
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
    try:
        not_before, not_after = certificate_validity(Path(path).read_bytes())
    except (OSError, ValueError, IndexError) as exc:
        reason = _first_line(exc) if not isinstance(exc, IndexError) else "truncated certificate"
        raise ConfigError(f"client certificate of user '{user}' is unreadable: {reason}") from None
    now = dt.datetime.now(dt.UTC)
    if not_after < now:
        raise ConfigError(f"client certificate of user '{user}' expired on {not_after:%Y-%m-%d %H:%M}Z")
    if not_before > now:
        raise ConfigError(f"client certificate of user '{user}' is not valid yet")


_PEM_BEGIN = "-----BEGIN CERTIFICATE-----"
_PEM_END = "-----END CERTIFICATE-----"


def certificate_validity(pem: bytes) -> tuple[dt.datetime, dt.datetime]:
    """notBefore and notAfter of the first certificate of a PEM file.

    Read from the DER by hand (RFC 5280: Certificate > tbsCertificate > validity):
    importing ``cryptography`` for two dates cost a one-shot command tens of milliseconds.
    """
    text = pem.decode("ascii", "replace")
    begin = text.find(_PEM_BEGIN)
    end = text.find(_PEM_END, begin + 1)
    if begin < 0 or end < 0:
        raise ValueError("no PEM certificate in the file")
    der = base64.b64decode("".join(text[begin + len(_PEM_BEGIN):end].split()), validate=True)
    _, start, _ = _der_item(der, 0)  # Certificate
    _, start, _ = _der_item(der, start)  # tbsCertificate
    tag, first, after = _der_item(der, start)
    fields = 3 if tag == 0xA0 else 2  # [0] version, then serial, signature, issuer
    for _ in range(fields):
        tag, first, after = _der_item(der, after)
    tag, first, after = _der_item(der, after)  # validity
    if tag != 0x30:
        raise ValueError("not an X.509 certificate")
    before_tag, before_start, before_end = _der_item(der, first)
    after_tag, after_start, after_end = _der_item(der, before_end)
    return (_der_time(before_tag, der[before_start:before_end]),
            _der_time(after_tag, der[after_start:after_end]))


def _der_item(der: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, where the content starts, where it ends) of the DER item at ``offset``."""
    tag, length = der[offset], der[offset + 1]
    offset += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(der[offset:offset + count], "big")
        offset += count
    if offset + length > len(der):
        raise ValueError("truncated certificate")
    return tag, offset, offset + length


def _der_time(tag: int, content: bytes) -> dt.datetime:
    """A UTCTime (two-digit year: 50-99 are 19xx) or GeneralizedTime, in UTC."""
    text = content.decode("ascii")
    if tag == 0x17:
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != 0x18:
        raise ValueError("not an X.509 certificate")
    if not text[:14].isdigit():
        raise ValueError(f"not a certificate time: {text!r}")
    # By hand, not strptime: its module and format tables cost a one-shot command milliseconds.
    return dt.datetime(int(text[0:4]), int(text[4:6]), int(text[6:8]), int(text[8:10]), int(text[10:12]),
                       int(text[12:14]), tzinfo=dt.UTC)


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

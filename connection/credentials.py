"""Bearer credentials that change over time: token files and exec plugins.

The ``kubernetes`` package reads a token file once and runs an exec plugin
with no time limit, swallowing its errors into a log line.  A monitor runs for
hours and must not hang on a plugin, so these sources refresh the way
client-go does (token files re-read every minute; exec credentials renewed
before they expire) and fail with one clear line.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

from crdscope.base.errors import ConfigError

#: client-go re-reads a token file after this many seconds.
TOKEN_FILE_REREAD_SECONDS = 60.0
#: Renew an exec credential this long before it expires.
EXEC_EXPIRY_MARGIN_SECONDS = 60.0
#: A plugin that has not answered by then is treated as hung.
EXEC_TIMEOUT_SECONDS = 30.0


class TokenSource(Protocol):
    """Something that yields the value of an ``Authorization`` header."""

    def authorization(self) -> str | None:
        """Return the header value (``Bearer ...``), refreshing if due."""

    def invalidate(self) -> None:
        """Forget the cached value: the server answered 401 with it."""


class StaticToken:
    """A token or basic-auth header written in the kubeconfig itself."""

    def __init__(self, header: str) -> None:
        self._header = header

    def authorization(self) -> str | None:
        return self._header

    def invalidate(self) -> None:  # nothing to refresh
        return None

    def __repr__(self) -> str:  # never show the secret
        return "StaticToken(<redacted>)"


class TokenFile:
    """A ``tokenFile`` (or in-cluster service-account token), re-read every minute."""

    def __init__(self, path: str, *, reread_seconds: float = TOKEN_FILE_REREAD_SECONDS) -> None:
        self.path = path
        self._reread = reread_seconds
        self._token: str | None = None
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def authorization(self) -> str | None:
        with self._lock:
            now = time.monotonic()
            if self._token is None or now - self._read_at >= self._reread:
                try:
                    with open(self.path, encoding="utf-8") as handle:
                        token = handle.read().strip()
                except OSError as exc:
                    if self._token is None:
                        raise ConfigError(f"cannot read token file {self.path}: {exc.strerror}") from None
                    # Keep the last good token: rotation writes files non-atomically.
                    return f"Bearer {self._token}"
                if not token:
                    raise ConfigError(f"token file {self.path} is empty")
                self._token, self._read_at = token, now
            return f"Bearer {self._token}"

    def invalidate(self) -> None:
        with self._lock:
            self._read_at = float("-inf")

    def __repr__(self) -> str:
        return f"TokenFile({self.path!r})"


@dataclass(frozen=True)
class ExecResult:
    """What an exec credential plugin returned (secrets stay out of repr)."""

    token: str | None
    client_certificate_data: str | None
    client_key_data: str | None
    expires_at: float | None  # unix seconds

    def __repr__(self) -> str:
        return f"ExecResult(expires_at={self.expires_at!r}, token=<redacted>)"


class ExecCredential:
    """An exec credential plugin (``users[].user.exec``), run with a deadline.

    The plugin protocol (client.authentication.k8s.io): the command gets
    ``KUBERNETES_EXEC_INFO`` and prints an ExecCredential whose status holds a
    token or a client certificate, optionally with ``expirationTimestamp``.
    """

    def __init__(
        self,
        exec_config: dict[str, Any],
        *,
        base_dir: str,
        cluster: dict[str, Any] | None = None,
        user_name: str = "",
        timeout_seconds: float | None = None,
    ) -> None:
        for key in ("command", "apiVersion"):
            if not exec_config.get(key):
                raise ConfigError(f"exec plugin of user '{user_name}' has no '{key}'")
        self.api_version: str = exec_config["apiVersion"]
        command: str = exec_config["command"]
        # client-go: a command with a path separator is relative to the kubeconfig file.
        if os.sep in command and not os.path.isabs(command):
            command = os.path.join(base_dir, command)
        self.argv = [command, *(exec_config.get("args") or [])]
        self.extra_env = {item["name"]: item["value"] for item in exec_config.get("env") or []}
        self.cluster = cluster if exec_config.get("provideClusterInfo") else None
        self.user_name = user_name
        self._timeout_seconds = timeout_seconds
        self._result: ExecResult | None = None
        self._lock = threading.Lock()

    @property
    def timeout_seconds(self) -> float:
        """Deadline for one plugin run (module default unless given)."""
        return self._timeout_seconds or EXEC_TIMEOUT_SECONDS

    def _run(self) -> ExecResult:
        info: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        if self.cluster is not None:
            info["spec"]["cluster"] = self.cluster
        env = {**os.environ, **self.extra_env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        name = os.path.basename(self.argv[0])
        try:
            done = subprocess.run(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.timeout_seconds,
                check=False,
            )
        except FileNotFoundError:
            raise ConfigError(
                f"exec plugin '{self.argv[0]}' of user '{self.user_name}' not found"
            ) from None
        except PermissionError:
            raise ConfigError(f"exec plugin '{self.argv[0]}' is not executable") from None
        except subprocess.TimeoutExpired:
            raise ConfigError(
                f"exec plugin '{name}' of user '{self.user_name}' did not answer "
                f"within {self.timeout_seconds:g}s"
            ) from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or [""])[-1][:200]
            raise ConfigError(
                f"exec plugin '{name}' of user '{self.user_name}' failed "
                f"(exit {done.returncode}){': ' + last if last else ''}"
            )
        try:
            document = json.loads(done.stdout)
            status = document["status"]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(f"exec plugin '{name}' printed no valid ExecCredential") from None
        if document.get("apiVersion") != self.api_version:
            raise ConfigError(
                f"exec plugin '{name}' answered {document.get('apiVersion')!r}, "
                f"kubeconfig asked for {self.api_version!r}"
            )
        token = status.get("token")
        cert = status.get("clientCertificateData")
        key = status.get("clientKeyData")
        if not token and not (cert and key):
            raise ConfigError(f"exec plugin '{name}' returned neither a token nor a client certificate")
        expires_at = None
        if status.get("expirationTimestamp"):
            expires_at = parse_rfc3339(status["expirationTimestamp"])
        return ExecResult(token, cert, key, expires_at)

    def result(self) -> ExecResult:
        """The current credential, running the plugin when none is valid."""
        with self._lock:
            current = self._result
            if current is None or _expiring(current.expires_at):
                current = self._result = self._run()
            return current

    def authorization(self) -> str | None:
        token = self.result().token
        return f"Bearer {token}" if token else None

    def invalidate(self) -> None:
        with self._lock:
            self._result = None

    def __repr__(self) -> str:
        return f"ExecCredential({os.path.basename(self.argv[0])!r})"


def _expiring(expires_at: float | None) -> bool:
    return expires_at is not None and time.time() >= expires_at - EXEC_EXPIRY_MARGIN_SECONDS


def parse_rfc3339(value: str) -> float:
    """Unix seconds of an RFC 3339 timestamp such as ``2026-01-02T03:04:05Z``."""
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(f"invalid timestamp {value!r}") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()

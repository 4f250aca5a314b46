"""Registry credentials as crane and crank read them, and a registry's refusal as one line.

crdscope pulls (``crane``) and pushes (``crank xpkg push``) with go-containerregistry's default
keychain, which reads Docker's ``config.json`` with Docker's own code: ``auths`` entries,
``credHelpers`` (a ``docker-credential-NAME`` program per registry) and ``credsStore`` (one for
every registry).  crdscope never reads a password itself to send it; it chooses the file and says
where a registry's credentials come from when the registry refuses them:

- ``--registry-config FILE`` (every command that pulls or pushes) names the file: the children get
  ``DOCKER_CONFIG`` pointing at a private folder holding a link ``config.json`` to it (Docker's
  variable names a folder, not a file);
- otherwise ``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``, as Docker reads them.

A refusal (401 or 403) is one line naming the registry, the status, the realm its ``WWW-Authenticate``
challenge names (asked of ``/v2/`` without credentials) and what was offered, with exit code 3 (a
registry that refused crdscope, as a cluster that does).  Nothing a credential could be is ever
repeated: every message of crane or crank shown is cut to one line and cleaned of what looks like
one and of every secret the chosen file holds (:func:`redact`).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crdscope.base.errors import ConfigError, CrdscopeError

#: The file inside ``DOCKER_CONFIG`` (Docker's ``config.ConfigFileName``).
CONFIG_NAME = "config.json"
HELPER_PREFIX = "docker-credential-"
#: How long the realm probe (``GET /v2/``, no credentials) may take: it only adds to a message.
PROBE_SECONDS = 5.0
#: Realms are shown, never more than this.
REALM_LIMIT = 120

_CHALLENGE = re.compile(r'^\s*(?P<scheme>[A-Za-z]+)\b(?P<params>.*)$')
_PARAM = re.compile(r'(?P<key>[A-Za-z_]+)\s*=\s*(?:"(?P<quoted>[^"]*)"|(?P<bare>[^\s,]+))')
_STATUS = re.compile(r"\b(?P<code>401|403)\b|\b(?P<word>UNAUTHORIZED|DENIED|FORBIDDEN)\b")
_HELPER_FAILED = re.compile(r'error getting credentials - err: (?P<err>.*?)(?:, out: `|$)')
# Things a registry error could carry that must never be shown (a token, a basic-auth pair).
_LOOKS_SECRET = re.compile(r"(?i)\b(basic|bearer)\s+[A-Za-z0-9._~+/=-]+|(?<=://)[^/@\s]+@")


_LOOPBACK = re.compile(r"^(?:localhost|127(?:\.\d{1,3}){3}|\[?::1\]?)$")


def is_loopback(host: str) -> bool:
    """``HOST[:PORT]`` is on this machine (the lab's registry): the only kind reached over plain HTTP."""
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    return bool(_LOOPBACK.match(name))


class RegistryRefusedError(CrdscopeError):
    """A registry answered 401 or 403: it refused crdscope (exit 3, as a cluster that refuses it)."""

    exit_code = 3


@dataclass(frozen=True)
class RegistryConfig:
    """The ``config.json`` crane and crank read, and how it was chosen."""

    #: The file (it may not exist: then they read no credentials)
    file: Path
    #: Named by ``--registry-config`` (else Docker's own lookup)
    named: bool = False
    #: The ``DOCKER_CONFIG`` folder the children get (a link to ``file``), when named
    folder: Path | None = None
    #: Read once: what the file holds (never shown; see :meth:`secrets`)
    content: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def environment(self) -> dict[str, str] | None:
        """The environment of a crane or crank child: this process's own, with ``DOCKER_CONFIG``
        when a file was named (None: inherit it as it is)."""
        if self.folder is None:
            return None
        return {**os.environ, "DOCKER_CONFIG": str(self.folder)}

    def helper_for(self, host: str) -> str | None:
        """The credential helper Docker runs for ``host`` (``credHelpers``, else ``credsStore``)."""
        helpers = self.content.get("credHelpers")
        named = helpers.get(host) if isinstance(helpers, dict) else None
        store = named or self.content.get("credsStore")
        return str(store) if isinstance(store, str) and store else None

    def has_entry(self, host: str) -> bool:
        """Whether ``auths`` holds an entry for ``host`` (keys written as URLs count, as Docker matches them)."""
        auths = self.content.get("auths")
        if not isinstance(auths, dict):
            return False
        return any(_hostname(key) == host and isinstance(value, dict) and value for key, value in auths.items())

    def offered(self, host: str) -> str:
        """Where credentials for ``host`` came from, for a person (no secret in it)."""
        helper = self.helper_for(host)
        if helper:
            return f"the credentials {HELPER_PREFIX}{helper} gave for {host} (named in {self.file})"
        if self.has_entry(host):
            return f"the credentials for {host} in {self.file}"
        where = self.file if self.file.is_file() else f"{self.file} (absent)"
        return f"no credentials for {host} in {where}"

    def secrets(self) -> set[str]:
        """Every string of the file that is or holds a credential (to be cleaned from messages)."""
        found: set[str] = set()
        auths = self.content.get("auths")
        for entry in (auths.values() if isinstance(auths, dict) else ()):
            if not isinstance(entry, dict):
                continue
            for key in ("auth", "password", "identitytoken", "registrytoken"):
                value = entry.get(key)
                if isinstance(value, str) and len(value) >= 4:
                    found.add(value)
            decoded = _decoded(entry.get("auth"))
            if decoded:
                found.add(decoded)
                found.add(decoded.partition(":")[2])
        return {secret for secret in found if len(secret) >= 4}


def _hostname(key: str) -> str:
    """Docker's ``ConvertToHostname``: ``https://r.example.com/v1/`` -> ``r.example.com``."""
    stripped = key.removeprefix("http://").removeprefix("https://")
    return stripped.split("/", 1)[0]


def _decoded(auth: object) -> str:
    if not isinstance(auth, str) or not auth:
        return ""
    try:
        return base64.b64decode(auth, validate=False).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _read(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def docker_config_file() -> Path:
    """Where Docker (and so crane and crank) reads ``config.json`` when no file is named."""
    folder = os.environ.get("DOCKER_CONFIG")
    return Path(folder) / CONFIG_NAME if folder else Path.home() / ".docker" / CONFIG_NAME


_chosen: RegistryConfig | None = None


def registry_config() -> RegistryConfig:
    """The ``config.json`` this process's crane and crank read (``--registry-config``, else Docker's)."""
    if _chosen is not None:
        return _chosen
    file = docker_config_file()
    return RegistryConfig(file, content=_read(file))


def named_config(path: str | os.PathLike[str]) -> RegistryConfig:
    """A ``config.json`` named by ``--registry-config``: checked, and linked into a private folder
    (removed when the process ends) that the children get as ``DOCKER_CONFIG``."""
    file = Path(os.path.abspath(os.path.expanduser(path)))
    if not file.is_file():
        raise ConfigError(f"--registry-config {path}: no such file")
    try:
        content = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--registry-config {path}: cannot read it: {exc.strerror or exc}") from None
    except ValueError:
        raise ConfigError(f"--registry-config {path}: not JSON (Docker's config.json format)") from None
    if not isinstance(content, dict):
        raise ConfigError(f"--registry-config {path}: not a JSON object (Docker's config.json format)")
    folder = Path(tempfile.mkdtemp(prefix="crdscope-registry-config-"))  # mode 0700
    atexit.register(shutil.rmtree, folder, True)
    (folder / CONFIG_NAME).symlink_to(file)
    return RegistryConfig(file, named=True, folder=folder, content=content)


def use_registry_config(path: str | os.PathLike[str] | None) -> None:
    """``--registry-config FILE``: every crane and crank this process runs reads FILE (None: Docker's)."""
    global _chosen  # one choice per process, made by its command line
    _chosen = named_config(path) if path else None


def redact(text: str, config: RegistryConfig | None = None) -> str:
    """``text`` without anything that looks like a credential or is one of the file's secrets."""
    cleaned = _LOOKS_SECRET.sub("[redacted]", text)
    for secret in sorted((config or registry_config()).secrets(), key=len, reverse=True):
        cleaned = cleaned.replace(secret, "[redacted]")
    return cleaned


# --------------------------------------------------------------------------- refusals


def refused_status(said: str) -> int | None:
    """401 or 403 when crane's or crank's words say the registry refused (None otherwise)."""
    match = _STATUS.search(said)
    if match is None:
        return None
    if match.group("code"):
        return int(match.group("code"))
    return 401 if match.group("word") == "UNAUTHORIZED" else 403


def challenge(header: str) -> str:
    """``Basic realm="x"`` -> ``Basic realm "x"``; a Bearer challenge by its realm (the token service)."""
    match = _CHALLENGE.match(header or "")
    if match is None:
        return ""
    params = {m.group("key").lower(): m.group("quoted") if m.group("quoted") is not None else m.group("bare")
              for m in _PARAM.finditer(match.group("params"))}
    realm = (params.get("realm") or "")[:REALM_LIMIT]
    return f'{match.group("scheme")} realm "{realm}"' if realm else match.group("scheme")


def ask_challenge(host: str, *, loopback: bool) -> str:
    """What the registry's ``/v2/`` asks for, without credentials (empty when it cannot be asked)."""
    import httpx

    url = f"{'http' if loopback else 'https'}://{host}/v2/"
    try:
        response = httpx.get(url, timeout=PROBE_SECONDS, follow_redirects=False)
    except httpx.HTTPError:
        return ""
    return challenge(response.headers.get("www-authenticate", ""))


def helper_failure(said: str, host: str, config: RegistryConfig) -> str | None:
    """Why a credential helper failed, from Docker's words (never the helper's output), or None."""
    match = _HELPER_FAILED.search(said)
    if match is None:
        return None
    helper = config.helper_for(host)
    name = f"{HELPER_PREFIX}{helper}" if helper else "the credential helper"
    cause = match.group("err")
    reason = "it is not on PATH" if "executable file not found" in cause else redact(cause, config)[:120]
    return f"{name} (named in {config.file} for {host}) failed: {reason}"


def refusal(shown: str, host: str, said: str, *, loopback: bool, pushing: bool = False,
            config: RegistryConfig | None = None) -> CrdscopeError | None:
    """The one-line error when ``said`` (crane's or crank's words about ``shown``) is a refusal or a
    credential helper failing; None for any other failure."""
    chosen = config or registry_config()
    helper = helper_failure(said, host, chosen)
    if helper is not None:
        return ConfigError(f"{shown}: no credentials for registry {host}: {helper}")
    status = refused_status(said)
    if status is None:
        return None
    asked = ask_challenge(host, loopback=loopback) if status == 401 else ""
    offered = chosen.offered(host)
    if status == 401:
        head = "401 Unauthorized" + (f", {asked}" if asked else "")
        why = (f"{offered}: log in with `docker login {host}` or give --registry-config FILE"
               if offered.startswith("no credentials") else f"{offered} were not accepted")
    else:
        head = "403 Forbidden"
        why = (f"{offered}: it asks for credentials allowed to {'push' if pushing else 'pull'} this repository"
               if offered.startswith("no credentials")
               else f"{offered} are not allowed to {'push' if pushing else 'pull'} this repository")
    return RegistryRefusedError(f"{shown}: registry {host} refused access ({head}): {why}")

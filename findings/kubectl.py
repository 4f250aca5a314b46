"""Client-side discovery as the user's own kubectl lives it: its limits, its cache, its next cold start.

:func:`read_local_kubectl` runs ``kubectl version --client -o json`` (a
process: call it in a thread, never on the event loop) and knows, from the
minor version, what that kubectl does when its discovery cache is cold:

* QPS/burst of its discovery client: 5/100 up to 1.23, 50/300 from 1.24
  (kubernetes PRs 107131, 109141);
* how long it trusts the cache: 10 minutes up to 1.23, 6 hours from 1.24 (PR 107141);
* whether it asks for aggregated discovery (one request for everything): from
  1.26 (``apidiscovery.k8s.io/v2beta1``), ``v2`` as well from 1.30.  A server from
  1.33 no longer serves ``v2beta1`` by default, so kubectl 1.26-1.29 walks there.

What that means on the cluster being watched is :mod:`findings.kubectl_discovery`'s finding.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess


VERSION_TIMEOUT_SECONDS = 10.0
_MINOR = re.compile(r"(\d+)")


@dataclasses.dataclass(frozen=True)
class KubectlMeasurement:
    """The local kubectl's ``api-resources`` with an empty cache dir, timed in this run."""

    seconds: float | None = None
    #: Killed unfinished after this many seconds (its cold discovery takes longer).
    unfinished_after: float | None = None
    error: str | None = None


@dataclasses.dataclass(frozen=True)
class KubectlClient:
    """The local kubectl: where, which version, and its discovery behaviour."""

    path: str
    git_version: str
    major: int
    minor: int

    @property
    def qps(self) -> float:
        return 5.0 if self.minor <= 23 else 50.0

    @property
    def burst(self) -> int:
        return 100 if self.minor <= 23 else 300

    @property
    def cache_ttl_seconds(self) -> float:
        return 600.0 if self.minor <= 23 else 6 * 3600.0

    @property
    def aggregated_versions(self) -> tuple[str, ...]:
        """The aggregated discovery versions it asks for (empty: it always walks)."""
        if self.minor < 26:
            return ()
        return ("v2beta1",) if self.minor < 30 else ("v2", "v2beta1")

    def describe(self) -> str:
        """``v1.32.4 at /usr/bin/kubectl (50 QPS, burst 300, cache 6 h, aggregated v2/v2beta1)``."""
        ttl = "10 min" if self.cache_ttl_seconds < 3600 else "6 h"
        reads = "aggregated " + "/".join(self.aggregated_versions) if self.aggregated_versions else "legacy walk only"
        return f"{self.git_version} at {self.path} ({self.qps:g} QPS, burst {self.burst}, cache {ttl}, {reads})"


def parse_client_version(text: str, path: str) -> KubectlClient | None:
    """``kubectl version --client -o json`` output -> :class:`KubectlClient` (None if unreadable)."""
    try:
        client = json.loads(text).get("clientVersion") or {}
        major, minor = _leading_int(client.get("major")), _leading_int(client.get("minor"))  # "32+" on some builds
    except (ValueError, AttributeError, TypeError):
        return None
    return KubectlClient(path=path, git_version=str(client.get("gitVersion") or f"v{major}.{minor}"),
                         major=major, minor=minor)


def _leading_int(value: object) -> int:
    match = _MINOR.match(str(value or ""))
    if match is None:
        raise ValueError(f"not a version number: {value!r}")
    return int(match.group(1))


def read_local_kubectl(path: str | None = None) -> KubectlClient | None:
    """The kubectl on PATH (or at ``path``): runs a process, so call it off the event loop."""
    binary = path or shutil.which("kubectl")
    if not binary:
        return None
    try:
        done = subprocess.run([binary, "version", "--client", "-o", "json"], capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_client_version(done.stdout, binary) if done.returncode == 0 else None

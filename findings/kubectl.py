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

:func:`kubectl_check` combines that with the discovery probe's figures (this
cluster's group-versions, the measured per-request latency replayed behind
kubectl's limits) into one finding.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess

from crdscope.probes.discovery import DiscoverySample

from .model import Finding, Severity
from .observations import Observations, fmt_seconds
from .spec import CheckSpec

VERSION_TIMEOUT_SECONDS = 10.0
_MINOR = re.compile(r"(\d+)")
#: Below this many group-versions a fast cold discovery is not worth a finding.
SMALL_CLUSTER_GROUP_VERSIONS = 50


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


def estimate_cold_discovery(kubectl: KubectlClient, discovery: DiscoverySample) -> tuple[float | None, str]:
    """Seconds the next cold discovery of ``kubectl`` takes on this cluster, and how it was worked out."""
    served = discovery.format
    gvs = discovery.group_versions
    if served in kubectl.aggregated_versions:
        cold = discovery.cold_seconds
        if cold is not None:
            return cold, (f"aggregated discovery {served}: 2 requests (/api, /apis), a full GET measured at "
                          f"{fmt_seconds(cold)} (discovery.cold_seconds)")
        seconds = discovery.seconds
        return seconds, (f"aggregated discovery {served}: 2 requests; discovery.seconds = {fmt_seconds(seconds)} "
                         "(a conditional GET: a cold client downloads the whole document, so more)")
    for model in discovery.client_models or ():
        if model.qps == kubectl.qps and model.burst == kubectl.burst:
            why = ("this server does not serve aggregated discovery" if served in ("", "legacy")
                   else f"this kubectl does not ask for aggregated {served}")
            return model.seconds, (f"{why}: a walk of 2 + {gvs} requests replayed behind {kubectl.qps:g} QPS / "
                                   f"burst {kubectl.burst} from the measured per-request latencies "
                                   f"(discovery.client_models[{model.name}]: {fmt_seconds(model.seconds)}, "
                                   f"{fmt_seconds(model.waited_seconds)} of it waiting for tokens)")
    return None, "needs a legacy discovery walk measured first (discovery.client_models is empty)"


def kubectl_check(obs: Observations) -> list[Finding]:
    """How the local kubectl's next cold discovery fares on this cluster."""
    kubectl = obs.kubectl
    discovery = obs.good(DiscoverySample)
    if kubectl is None or discovery is None:
        return []
    modelled, how = estimate_cold_discovery(kubectl, discovery)
    seconds, measured = _measured(obs.kubectl_measured, modelled)
    if seconds is None:
        return []
    budget = obs.thresholds.discovery_seconds_warn
    if seconds <= budget and discovery.group_versions < SMALL_CLUSTER_GROUP_VERSIONS:
        return []  # a small cluster's discovery is no news
    ttl = "10 minutes" if kubectl.cache_ttl_seconds < 3600 else "6 hours"
    severity = Severity.WARNING if seconds > budget else Severity.INFO
    verdict = "slow" if seconds > budget else "fine"
    return [Finding(
        "kubectl-discovery", severity,
        f"your kubectl {kubectl.git_version}: next cold discovery about {fmt_seconds(seconds)} ({verdict}), "
        f"cache expires every {ttl}",
        (f"local kubectl: {kubectl.describe()}", *measured, how if not measured else f"modelled: {how}",
         f"discovery.group_versions = {discovery.group_versions}; budget {budget:g} s "
         "(thresholds.discovery_seconds_warn)"),
        "kubectl discovers every group-version before its first command after the cache expires; behind its "
        "client-side rate limit a walk of hundreds of group-versions waits for tokens"
        + ("; kubectl up to 1.23 also keeps the cache only 10 minutes" if kubectl.minor <= 23 else ""),
        "use kubectl 1.30 or newer (aggregated discovery v2, 50/300, 6 h cache) against a server that serves "
        "aggregated discovery; fewer CRDs mean fewer group-versions")]


def _measured(measurement: KubectlMeasurement | None,
              modelled: float | None) -> tuple[float | None, tuple[str, ...]]:
    """The figure the finding states (a real run beats the model) and the evidence lines for it."""
    if measurement is None:
        return modelled, ()
    if measurement.seconds is not None:
        return measurement.seconds, (f"measured: kubectl api-resources with an empty --cache-dir took "
                                     f"{fmt_seconds(measurement.seconds)} in this run (process start, "
                                     "discovery, its disk cache written)",)
    if measurement.unfinished_after is not None:
        return max(modelled or 0.0, measurement.unfinished_after), (
            f"measured: kubectl api-resources with an empty --cache-dir had not finished after "
            f"{fmt_seconds(measurement.unfinished_after)} (stopped there)",)
    return modelled, (f"not measured: {measurement.error}",) if measurement.error else ()


#: Not among the engine's default checks: a front end adds it once it knows the local kubectl.
KUBECTL_DISCOVERY_CHECK = CheckSpec(
    kubectl_check, "your kubectl's next cold discovery", probes=(DiscoverySample,),
    thresholds=("discovery_seconds_warn",), constants=("SMALL_CLUSTER_GROUP_VERSIONS",))

"""The finding "your kubectl's next cold discovery": the local kubectl's limits on this cluster.

:func:`kubectl_check` combines what :mod:`findings.kubectl` knows of the local kubectl (its QPS and
burst, its cache's lifetime, which aggregated discovery it asks for) with the discovery probe's
figures (this cluster's group-versions, the measured per-request latency replayed behind kubectl's
limits) into one finding.

Discovery seconds are judged here only (:data:`DISCOVERY_SECONDS`): this finding, the events log's
"discovery over budget" line (:data:`DISCOVERY_BUDGET`, the kubectl 1.24+ client model) and the
discovery panel's colours of the client models all ask it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from crdscope.base.samples.discovery import ClientModel, DiscoverySample

from crdscope.findings.kubectl import KubectlClient, KubectlMeasurement
from .model import Finding, Severity
from .observations import Observations, fmt_seconds
from .spec import CheckSpec, EventRule, Holding, Judgement, Judging, Said

#: Below this many group-versions a fast cold discovery is not worth a finding.
SMALL_CLUSTER_GROUP_VERSIONS = 50
#: The kubectl >= 1.24 client model (QPS 50, burst 300): the discovery budget people feel.
KUBECTL_124_QPS, KUBECTL_124_BURST = 50.0, 300.0

#: A client's cold discovery, against the budget people feel.
DISCOVERY_SECONDS = Judgement("a client's cold discovery, seconds", "discovery_seconds_warn")


def kubectl_124_seconds(models: Iterable[ClientModel]) -> float | None:
    """Seconds of the kubectl >= 1.24 client model among a discovery sample's (None when absent)."""
    models = list(models)
    found = next((m for m in models if m.qps == KUBECTL_124_QPS and m.burst == KUBECTL_124_BURST), None) or \
        next((m for m in models if "kubectl" in m.name and "1.24" in m.name), None)
    if found is None or not isinstance(found.seconds, (int, float)) or not math.isfinite(found.seconds):
        return None  # absent, or a recording's odd figure
    return float(found.seconds)


def _over_budget(judging: Judging[DiscoverySample]) -> Holding:
    seconds = kubectl_124_seconds(judging.sample.client_models)
    if seconds is None:
        return None
    if not DISCOVERY_SECONDS.crossed(seconds, judging.thresholds):
        return {}
    budget = DISCOVERY_SECONDS.limit(judging.thresholds)
    return {"": Said(DISCOVERY_SECONDS.severity,
                     f"discovery over budget: kubectl 1.24+ would take {seconds:.1f} s (> {budget:g} s)")}


def _within_budget(_key: str, judging: Judging[DiscoverySample]) -> str:
    seconds = kubectl_124_seconds(judging.sample.client_models) or 0.0
    return f"discovery within budget again: kubectl 1.24+ {seconds:.1f} s"


#: The events log's line while the kubectl 1.24+ client model's cold discovery is over budget.
DISCOVERY_BUDGET = EventRule(DiscoverySample, "discovery-over-budget", "discovery-within-budget", _over_budget,
                             _within_budget, judgements=(DISCOVERY_SECONDS,),
                             constants=("KUBECTL_124_QPS", "KUBECTL_124_BURST"))


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
    budget = DISCOVERY_SECONDS.limit(obs.thresholds)
    slow = DISCOVERY_SECONDS.crossed(seconds, obs.thresholds)
    if not slow and discovery.group_versions < SMALL_CLUSTER_GROUP_VERSIONS:
        return []  # a small cluster's discovery is no news
    ttl = "10 minutes" if kubectl.cache_ttl_seconds < 3600 else "6 hours"
    severity = DISCOVERY_SECONDS.severity if slow else Severity.INFO
    verdict = "slow" if slow else "fine"
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
    thresholds=("discovery_seconds_warn",), constants=("SMALL_CLUSTER_GROUP_VERSIONS",), kinds=("kubectl-discovery",),
    judgements=(DISCOVERY_SECONDS,), events=(DISCOVERY_BUDGET,))

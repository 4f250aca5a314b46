"""Health figures from a Prometheus server, for control planes that hide ``/metrics``.

Managed clusters (GKE, AKS) expose the API server's figures only through their
managed Prometheus; self-hosted ones often scrape kubelets (cAdvisor) and
kube-state-metrics.  :class:`PrometheusSource` asks a Prometheus server, through
``prometheus-api-client`` (blocking ``requests``: always run in a thread), for:

======================  =====================================================================
figure                  query (what must be scraped for it to exist)
======================  =====================================================================
``working_set_bytes``   ``container_memory_working_set_bytes{container="kube-apiserver"}``
                        (kubelet/cAdvisor; a pod's working set, not the process's RSS)
``pod_restarts``        ``kube_pod_container_status_restarts_total{namespace="kube-system",
                        container="kube-apiserver"}`` (kube-state-metrics, per pod)
``oom_killed_pods``     ``kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}``
                        (kube-state-metrics: the pods whose API server was last OOM-killed)
``memory_limit_bytes``  ``kube_pod_container_resource_limits{resource="memory",container=
                        "kube-apiserver"}`` (kube-state-metrics), else cAdvisor's
                        ``container_spec_memory_limit_bytes`` (0 or huge: no limit); the
                        smallest over the replicas (the first to be OOM-killed)
process figures         ``process_resident_memory_bytes``, ``process_start_time_seconds``,
                        ``go_memstats_heap_inuse_bytes``, ``go_goroutines``, ``process_open_fds``
                        with ``job=~"apiserver|kube-apiserver"`` (the API server's own
                        ``/metrics`` scraped by that Prometheus: the fallback)
======================  =====================================================================

Several API server instances (HA) give several series: a figure is the
largest of them (memory) or their sum (restarts), and :attr:`PrometheusReading.sources`
says which query and how many series each figure came from.  What returns no
series is reported in :attr:`PrometheusReading.unobservable` with the reason.

What a managed control plane offers only through Prometheus (issue 17) is read
too, into :class:`PrometheusFigures` (``figures``), as PromQL over the series
the API server exports (``J`` = ``job=~"apiserver|kube-apiserver"``):

=========================  ==================================================================
per-instance figures       the process metrics above, one set per ``instance`` label
per-instance restarts      ``changes(process_start_time_seconds{J}[RESTART_WINDOW])``
                           (an instance whose address changes with a new pod is a new instance)
APF rejections             ``sum by (priority_level) (apiserver_flowcontrol_rejected_requests_total{J})``
                           and its ``rate(...[5m])``
APF queueing               ``sum by (priority_level) (apiserver_flowcontrol_current_inqueue_requests{J})``
latency p99 by verb        ``histogram_quantile(0.99, sum by (verb, le)
                           (increase(apiserver_request_duration_seconds_bucket{J}[5m])))``,
                           WATCH and CONNECT left out (they last as long as the client wants);
                           with no window, the buckets since each process started
=========================  ==================================================================

Sums and quantiles are over every instance (the whole control plane).  Where
``/metrics`` is readable the throttling and latency probes show its figures (the
replica that answered each scrape); these stay in the health sample's
``prometheus`` field, which says so in ``shown``.
"""

from __future__ import annotations

from crdscope.base.samples.health import InstanceFigures, PrometheusFigures, RATE_WINDOW

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from crdscope.base.errors import ConfigError

from .metrics import PROCESS_FAMILIES

#: Jobs under which common setups scrape the API server's own /metrics.
APISERVER_JOBS = "apiserver|kube-apiserver"
CONTAINER = "kube-apiserver"
#: The container's memory limit: kube-state-metrics' and cAdvisor's series (cAdvisor writes 0 for none).
LIMIT_METRICS = ("kube_pod_container_resource_limits", "container_spec_memory_limit_bytes")
CONTAINER_QUERY = (
    '{__name__=~"container_memory_working_set_bytes|kube_pod_container_status_restarts_total|'
    'kube_pod_container_status_last_terminated_reason|'
    f'{"|".join(LIMIT_METRICS)}",container="{CONTAINER}"}}'
)
#: Above this a "limit" means none (cAdvisor reports the page-rounded maximum of an unlimited cgroup).
UNLIMITED_BYTES = float(1 << 60)
#: health field -> process metric queried per instance (not the fd limit: a setting, not a figure).
PROCESS_METRICS = {name: family for name, family in PROCESS_FAMILIES.items() if name != "max_fds"}
QUERY_TIMEOUT_SECONDS = 10
RESTART_WINDOW = "1h"
APF_REJECTED = "apiserver_flowcontrol_rejected_requests_total"
APF_INQUEUE = "apiserver_flowcontrol_current_inqueue_requests"
REQUEST_DURATION = "apiserver_request_duration_seconds_bucket"


def process_query(jobs: str = APISERVER_JOBS) -> str:
    """One PromQL selector for every process metric of the API server's jobs."""
    names = "|".join(PROCESS_METRICS.values())
    return f'{{__name__=~"{names}",job=~"{jobs}"}}'


def redacted(url: str) -> str:
    """``scheme://host:port`` of a URL: user names and passwords never reach messages."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "the Prometheus URL"
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}"


def figure_queries(jobs: str = APISERVER_JOBS, window: str | None = RATE_WINDOW) -> dict[str, str]:
    """figure -> PromQL over the API server's own series (``window`` None: since each process started)."""
    selector = f'job=~"{jobs}"'
    buckets = f'{REQUEST_DURATION}{{{selector},verb!~"WATCH|CONNECT"}}'
    latency_input = f"increase({buckets}[{window}])" if window else buckets
    return {
        "restarts": f"changes(process_start_time_seconds{{{selector}}}[{RESTART_WINDOW}])",
        "apf_rejected_total": f"sum by (priority_level) ({APF_REJECTED}{{{selector}}})",
        "apf_rejected_per_s": f"sum by (priority_level) (rate({APF_REJECTED}{{{selector}}}[{window or RATE_WINDOW}]))",
        "apf_inqueue": f"sum by (priority_level) ({APF_INQUEUE}{{{selector}}})",
        "latency_p99_seconds": f"histogram_quantile(0.99, sum by (verb, le) ({latency_input}))",
    }


@dataclass(frozen=True)
class PrometheusReading:
    """What one round of queries found: figures, where each came from, what is missing."""

    timestamp: float
    values: dict[str, float] = field(default_factory=dict)
    pod_restarts: dict[str, int] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    unobservable: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    figures: PrometheusFigures | None = None
    #: API server pods whose container last terminated with reason OOMKilled.
    oom_killed_pods: tuple[str, ...] = ()


class PrometheusSource:
    """Reads the API server's health figures from a Prometheus server (see the module doc)."""

    def __init__(self, url: str, *, jobs: str = APISERVER_JOBS, timeout: float = QUERY_TIMEOUT_SECONDS,
                 min_interval: float = 15.0, window: str | None = RATE_WINDOW) -> None:
        from urllib3.util.retry import Retry
        from prometheus_api_client import PrometheusConnect

        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--prometheus wants an http:// or https:// URL, not {url.split('@')[-1]!r}")
        self.url = url.rstrip("/")
        self.jobs = jobs
        self.window = window
        self.min_interval = min_interval
        self.last: PrometheusReading | None = None
        # One quick retry: the health probe asks again on its own cadence.
        self._client = PrometheusConnect(url=self.url, timeout=timeout,
                                         retry=Retry(total=1, backoff_factor=0.2, status_forcelist=(502, 503, 504)))

    async def read(self, max_age: float | None = None) -> PrometheusReading:
        """The figures (cached for ``max_age``, default :attr:`min_interval`: Prometheus scrapes
        every 15-60 s, asking more often only repeats its answer)."""
        max_age = self.min_interval if max_age is None else max_age
        last = self.last
        if last is not None and time.time() - last.timestamp <= max_age:
            return last
        reading = await asyncio.to_thread(self._read_blocking)
        self.last = reading
        return reading

    def close(self) -> None:
        self._client.close()

    # -- blocking part (runs in a thread) -------------------------------------------------
    def _query(self, query: str) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self._client.custom_query(query)
        return answer

    def _read_blocking(self) -> PrometheusReading:
        import requests
        from prometheus_api_client.exceptions import PrometheusApiClientException

        stamp = time.time()
        try:
            container = self._query(CONTAINER_QUERY)
            process = self._query(process_query(self.jobs))
            answers = {name: self._query(query) for name, query in figure_queries(self.jobs, self.window).items()}
        except requests.RequestException as exc:
            return self._failed(stamp, f"cannot query Prometheus at {redacted(self.url)}: {_reason(exc)}")
        except PrometheusApiClientException as exc:
            return self._failed(stamp, f"Prometheus at {redacted(self.url)} refused the query: "
                                       f"{str(exc).splitlines()[0][:160]}")
        except (ValueError, KeyError) as exc:
            return self._failed(stamp, f"Prometheus at {redacted(self.url)} answered something else "
                                       f"than a query result ({type(exc).__name__})")
        reading = self._interpret(stamp, container, process)
        return dataclasses.replace(reading, figures=self._figures(process, answers))

    def _figures(self, process: list[dict[str, Any]], answers: dict[str, list[dict[str, Any]]]) -> PrometheusFigures:
        """Per-instance figures, APF and latency from the query answers."""
        per_instance: dict[str, dict[str, float]] = {}
        names = {metric: name for name, metric in PROCESS_METRICS.items()}
        for series in process:
            labels = series["metric"]
            value = _value(series)
            name = names.get(labels.get("__name__", ""))
            if value is not None and name:
                per_instance.setdefault(labels.get("instance", "?"), {})[name] = value
        for series in answers["restarts"]:
            value = _value(series)
            if value is not None:
                per_instance.setdefault(series["metric"].get("instance", "?"), {})["restarts"] = value
        instances = tuple(
            InstanceFigures(instance, rss_bytes=_whole(values.get("rss_bytes")),
                            heap_bytes=_whole(values.get("heap_bytes")), goroutines=_whole(values.get("goroutines")),
                            open_fds=_whole(values.get("open_fds")), start_time=values.get("start_time"),
                            restarts=_whole(values.get("restarts")))
            for instance, values in sorted(per_instance.items()))
        return PrometheusFigures(
            instances=instances,
            apf_rejected_total=_by(answers["apf_rejected_total"], "priority_level"),
            apf_rejected_per_s=_by(answers["apf_rejected_per_s"], "priority_level"),
            apf_inqueue=_by(answers["apf_inqueue"], "priority_level"),
            latency_p99_seconds=_by(answers["latency_p99_seconds"], "verb"),
            window=self.window or "",
            queries=figure_queries(self.jobs, self.window),
        )

    def _failed(self, stamp: float, message: str) -> PrometheusReading:
        reasons = dict.fromkeys(("working_set_bytes", "pod_restarts", "memory_limit_bytes", *PROCESS_METRICS), message)
        return PrometheusReading(stamp, unobservable=reasons, error=message)

    def _interpret(self, stamp: float, container: list[dict[str, Any]],
                   process: list[dict[str, Any]]) -> PrometheusReading:
        values: dict[str, float] = {}
        sources: dict[str, str] = {}
        unobservable: dict[str, str] = {}
        pod_restarts: dict[str, int] = {}
        oom_killed: set[str] = set()

        working_sets = [value for s in container
                        if s["metric"].get("__name__") == "container_memory_working_set_bytes"
                        and (value := _value(s)) is not None]
        if working_sets:
            values["working_set_bytes"] = max(working_sets)
            sources["working_set_bytes"] = (f'prometheus: container_memory_working_set_bytes{{container="{CONTAINER}"}}'
                                            f" (largest of {len(working_sets)} series)")
        else:
            unobservable["working_set_bytes"] = (
                f'Prometheus has no container_memory_working_set_bytes{{container="{CONTAINER}"}} '
                "(no kubelet/cAdvisor scrape, or the API server does not run as a pod)")

        for series in container:
            labels = series["metric"]
            if labels.get("namespace") != "kube-system":
                continue
            if (labels.get("__name__") == "kube_pod_container_status_last_terminated_reason"
                    and labels.get("reason") == "OOMKilled" and _value(series) == 1):
                oom_killed.add(labels.get("pod", "?"))
            if labels.get("__name__") != "kube_pod_container_status_restarts_total":
                continue
            value = _value(series)
            if value is not None:
                pod = labels.get("pod", "?")
                pod_restarts[pod] = pod_restarts.get(pod, 0) + int(value)
        if pod_restarts:
            sources["pod_restarts"] = ('prometheus: kube_pod_container_status_restarts_total'
                                       f'{{namespace="kube-system",container="{CONTAINER}"}}')
        else:
            unobservable["pod_restarts"] = (
                "Prometheus has no kube_pod_container_status_restarts_total for kube-system "
                f"{CONTAINER} pods (no kube-state-metrics, or a managed control plane)")

        _memory_limit(container, values, sources, unobservable)
        by_name: dict[str, list[float]] = {}
        for series in process:
            value = _value(series)
            if value is not None:
                by_name.setdefault(series["metric"].get("__name__", ""), []).append(value)
        for field_name, metric in PROCESS_METRICS.items():
            found = by_name.get(metric)
            if found:
                # The newest process (start time) or the largest figure across instances.
                values[field_name] = max(found)
                sources[field_name] = f'prometheus: {metric}{{job=~"{self.jobs}"}} (largest of {len(found)} series)'
            else:
                unobservable[field_name] = (f'Prometheus has no {metric}{{job=~"{self.jobs}"}} '
                                            "(it does not scrape the API server's /metrics under that job)")
        return PrometheusReading(stamp, values, pod_restarts, sources, unobservable,
                                 oom_killed_pods=tuple(sorted(oom_killed)))


def _memory_limit(container: list[dict[str, Any]], values: dict[str, float], sources: dict[str, str],
                  unobservable: dict[str, str]) -> None:
    """The API server container's memory limit (kube-state-metrics first, then cAdvisor)."""
    for metric in LIMIT_METRICS:
        limits = [value for series in container
                  if series["metric"].get("__name__") == metric
                  and series["metric"].get("resource", "memory") == "memory"
                  and (value := _value(series)) is not None and 0 < value < UNLIMITED_BYTES]
        if limits:
            values["memory_limit_bytes"] = min(limits)
            sources["memory_limit_bytes"] = (f'prometheus: {metric}{{container="{CONTAINER}"}} '
                                             f"(smallest of {len(limits)} series)")
            return
    unobservable["memory_limit_bytes"] = (
        f"Prometheus shows no memory limit for {CONTAINER} (no kube-state-metrics or cAdvisor series, "
        "or the container has none)")


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _by(answer: list[dict[str, Any]], label: str) -> dict[str, float]:
    """label value -> value of a ``sum by (label)`` answer (NaN, e.g. a quantile of nothing, left out)."""
    return {series["metric"].get(label, ""): value for series in answer
            if (value := _value(series)) is not None}


def _value(series: dict[str, Any]) -> float | None:
    try:
        value = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _reason(exc: BaseException) -> str:
    text = str(exc)
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    if "timed out" in text.lower():
        return "timed out"
    if "Name or service not known" in text:
        return "unknown host"
    return type(exc).__name__

"""API request latency: timed canary requests and the server's own histograms, against the SLOs.

Two views of the same question (are ordinary requests getting slow?):

* Canaries, timed end to end from here on the probe's cadence: a cheap read
  (``GET /version``), a single-object read (the ``default`` namespace), a
  cluster-scope list of CRDs and a list of one custom resource kind, each
  ``?limit=1``.  The custom resource kind is taken from the CRD watch,
  preferring one crdscope created; note that the first list of a kind makes
  the server allocate that kind's storage (etcd client, watch cache), so the
  canary costs the server that one kind's memory.  Each canary keeps a
  rolling p50/p99 over :data:`WINDOW_SECONDS`.
* The server's ``apiserver_request_sli_duration_seconds`` (or, on servers
  without it, ``apiserver_request_duration_seconds``) histograms, summed over
  resources per verb and scope, differenced between the newest scrape and one
  about :data:`WINDOW_SECONDS` old, and read as p99 next to the Kubernetes API
  call latency SLOs: mutating calls and single-object reads 1 s, namespace
  lists 5 s, cluster lists 30 s.  Watches, CONNECT and non-resource requests
  (``/metrics``, ``/readyz``: empty scope) have no SLO and are left out.
"""

from __future__ import annotations

from crdscope.base.samples.latency import Canary, LatencySample

import asyncio
from typing import TYPE_CHECKING, Any
import time
from collections import deque
from collections.abc import Awaitable, Callable

import httpx

from crdscope.connection.cluster import Cluster, explain, status_message
from crdscope.connection.crdwatch import CRD_PATH, MANAGED_BY_LABEL, MANAGED_BY_VALUE, THREAD_DECODE_BYTES, CRDRecord
from crdscope.connection.metrics import (SHARED_SCRAPE_AGE, MetricsSource, Scrape, buckets, delta_buckets,
                                         histogram_quantile, merge_buckets)
from .replicas import KEEP_SLOTS, PROCESS_FAMILY, process_of, start_time_of
from crdscope.base.samples import percentile
from crdscope.connection.transport import TRANSPORT_ERRORS

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from .probe import ProbeParts

#: The SLOs are defined over 5 minutes; rolling canary percentiles use the same window.
WINDOW_SECONDS = 300.0
SLI_FAMILY = "apiserver_request_sli_duration_seconds"
DURATION_FAMILY = "apiserver_request_duration_seconds"
LATENCY_FAMILIES = (SLI_FAMILY, DURATION_FAMILY)
MUTATING_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "APPLY"})
UNTIMED_VERBS = frozenset({"WATCH", "WATCHLIST", "CONNECT"})
CANARY_TIMEOUT = httpx.Timeout(connect=5.0, read=35.0, write=10.0, pool=10.0)
#: canary name -> (path, SLO seconds or None); "list_cr" is filled from the CRD watch.
CANARIES: dict[str, tuple[str, float | None]] = {
    "version": ("/version", None),
    "get_namespace": ("/api/v1/namespaces/default", 1.0),
    "list_crds": (f"{CRD_PATH}?limit=1", 30.0),
    "list_cr": ("", 30.0),
}


def slo_seconds(verb: str, scope: str) -> float | None:
    """The Kubernetes latency SLO of a (verb, scope), or None when it has none."""
    if scope == "resource" and (verb in MUTATING_VERBS or verb == "GET"):
        return 1.0
    if verb == "LIST" and scope == "namespace":
        return 5.0
    if verb == "LIST" and scope == "cluster":
        return 30.0
    return None


# --------------------------------------------------------------------------- server-side histograms

#: "VERB scope" -> cumulative buckets summed over resources
Reduced = dict[str, list[tuple[float, float]]]
#: "VERB scope resource" -> requests slower than that verb and scope's SLO so far (only those with any:
#: a healthy server has none, so this stays small where the buckets per resource would not).
OverSlo = dict[str, float]
#: Resources a breached verb and scope names: those with the most requests over its SLO in the window.
NAMED_RESOURCES = 3


def reduce_scrape(scrape: Scrape) -> tuple[str, Reduced, OverSlo]:
    """The request-latency histogram of a scrape, summed per "VERB scope" (family used, buckets), and the
    requests over the SLO per resource."""
    family = SLI_FAMILY if scrape.has(SLI_FAMILY + "_bucket") else DURATION_FAMILY
    grouped: dict[str, list[list[tuple[float, float]]]] = {}
    over: OverSlo = {}
    for key, series in buckets(scrape, family).items():
        labels = dict(key)
        verb, scope = labels.get("verb", ""), labels.get("scope", "")
        if not scope or verb in UNTIMED_VERBS:
            continue
        grouped.setdefault(f"{verb} {scope}", []).append(series)
        slo = slo_seconds(verb, scope)
        slower = series[-1][1] - max((count for bound, count in series if bound <= slo), default=0.0) if slo else 0.0
        if slower > 0:
            name = f"{verb} {scope} {resource_name(labels)}"
            over[name] = over.get(name, 0.0) + slower  # a resource's versions (and components) added
    return family, {name: merge_buckets(series) for name, series in grouped.items()}, over


def resource_name(labels: dict[str, str]) -> str:
    """``widgets.example.io`` (``namespaces`` for the core group), ``/status`` after a subresource."""
    resource, group, sub = labels.get("resource", ""), labels.get("group", ""), labels.get("subresource", "")
    return (f"{resource}.{group}" if group else resource) + (f"/{sub}" if sub else "")


def slowest_resources(newer: OverSlo, older: OverSlo | None, breached: tuple[str, ...]) -> dict[str, int]:
    """Per breached "VERB scope", the :data:`NAMED_RESOURCES` resources with the most requests over its SLO
    between two scrapes ("VERB scope resource" -> requests; a counter reset keeps ``newer``)."""
    before = older or {}
    if any(count < before.get(name, 0.0) for name, count in newer.items()):
        before = {}
    grew = {name: int(count - before.get(name, 0.0)) for name, count in newer.items()}
    named: dict[str, int] = {}
    for key in breached:
        mine = sorted(((n, c) for n, c in grew.items() if c > 0 and n.startswith(key + " ")), key=lambda nc: -nc[1])
        named.update(mine[:NAMED_RESOURCES])
    return named


def window_p99(newer: Reduced, older: Reduced | None) -> tuple[dict[str, float], dict[str, float], dict[str, int]]:
    """p99 per "VERB scope" and per verb, and request counts, between two reduced scrapes."""
    deltas = {name: delta_buckets(series, (older or {}).get(name)) for name, series in newer.items()}
    by_scope: dict[str, float] = {}
    counts: dict[str, int] = {}
    per_verb: dict[str, list[list[tuple[float, float]]]] = {}
    for name, delta in deltas.items():
        total = delta[-1][1] if delta else 0.0
        if total <= 0:
            continue
        counts[name] = int(total)
        p99 = histogram_quantile(0.99, delta)
        if p99 is not None:
            by_scope[name] = p99
        per_verb.setdefault(name.split(" ")[0], []).append(delta)
    by_verb = {}
    for verb, series in per_verb.items():
        p99 = histogram_quantile(0.99, merge_buckets(series))
        if p99 is not None:
            by_verb[verb] = p99
    return by_verb, by_scope, counts


def breaches(p99_by_verb_scope: dict[str, float]) -> tuple[dict[str, float], tuple[str, ...]]:
    """The SLO of each "VERB scope" and those whose p99 is over it."""
    slos = {}
    over = []
    for name, p99 in sorted(p99_by_verb_scope.items()):
        verb, _, scope = name.partition(" ")
        slo = slo_seconds(verb, scope)
        if slo is None:
            continue
        slos[name] = slo
        if p99 > slo:
            over.append(name)
    return slos, tuple(over)


# --------------------------------------------------------------------------- the probe


def pick_custom_resource(crds: dict[str, CRDRecord], current: str = "") -> CRDRecord | None:
    """An Established CRD to list: keep the current one while it lasts, else prefer crdscope's."""
    if current in crds and crds[current].state == "Established":
        return crds[current]
    ready = [r for r in crds.values() if r.state == "Established" and r.served_versions]
    ready.sort(key=lambda r: (not r.managed_by_crdscope, r.name))
    return ready[0] if ready else None


def custom_resource_path(record: CRDRecord) -> str:
    """``?limit=1`` list path of a CRD's kind (its storage version when served)."""
    version = record.storage_version if record.storage_version in record.served_versions else record.served_versions[0]
    return f"/apis/{record.group}/{version}/{record.plural}?limit=1"


class LatencyProbe(ProbeBase):
    """Canaries plus windowed server-side p99 (state: canary history and past reduced scrapes)."""

    name = "latency"
    #: Four canary requests per run: every 15 s while busy (budget 16/min; a hang of 20 s then always
    #: catches a round of canaries), every minute when idle.
    pacing = Pacing(busy=15.0, idle=60.0, budget=16.0)

    def __init__(self, cluster: Cluster, metrics: MetricsSource, *,
                 pick_cr: Callable[[], Awaitable[tuple[CRDRecord | None, str]]], cadence: float | None = None,
                 window: float = WINDOW_SECONDS) -> None:
        self.cluster = cluster
        self.metrics = metrics
        if cadence is not None:  # a one-shot run: its own age for the shared scrape
            self.cadence = cadence
        self.window = window
        self._pick_cr = pick_cr  # -> (a CRD to list, or None and why)
        self._times: dict[str, deque[tuple[float, float]]] = {name: deque() for name in CANARIES}
        #: Scrapes kept per API server process: behind a balancer, windows never mix two replicas.
        self._histories: dict[int | None, deque[tuple[float, Reduced, OverSlo]]] = {}
        self.cr_name = ""
        metrics.want(*LATENCY_FAMILIES, PROCESS_FAMILY)

    async def run(self) -> LatencySample:
        """Send the canaries, then read the server's histograms; failures become fields."""
        record, why_none = await self._pick_cr()
        self.cr_name = record.name if record else ""
        canaries = {}
        for name, (path, slo) in CANARIES.items():
            if name == "list_cr":
                if record is None:
                    canaries[name] = Canary(error=why_none, slo_seconds=slo)
                    continue
                path = custom_resource_path(record)
            canaries[name] = await self._canary(name, path, slo)
        scrape = await self.metrics.scrape(max_age=self.cadence * SHARED_SCRAPE_AGE)
        now = time.time()
        unobservable: dict[str, str] = {}
        family, window = "", None
        process = start_time_of(scrape)
        by_verb: dict[str, float] = {}
        by_scope: dict[str, float] = {}
        counts: dict[str, int] = {}
        slower: tuple[OverSlo, OverSlo | None] = ({}, None)
        if scrape.ok:
            family, reduced, over_slo = reduce_scrape(scrape)
            baseline = self._remember(scrape.timestamp, reduced, process_of(scrape), over_slo)
            if baseline is None:
                unobservable["p99_by_verb"] = "needs a second /metrics scrape (a window between two)"
            else:
                window = scrape.timestamp - baseline[0]
                by_verb, by_scope, counts = window_p99(reduced, baseline[1])
                slower = (over_slo, baseline[2])
        else:
            unobservable["p99_by_verb"] = scrape.error or "/metrics failed"
        slos, over = breaches(by_scope)
        canary_over = tuple(name for name, c in canaries.items()
                            if c.slo_seconds is not None and c.p99_seconds is not None
                            and c.p99_seconds > c.slo_seconds)
        answered = [c for c in canaries.values() if c.status is not None]
        error = None
        if not answered:
            error = next((c.error for c in canaries.values() if c.error and c.path), "no canary answered")
        return LatencySample(
            timestamp=now, error=error, server=self.cluster.server, canaries=canaries, cr_resource=self.cr_name,
            server_family=family, window_seconds=window, p99_by_verb=by_verb, p99_by_verb_scope=by_scope,
            requests_by_verb_scope=counts, slo_seconds=slos, slo_breaches=over, canary_slo_breaches=canary_over,
            requests_over_slo=slowest_resources(*slower, over),
            process_start_time_seconds=process, unobservable=unobservable,
        )

    async def _canary(self, name: str, path: str, slo: float | None) -> Canary:
        started = time.perf_counter()
        status = error = None
        try:
            response = await self.cluster.client.get(path, timeout=CANARY_TIMEOUT)
            status = response.status_code
            if status >= 400:
                error = f"answered {status}: {status_message(response)}"
        except httpx.TimeoutException as exc:
            error = explain(exc, self.cluster.server)
            status = None
        except TRANSPORT_ERRORS as exc:
            return Canary(path=path, error=explain(exc, self.cluster.server), slo_seconds=slo,
                          **self._rolling(name, None))
        seconds = time.perf_counter() - started
        # A timeout counts with the time it took (a lower bound); a refused connection does not count.
        return Canary(path=path, seconds=seconds, status=status, error=error, slo_seconds=slo,
                      **self._rolling(name, seconds))

    def _rolling(self, name: str, seconds: float | None) -> dict[str, Any]:
        times = self._times[name]
        now = time.monotonic()
        if seconds is not None:
            times.append((now, seconds))
        while times and times[0][0] < now - self.window:
            times.popleft()
        values = [s for _, s in times]
        return {"p50_seconds": percentile(values, 50), "p99_seconds": percentile(values, 99), "count": len(values)}

    async def prime(self) -> None:
        """Take the first scrape now, so that the next run has a window to compare."""
        scrape = await self.metrics.scrape()
        if scrape.ok:
            _, reduced, over_slo = reduce_scrape(scrape)
            self._remember(scrape.timestamp, reduced, process_of(scrape), over_slo)

    def _remember(self, stamp: float, reduced: Reduced, process: int | None = None,
                  over_slo: OverSlo | None = None) -> tuple[float, Reduced, OverSlo] | None:
        """Keep this scrape; return the oldest one of the same process kept within the window (None on the first)."""
        history = self._histories.setdefault(process, deque())
        while len(self._histories) > KEEP_SLOTS:
            oldest = min(self._histories, key=lambda key: self._histories[key][-1][0] if self._histories[key] else 0.0)
            del self._histories[oldest]
        if not history or stamp > history[-1][0]:  # the shared scrape may be one already seen
            history.append((stamp, reduced, over_slo or {}))
        # Drop scrapes older than needed: keep the newest one that is at least a window old.
        while len(history) > 2 and history[1][0] <= stamp - self.window:
            history.popleft()
        return history[0] if len(history) > 1 else None


# --------------------------------------------------------------------------- wiring


def make_probe(monitor: ProbeParts) -> LatencyProbe:
    """The latency probe on the monitor's cluster, shared scrape and CRD watch."""
    probe: LatencyProbe

    async def pick() -> tuple[CRDRecord | None, str]:
        record = pick_custom_resource(monitor.crds.crds, probe.cr_name)
        if record is not None:
            return record, ""
        if not monitor.crds.status.synced:
            return None, f"the CRD watch has not listed yet ({monitor.crds.status.last_error or 'starting'})"
        return None, "no Established CRD to list"

    probe = LatencyProbe(monitor.cluster, monitor.metrics, pick_cr=pick,
                         window=monitor.settings.cadences.latency_window)
    return probe


async def first_custom_resource(cluster: Cluster) -> tuple[CRDRecord | None, str]:
    """One Established CRD from the server (crdscope's first), without a watch; or None and why."""
    from crdscope.connection.crdwatch import record_from

    # limit=1: a Crossplane CRD can weigh megabytes.
    choices: tuple[dict[str, str | int], ...] = (
        {"labelSelector": f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}", "limit": 1}, {"limit": 1})
    for params in choices:
        try:
            response = await cluster.client.get(CRD_PATH, params=params)
            if response.status_code != 200:
                return None, f"listing CRDs answered {response.status_code}: {status_message(response)}"
            if len(response.content) > THREAD_DECODE_BYTES:
                body = await asyncio.to_thread(response.json)
            else:
                body = response.json()
            items = body.get("items") or []
        except TRANSPORT_ERRORS as exc:
            return None, explain(exc, cluster.server)
        except ValueError:
            return None, "listing CRDs did not answer JSON"
        records = {r.name: r for r in (record_from(item) for item in items)}
        chosen = pick_custom_resource(records)
        if chosen is not None:
            return chosen, ""
    return None, "no Established CRD to list"


async def once(cluster: Cluster) -> LatencySample:
    """Canaries once, and the server's p99 between a scrape before and one after them."""
    metrics = MetricsSource(cluster)
    probe = LatencyProbe(cluster, metrics, pick_cr=lambda: first_custom_resource(cluster), cadence=0.0)
    await probe.prime()
    return await probe.run()

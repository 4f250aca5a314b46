"""Webhooks: the conversion and admission webhooks the API server calls, as it counts them.

No request of its own: the shared ``/metrics`` scrape (:class:`connection.metrics.MetricsSource`)
and the shared CRD watch, whose records say where each CRD's conversion webhook is
(``CRDRecord.conversion_webhook``).  Read from the scrape:

* ``apiserver_crd_conversion_webhook_duration_seconds{crd_name, from_version, to_version, succeeded}``
  (``apiserver_crd_webhook_conversion_duration_seconds`` on 1.26: both are read), a histogram per
  CRD, grouped here by the webhook the CRD names: conversions, failures and their latency;
* ``apiserver_conversion_webhook_request_total{result, failure_type}`` (1.33 and 1.37 have it, 1.26 not): every
  conversion call, failed ones by type;
* ``apiserver_admission_webhook_admission_duration_seconds``, ``..._rejection_count``,
  ``..._fail_open_count`` and ``..._request_total``, per webhook name.

Counters run from the server's start: what happened *now* is the difference between two scrapes
of one process (kept per process, as the throttling probe does, so that behind a load balancer two
replicas' counters are never subtracted).  A webhook is failing when the newest interval that
counted calls to it counted failed ones; an interval that counted none keeps the verdict (an API
server whose conversion webhook is down keeps counting failures by itself: its watch cache of
the other versions lists again and again).  A webhook never called is never failing: a provider
awaiting activation, or a lab's provider that never runs (the lab has no kubelet).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from crdscope.base.samples.webhooks import MAX_NAMED_CRDS, AdmissionWebhook, ConversionWebhook, WebhooksSample
from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import CRDWatch
from crdscope.connection.metrics import (SHARED_SCRAPE_AGE, MetricsSource, Scrape, buckets, delta_buckets,
                                         histogram_quantile, merge_buckets)

from .probe import Pacing, ProbeBase
from .replicas import KEEP_SLOTS, PROCESS_FAMILY, process_of

if TYPE_CHECKING:
    from .probe import ProbeParts

#: The per-CRD conversion histogram, named twice: 1.26's name, then 1.33's and 1.37's (a fleet mixes minors).
CRD_CONVERSION_FAMILIES = ("apiserver_crd_webhook_conversion_duration_seconds",
                           "apiserver_crd_conversion_webhook_duration_seconds")
CONVERSION_REQUESTS = "apiserver_conversion_webhook_request_total"
ADMISSION_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
ADMISSION_REJECTIONS = "apiserver_admission_webhook_rejection_count"
ADMISSION_FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"
ADMISSION_REQUESTS = "apiserver_admission_webhook_request_total"
FAMILIES = (*CRD_CONVERSION_FAMILIES, CONVERSION_REQUESTS, ADMISSION_DURATION, ADMISSION_REJECTIONS,
            ADMISSION_FAIL_OPEN, ADMISSION_REQUESTS)
#: ``error_type`` of a rejection whose call succeeded: the webhook said no (every other type is a failed call).
NO_ERROR = "no_error"
#: How long a failing verdict stands with no call counted since (an API server whose conversion webhook
#: is down counts failures by itself every few seconds; an admission webhook is called on writes).
VERDICT_HOLD_SECONDS = 600.0
#: Seconds between the two scrapes of :func:`once`: long enough for an interval, short for a CLI.
ONCE_INTERVAL_SECONDS = 2.0

Buckets = tuple[tuple[float, float], ...]


@dataclasses.dataclass(frozen=True)
class Counted:
    """What the server counted of one CRD's conversions or one admission webhook's calls."""

    calls: float = 0.0
    failed: float = 0.0
    #: The latency histogram's cumulative buckets, sorted by bound.
    buckets: Buckets = ()

    def since(self, older: Counted | None) -> Counted:
        """What was counted after ``older`` (everything when it counted nothing, or the counters
        started again)."""
        if older is None:
            return self
        calls, failed = self.calls - older.calls, self.failed - older.failed
        if calls < 0 or failed < 0:
            return self
        return Counted(calls, failed, tuple(delta_buckets(list(self.buckets), list(older.buckets))))


def _add(into: dict[str, float], key: str, value: float) -> None:
    into[key] = into.get(key, 0.0) + value


def _total(counted: Iterable[Counted]) -> Counted:
    """Several counts as one (a webhook's CRDs)."""
    items = list(counted)
    return Counted(sum(c.calls for c in items), sum(c.failed for c in items),
                   tuple(merge_buckets(list(c.buckets) for c in items if c.buckets)))


def p99(counted: Counted | None) -> float | None:
    """The 99th percentile of the calls' latency (None: none timed)."""
    return histogram_quantile(0.99, list(counted.buckets)) if counted is not None else None


# --------------------------------------------------------------------------- reading a scrape


def crd_conversions(scrape: Scrape) -> dict[str, Counted]:
    """CRD name -> its conversions counted since the server started (every version pair, either
    family name), the failed ones (``succeeded="false"``) and their latency buckets."""
    calls: dict[str, float] = {}
    failed: dict[str, float] = {}
    grouped: dict[str, list[list[tuple[float, float]]]] = {}
    for family in CRD_CONVERSION_FAMILIES:
        for labels, value in scrape.series(family + "_count"):
            crd = labels.get("crd_name", "")
            _add(calls, crd, value)
            if labels.get("succeeded") == "false":
                _add(failed, crd, value)
        for key, series in buckets(scrape, family).items():
            grouped.setdefault(dict(key).get("crd_name", ""), []).append(series)
    return {crd: Counted(count, failed.get(crd, 0.0), tuple(merge_buckets(grouped.get(crd, []))))
            for crd, count in calls.items()}


def conversion_requests(scrape: Scrape) -> tuple[int | None, dict[str, int]]:
    """Every conversion webhook call counted, and the failed ones by failure type (None and empty
    where the server has no such counter: 1.26, or any server before its first call)."""
    series = scrape.series(CONVERSION_REQUESTS)
    if not series:
        return None, {}
    failures: dict[str, float] = {}
    for labels, value in series:
        if labels.get("result") != "success":
            _add(failures, labels.get("failure_type") or "unknown", value)
    return int(sum(value for _, value in series)), {kind: int(count) for kind, count in sorted(failures.items())}


def admission_calls(scrape: Scrape) -> dict[str, Counted]:
    """Webhook name -> its calls (timed), failed calls (an error rejected the request, or a
    ``failurePolicy: Ignore`` let it through) and their latency buckets, since the server started."""
    calls: dict[str, float] = {}
    failed: dict[str, float] = {}
    for labels, value in scrape.series(ADMISSION_DURATION + "_count"):
        _add(calls, labels.get("name", ""), value)
    for labels, value in scrape.series(ADMISSION_REJECTIONS):
        if labels.get("error_type", NO_ERROR) != NO_ERROR:
            _add(failed, labels.get("name", ""), value)
    for labels, value in scrape.series(ADMISSION_FAIL_OPEN):
        _add(failed, labels.get("name", ""), value)
    grouped: dict[str, list[list[tuple[float, float]]]] = {}
    for key, series in buckets(scrape, ADMISSION_DURATION).items():
        grouped.setdefault(dict(key).get("name", ""), []).append(series)
    return {name: Counted(calls.get(name, 0.0), failed.get(name, 0.0), tuple(merge_buckets(grouped.get(name, []))))
            for name in sorted(calls.keys() | failed.keys())}


def admission_totals(scrape: Scrape) -> dict[str, AdmissionWebhook]:
    """Webhook name -> its totals since the server started (the interval's figures left empty)."""
    requests = scrape.by(ADMISSION_REQUESTS, "name") if scrape.has(ADMISSION_REQUESTS) else None
    rejections = scrape.by(ADMISSION_REJECTIONS, "name")
    errors = {key: value for key, value in scrape.by(ADMISSION_REJECTIONS, "name", "error_type").items()
              if key[1] != NO_ERROR}
    fail_open = scrape.by(ADMISSION_FAIL_OPEN, "name")
    types: dict[str, set[str]] = {}
    for family in (ADMISSION_DURATION + "_count", ADMISSION_REJECTIONS, ADMISSION_FAIL_OPEN, ADMISSION_REQUESTS):
        for labels, _ in scrape.series(family):
            types.setdefault(labels.get("name", ""), set()).add(labels.get("type", ""))
    return {name: AdmissionWebhook(
        name=name, type="+".join(sorted(kinds - {""})),
        requests_total=int(requests.get((name,), 0.0)) if requests is not None else None,
        rejections_total=int(rejections.get((name,), 0.0)),
        errors_total=int(sum(value for key, value in errors.items() if key[0] == name)),
        fail_open_total=int(fail_open.get((name,), 0.0))) for name, kinds in sorted(types.items())}


# --------------------------------------------------------------------------- judging


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Whether calls for one name (a CRD's conversions, an admission webhook) fail now."""

    #: Failed calls counted in the newest interval that counted calls for it.
    failing: bool = False
    #: That interval counted failed calls only: a quiet interval after it keeps the verdict (an API
    #: server whose webhook is down retries by itself, and reads that would fail are not being made).
    #: After a mix (the webhook came back within the interval), a quiet interval ends it.
    only_failures: bool = False
    #: When that interval ended (its scrape's time).
    at: float = 0.0


def judged(previous: Verdict, counted: Counted | None, now: float) -> Verdict:
    """The verdict after an interval that counted ``counted`` (None: no interval yet).  A failing
    verdict outlives quiet intervals for :data:`VERDICT_HOLD_SECONDS` at most: a webhook nothing calls
    any more (its configuration deleted) is not failing for ever."""
    if counted is None:
        return previous
    if counted.calls > 0 or counted.failed > 0:
        failing = counted.failed > 0
        return Verdict(failing, failing and counted.calls <= counted.failed, now)
    if previous.only_failures and now - previous.at <= VERDICT_HOLD_SECONDS:
        return previous
    return Verdict()


def webhooks_of(endpoints: Mapping[str, str]) -> dict[str, list[str]]:
    """Webhook -> the CRDs converted through it, sorted."""
    grouped: dict[str, list[str]] = {}
    for crd, webhook in sorted(endpoints.items()):
        grouped.setdefault(webhook, []).append(crd)
    return grouped


def conversion_webhook(name: str, crds: list[str], counted: Mapping[str, Counted],
                       window: Mapping[str, Counted] | None, failing: tuple[str, ...]) -> ConversionWebhook:
    """One webhook's record: its CRDs' totals, what the interval counted, its failing CRDs."""
    total = _total(counted[crd] for crd in crds if crd in counted)
    recent = _total(window[crd] for crd in crds if crd in window) if window is not None else None
    return ConversionWebhook(
        name=name, crds=len(crds), conversions_total=int(total.calls), failures_total=int(total.failed),
        conversions=int(recent.calls) if recent is not None else None,
        failures=int(recent.failed) if recent is not None else None,
        p99_seconds=p99(recent), failing=bool(failing),
        failing_crds=failing[:MAX_NAMED_CRDS], failing_crd_count=len(failing))


def windows(newer: Mapping[str, Counted], older: Mapping[str, Counted] | None) -> dict[str, Counted] | None:
    """What each name counted between two scrapes (None: no older scrape); a name the older scrape
    lacks counted everything since (the server creates a histogram's series at its first call)."""
    if older is None:
        return None
    return {name: counted.since(older.get(name)) for name, counted in newer.items()}


# --------------------------------------------------------------------------- the probe


class WebhooksProbe(ProbeBase):
    """The webhooks probe of a monitor (or of :func:`once`): keeps its previous scrape per process
    and its verdicts."""

    name = "webhooks"
    #: The shared scrape's pacing (throttling and health scrape every 10 s while CRDs change, every
    #: 20 s at rest), so that taking theirs adds no scrape; no request of its own (the shared scrape
    #: is budgeted as ``metrics``).  ``[cadences] webhooks`` and ``webhooks_idle`` override it.
    pacing = Pacing(busy=10.0, idle=20.0)

    def __init__(self, metrics: MetricsSource, crds: CRDWatch, server: str, pacing: Pacing | None = None) -> None:
        self.metrics = metrics
        self.crds = crds
        self.server = server
        if pacing is not None:
            self.pacing = pacing
        metrics.want(*FAMILIES, PROCESS_FAMILY)
        #: The previous scrape's counts per API server process.
        self._previous: dict[int | None, tuple[float, dict[str, Counted], dict[str, Counted]]] = {}
        #: The verdicts: per CRD (its conversions) and per admission webhook.
        self._conversion_verdicts: dict[str, Verdict] = {}
        self._admission_verdicts: dict[str, Verdict] = {}

    async def run(self) -> WebhooksSample:
        # Another probe's recent scrape will do (SHARED_SCRAPE_AGE): intervals use each scrape's own time.
        return self.observe(await self.metrics.scrape(max_age=self.cadence * SHARED_SCRAPE_AGE))

    def endpoints(self) -> dict[str, str] | None:
        """CRD name -> its conversion webhook, for CRDs converted by one (None: not listed yet)."""
        if not self.crds.status.synced:
            return None
        return {record.name: record.conversion_webhook for record in self.crds.crds.values()
                if record.conversion_webhook is not None}

    def observe(self, scrape: Scrape) -> WebhooksSample:
        """Build the sample from ``scrape`` and the kept previous one."""
        if not scrape.ok:
            if scrape.status in (401, 403):
                reason = scrape.error or "/metrics forbidden"
                return WebhooksSample(server=self.server, unobservable={
                    "conversion_webhooks": reason, "admission_webhooks": reason})
            return WebhooksSample(server=self.server, error=scrape.error)
        conversions, admissions = crd_conversions(scrape), admission_calls(scrape)
        older = self._keep(scrape, conversions, admissions)
        requests, failures_by_type = conversion_requests(scrape)
        endpoints = self.endpoints()
        unobservable: dict[str, str] = {}
        if older is None:
            unobservable["intervals"] = "one scrape so far: what fails now needs the next run"
        if requests is None:
            unobservable["conversion_requests_total"] = (f"no {CONVERSION_REQUESTS} (not on 1.26; elsewhere "
                                                         "once a conversion webhook was called)")
        if endpoints is None:
            unobservable["conversion_webhooks"] = (
                f"the CRD watch has not listed CRDs yet ({self.crds.status.last_error or 'listing'})")
        admission = self._admission(scrape, admissions, older[2] if older is not None else None)
        sample = WebhooksSample(
            server=self.server, interval_seconds=scrape.timestamp - older[0] if older is not None else None,
            admission_webhooks=admission, failing_admission_webhooks=sum(1 for hook in admission if hook.failing),
            conversion_requests_total=requests, conversion_failures_by_type=failures_by_type,
            unobservable=unobservable)
        if endpoints is None:
            return sample
        return self._with_conversions(sample, endpoints, conversions, older[1] if older is not None else None,
                                      scrape.timestamp)

    def _keep(self, scrape: Scrape, conversions: dict[str, Counted], admissions: dict[str, Counted]
              ) -> tuple[float, dict[str, Counted], dict[str, Counted]] | None:
        """Keep this scrape's counts for its process's next interval; return the previous ones."""
        process = process_of(scrape)
        older = self._previous.get(process)
        self._previous[process] = (scrape.timestamp, conversions, admissions)
        while len(self._previous) > KEEP_SLOTS:
            self._previous.pop(min(self._previous, key=lambda key: self._previous[key][0]))
        return older

    def _with_conversions(self, sample: WebhooksSample, endpoints: dict[str, str], counted: dict[str, Counted],
                          older: dict[str, Counted] | None, now: float) -> WebhooksSample:
        window = windows(counted, older)
        grouped = webhooks_of(endpoints)
        self._conversion_verdicts = {
            crd: judged(self._conversion_verdicts.get(crd, Verdict()),
                        window.get(crd, Counted()) if window is not None else None, now) for crd in endpoints}
        records = tuple(conversion_webhook(name, crds, counted, window,
                                           tuple(crd for crd in crds if self._conversion_verdicts[crd].failing))
                        for name, crds in grouped.items())
        affected = sorted(crd for record in records if record.failing for crd in grouped[record.name])
        return dataclasses.replace(
            sample, conversion_webhooks=records, conversion_crds=len(endpoints),
            failing_conversion_webhooks=sum(1 for record in records if record.failing),
            affected_crds=tuple(affected[:MAX_NAMED_CRDS]), affected_crd_count=len(affected))

    def _admission(self, scrape: Scrape, counted: dict[str, Counted],
                   older: dict[str, Counted] | None) -> tuple[AdmissionWebhook, ...]:
        window = windows(counted, older)
        records = []
        for name, totals in admission_totals(scrape).items():
            recent = window.get(name) if window is not None else None
            verdict = judged(self._admission_verdicts.get(name, Verdict()), recent, scrape.timestamp)
            self._admission_verdicts[name] = verdict
            records.append(dataclasses.replace(
                totals, failed=int(recent.failed) if recent is not None else None,
                calls=int(recent.calls) if recent is not None else None, p99_seconds=p99(recent),
                failing=bool(verdict.failing)))
        return tuple(records)


async def once(cluster: Cluster) -> WebhooksSample:
    """The CRDs listed once, then two scrapes :data:`ONCE_INTERVAL_SECONDS` apart, so that the sample
    says what fails now (totals since the server started are in the first already)."""
    watch = CRDWatch(cluster)
    await watch.sync_once()  # a failed list leaves the watch unsynced: the sample says why
    probe = WebhooksProbe(MetricsSource(cluster), watch, cluster.server)
    first = probe.observe(await probe.metrics.scrape())
    if not first.ok or "admission_webhooks" in first.unobservable:  # down or forbidden: the same again
        return first
    await asyncio.sleep(ONCE_INTERVAL_SECONDS)
    return probe.observe(await probe.metrics.scrape())


def make_probe(parts: ProbeParts) -> WebhooksProbe:
    """The webhooks probe on the monitor's shared scrape and CRD watch."""
    return WebhooksProbe(parts.metrics, parts.crds, parts.cluster.server, parts.pacing(WebhooksProbe.name))

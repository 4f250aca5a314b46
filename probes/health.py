"""API-server health: memory, descriptors, restarts, availability, and their cost per CRD.

Figures come from the shared ``/metrics`` scrape (process and Go runtime
gauges, storage object counts and database size as the server exposes them:
Kubernetes 1.37 names the object counts ``apiserver_resource_objects``,
older servers ``apiserver_storage_objects``).  Where ``/metrics`` is forbidden
or absent, a Prometheus server (:mod:`connection.prometheus`, ``--prometheus
URL``) fills what it can; ``sources`` names where each filled figure came
from, and every figure left empty has its reason in ``unobservable``.  Each
source has its reader (:mod:`probes.health_figures`: ``/metrics``, the process
and its cgroup through Prometheus, etcd; restarts: :mod:`probes.health_tracker`),
a typed function from the source to typed figures; this module runs them and
makes the sample.  The container limit Prometheus shows is reported as observed:
the session's facts decide the limit (:class:`base.facts.ClusterFacts`).

Across runs the probe keeps:

* replicas (:mod:`probes.replicas`): behind a load balancer each scrape reads
  one of several API servers, told apart by ``process_start_time_seconds``;
  figures and fits are kept per replica, a switch between known replicas is
  not a restart, a replica back with a new start time is one restart of it.
  How many replicas exist comes from their identity Leases
  (:mod:`probes.leases`), read at most every :data:`LEASE_INTERVAL_SECONDS`;
* outage windows (:mod:`probes.health_tracker` keeps them, with the replicas, Leases, restarts
  and fits): from the first attempt that found the server unreachable or not ready (its own, or
  the first the session's "not answering" verdict left unanswered: ``ClusterFacts.server_away``)
  to the first that finds it ready again.  While the server is away the probe is ``dating``: it
  runs every :data:`OUTAGE_CADENCE_SECONDS` and each run costs the server at most one cheap check
  (:mod:`probes.outage`: every second while refused, one in flight with a back-off while requests
  time out), so ``down_seconds`` is known to the second; a run whose reads a hung server holds
  ends as soon as the session judges the server away, its reads left in flight as that check;
* least-squares fits (:mod:`base.fit`) of resident memory, heap and open
  descriptors against the CRD count, one per API server process.

On a lab, the API server's established TCP connections to etcd are counted
from ``/proc`` and its supervisor's restarts read from its log: the session
that knows it watches a lab puts the lab's hooks into its facts
(``ClusterFacts.lab``); probes never import ``lab``.
"""

from __future__ import annotations

from crdscope.base.samples.health import HealthSample

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING

from crdscope.base.facts import ClusterFacts, LabHooks, ServerAway
from crdscope.base.restarts import IDENTITY_LEASE, KUBE_STATE_METRICS, PlatformRestarts, RestartEvent
from crdscope.connection.cluster import Cluster
from crdscope.connection.metrics import PROCESS_FAMILIES, SHARED_SCRAPE_AGE, MetricsSource, Scrape
from crdscope.connection.prometheus import PrometheusReading, PrometheusSource

from .health_checks import LIVE_BECAUSE_READY, CheckResult, count_crds, health_check
from .health_figures import (OBJECT_FAMILIES, SIZE_FAMILIES, ContainerFigures, Gauge, ProcessFigures, Storage,
                             missing_of, read_container, read_etcd_connections, read_process, read_storage,
                             scraped_gauges, sources_of, with_prometheus)
from .health_tracker import HealthTracker, OwnShare, Restarts, Slope
from .leases import LeaseReading, read_leases
from .outage import Attempt, OutageCheck
from .probe import Pacing, ProbeBase
from .replicas import from_instances
from .shared import SharedState

if TYPE_CHECKING:
    from .probe import ProbeParts

log = logging.getLogger("crdscope.health")

TOP_RESOURCES = 10
UNUSED_EXAMPLES = 5
IN_USE_KEPT = 1000  # CRDs in use named in a sample: a cluster uses a few hundred kinds at most
#: Identity Leases are renewed every 10 s; a new holder (a restart) stays visible: every 30 s is enough.
LEASE_INTERVAL_SECONDS = 30.0
#: While the Leases count a replica no scrape has named, a run scrapes again up to this many times,
#: in at most this many runs after the Leases last changed (see ``_seek_unseen_replicas``).
SEEK_SCRAPES_PER_RUN = 3
SEEK_RUNS = 3
#: Restart events carried by each sample (the crash-loop finding needs the last ten minutes').
RESTART_EVENTS_IN_SAMPLE = 30
#: While the server is away, a sample this often (each run costs at most the outage check, which paces
#: itself): a ``down_seconds`` threshold crosses within this of its value.
OUTAGE_CADENCE_SECONDS = 0.5
#: While a run's reads wait, how often it looks whether the session judged the server away.
AWAY_POLL_SECONDS = 0.25

HEALTH_FAMILIES = (*PROCESS_FAMILIES.values(), *OBJECT_FAMILIES, *SIZE_FAMILIES)


# --------------------------------------------------------------------------- the probe


CrdCounter = Callable[[], Awaitable[tuple[int | None, str | None]]]


@dataclasses.dataclass(frozen=True)
class _Gathered:
    """What one run read from every source, before anything is judged."""

    sent: float
    ready: CheckResult
    live: CheckResult
    scrape: Scrape
    crds: int | None
    crds_reason: str | None
    #: The CRD names the unused ones are taken from (None: not known), from the same moment as ``crds``.
    crd_names: tuple[str, ...] | None
    reading: PrometheusReading | None
    etcd_connections: Gauge
    leases: LeaseReading
    platform: PlatformRestarts | None


@dataclasses.dataclass(frozen=True)
class _Judged:
    """What the readers made of a run: the typed figures the sample is made from."""

    now: float
    process: ProcessFigures
    container: ContainerFigures
    storage: Storage
    restarts: Restarts
    down: bool
    slopes: dict[str, Slope]
    own: OwnShare
    unused: list[str] | None


class HealthProbe(ProbeBase):
    """Runs the health checks and the readers, and keeps :class:`HealthTracker` state."""

    name = "health"
    #: /readyz every run (/livez only when not ready), the identity Leases every 30 s (budget
    #: 10/min); the process figures from the shared /metrics scrape.  While the server is away, a run
    #: every half second that sends at most the outage check (refused: unsent; timing out: one in flight).
    pacing = Pacing(busy=10.0, idle=20.0, budget=10.0, outage=OUTAGE_CADENCE_SECONDS)

    def __init__(self, cluster: Cluster, metrics: MetricsSource, *, crd_count: CrdCounter,
                 cadence: float | None = None, prometheus: PrometheusSource | None = None,
                 facts: ClusterFacts | None = None,
                 crd_names: Callable[[], Collection[str] | None] = lambda: None,
                 since_start: bool = True, shared: SharedState | None = None) -> None:
        self.cluster = cluster
        self.metrics = metrics
        self.prometheus = prometheus
        #: The session's facts: the lab's hooks (etcd connections, the supervisor's restarts).
        self.facts = facts if facts is not None else ClusterFacts()
        #: Where the CRDs in use are handed to the inventory probe.
        self.shared = shared if shared is not None else SharedState()
        self._crd_count = crd_count
        self._crd_names = crd_names
        if cadence is not None:  # a one-shot run: its own age for the shared scrape
            self.cadence = cadence
        self.tracker = HealthTracker(since_start=since_start)
        #: The one check of the server while it is away, and when it last answered one.
        self.outage_check = OutageCheck(lambda: health_check(self.cluster, "readyz"))
        #: The session's verdict at the last run that read it.
        self._told: ServerAway | None = None
        self._seek_marker: tuple[int, int] | None = None
        self._seek_runs = SEEK_RUNS
        metrics.want(*HEALTH_FAMILIES)
        # Every scrape names the replica that answered, whichever probe asked for it: a probe on
        # half this cadence would otherwise hand this one every other replica only.
        metrics.listeners.append(self._on_scrape)

    def _on_scrape(self, scrape: Scrape) -> None:
        """Attribute one shared scrape to its replica (figures, restarts; fits need the CRD count of a run)."""
        start = scrape.value(PROCESS_FAMILIES["start_time"]) if scrape.ok else None
        if start is not None:
            self.tracker.observe_start(start, scrape.timestamp, scraped_gauges(scrape))

    @property
    def busy(self) -> bool:
        """While an outage is open (a server not ready answers), the busy cadence rather than the idle one."""
        return self.tracker.open_outage is not None

    @property
    def dating(self) -> bool:
        """While the server is away: runs on the outage cadence, each one the outage check at most."""
        return self._away_since() is not None

    def _away_since(self) -> float | None:
        """The first attempt left unanswered since the server last answered a check of this probe: the
        session's verdict's (PINGs and requests every half second) or this probe's own (None: it answers)."""
        told = self.facts.server_away
        check = self.outage_check
        known = [since for since in (told.since if told is not None and told.since > check.answered_at else None,
                                     check.failing_since) if since is not None]
        return min(known) if known else None

    async def run(self) -> HealthSample:
        """One observation; an unreachable server is a sample with ``error`` and an open outage."""
        if self.dating:
            away = await self._outage_run()
            if away is not None:
                return away
        if self.tracker.lease_reading is None:
            # Read the Leases before the first scrape: with several API servers every scrape then
            # goes out on its own connection from the start, and each replica is seen in the first
            # rounds instead of whenever a kept-alive connection happens to move.
            await self._leases()
            self._spread_scrapes()
        run = await self._gather_unless_away()
        if isinstance(run, Attempt):
            return await self._down_sample(run)
        unobservable: dict[str, str] = {}
        judged = await self._judge(run, unobservable)
        in_use = frozenset(n for n, count in judged.storage.objects.items() if count > 0)
        self.shared.crds_in_use = in_use if judged.unused is not None else None  # for the inventory's MRDs
        return self._sample(run, judged, unobservable)

    async def _gather(self) -> _Gathered:
        """Every source read once, side by side (the lab's files in threads)."""
        sent = time.time()
        platform_read = asyncio.ensure_future(self._platform())  # a file read in a thread, beside the requests
        ready, scrape, (crds, crds_reason), reading, etcd_connections, leases = await asyncio.gather(
            health_check(self.cluster, "readyz"),
            self.metrics.scrape(max_age=self.cadence * SHARED_SCRAPE_AGE),
            self._crd_count(),
            self._prometheus(),
            # Beside the scrape: open_fds and this compare.
            read_etcd_connections(self.facts.lab.etcd_connections),
            self._leases(),
        )
        platform = await platform_read
        # The CRD names the unused ones are taken from, and the count beside them, from one moment:
        # a count read before the names while CRDs are being added read "770 of 760 unused".
        names = self._crd_names()
        crd_names = tuple(names) if names is not None else None
        if crd_names is not None:
            crds, crds_reason = len(crd_names), None
        # /readyz runs every /livez check and more: a ready server is live, and only a server that
        # is not ready (or will not say) costs the second request that tells "not ready" from "dead".
        live = LIVE_BECAUSE_READY if ready.ok else await health_check(self.cluster, "livez")
        return _Gathered(sent, ready, live, scrape, crds, crds_reason, crd_names, reading, etcd_connections,
                         leases, platform)

    async def _gather_unless_away(self) -> _Gathered | Attempt:
        """The run's reads; once the session judges the server away before they finish (a hung server
        holds them to their timeouts), they stay in flight as the outage's one check (its attempt)."""
        sent = time.time()
        gathering = asyncio.ensure_future(self._gather())
        held = False
        try:
            while not gathering.done():
                await asyncio.wait({gathering}, timeout=AWAY_POLL_SECONDS)
                if not gathering.done() and self.facts.server_away is not None and self._away_since() is not None:
                    self.outage_check.hold(_ready_of(gathering), sent)
                    held = True
                    return Attempt(sent, None)
        finally:
            if not held and not gathering.done():  # the run was cancelled: nothing left behind
                gathering.cancel()
        return gathering.result()

    async def _outage_run(self) -> HealthSample | None:
        """While the server is away: the outage check only, a down sample (None: the server answered the
        check, and a full run says how it is)."""
        told = self.facts.server_away
        back = self._told is not None and told is None  # the session hears the server again: check now
        self._told = told
        attempt = await self.outage_check.poll(now_if_between=back)
        if attempt.answered:
            return None
        return await self._down_sample(attempt)

    async def _down_sample(self, attempt: Attempt) -> HealthSample:
        """A sample of a server away: the outage dated from its first unanswered attempt, the restarts
        the platform counts meanwhile; no figure of the server's own."""
        now = time.time()
        told = self.facts.server_away
        if attempt.result is not None and attempt.result.error:
            reason = attempt.result.error
        else:
            reason = f"GET /readyz unanswered for {max(0.0, now - attempt.sent):.1f} s"
            reason = f"{told.why} ({reason})" if told is not None else reason
        self.tracker.observe_availability(self._away_since() or attempt.sent or now, True, reason)
        platform = await self._platform()
        if platform is not None:
            self.tracker.ledger.platform(platform)
        return away_sample(self.tracker, self.cluster.server, now, reason)

    async def _judge(self, run: _Gathered, unobservable: dict[str, str]) -> _Judged:
        """The readers' figures of one run, the tracker's restarts, outages and fits updated."""
        now = time.time()
        container = read_container(run.reading)
        process = with_prometheus(read_process(run.scrape), run.reading, container)
        restarts = await self._count_restarts(run, process, unobservable)
        down, reason = _availability(run.ready, run.live)
        self.outage_check.saw(run.sent, run.ready)
        # A hang counts from when the check was sent (it failed only at its read timeout) or the first
        # attempt the session saw unanswered, a recovery from when it answered.
        self.tracker.observe_availability((self._away_since() or run.sent) if down else now, down, reason)
        storage = read_storage(run.scrape)
        slopes = self.tracker.slopes(process, run.crds, restarts.replica, unobservable)
        own = self.tracker.own_share(process, run.crds, storage.objects, unobservable)
        return _Judged(now, process, container, storage, restarts, down, slopes, own,
                       _unused_crds(storage, run.crd_names, unobservable))

    async def _count_restarts(self, run: _Gathered, process: ProcessFigures,
                              unobservable: dict[str, str]) -> Restarts:
        """Restarts from every source: start times (this run's replica), the Leases, the lab's
        supervisor and kube-state-metrics, as the ledger counts them."""
        restarts = self.tracker.restarts_of(process, run.reading, run.scrape.timestamp, run.crds)
        if run.leases.error:
            unobservable["apiservers"] = unobservable["lease_replacements"] = run.leases.error
        self._spread_scrapes()
        await self._seek_unseen_replicas()
        if restarts.replica is not None:
            self.tracker.replicas.answering = restarts.replica  # this run's figures are its main scrape's
        ledger = self.tracker.ledger
        if run.platform is not None:
            ledger.platform(run.platform)
        if run.reading is not None and run.reading.pod_restarts:
            # kube-state-metrics' restart counter: one more source (see probes.restarts).
            ledger.counter(KUBE_STATE_METRICS, sum(run.reading.pod_restarts.values()), run.reading.timestamp,
                           oom_killed=True if run.reading.oom_killed_pods else None)
        total = ledger.total()
        if total is not None:
            return Restarts(total, restarts.replica)
        if restarts.missing:
            unobservable["restarts"] = restarts.missing
        return restarts

    def _sample(self, run: _Gathered, judged: _Judged, unobservable: dict[str, str]) -> HealthSample:
        """The sample of one run, made from the typed figures of each reader."""
        now, process, storage, tracker = judged.now, judged.process, judged.storage, self.tracker
        ledger, reading, unused, fits = tracker.ledger, run.reading, judged.unused, judged.slopes
        rss_fit = tracker.fits_of(judged.restarts.replica)["rss"].current()
        sources = sources_of(process.by_field(), judged.container.by_field())
        return HealthSample(
            timestamp=now, error=run.ready.error if run.ready.unreachable else None, server=self.cluster.server,
            rss_bytes=process.rss_bytes.whole(), heap_bytes=process.heap_bytes.whole(),
            goroutines=process.goroutines.whole(), start_time=process.start_time.value,
            open_fds=process.open_fds.whole(), max_fds=process.max_fds.whole(),
            etcd_connections=run.etcd_connections.whole(),
            storage_objects_total=sum(storage.objects.values()) if storage.objects else None,
            storage_objects_top=dict(sorted(storage.objects.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_RESOURCES]),
            crds_without_objects=len(unused) if unused is not None else None,
            unused_crd_examples=tuple(sorted(unused or ())[:UNUSED_EXAMPLES]),
            crds_with_objects=_in_use(storage.objects, run.crd_names) if unused is not None else (),
            storage_size_bytes=storage.size_bytes,
            restarts=judged.restarts.count, restarts_source=ledger.best() if ledger.total() is not None else None,
            restarts_by_source=dict(ledger.counts), restart_events=ledger.recent()[-RESTART_EVENTS_IN_SAMPLE:],
            lease_restarts=dict(tracker.leases.replaced_hosts), oom_kills=ledger.oom_kills,
            oom_killed_pods=reading.oom_killed_pods if reading is not None else (),
            down_seconds=round(now - tracker.open_outage.start, 1) if tracker.open_outage is not None else 0.0,
            replica=judged.restarts.replica, replicas=tracker.replicas.figures() or from_instances(reading, sources),
            prometheus=reading.figures if reading is not None else None, apiservers=tracker.apiservers,
            lease_replacements=None if run.leases.error else tracker.leases.replacements,
            ready=run.ready.ok, live=run.live.ok, failing_checks=run.ready.failing,
            failing_live_checks=run.live.failing, down=judged.down, outages=tracker.outage_windows(now),
            crds=run.crds, fit_points=rss_fit.n if rss_fit else 0, fit_crd_counts=rss_fit.distinct_x if rss_fit else 0,
            working_set_bytes=judged.container.working_set_bytes.whole(),
            memory_limit_bytes=judged.container.memory_limit_bytes.whole(),
            pod_restarts=dict(reading.pod_restarts) if reading else {}, sources=sources,
            unobservable=_reasons(run, judged, unobservable),
            mib_per_crd=fits["rss"].per_crd, r2=fits["rss"].r2, heap_mib_per_crd=fits["heap"].per_crd,
            heap_r2=fits["heap"].r2, fds_per_crd=fits["fds"].per_crd, fds_r2=fits["fds"].r2,
            mrds=judged.own.mrds, mib_per_crd_own=judged.own.mib_per_crd_own, mib_per_mrd=judged.own.mib_per_mrd,
            own_share_by=judged.own.own_share_by,
        )

    async def aclose(self) -> None:
        """Cancel the outage check still waiting on a hung server."""
        await self.outage_check.aclose()

    async def _prometheus(self) -> PrometheusReading | None:
        return await self.prometheus.read() if self.prometheus else None

    async def _leases(self) -> LeaseReading:
        """The identity Leases, read again once :data:`LEASE_INTERVAL_SECONDS` have passed."""
        tracker = self.tracker
        if tracker.lease_reading is None or time.time() - tracker.lease_read_at >= LEASE_INTERVAL_SECONDS:
            tracker.lease_read_at = time.time()
            tracker.lease_reading = reading = await read_leases(self.cluster, tracker.lease_read_at)
            first = tracker.leases.holders is None
            for lease in tracker.leases.observe(reading):
                tracker.ledger.observed(RestartEvent(tracker.lease_read_at, IDENTITY_LEASE, lease.host))
            if not reading.error and tracker.ledger.since_start and not first:
                tracker.ledger.watching(IDENTITY_LEASE)  # two readings compared: it can count now
        return tracker.lease_reading

    async def _platform(self) -> PlatformRestarts | None:
        """The platform's account of restarts (the lab's supervisor), read in a thread."""
        reader = self.facts.lab.restarts
        if reader is None:
            return None
        try:
            return await asyncio.to_thread(reader)
        except Exception:  # an unreadable log is "not known", never a failed probe
            log.debug("the platform's restart count could not be read", exc_info=True)
            return None

    async def _seek_unseen_replicas(self) -> None:
        """Scrape again, back to back, while the Leases count more live replicas than scrapes named.

        A balancer hands each new connection to the next replica, but other connections opened
        between two periodic scrapes (another client's, the CRD watch's, the PING's) can make every
        one of them land on the same replica: one never scraped, its restarts unseen.  Scrapes back
        to back leave no room for that.  Only while a replica is missing, and for at most
        :data:`SEEK_RUNS` runs after the Leases last changed (a replica the balancer cannot reach
        costs no more than that).
        """
        tracker = self.tracker
        marker = (tracker.leases.appeared, tracker.leases.replacements)
        if marker != self._seek_marker:
            self._seek_marker, self._seek_runs = marker, SEEK_RUNS
        live = tracker.apiservers or 0
        if live <= 1 or self.metrics.spread is None or self._seek_runs <= 0 or tracker.replicas.known >= live:
            return
        self._seek_runs -= 1
        for _ in range(SEEK_SCRAPES_PER_RUN):
            await self.metrics.scrape(max_age=0.0)  # the listener attributes it to its replica
            if tracker.replicas.known >= live:
                log.info("every API server replica the Leases count has answered a scrape")
                return

    def _spread_scrapes(self) -> None:
        """With several replicas, scrape over a new connection each time so every replica is read."""
        several = (self.tracker.apiservers or 0) > 1 or self.tracker.replicas.known > 1
        if several and not self.metrics.spread:
            log.info("several API servers: each /metrics scrape opens its own connection")
            self.metrics.spread_over_replicas()


async def _ready_of(run: Awaitable[_Gathered]) -> CheckResult:
    """The /readyz answer of a run left in flight (a failure of the run reads as unreachable)."""
    try:
        return (await run).ready
    except Exception as exc:  # a run's failures are results; this one ended otherwise
        log.exception("a health run left in flight failed")
        return CheckResult(ok=False, unreachable=True, error=f"the health run failed: {type(exc).__name__}")


def away_sample(tracker: HealthTracker, server: str, now: float, reason: str) -> HealthSample:
    """The sample of a run while the server is away: what outlives it (restarts its sources count, the
    outage windows, the replicas last seen); its own figures unknown."""
    ledger = tracker.ledger
    total = ledger.total()
    restarts = total if total is not None else (tracker.restarts if tracker.start_time is not None else None)
    opened = tracker.open_outage
    return HealthSample(
        timestamp=now, error=reason, server=server, restarts=restarts,
        restarts_source=ledger.best() if total is not None else None, restarts_by_source=dict(ledger.counts),
        restart_events=ledger.recent()[-RESTART_EVENTS_IN_SAMPLE:], lease_restarts=dict(tracker.leases.replaced_hosts),
        oom_kills=ledger.oom_kills, apiservers=tracker.apiservers, replicas=tracker.replicas.figures(),
        ready=False, down=True, down_seconds=round(now - opened.start, 1) if opened is not None else 0.0,
        outages=tracker.outage_windows(now),
        unobservable={"figures": "the API server is away: only its outage check runs (probes.outage)"})


def _availability(ready: CheckResult, live: CheckResult) -> tuple[bool, str]:
    """Whether the server counts as down now, and why."""
    if ready.unreachable:
        return True, ready.error or "unreachable"
    if ready.ok is False:
        return True, "not ready: " + (", ".join(ready.failing) or ready.error or "?")
    if ready.ok is None and live.ok is False:  # readiness forbidden: liveness is all we have
        return True, "not live: " + (", ".join(live.failing) or live.error or "?")
    return False, ""


def _in_use(objects: dict[str, int], crd_names: Collection[str] | None) -> tuple[str, ...]:
    """CRDs with at least one stored object (few, even where thousands are installed)."""
    return tuple(sorted(name for name in crd_names or () if objects.get(name, 0) > 0)[:IN_USE_KEPT])


def _unused_crds(storage: Storage, crd_names: Collection[str] | None,
                 unobservable: dict[str, str]) -> list[str] | None:
    """CRDs ("plural.group", the object-count family's "resource.group") with no stored objects."""
    if crd_names is None:
        unobservable["crds_without_objects"] = "needs the CRD watch's list of CRDs"
        return None
    if not storage.objects:
        unobservable["crds_without_objects"] = storage.objects_missing or "no object counts"
        return None
    return [name for name in crd_names if storage.objects.get(name, 0) <= 0]


def _reasons(run: _Gathered, judged: _Judged, found: dict[str, str]) -> dict[str, str]:
    """Every figure left empty with why: the readers' reasons, then what the run itself found."""
    reasons = missing_of(judged.process.by_field(), judged.container.by_field(),
                         {"etcd_connections": run.etcd_connections})
    if run.crds is None:
        reasons["crds"] = run.crds_reason or "CRD count unknown"
    if judged.storage.objects_missing:
        reasons["storage_objects_total"] = judged.storage.objects_missing
    if judged.storage.size_missing:
        reasons["storage_size_bytes"] = judged.storage.size_missing
    if run.ready.ok is None:
        reasons["ready"] = run.ready.error or "readiness not observable"
    if run.live.ok is None:
        reasons["live"] = run.live.error or "liveness not observable"
    return {**reasons, **found}


# --------------------------------------------------------------------------- wiring


def make_probe(parts: ProbeParts) -> HealthProbe:
    """The health probe on the monitor's shared scrape, CRD watch, settings and the session's facts."""
    prometheus = PrometheusSource(parts.settings.prometheus_url) if parts.settings.prometheus_url else None

    async def crd_count() -> tuple[int | None, str | None]:
        if parts.crds.status.synced:
            return len(parts.crds.crds), None
        return await count_crds(parts.cluster)  # until the watch has listed once

    return HealthProbe(parts.cluster, parts.metrics, crd_count=crd_count, prometheus=prometheus,
                       facts=parts.facts, shared=parts.shared,
                       crd_names=lambda: parts.crds.crds.keys() if parts.crds.status.synced else None)


#: ``probe health`` scrapes again, up to this many times per replica, until it has read each one.
SCRAPES_PER_REPLICA = 3


async def once(cluster: Cluster, prometheus_url: str | None = None,
               etcd_counter: Callable[[], int | None] | None = None,
               platform_restarts: Callable[[], PlatformRestarts | None] | None = None) -> HealthSample:
    """One health sample (``crdscope probe health``): fits need a running monitor.

    ``etcd_counter`` counts the API server's etcd connections where the caller can (a
    crdscope lab's, from /proc: probes never import the lab); ``platform_restarts`` reads the
    lab supervisor's restarts, which one sample reports in full (every restart it logged).

    Behind a load balancer it scrapes again (each time on a new connection) until every API
    server the Leases count has answered once, so the sample lists each replica's figures.
    """
    prometheus = PrometheusSource(prometheus_url) if prometheus_url else None
    facts = ClusterFacts(lab=LabHooks(etcd_connections=etcd_counter, restarts=platform_restarts))
    probe = HealthProbe(cluster, MetricsSource(cluster), crd_count=lambda: count_crds(cluster),
                        prometheus=prometheus, cadence=0.0, facts=facts, since_start=False)
    try:
        sample = await probe.run()
        for _ in range(SCRAPES_PER_REPLICA * (sample.apiservers or 1)):
            if sample.start_time is None or len(sample.replicas) >= (sample.apiservers or 1):
                break
            sample = await probe.run()
        return sample
    finally:
        if prometheus is not None:
            prometheus.close()
        if probe.metrics.spread is not None:
            await probe.metrics.spread.client.aclose()

"""API-server health: memory, descriptors, restarts, availability, and their cost per CRD.

Figures come from the shared ``/metrics`` scrape (process and Go runtime
gauges, storage object counts and database size as the server exposes them:
Kubernetes 1.37 names the object counts ``apiserver_resource_objects``,
older servers ``apiserver_storage_objects``).  Where ``/metrics`` is forbidden
or absent, a Prometheus server (:mod:`connection.prometheus`, ``--prometheus
URL``) fills what it can; ``sources`` names where each filled figure came
from, and every figure left empty has its reason in ``unobservable``.

Across runs the probe keeps:

* replicas (:mod:`probes.replicas`): behind a load balancer each scrape reads
  one of several API servers, told apart by ``process_start_time_seconds``;
  figures and fits are kept per replica, a switch between known replicas is
  not a restart, a replica back with a new start time is one restart of it.
  How many replicas exist comes from their identity Leases
  (:mod:`probes.leases`), read at most every :data:`LEASE_INTERVAL_SECONDS`;
* outage windows (:mod:`probes.health_tracker` keeps them, with the replicas, Leases, restarts
  and fits): from the first run that finds the server unreachable or not
  ready to the first that finds it ready again (resolution: the cadence);
* least-squares fits (:mod:`base.fit`) of resident memory, heap and open
  descriptors against the CRD count, one per API server process.

On a lab, the API server's established TCP connections to etcd are counted
from ``/proc``: the wiring that knows it watches a lab puts
``lab.sockets.etcd_connection_counter(server)`` into
``monitor.shared.lab_etcd_connections``;
probes never import ``lab``.
"""

from __future__ import annotations

from crdscope.base.samples.health import HealthSample

import asyncio
from typing import TYPE_CHECKING, Any
import logging
import time
from collections.abc import Awaitable, Callable, Collection

from crdscope.connection.cluster import Cluster
from crdscope.base.activation import MRD_BYTES, MRDS_RESOURCE
from crdscope.base.fit import ProcessFits
from .health_checks import LIVE_BECAUSE_READY, CheckResult, count_crds, health_check
from .leases import LeaseReading, read_leases
from crdscope.connection.metrics import PROCESS_FAMILIES, SHARED_SCRAPE_AGE, MetricsSource, Scrape
from crdscope.connection.prometheus import PrometheusReading, PrometheusSource
from .health_tracker import FITS, HealthTracker
from .probe import Pacing, ProbeBase
from .shared import SharedState
from crdscope.base.facts import ClusterFacts, LabHooks
from .replicas import REPLICA_GAUGES, from_instances
from crdscope.base.restarts import IDENTITY_LEASE, KUBE_STATE_METRICS, PlatformRestarts, RestartEvent

if TYPE_CHECKING:
    from .probe import ProbeParts

log = logging.getLogger("crdscope.health")

MIB = float(1 << 20)
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

OBJECT_FAMILIES = ("apiserver_resource_objects", "apiserver_storage_objects")  # 1.37 name first
SIZE_FAMILIES = ("apiserver_storage_size_bytes", "etcd_db_total_size_in_bytes")
HEALTH_FAMILIES = (*PROCESS_FAMILIES.values(), *OBJECT_FAMILIES, *SIZE_FAMILIES)


# --------------------------------------------------------------------------- the probe


CrdCounter = Callable[[], Awaitable[tuple[int | None, str | None]]]


class HealthProbe(ProbeBase):
    """Runs the health checks, reads the scrape, and keeps :class:`HealthTracker` state."""

    name = "health"
    #: /readyz every run (/livez only when not ready), the identity Leases every 30 s (budget
    #: 10/min); the process figures from the shared /metrics scrape.
    pacing = Pacing(busy=10.0, idle=20.0, budget=10.0)

    def __init__(self, cluster: Cluster, metrics: MetricsSource, *, crd_count: CrdCounter,
                 cadence: float | None = None, prometheus: PrometheusSource | None = None,
                 facts: ClusterFacts | None = None,
                 crd_names: Callable[[], Collection[str] | None] = lambda: None,
                 since_start: bool = True, shared: SharedState | None = None) -> None:
        self.cluster = cluster
        self.facts = facts if facts is not None else ClusterFacts()
        self.shared = shared if shared is not None else SharedState()
        self._crd_names = crd_names
        self.metrics = metrics
        if cadence is not None:  # a one-shot run: its own age for the shared scrape
            self.cadence = cadence
        self.prometheus = prometheus
        self.tracker = HealthTracker(since_start=since_start)
        self._seek_marker: tuple[int, int] | None = None
        self._seek_runs = SEEK_RUNS
        self._crd_count = crd_count
        metrics.want(*HEALTH_FAMILIES)
        # Every scrape names the replica that answered, whichever probe asked for it: a probe on
        # half this cadence would otherwise hand this one every other replica only.
        metrics.listeners.append(self._on_scrape)

    def _on_scrape(self, scrape: Scrape) -> None:
        """Attribute one shared scrape to its replica (figures, restarts; fits need the CRD count of a run)."""
        start = scrape.value(PROCESS_FAMILIES["start_time"]) if scrape.ok else None
        if start is not None:
            figures = {name: value for name, family in REPLICA_GAUGES.items()
                       if (value := scrape.value(family)) is not None}
            self.tracker.observe_start(start, scrape.timestamp, figures)

    async def run(self) -> HealthSample:
        """One observation; an unreachable server is a sample with ``error`` and an open outage."""
        unobservable: dict[str, str] = {}
        if self.tracker.lease_reading is None:
            # Read the Leases before the first scrape: with several API servers every scrape then
            # goes out on its own connection from the start, and each replica is seen in the first
            # rounds instead of whenever a kept-alive connection happens to move.
            await self._leases()
            self._spread_scrapes()
        sent = time.time()
        platform_read = asyncio.ensure_future(self._platform())  # a file read in a thread, beside the requests
        ready, scrape, (crds, crds_reason), reading, etcd_connections, leases = await asyncio.gather(
            health_check(self.cluster, "readyz"),
            self.metrics.scrape(max_age=self.cadence * SHARED_SCRAPE_AGE),
            self._crd_count(),
            self._prometheus(),
            self._etcd_connections(unobservable),  # beside the scrape: open_fds and this compare
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
        now = time.time()
        values = _process_figures(scrape, unobservable)
        sources: dict[str, str] = {}
        if reading is not None:
            _fill_from_prometheus(reading, values, sources, unobservable)
        else:
            reason = "needs --prometheus (a kubelet/cAdvisor and kube-state-metrics figure)"
            unobservable.update(working_set_bytes=reason, pod_restarts=reason, memory_limit_bytes=reason)
        if crds is None:
            unobservable["crds"] = crds_reason or "CRD count unknown"

        restarts, replica = self._restarts(values, reading, unobservable, scrape.timestamp, crds)
        if leases.error:
            unobservable["apiservers"] = unobservable["lease_replacements"] = leases.error
        self._spread_scrapes()
        await self._seek_unseen_replicas()
        if replica is not None:
            self.tracker.replicas.answering = replica  # this run's figures are its main scrape's
        down, reason = _availability(ready, live)
        # A hang counts from when the check was sent (it failed only at its read timeout), a
        # recovery from when it answered.
        self.tracker.observe_availability(sent if down else now, down, reason)
        if platform is not None:
            self.tracker.ledger.platform(platform)
        if reading is not None and reading.pod_restarts:
            # kube-state-metrics' restart counter: one more source (see probes.restarts).
            self.tracker.ledger.counter(KUBE_STATE_METRICS, sum(reading.pod_restarts.values()), reading.timestamp,
                                        oom_killed=True if reading.oom_killed_pods else None)
        ledger = self.tracker.ledger
        if ledger.total() is not None:
            restarts = ledger.total()
            unobservable.pop("restarts", None)
        open_outage = self.tracker.open_outage
        if ready.ok is None:
            unobservable["ready"] = ready.error or "readiness not observable"
        if live.ok is None:
            unobservable["live"] = live.error or "liveness not observable"

        fitted = self._fit(values, crds, unobservable, replica)
        objects, size = _storage(scrape, unobservable)
        own_share = self._own_share(values, crds, objects, unobservable)
        top = dict(sorted(objects.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_RESOURCES])
        unused = _unused_crds(objects, crd_names, unobservable)
        in_use = frozenset(n for n, count in objects.items() if count > 0) if unused is not None else None
        self.shared.crds_in_use = in_use  # the inventory tells MRDs in use from those nobody uses
        rss_fit = self._fits(replica)["rss"].current()
        return HealthSample(
            timestamp=now,
            error=ready.error if ready.unreachable else None,
            server=self.cluster.server,
            rss_bytes=_int(values.get("rss_bytes")),
            heap_bytes=_int(values.get("heap_bytes")),
            goroutines=_int(values.get("goroutines")),
            start_time=values.get("start_time"),
            open_fds=_int(values.get("open_fds")),
            max_fds=_int(values.get("max_fds")),
            etcd_connections=etcd_connections,
            storage_objects_total=sum(objects.values()) if objects else None,
            storage_objects_top=top,
            crds_without_objects=len(unused) if unused is not None else None,
            unused_crd_examples=tuple(sorted(unused or ())[:UNUSED_EXAMPLES]),
            crds_with_objects=_in_use(objects, crd_names) if unused is not None else (),
            storage_size_bytes=size,
            restarts=restarts,
            restarts_source=ledger.best() if ledger.total() is not None else None,
            restarts_by_source=dict(ledger.counts),
            restart_events=ledger.recent()[-RESTART_EVENTS_IN_SAMPLE:],
            lease_restarts=dict(self.tracker.leases.replaced_hosts),
            oom_kills=ledger.oom_kills,
            oom_killed_pods=reading.oom_killed_pods if reading is not None else (),
            down_seconds=round(now - open_outage.start, 1) if open_outage is not None else 0.0,
            replica=replica,
            replicas=self.tracker.replicas.figures() or from_instances(reading, sources),
            prometheus=reading.figures if reading is not None else None,
            apiservers=self.tracker.apiservers,
            lease_replacements=None if leases.error else self.tracker.leases.replacements,
            ready=ready.ok,
            live=live.ok,
            failing_checks=ready.failing,
            failing_live_checks=live.failing,
            down=down,
            outages=self.tracker.outage_windows(now),
            crds=crds,
            fit_points=rss_fit.n if rss_fit else 0,
            fit_crd_counts=rss_fit.distinct_x if rss_fit else 0,
            working_set_bytes=_int(values.get("working_set_bytes")),
            memory_limit_bytes=_int(values.get("memory_limit_bytes")),
            pod_restarts=dict(reading.pod_restarts) if reading else {},
            sources=sources,
            unobservable=unobservable,
            **fitted,
            **own_share,
        )

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

    def _fits(self, replica: str | None) -> dict[str, ProcessFits]:
        """The answering replica's fits; the tracker's when no start time names the process."""
        return self.tracker.replicas.slot_fits(replica) if replica else self.tracker.fits

    def _restarts(self, values: dict[str, float], reading: PrometheusReading | None,
                  unobservable: dict[str, str], now: float, crds: int | None) -> tuple[int | None, str | None]:
        if "start_time" in values:
            figures = {name: values[name] for name in REPLICA_GAUGES if name in values}
            replica = self.tracker.replicas.name_of(values["start_time"])
            if replica is None:  # a scrape the listener did not see
                replica = self.tracker.observe_start(values["start_time"], now, figures, crds)
            elif crds is not None:  # this run's CRD count goes with this run's scrape
                self.tracker.replicas.fit(replica, crds, figures)
            self.tracker.replicas.answering = replica
            return self.tracker.restarts, replica
        return self._restarts_without_start(reading, unobservable), None

    def _restarts_without_start(self, reading: PrometheusReading | None, unobservable: dict[str, str]) -> int | None:
        if self.tracker.start_time is not None:
            return self.tracker.restarts  # seen before: the server is away, the count stands
        instance_restarts = [i.restarts for i in reading.figures.instances if i.restarts is not None] \
            if reading is not None and reading.figures is not None else []
        if instance_restarts:  # start-time changes per instance, within Prometheus' window
            return sum(instance_restarts)
        unobservable["restarts"] = "needs process_start_time_seconds (see start_time)"
        return None

    async def _etcd_connections(self, unobservable: dict[str, str]) -> int | None:
        counter = self.facts.lab.etcd_connections
        if counter is None:
            unobservable["etcd_connections"] = ("counted from /proc on a lab only "
                                                "(this session did not wire the lab's counter)")
            return None
        count = await asyncio.to_thread(counter)
        if count is None:
            unobservable["etcd_connections"] = "the lab's API server process is not running"
        return count

    def _fit(self, values: dict[str, float], crds: int | None, unobservable: dict[str, str],
             replica: str | None) -> dict[str, Any]:
        start = values.get("start_time", self.tracker.start_time or 0.0)
        fitted: dict[str, Any] = {}
        for name, (figure, slope_field, r2_field, unit) in FITS.items():
            fits = self._fits(replica)[name]
            if replica is None and crds is not None and figure in values:  # a replica's fits: filled by it
                fits.add(start, crds, values[figure])
            result = fits.result()
            fitted[slope_field] = result.slope / unit if result else None
            fitted[r2_field] = result.r2 if result else None
            if result is None:
                unobservable[slope_field] = unobservable[r2_field] = self._no_fit_reason(
                    name, figure, values, crds, replica)
            elif result.r2 is None:
                unobservable[r2_field] = f"{figure} did not vary"
        return fitted

    def _own_share(self, values: dict[str, float], crds: int | None, objects: dict[str, int],
                   unobservable: dict[str, str]) -> dict[str, Any]:
        """The CRDs' own MiB per CRD where Crossplane's MRDs arrived too (they cost memory of their own).

        Both counts varying apart: a least-squares plane through RSS against CRDs and MRDs gives each
        its slope.  Grown together (a provider install makes each MRD's CRD at once): the MRDs'
        measured cost is taken out of RSS first.  MRD count constant: ``mib_per_crd`` is the CRDs' own.
        """
        if not objects:
            return {}
        mrds = objects.get(MRDS_RESOURCE, 0)
        rss = values.get("rss_bytes")
        start = values.get("start_time", self.tracker.start_time or 0.0)
        fits = self.tracker.mrd_fits
        if crds is not None and rss is not None:
            fits["plane"].add(start, crds, mrds, rss)
            fits["rss_less_mrds"].add(start, crds, rss - mrds * MRD_BYTES)
        plane = fits["plane"].result()
        found: dict[str, Any] = {"mrds": mrds}
        if plane is None or plane.state == "x2-constant":
            unobservable["mib_per_crd_own"] = ("no MRD count changed while this API server ran: mib_per_crd is "
                                               "the CRDs' own")
            return found
        if plane.state == "separated" and (plane.slope1 or 0) > 0 and (plane.slope2 or 0) > 0:
            return {**found, "mib_per_crd_own": plane.slope1 / MIB, "mib_per_mrd": (plane.slope2 or 0) / MIB,
                    "own_share_by": "fit"}
        line = fits["rss_less_mrds"].result()
        unobservable["mib_per_mrd"] = (f"MRDs and CRDs grew together: their shares cannot be told apart, so "
                                       f"each MRD is taken at its measured {MRD_BYTES / MIB:.1f} MiB")
        if line is None:
            return found
        return {**found, "mib_per_crd_own": line.slope / MIB, "own_share_by": "mrd-cost"}

    def _no_fit_reason(self, name: str, figure: str, values: dict[str, float], crds: int | None,
                       replica: str | None) -> str:
        if crds is None:
            return "no CRD count (see crds)"
        if figure not in values:
            return f"no {figure} (see {figure})"
        current = self._fits(replica)[name].current()
        seen = current.distinct_x if current else 0
        return f"needs samples at two or more CRD counts from one API server process (seen {seen})"


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _process_figures(scrape: Scrape, unobservable: dict[str, str]) -> dict[str, float]:
    """Process and runtime gauges from the scrape; a reason in ``unobservable`` for each one missing."""
    values: dict[str, float] = {}
    for field_name, family in PROCESS_FAMILIES.items():
        value = scrape.value(family) if scrape.ok else None
        if value is not None:
            values[field_name] = value
        elif scrape.ok:
            unobservable[field_name] = f"/metrics has no {family}"
        else:
            unobservable[field_name] = scrape.error or "/metrics failed"
    return values


def _fill_from_prometheus(reading: PrometheusReading, values: dict[str, float], sources: dict[str, str],
                          unobservable: dict[str, str]) -> None:
    """Fill figures /metrics could not give from Prometheus (same meaning first)."""
    for field_name, value in reading.values.items():
        if field_name == "working_set_bytes" or field_name not in values:
            values[field_name] = value
            sources[field_name] = reading.sources[field_name]
            unobservable.pop(field_name, None)
    if "rss_bytes" not in values and "working_set_bytes" in values:
        # A pod's working set is not the process's RSS, but the closest a managed cluster shows.
        values["rss_bytes"] = values["working_set_bytes"]
        sources["rss_bytes"] = reading.sources["working_set_bytes"]
        unobservable.pop("rss_bytes", None)
    if reading.pod_restarts:
        sources["pod_restarts"] = reading.sources["pod_restarts"]
    for field_name, reason in reading.unobservable.items():
        if field_name not in values and field_name not in sources:
            previous = unobservable.get(field_name)
            unobservable[field_name] = f"{previous}; {reason}" if previous else reason


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


def _unused_crds(objects: dict[str, int], crd_names: Collection[str] | None,
                 unobservable: dict[str, str]) -> list[str] | None:
    """CRDs ("plural.group", the object-count family's "resource.group") with no stored objects."""
    if crd_names is None:
        unobservable["crds_without_objects"] = "needs the CRD watch's list of CRDs"
        return None
    if not objects:
        unobservable["crds_without_objects"] = unobservable.get("storage_objects_total", "no object counts")
        return None
    return [name for name in crd_names if objects.get(name, 0) <= 0]


def _storage(scrape: Scrape, unobservable: dict[str, str]) -> tuple[dict[str, int], int | None]:
    """Stored objects per resource ("resource.group") and the database size, as the server reports."""
    if not scrape.ok:
        reason = scrape.error or "/metrics failed"
        unobservable.update(storage_objects_total=reason, storage_size_bytes=reason)
        return {}, None
    objects: dict[str, int] = {}
    for family in OBJECT_FAMILIES:
        grouped = scrape.by(family, "group", "resource")
        if grouped:
            for (group, resource), value in grouped.items():
                if value >= 0:  # -1: the server failed to count this resource
                    objects[f"{resource}.{group}" if group else resource] = int(value)
            break
    else:
        unobservable["storage_objects_total"] = f"/metrics has none of {', '.join(OBJECT_FAMILIES)}"
    size = None
    for family in SIZE_FAMILIES:
        total = scrape.total(family)
        if total is not None:
            size = int(total)
            break
    else:
        unobservable["storage_size_bytes"] = f"/metrics has none of {', '.join(SIZE_FAMILIES)}"
    return objects, size


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

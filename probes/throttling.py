"""Throttling: API Priority and Fairness on the server, rate limits on the client.

Server side, from the shared ``/metrics`` scrape (:mod:`probes.apf`): the APF
families per priority level (and per flow schema where something happened), as
current values and as rates between two scrapes.  The probe keeps its own previous
scrape (probes sharing the scrape run on other cadences); ``once`` takes two
scrapes :data:`ONCE_INTERVAL_SECONDS` apart so that rates exist.

Of crdscope's own requests (:class:`connection.cluster.RequestLog`): every 429
with its ``Retry-After``, and the ``X-Kubernetes-PF-*-UID`` headers mapped to
names through the flowcontrol API (:class:`FlowcontrolNames`, listed rarely).

Client side (the probe never imports the loader):

* ``facts.client_limiter`` (:class:`base.facts.ClusterFacts`): the token bucket crdscope
  itself runs; whoever starts the loader on a monitor gives the session's facts the
  loader's :class:`connection.ratelimit.TokenBucket`.  Any :class:`base.facts.ClientBucket`
  will do: ``qps``, ``burst`` and the running totals ``acquired`` (requests that passed),
  ``throttled`` (those that had to wait) and ``waited_seconds``.
* the client models (client-go, kubectl) of the discovery probe's latest sample
  (``parts.latest["discovery"]``, a :class:`DiscoverySample`), copied as they are.

What cannot be seen (``/metrics`` forbidden, no limiter in a one-shot run) is
named with its reason in ``unobservable``; the rest of the sample stays filled.
"""

from __future__ import annotations

from crdscope.base.samples.throttling import ClientLimiter, OwnFlow, Response429, Responses429, ThrottlingSample

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from .apf import APF_FAMILIES, CURRENT_LIMIT, NOMINAL_LIMIT, FlowcontrolNames, level_names, priority_levels
from crdscope.base.samples.throttling import FlowSchemaActivity, PriorityLevel
from crdscope.connection.cluster import Cluster, RequestLog
from crdscope.connection.metrics import SHARED_SCRAPE_AGE, MetricsSource, Scrape
from crdscope.base.facts import ClientBucket, ClusterFacts
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from .replicas import KEEP_SLOTS, PROCESS_FAMILY, process_of, start_time_of
from crdscope.base.samples import Sample

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .probe import ProbeParts

#: Seconds between the two scrapes of :func:`once`: long enough for a rate, short for a CLI.
ONCE_INTERVAL_SECONDS = 2.0
#: How many of the latest 429s a sample lists.
RECENT_429 = 20

# --------------------------------------------------------------------------- the sample


# --------------------------------------------------------------------------- crdscope's own requests


def responses_429(log: RequestLog, names: FlowcontrolNames, previous_total: int | None) -> Responses429:
    """The 429s crdscope received, the latest with names for their flow schema and level."""
    recent = list(log.throttled)[-RECENT_429:]
    return Responses429(
        total=log.throttled_total,
        since_last_run=log.throttled_total - (previous_total or 0),
        recent=tuple(
            Response429(timestamp=t.timestamp, method=t.method, path=t.path,
                        retry_after_seconds=t.retry_after_seconds,
                        flow_schema=names.flow_schema(t.flow_schema_uid),
                        priority_level=names.priority_level(t.priority_level_uid))
            for t in recent
        ),
    )


def own_flows(log: RequestLog, names: FlowcontrolNames) -> tuple[OwnFlow, ...]:
    """Where the server classified crdscope's requests (most used first)."""
    return tuple(
        OwnFlow(flow_schema=names.flow_schema(fs), priority_level=names.priority_level(pl),
                flow_schema_uid=fs, priority_level_uid=pl, responses=count)
        for (fs, pl), count in sorted(log.apf_pairs.items(), key=lambda item: -item[1])
    )


def header_uids(log: RequestLog) -> set[str]:
    """Every APF UID crdscope's responses carried."""
    return {uid for pair in log.apf_pairs for uid in pair}


# --------------------------------------------------------------------------- client side


def client_limiter(limiter: ClientBucket | None, previous_waited: float | None) -> ClientLimiter | None:
    """A view of crdscope's own token bucket (see the module docstring)."""
    if limiter is None:
        return None
    waited = float(limiter.waited_seconds)
    return ClientLimiter(
        qps=float(limiter.qps),
        burst=int(limiter.burst),
        acquired=int(limiter.acquired),
        throttled=int(limiter.throttled),
        waited_seconds=waited,
        waited_seconds_since_last_run=None if previous_waited is None else waited - previous_waited,
    )


def client_models(discovery_sample: Sample | None) -> tuple[ClientModel, ...]:
    """The client models of the discovery probe's latest sample (none before its first run)."""
    if not isinstance(discovery_sample, DiscoverySample):
        return ()
    return tuple(discovery_sample.client_models)


# --------------------------------------------------------------------------- the probe


class ThrottlingProbe(ProbeBase):
    """The throttling probe of a monitor (or of :func:`once`): keeps its previous scrape."""

    name = "throttling"
    #: Throttling, health and latency share one /metrics scrape (megabytes on a big cluster, most of
    #: the monitor's bytes): 10 s keeps it under 50 KB/s with 2,000 CRDs (budget 6 scrapes/min, the
    #: ``metrics`` part's); idle, every 20 s (the server builds the whole text for each scrape).  Its
    #: own requests (the flowcontrol names, listed rarely): 2/min.
    pacing = Pacing(busy=10.0, idle=20.0, budget=2.0)

    def __init__(self, cluster: Cluster, metrics: MetricsSource, *, facts: ClusterFacts | None = None,
                 latest: Mapping[str, Sample] | None = None) -> None:
        self.cluster = cluster
        self.metrics = metrics
        self.facts = facts if facts is not None else ClusterFacts()
        self.latest = latest if latest is not None else {}
        self.names = FlowcontrolNames(cluster)
        metrics.want(*APF_FAMILIES, PROCESS_FAMILY)
        #: The previous scrape of each API server process (behind a balancer, rates stay per replica).
        self._previous: dict[int | None, Scrape] = {}
        self._previous_429: int | None = None
        self._previous_waited: float | None = None

    async def run(self) -> ThrottlingSample:
        """One observation; rates need the previous run's scrape."""
        # Another probe's recent scrape will do (SHARED_SCRAPE_AGE): rates use each scrape's own time.
        scrape = await self.metrics.scrape(max_age=self.cadence * SHARED_SCRAPE_AGE)
        return await self.observe(scrape)

    async def observe(self, scrape: Scrape) -> ThrottlingSample:
        """Build the sample from ``scrape`` (and the kept previous one)."""
        unobservable: dict[str, str] = {}
        await self.names.refresh(header_uids(self.cluster.requests), level_names(scrape))
        if self.names.error:
            unobservable["names"] = self.names.error
        server = self._server_side(scrape, unobservable)
        levels = server.levels
        log = self.cluster.requests
        answered = responses_429(log, self.names, self._previous_429)
        self._previous_429 = log.throttled_total
        limiter = client_limiter(self.facts.client_limiter, self._previous_waited)
        if limiter is None:
            unobservable["client_limiter"] = "no client-side limiter runs here (the loader's, while it loads)"
        else:
            self._previous_waited = limiter.waited_seconds
        models = client_models(self.latest.get("discovery"))
        if not models:
            unobservable["client_models"] = "no discovery sample with client models yet"
        rejected = [level.rejected_per_s for level in levels if level.rejected_per_s is not None]
        return ThrottlingSample(
            server=self.cluster.server,
            error=server.error,
            interval_seconds=server.interval,
            priority_levels=levels,
            flow_schemas=server.schemas,
            rejected_per_s=sum(rejected) if rejected else None,
            responses_429=answered,
            own_flows=own_flows(log, self.names),
            client_limiter=limiter,
            client_models=models,
            scrape_bytes=scrape.bytes,
            scrape_seconds=scrape.seconds,
            flowcontrol_api=self.names.api_version,
            process_start_time_seconds=start_time_of(scrape),
            unobservable=unobservable,
        )

    def _server_side(self, scrape: Scrape, unobservable: dict[str, str]) -> _ServerSide:
        """APF per priority level and flow schema, rates against this process's previous scrape."""
        if not scrape.ok:
            if scrape.status not in (401, 403):
                return _ServerSide(error=scrape.error)
            unobservable["priority_levels"] = unobservable["flow_schemas"] = scrape.error or "/metrics forbidden"
            return _ServerSide()
        process = process_of(scrape)
        older = self._previous.get(process)
        self._previous[process] = scrape
        while len(self._previous) > KEEP_SLOTS:
            self._previous.pop(min(self._previous, key=lambda key: self._previous[key].timestamp))
        if not scrape.has(NOMINAL_LIMIT) and not scrape.has(CURRENT_LIMIT):
            unobservable["priority_levels"] = "the server exports no API Priority and Fairness metrics (APF disabled?)"
            return _ServerSide()
        levels, schemas = priority_levels(scrape, older, self.names.limit_responses)
        if older is not None and scrape.timestamp > older.timestamp:
            return _ServerSide(levels, schemas, interval=scrape.timestamp - older.timestamp)
        unobservable["rates"] = "one scrape so far: rates need the next run"
        return _ServerSide(levels, schemas)


@dataclasses.dataclass(frozen=True)
class _ServerSide:
    """What the server's APF families say (empty: not observable, or the scrape failed: ``error``)."""

    levels: tuple[PriorityLevel, ...] = ()
    schemas: tuple[FlowSchemaActivity, ...] = ()
    interval: float | None = None
    error: str | None = None


async def once(cluster: Cluster) -> ThrottlingSample:
    """Two scrapes :data:`ONCE_INTERVAL_SECONDS` apart, so that the sample has rates."""
    probe = ThrottlingProbe(cluster, MetricsSource(cluster))
    first = await probe.metrics.scrape()
    sample = await probe.observe(first)
    if not first.ok:  # down or forbidden: a second scrape would say the same
        return sample
    await asyncio.sleep(ONCE_INTERVAL_SECONDS)
    return await probe.observe(await probe.metrics.scrape())


def make_probe(parts: ProbeParts) -> ThrottlingProbe:
    """The throttling probe on the monitor's shared scrape, the session's facts and the latest samples."""
    return ThrottlingProbe(parts.cluster, parts.metrics, facts=parts.facts, latest=parts.latest)

"""The discovery probe: how long a client needs to find every API, and how that grows with CRDs.

Each run fetches aggregated discovery (``/api`` then ``/apis`` with client-go's
Accept list and ``If-None-Match``: an unchanged document costs a 304) and
recognises the answer by its Content-Type.  A plain ``APIGroupList``/``APIVersions``
or a 406 means the server does not serve aggregated discovery: the probe then
does what client-go does, the legacy walk (``/api``, ``/apis``, then every
group-version at once).  The walk also runs on its own, rarely
(``cadences.discovery_legacy``) and when the set of group-versions changed, to
measure per-group-version latencies and to replay them through the client
rate limits of :mod:`connection.ratelimit` (the time kubectl users see).

Documents are parsed in :mod:`connection.discovery_docs` (big ones in pieces, so that
the event loop keeps running); kubectl's disk cache and its own timing are in
:mod:`probes.discovery_kubectl`.  What the OpenAPI probe reads is published as
``monitor.shared.discovery`` (:class:`DiscoveryView`).
"""

from __future__ import annotations

from crdscope.base.samples.discovery import DiscoverySample, GroupVersionLatency

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple


from . import discovery_kubectl as kubectl_side
from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.connection.discovery_decode import decode_aggregated
from crdscope.connection.discovery_docs import (
    ACCEPT_AGGREGATED,
    ACCEPT_LEGACY,
    DiscoveredAPIs,
    content_format,
    decode_in_pieces,
    group_version_path,
    parse_api_group_list,
    parse_api_versions,
    parse_resource_list,
    Resource,
)
from crdscope.base.samples.discovery import ClientModel, DiscoveryFormat, DiscoveryMode, KubectlCache
from crdscope.base.errors import ClusterError, ConfigError
from crdscope.connection.ratelimit import ClientLimits, client_models, user_limits
from crdscope.base.samples import percentile
from crdscope.base.settings import Cadences
from .probe import Pacing, ProbeBase
from .shared import DiscoveryView, SharedState
from crdscope.connection.traffic import origin
from crdscope.connection.transport import TRANSPORT_ERRORS

if TYPE_CHECKING:
    from .probe import ProbeParts

log = logging.getLogger("crdscope.discovery")

#: (path, size, mtime) of every file of kubectl's cache (``discovery_kubectl.cache_signature``).
CacheSignature = tuple[tuple[str, int, int], ...]

SLOWEST = 5
#: After a change, walk again no sooner than this fraction of the legacy cadence (politeness floor).
CHANGE_WALK_FLOOR = 0.1
#: During an install the walk waits, but never longer than this many legacy cadences.
MAX_WALK_DEFERRALS = 4
#: The origin the walk's requests are counted under (:mod:`connection.traffic`).
WALK_ORIGIN = "discovery-walk"


@dataclass
class _Fetched:
    status: int
    content_type: str | None
    etag: str | None
    body: bytes
    wire_bytes: int
    seconds: float


@dataclass
class _Walk:
    timestamp: float
    apis: DiscoveredAPIs
    requests: int
    bytes: int
    wire_bytes: int
    seconds: float
    api_seconds: float
    apis_seconds: float
    gv_seconds: dict[str, float]
    failed: dict[str, str]


class _AggregatedAnswer(NamedTuple):
    """``/api`` and ``/apis`` asked for aggregated discovery."""

    format: DiscoveryFormat
    apis: DiscoveredAPIs
    fetches: list[_Fetched]
    #: Why this server needs the legacy walk (None: aggregated discovery answered).
    fallback_reason: str | None
    #: Plain (legacy) answers already received, by path, to reuse for the walk.
    plain: dict[str, _Fetched]


class _LegacyLists(NamedTuple):
    """Legacy ``/api`` and ``/apis`` answers and the group-versions they list."""

    api: _Fetched
    apis: _Fetched
    listed: DiscoveredAPIs


class _GroupVersionAnswer(NamedTuple):
    """One group-version's GET of the legacy walk: its answer and resources, or why there are none."""

    group_version: str
    fetched: _Fetched | None
    resources: list[Resource] | None
    error: str | None


class _Measured(NamedTuple):
    """What this run's discovery cost, in the mode it ran."""

    mode: DiscoveryMode
    requests: int
    body_bytes: int
    wire_bytes: int
    seconds: float


class _ColdFigure(NamedTuple):
    """The latest discovery fetched without ETags: when, how long, how many bytes on the wire."""

    timestamp: float
    seconds: float
    wire_bytes: int


class _Counted(NamedTuple):
    """A discovery document's resources, counted once per document (thousands of CRDs)."""

    apis: DiscoveredAPIs
    served: frozenset[tuple[str, str, str]]
    resources: frozenset[str]


class _RunError(Exception):
    """This run cannot go on; the message becomes the sample's error."""


class DiscoveryProbe(ProbeBase):
    """The periodic discovery probe of one cluster."""

    name = "discovery"
    #: Two conditional GETs (/api, /apis: 304 when unchanged) while CRDs change (budget 14/min),
    #: every minute once no CRD changed for ``cadences.settle`` seconds (a change wakes it at once).
    #: The legacy walk runs on its own cadences (``cadences.discovery_legacy``).
    pacing = Pacing(busy=10.0, idle=60.0, budget=14.0)

    def __init__(self, cluster: Cluster, cadences: Cadences | None = None, *,
                 shared: SharedState | None = None, extra_limits: ClientLimits | None = None) -> None:
        cadences = cadences or Cadences()
        self.cluster = cluster
        self.settle = cadences.settle
        self.legacy_cadence = cadences.discovery_legacy
        self.legacy_refresh = max(cadences.discovery_legacy, cadences.discovery_legacy_refresh)
        self.shared = shared
        self.extra_limits = extra_limits
        self.view: DiscoveryView | None = None
        self.not_modified_total = 0
        self._etags: dict[str, str] = {}
        self._aggregated: dict[str, tuple[DiscoveryFormat, DiscoveredAPIs]] = {}  # path -> (format, parsed)
        self._merged: DiscoveredAPIs | None = None
        self._counted: _Counted | None = None
        self._legacy_only = False
        self._walk: _Walk | None = None
        self._walk_listed: set[str] = set()
        self._previous: set[str] | None = None
        self._first_seen: dict[str, float] = {}
        self._cache_signature: CacheSignature | None = None
        self._cache: KubectlCache | None = None
        self._cold: _ColdFigure | None = None

    async def run(self) -> DiscoverySample:
        """One periodic run: aggregated discovery, plus the legacy walk when it is due."""
        return await self.observe()

    # -- fetching -----------------------------------------------------------------------
    async def _get(self, path: str, accept: str, etag: str | None = None) -> _Fetched:
        headers = {"Accept": accept}
        if etag:
            headers["If-None-Match"] = etag
        started = time.perf_counter()
        try:
            async with self.cluster.client.stream("GET", path, headers=headers) as response:
                # Read into the response so an error answer can explain itself (status_message).
                body = await response.aread()
                if response.status_code >= 400 and response.status_code != 406:
                    raise_for_status(response)
                return _Fetched(response.status_code, response.headers.get("Content-Type"),
                                response.headers.get("ETag"), bytes(body), response.num_bytes_downloaded,
                                time.perf_counter() - started)
        except TRANSPORT_ERRORS as exc:
            raise _RunError(explain(exc, self.cluster.server)) from None
        except ClusterError as exc:
            raise _RunError(str(exc)) from None

    async def _aggregated_fetch(self) -> _AggregatedAnswer:
        """``/api`` then ``/apis`` asked for aggregated discovery."""
        fetches: list[_Fetched] = []
        parts: list[DiscoveredAPIs] = []
        formats: list[DiscoveryFormat] = []
        plain: dict[str, _Fetched] = {}
        for path in ("/api", "/apis"):
            fetched = await self._get(path, ACCEPT_AGGREGATED, self._etags.get(path))
            fetches.append(fetched)
            if fetched.status == 406:
                return _AggregatedAnswer("legacy", DiscoveredAPIs(), fetches,
                                         f"{path} answered 406 to aggregated discovery", {})
            if fetched.status == 304 and path in self._aggregated:
                fmt, parsed = self._aggregated[path]
            else:
                fmt = content_format(fetched.content_type)
                if fmt == "legacy":
                    plain[path] = fetched
                    self._etags.pop(path, None)
                    self._aggregated.pop(path, None)
                    parts.append(DiscoveredAPIs())
                    formats.append(fmt)
                    continue
                parsed = await decode_aggregated(fetched.body, path)
                if fetched.etag:
                    self._etags[path] = fetched.etag
                self._aggregated[path] = (fmt, parsed)
            parts.append(parsed)
            formats.append(fmt)
        if plain:
            which = " and ".join(plain)
            return _AggregatedAnswer("legacy", DiscoveredAPIs(), fetches,
                                     f"{which} answered plain JSON (no aggregated discovery)", plain)
        if self._merged is None or any(f.status != 304 for f in fetches):
            self._merged = parts[0].merge(parts[1])  # the same object while nothing changes
        return _AggregatedAnswer(formats[-1], self._merged, fetches, None, {})

    async def _legacy_lists(self, plain: dict[str, _Fetched]) -> _LegacyLists:
        """Legacy ``/api`` and ``/apis`` (reusing plain answers already received), parsed and merged."""
        api = plain.get("/api") or await self._get("/api", ACCEPT_LEGACY)
        apis = plain.get("/apis") or await self._get("/apis", ACCEPT_LEGACY)
        for path, fetched in (("/api", api), ("/apis", apis)):
            if fetched.status != 200:
                raise _RunError(f"legacy discovery {path} answered {fetched.status}")
        listed = parse_api_versions(await decode_in_pieces(api.body), "/api").merge(
            parse_api_group_list(await decode_in_pieces(apis.body), "/apis"))
        return _LegacyLists(api, apis, listed)

    async def _walk_legacy(self, lists: _LegacyLists | None = None) -> _Walk:
        """client-go's walk: ``/api``, ``/apis``, then every group-version at once, each timed."""
        started = time.perf_counter()
        timestamp = time.time()
        reused = 0.0 if lists is None else lists.api.seconds + lists.apis.seconds
        with origin(WALK_ORIGIN):  # 2+N requests: budgeted in walks per hour, apart from the probe's own
            api, apis, listed = lists or await self._legacy_lists({})
            gvs = listed.group_versions()
            results = await asyncio.gather(*(self._get_group_version(gv) for gv in gvs))
        failed = {r.group_version: r.error for r in results if r.error}
        if gvs and len(failed) == len(gvs):
            raise _RunError(f"every group-version GET failed, e.g. {gvs[0]}: {failed[gvs[0]]}")
        for result in results:
            if result.resources is not None:
                listed.resources[result.group_version] = result.resources
        answered = [api, apis] + [r.fetched for r in results if r.fetched]
        return _Walk(
            timestamp=timestamp, apis=listed, requests=2 + len(gvs),
            bytes=sum(len(f.body) for f in answered), wire_bytes=sum(f.wire_bytes for f in answered),
            seconds=time.perf_counter() - started + reused, api_seconds=api.seconds, apis_seconds=apis.seconds,
            gv_seconds={r.group_version: r.fetched.seconds for r in results if r.fetched}, failed=failed,
        )

    async def _get_group_version(self, gv: str) -> _GroupVersionAnswer:
        path = group_version_path(gv)
        try:
            fetched = await self._get(path, ACCEPT_LEGACY)
            if fetched.status != 200:
                return _GroupVersionAnswer(gv, fetched, None, f"{path} answered {fetched.status}")
            resources = parse_resource_list(await decode_in_pieces(fetched.body), path)
            return _GroupVersionAnswer(gv, fetched, resources, None)
        except _RunError as exc:
            return _GroupVersionAnswer(gv, None, None, str(exc))
        except ValueError as exc:  # DiscoveryFormatError or undecodable JSON
            return _GroupVersionAnswer(gv, None, None, f"{path}: {exc}")

    async def _measure_cold(self, fetches: list[_Fetched], seconds: float) -> None:
        """Keep a cold figure: this run's fetches when none was conditional, else a full GET when due."""
        now = time.time()
        if fetches and all(f.status == 200 for f in fetches):
            self._cold = _ColdFigure(now, seconds, sum(f.wire_bytes for f in fetches))
        elif self._cold is None or now - self._cold.timestamp >= self.legacy_cadence:
            started = time.perf_counter()
            cold = [await self._get(path, ACCEPT_AGGREGATED) for path in ("/api", "/apis")]
            self._cold = _ColdFigure(now, time.perf_counter() - started, sum(f.wire_bytes for f in cold))

    # -- one run ------------------------------------------------------------------------
    def _walk_due(self, listed: set[str] | None, now: float) -> bool:
        """The walk's policy: a first one; then never during an install (CRDs changed within
        ``settle`` seconds) unless none ran for :data:`MAX_WALK_DEFERRALS` legacy cadences; once
        the set of group-versions changed and settled, or the legacy cadence passed (on a server
        with aggregated discovery: ``discovery_legacy_refresh``); never while the guard holds
        heavy reads back (a walk is 2+N requests)."""
        if self._walk is None:
            return True
        age = now - self._walk.timestamp
        if self.shared is not None and not self.shared.guard.allows("discovery_walk"):
            return False
        if self.shared is not None and self.shared.crds_changing(self.settle):
            return age >= self.legacy_cadence * MAX_WALK_DEFERRALS
        if age >= (self.legacy_cadence if self._legacy_only else self.legacy_refresh):
            return True
        return listed is not None and listed != self._walk_listed and age >= self.legacy_cadence * CHANGE_WALK_FLOOR

    async def observe(self, mode: DiscoveryMode | None = None) -> DiscoverySample:
        """Run once.  ``mode``: ``"aggregated"`` (no walk unless the server forces one),
        ``"legacy"`` (the walk alone) or None (the periodic policy)."""
        try:
            return await self._observe(mode)
        except _RunError as exc:
            error = str(exc)
        except ValueError as exc:  # DiscoveryFormatError and undecodable JSON
            error = f"malformed discovery document: {exc}"
        return DiscoverySample(server=self.cluster.server, error=error, not_modified_total=self.not_modified_total)

    async def _observe(self, mode: DiscoveryMode | None) -> DiscoverySample:
        started = time.perf_counter()
        fallback, walk = None, None
        fmt: DiscoveryFormat = "legacy"
        fetches: list[_Fetched] = []
        if mode == "legacy":
            walk = await self._walk_legacy()
            found, fetch_seconds = walk.apis, walk.seconds
        else:
            fmt, found, fetches, fallback, plain = await self._aggregated_fetch()
            self.not_modified_total += sum(1 for f in fetches if f.status == 304)
            if fallback is None:
                self._legacy_only = False
                fetch_seconds = time.perf_counter() - started
                await self._measure_cold(fetches, fetch_seconds)
                if mode is None and self._walk_due(found.listed(), time.time()):
                    walk = await self._walk_legacy()
            else:
                if not self._legacy_only:
                    log.info("%s: no aggregated discovery (%s); using the legacy walk", self.cluster.server, fallback)
                self._legacy_only = True
                lists = await self._legacy_lists(plain)
                fetches += [f for f in (lists.api, lists.apis) if all(f is not other for other in fetches)]
                fetch_seconds = time.perf_counter() - started
                found = lists.listed
                if mode is None and not self._walk_due(found.listed(), time.time()):
                    # Between walks, a server without aggregated discovery costs two requests a run.
                    known = set(found.group_versions())
                    assert self._walk is not None  # a walk is always due until there is one
                    found.resources = {gv: r for gv, r in self._walk.apis.resources.items() if gv in known}
                else:
                    walk = await self._walk_legacy(lists)
                    found = walk.apis
        received = time.time()
        if walk is not None:
            self._walk, self._walk_listed = walk, walk.apis.listed()
        cache = await self._refresh_kubectl_cache()
        if walk is not None and walk.apis is found:  # the walk was this run's discovery
            measured = _Measured("legacy", walk.requests, walk.bytes, walk.wire_bytes, walk.seconds)
        else:
            measured = _Measured("legacy" if fallback else "aggregated", len(fetches),
                                 sum(len(f.body) for f in fetches), sum(f.wire_bytes for f in fetches), fetch_seconds)
        return self._sample(found, received, measured, fmt, fallback, sum(1 for f in fetches if f.status == 304),
                            walk, cache)

    def _changes(self, found: DiscoveredAPIs, now: float) -> tuple[list[str], list[str], list[str]]:
        """(fresh group-versions, appeared, vanished); keeps first-seen times and the shared view."""
        listed = found.listed()
        previous, self._previous = self._previous, listed
        appeared = sorted(listed - previous) if previous is not None else []
        vanished = sorted(previous - listed) if previous is not None else []
        fresh = found.group_versions()
        fresh_set = set(fresh)
        for gv in [gv for gv in self._first_seen if gv not in fresh_set]:
            del self._first_seen[gv]
        for gv in fresh:
            self._first_seen.setdefault(gv, now)
        return fresh, appeared, vanished

    def _sample(self, found: DiscoveredAPIs, received: float, measured: _Measured, fmt: DiscoveryFormat,
                fallback: str | None, not_modified: int, walk: _Walk | None, cache: KubectlCache) -> DiscoverySample:
        fresh, appeared, vanished = self._changes(found, received)
        if self._counted is None or self._counted.apis is not found:  # counting thousands of CRDs: once per change
            self._counted = _Counted(found, frozenset(found.served_resources()), frozenset(found.preferred_resources()))
        served, resources = self._counted.served, self._counted.resources
        self.view = DiscoveryView(received, measured.mode, dict(self._first_seen), frozenset(found.stale), served,
                                  resources)
        if self.shared is not None:
            self.shared.discovery = self.view
        last = self._walk
        unobservable: dict[str, str] = {}
        latencies: list[float] = []
        slowest: list[tuple[str, float]] = []
        models: tuple[ClientModel, ...] = ()
        if last is None:
            unobservable["latencies"] = "no legacy walk measured yet (crdscope probe discovery --legacy)"
            unobservable["client_models"] = unobservable["latencies"]
        else:
            latencies = list(last.gv_seconds.values())
            slowest = sorted(last.gv_seconds.items(), key=lambda item: item[1], reverse=True)[:SLOWEST]
            models = client_models(last.api_seconds, last.apis_seconds, latencies, self.extra_limits)
        return DiscoverySample(
            server=self.cluster.server, mode=measured.mode, format=fmt, fallback_reason=fallback,
            group_versions=len(fresh), resources=len(resources), stale_group_versions=tuple(sorted(found.stale)),
            failed_group_versions=dict(sorted(walk.failed.items())) if walk else {},
            requests=measured.requests, bytes=measured.body_bytes, wire_bytes=measured.wire_bytes,
            seconds=measured.seconds,
            not_modified=not_modified, not_modified_total=self.not_modified_total,
            changed=bool(appeared or vanished), appeared=tuple(appeared), vanished=tuple(vanished),
            cold_timestamp=self._cold.timestamp if self._cold else None,
            cold_seconds=self._cold.seconds if self._cold else None,
            cold_bytes=self._cold.wire_bytes if self._cold else None,
            walk_timestamp=last.timestamp if last else None, walk_requests=last.requests if last else None,
            walk_bytes=last.bytes if last else None, walk_seconds=last.seconds if last else None,
            gv_p50_seconds=percentile(latencies, 50), gv_p95_seconds=percentile(latencies, 95),
            gv_max_seconds=max(latencies) if latencies else None,
            slowest=tuple(GroupVersionLatency(gv, seconds) for gv, seconds in slowest),
            client_models=models, kubectl_cache=cache, unobservable=unobservable,
        )

    async def _refresh_kubectl_cache(self) -> KubectlCache:
        """Inspect kubectl's cache in a thread; re-time the reads only when its files changed."""
        def inspect() -> tuple[CacheSignature, KubectlCache]:
            signature = kubectl_side.cache_signature(kubectl_side.cache_dir_for(self.cluster.server))
            previous = self._cache if signature == self._cache_signature else None
            current = kubectl_side.inspect_cache(self.cluster.server, time_reads=previous is None)
            if previous is not None:
                current = dataclasses.replace(current, read_seconds=previous.read_seconds,
                                              unreadable_files=previous.unreadable_files)
            return signature, current

        self._cache_signature, cache = await asyncio.to_thread(inspect)
        self._cache = cache
        return cache


async def once(cluster: Cluster, legacy: bool = False, qps: float | None = None, burst: int | None = None,
               kubectl: bool | str = False) -> DiscoverySample:
    """``crdscope probe discovery``: aggregated discovery, or (``legacy``) the legacy walk.

    ``qps``/``burst`` add a client model of the walk (so they need ``legacy``);
    ``kubectl`` also times the real ``kubectl api-resources`` (cold and warm): True or
    ``"kubectl"`` for the one on PATH, else the path of a kubectl binary.
    """
    extra = user_limits(qps, burst)
    if extra is not None and not legacy:
        raise ConfigError("--qps/--burst model the legacy walk: add --legacy")
    probe = DiscoveryProbe(cluster, extra_limits=extra)
    sample = await probe.observe("legacy" if legacy else "aggregated")
    if kubectl and sample.ok:
        binary = kubectl if isinstance(kubectl, str) and kubectl != "kubectl" else None
        sample = dataclasses.replace(sample, kubectl=await kubectl_side.kubectl_timing(cluster, binary))
    return sample


def make_probe(parts: ProbeParts) -> DiscoveryProbe:
    """The discovery probe on the monitor's cluster and cadences; it publishes ``parts.shared.discovery``."""
    return DiscoveryProbe(parts.cluster, parts.settings.cadences, shared=parts.shared)

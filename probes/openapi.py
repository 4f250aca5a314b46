"""OpenAPI readiness: how long new CRDs take to reach discovery and the OpenAPI documents.

Every run fetches the ``/openapi/v3`` index (If-None-Match when the server
gave an ETag: kube-apiserver 1.37 gives none for the index, so a change is
told by comparing the path hashes) and reads aggregated discovery (the
discovery probe's ``monitor.shared.discovery`` when it is fresh, else its
own fetch of ``/apis`` with an ETag), and feeds
the shared CRD watch's records to a :class:`~probes.publication.PublicationTracker`,
which keeps each CRD's stage times.  Nothing is fetched per CRD.

``/openapi/v2`` is not fetched unless asked (``--openapi-v2`` or
``cadences.openapi_v2``): each fetch makes the server build the whole document
(43 s and 100 MB at 2,065 CRDs, and the Go heap keeps the memory; ``bench/RESULTS.md``,
footprint).  What other clients' v2 fetches cost the server is read passively where the
server records them (its request histogram, from the shared ``/metrics`` scrape: see
:data:`V2_SUBRESOURCE`; kube-apiserver 1.37.2 does not).  When asked,
it is fetched in the background at most every ``cadences.openapi_v2`` seconds and
only after the watch saw a CRD change, with If-None-Match, streamed to count bytes
without keeping the document.

The group-version documents read to settle stages are budgeted
(``budgets.openapi_v3_documents`` per minute), and the index is read on the idle
cadence once nothing changes or waits.  Both heavy reads wait while the guard holds
(:mod:`probes.guard`: the server near its memory limit).

**Servers before 1.27 are read only once CRDs settle.**  Their kube-openapi (1.26.15 vendors
the 2022-10 one) builds the index by marshalling and hashing every group-version changed since
the previous read, holding the lock the CRD OpenAPI controller needs to publish, and keeps
the JSON; a server nobody reads the index of never does that work.  Reading it every 10 s of
an install made a watched 1.26 install 1.15x as long (``bench/RESULTS.md``, footprint).  On
those servers the index waits until no CRD changed for ``cadences.settle`` seconds, and the
``openapi_v3`` stage of new CRDs is timed from the server's own record instead: its
``apiextensions_openapi_v3_regeneration_count`` series (one per CRD version, created when the
controller publishes it; 1.26 never increments it, so its appearance is what counts), read
from the shared ``/metrics`` scrape other probes take anyway.
"""

from __future__ import annotations

from crdscope.base.samples.openapi import GroupVersionPublication, OpenAPISample
from crdscope.base.samples.version import VersionSample

import asyncio
import dataclasses
import time
from typing import TYPE_CHECKING, Any

import httpx

from crdscope.connection.cluster import Cluster, explain, status_message
from crdscope.connection.crdwatch import CRDRecord, CRDWatch
from .guard import Guard
from crdscope.connection.metrics import Scrape
from .publication import PublicationTracker
from crdscope.connection.ratelimit import Allowance
from crdscope.connection.transport import TRANSPORT_ERRORS

from .probe import Pacing, ProbeBase
from .shared import DiscoveryView

if TYPE_CHECKING:
    from .probe import ProbeParts

DISCOVERY_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                    "application/json")
#: What client-go's OpenAPI v2 client asks for (smaller than JSON); JSON is accepted too.
V2_ACCEPT = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json;q=0.9"
#: Building /openapi/v2 on a cluster with thousands of CRDs takes long before the first byte.
V2_TIMEOUT = httpx.Timeout(connect=5.0, read=300.0, write=10.0, pool=10.0)
BACKLOG_NAMES = 10
#: Group-version documents read per round to settle CRDs the index hashes cannot place (and
#: at most ``budgets.openapi_v3_documents`` per minute, a token bucket of this burst).
CONTENT_FETCHES_PER_ROUND = 4
#: The server's own request histogram: where it records /openapi/v2 (as the non-resource
#: ``subresource="openapi/v2"``), its count and total seconds say what other clients' v2
#: fetches cost it.  kube-apiserver 1.37.2 records /openapi/v3 there but not v2, and its
#: ``apiextensions_openapi_v2_regeneration_count`` stays 0 through lazy builds: on such a
#: server the cost of v2 is not observable passively (the fields stay None).
REQUEST_DURATION_FAMILY = "apiserver_request_duration_seconds"
V2_SUBRESOURCE = "openapi/v2"
#: The CRD OpenAPI v3 controller's record of each CRD version it published (see the module doc).
REGENERATION_FAMILY = "apiextensions_openapi_v3_regeneration_count"
#: Kubernetes minors from which reading the /openapi/v3 index no longer marshals every changed
#: group-version under the controller's lock (kube-openapi's 2023 cached handler, 1.27).
LAZY_INDEX_MINOR = 27


# --------------------------------------------------------------------------- fetching


def index_hashes(document: dict[str, Any]) -> dict[str, str]:
    """``apis/<group>/<version>`` -> hash, from a ``/openapi/v3`` index document."""
    hashes = {}
    for path, entry in (document.get("paths") or {}).items():
        if not path.startswith("apis/") or path.count("/") != 2:
            continue
        url = str((entry or {}).get("serverRelativeURL", ""))
        hashes[path] = url.partition("hash=")[2].partition("&")[0]
    return hashes


def document_resources(document: dict[str, Any], path: str) -> frozenset[str]:
    """Resources (plurals) a group-version document lists under ``/<path>/``, namespaced or not."""
    prefix = f"/{path}/"
    found = set()
    for key in document.get("paths") or {}:
        if not key.startswith(prefix):
            continue
        parts = key[len(prefix):].split("/")
        if parts[0] == "watch" and len(parts) > 1:  # the deprecated watch paths name the same resources
            parts = parts[1:]
        if parts[0] == "namespaces" and len(parts) > 2:
            parts = parts[2:]
        if parts[0] and not parts[0].startswith("{"):
            found.add(parts[0])
    return frozenset(found)


def discovered_resources(document: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, version, resource) of every top-level resource in an APIGroupDiscoveryList."""
    visible = set()
    for group in document.get("items") or []:
        name = (group.get("metadata") or {}).get("name", "")
        for version in group.get("versions") or []:
            for resource in version.get("resources") or []:
                visible.add((name, str(version.get("version", "")), str(resource.get("resource", ""))))
    return visible


class ConditionalGet:
    """GET one path with If-None-Match; keeps the last decoded body for 304s."""

    def __init__(self, cluster: Cluster, path: str, accept: str = "application/json") -> None:
        self.cluster = cluster
        self.path = path
        self.accept = accept
        self.etag: str | None = None
        self.body: Any = None
        self.status: int | None = None
        self.bytes = 0
        self.fetches = 0

    async def fetch(self) -> tuple[Any, bool]:
        """(document, changed); raises httpx.HTTPError or ValueError with one line."""
        headers = {"Accept": self.accept}
        if self.etag and self.body is not None:
            headers["If-None-Match"] = self.etag
        self.fetches += 1
        response = await self.cluster.client.get(self.path, headers=headers)
        self.status = response.status_code
        if response.status_code == 304 and self.body is not None:
            return self.body, False
        if response.status_code != 200:
            raise ValueError(f"GET {self.path} answered {response.status_code}: {status_message(response)}")
        self.etag = response.headers.get("ETag")
        self.bytes = len(response.content)
        body = await asyncio.to_thread(response.json) if self.bytes > 256 * 1024 else response.json()
        changed = body != self.body
        self.body = body
        return body, changed


@dataclasses.dataclass(frozen=True)
class V2Result:
    """One /openapi/v2 fetch."""

    fetched_at: float
    status: int | None = None
    bytes: int | None = None
    seconds: float | None = None
    first_byte_seconds: float | None = None
    content_type: str = ""
    #: Bytes on the wire (compressed) for this fetch; a 304 sends none.
    wire_bytes: int | None = None
    error: str | None = None


class V2Fetcher:
    """``/openapi/v2`` with If-None-Match, streamed: bytes are counted, never kept."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.etag: str | None = None
        self.document_bytes: int | None = None
        self.last: V2Result | None = None

    async def fetch(self) -> V2Result:
        """Fetch once; failures come back as ``V2Result.error``."""
        headers = {"Accept": V2_ACCEPT}
        if self.etag:
            headers["If-None-Match"] = self.etag
        stamp = time.time()
        started = time.perf_counter()
        first_byte = None
        received = 0
        try:
            async with self.cluster.client.stream("GET", "/openapi/v2", headers=headers,
                                                  timeout=V2_TIMEOUT) as response:
                # Headers come with the first bytes of the answer, after the server built the document.
                first_byte = time.perf_counter() - started
                if response.status_code not in (200, 304):
                    await response.aread()
                    result = V2Result(stamp, response.status_code, self.document_bytes,
                                      time.perf_counter() - started, first_byte,
                                      error=f"/openapi/v2 answered {response.status_code}: {status_message(response)}")
                    self.last = result
                    return result
                async for chunk in response.aiter_bytes():  # decompressed: the document's own size
                    received += len(chunk)
                if response.status_code == 200:
                    self.etag = response.headers.get("ETag")
                    self.document_bytes = received
                result = V2Result(stamp, response.status_code, self.document_bytes,
                                  time.perf_counter() - started, first_byte,
                                  response.headers.get("Content-Type", ""), response.num_bytes_downloaded)
        except TRANSPORT_ERRORS as exc:
            result = V2Result(stamp, None, self.document_bytes, time.perf_counter() - started, first_byte,
                              error=explain(exc, self.cluster.server))
        self.last = result
        return result


# --------------------------------------------------------------------------- the probe


class OpenAPIObserver:
    """Fetches the v3 index and discovery, and keeps the per-CRD stage times."""

    def __init__(self, cluster: Cluster, documents: Allowance | None = None, guard: Guard | None = None) -> None:
        self.cluster = cluster
        #: The budget and the guard of the group-version documents (None: unlimited, one-shot use).
        self.documents = documents
        self.guard = guard
        self.tracker = PublicationTracker()
        self.v3 = ConditionalGet(cluster, "/openapi/v3")
        self.discovery = ConditionalGet(cluster, "/apis", DISCOVERY_ACCEPT)
        self.v2 = V2Fetcher(cluster)
        self._view_timestamp: float | None = None
        self._last_index: tuple[float, int] = (0.0, 0)  # the last read's seconds and paths

    async def observe(self, crds: dict[str, CRDRecord], discovery_view: DiscoveryView | None = None, *,
                      index_deferred: str = "") -> OpenAPISample:
        """One round: v3 index and discovery, stage bookkeeping, and a sample (v2 fields left empty).

        ``discovery_view`` is the discovery probe's published view
        (``monitor.shared.discovery``, with ``timestamp`` and ``served``); when
        given, it replaces this probe's own fetch of ``/apis``.  ``index_deferred`` (why)
        skips the index and the group-version documents this round: discovery and the
        stages already placed still make a sample.
        """
        self.tracker.update_crds(crds)
        if index_deferred:
            received = time.time()
            unobservable = await self._discovery_round(crds, discovery_view)
            seconds, paths = self._last_index
            sample = self._sample(crds, received, seconds, False, paths, unobservable)
            return dataclasses.replace(sample, v3_deferred=index_deferred)
        started = time.time()
        clock = time.perf_counter()
        try:
            index, changed = await self.v3.fetch()
        except TRANSPORT_ERRORS as exc:
            return OpenAPISample(error=explain(exc, self.cluster.server))
        except ValueError as exc:
            return OpenAPISample(error=str(exc) or "/openapi/v3 did not answer JSON")
        v3_seconds = time.perf_counter() - clock
        received = time.time()
        self.tracker.observe_index(started, received, index_hashes(index))
        self._last_index = (v3_seconds, len(index.get("paths") or {}))
        discovery_unobservable = await self._discovery_round(crds, discovery_view)
        await self._read_wanted_documents(crds, received)
        self.tracker.place_openapi(crds)
        return self._sample(crds, received, v3_seconds, changed, len(index.get("paths") or {}),
                            discovery_unobservable)

    async def _discovery_round(self, crds: dict[str, CRDRecord], discovery_view: DiscoveryView | None) -> str | None:
        """The discovery stage from the shared view when given, else from this probe's own fetch."""
        if discovery_view is None:
            return await self._observe_discovery(crds)
        if discovery_view.timestamp != self._view_timestamp:
            self._view_timestamp = discovery_view.timestamp
            self.tracker.observe_discovery(discovery_view.timestamp, set(discovery_view.served), crds)
        return None

    async def _read_wanted_documents(self, crds: dict[str, CRDRecord], now: float) -> None:
        """Read the few group-version documents that settle CRDs the hashes alone cannot place.

        Fetched by the hash URL the index names, so each (path, hash) is read at
        most once; a failed read is tried again next round.
        """
        for path, digest in self.tracker.content_wanted(crds, now)[:CONTENT_FETCHES_PER_ROUND]:
            if self.guard is not None and not self.guard.allows("openapi_v3_documents"):
                return
            if self.documents is not None and not self.documents.take():
                return  # the budget is spent for now: the stage settles a little later
            try:
                response = await self.cluster.client.get(f"/openapi/v3/{path}", params={"hash": digest},
                                                         headers={"Accept": "application/json"})
                if response.status_code != 200:
                    continue
                document = (await asyncio.to_thread(response.json) if len(response.content) > 256 * 1024
                            else response.json())
            except TRANSPORT_ERRORS:
                continue
            except ValueError:  # not JSON: tried again next round
                continue
            self.tracker.observe_content(path, digest, document_resources(document, path))

    async def _observe_discovery(self, crds: dict[str, CRDRecord]) -> str | None:
        try:
            document, _ = await self.discovery.fetch()
        except TRANSPORT_ERRORS as exc:
            return explain(exc, self.cluster.server)
        except ValueError as exc:
            return str(exc) or "/apis did not answer JSON"
        if document.get("kind") not in ("APIGroupDiscoveryList", None) or "items" not in document:
            return "the server does not serve aggregated discovery"
        self.tracker.observe_discovery(time.time(), discovered_resources(document), crds)
        return None

    def _sample(self, crds: dict[str, CRDRecord], now: float, v3_seconds: float, changed: bool,
                paths: int, discovery_unobservable: str | None) -> OpenAPISample:
        crd_paths = {f"apis/{gv}" for record in crds.values() for gv in record.group_versions}
        group_versions = {}
        for path in sorted(crd_paths):
            history = self.tracker.index.get(path)
            if history is not None:
                group_versions[path.removeprefix("apis/")] = GroupVersionPublication(
                    first_seen=history.first_seen, hash_changed=history.hash_changed,
                    hash=(history.current or "")[:16])
        pending = self.tracker.backlog(crds)
        return OpenAPISample(
            timestamp=now,
            v3_paths=paths,
            v3_seconds=v3_seconds,
            v3_status=self.v3.status,
            v3_changed=changed,
            v3_etag=self.v3.etag is not None,
            v3_bytes=self.v3.bytes,
            group_versions=group_versions,
            lag_seconds=self.tracker.lag_seconds(),
            backlog=len(pending),
            backlog_oldest_seconds=max(0.0, now - pending[0][1]) if pending else None,
            backlog_names=tuple(name for name, _ in pending[:BACKLOG_NAMES]),
            discovery_unobservable=discovery_unobservable,
        )


def with_v2(sample: OpenAPISample, result: V2Result | None, note: str = "") -> OpenAPISample:
    """The sample with the fields of the last /openapi/v2 fetch (or why there was none)."""
    if result is None:
        return dataclasses.replace(sample, v2_note=note)
    return dataclasses.replace(
        sample, v2_status=result.status, v2_bytes=result.bytes, v2_seconds=result.seconds,
        v2_first_byte_seconds=result.first_byte_seconds, v2_content_type=result.content_type,
        v2_wire_bytes=result.wire_bytes,
        v2_fetched_at=result.fetched_at, v2_error=result.error, v2_note=note)


async def once(cluster: Cluster, openapi_v2: bool = False, **_options: object) -> OpenAPISample:
    """List CRDs, fetch the v3 index and discovery once, and /openapi/v2 when asked (``--openapi-v2``:
    the server builds the whole document for it, which the summary says).

    One look cannot time a stage: lags come only from the CRDs' own conditions
    (names_accepted, established); the backlog counts Established CRDs whose
    group-version is missing from the index.
    """
    watch = CRDWatch(cluster)
    error = await watch.sync_once()
    if error:
        return OpenAPISample(error=error)
    observer = OpenAPIObserver(cluster)
    sample = await observer.observe(watch.crds)
    if sample.error:
        return sample
    if not openapi_v2:
        return with_v2(sample, None, V2_OFF_NOTE)
    return with_v2(sample, await observer.v2.fetch())


class OpenAPIProbe(ProbeBase):
    """The v3 index on its pacing; /openapi/v2 only when asked (``cadences.openapi_v2``)."""

    name = "openapi"
    #: The /openapi/v3 index while CRDs change or wait for publication (budget 12/min with the
    #: group-version documents, at most ``budgets.openapi_v3_documents`` of them), every minute once
    #: nothing changed or waits (a CRD change wakes it at once).
    pacing = Pacing(busy=10.0, idle=60.0, budget=12.0)

    def __init__(self, monitor: ProbeParts) -> None:
        self.monitor = monitor
        cadences = monitor.settings.cadences
        self.v2_cadence = cadences.openapi_v2
        documents = Allowance(monitor.settings.budgets.openapi_v3_documents, CONTENT_FETCHES_PER_ROUND)
        self.observer = OpenAPIObserver(monitor.cluster, documents, monitor.shared.guard)
        # The server's own count of v2 requests rides on the shared scrape other probes take.
        monitor.metrics.want(REQUEST_DURATION_FAMILY)
        self._v2_task: asyncio.Task[V2Result] | None = None
        self._v2_events: int | None = None  # watch events when v2 was last fetched
        self._v2_started = 0.0
        self._waiting = False  # CRDs waited for publication at the last run
        self._regenerations_read: float | None = None  # the scrape whose regenerations were read

    @property
    def tracker(self) -> PublicationTracker:
        return self.observer.tracker

    @property
    def busy(self) -> bool:
        """CRDs waited for publication at the last run: no idle cadence yet (see the scheduler)."""
        return self._waiting

    async def run(self) -> OpenAPISample:
        watch: CRDWatch = self.monitor.crds
        not_synced = await watch.wait_synced(max(1.0, self.cadence))
        if not_synced:
            return OpenAPISample(error=not_synced)
        if self._v2_events is None:
            self._v2_events = watch.status.events  # changes are counted from the first run on
        deferred = ""
        if self._index_costs_the_server():
            self.monitor.metrics.want(REGENERATION_FAMILY)
            self._place_by_regenerations(watch.crds)
            if self.monitor.shared.crds_changing(self.monitor.settings.cadences.settle):
                deferred = INDEX_DEFERRED_NOTE
        sample = await self.observer.observe(watch.crds, self._discovery_view(), index_deferred=deferred)
        self._waiting = sample.backlog > 0 or bool(self.tracker.content_wanted(watch.crds, time.time()))
        note = self._maybe_start_v2(watch)
        sample = with_v2(sample, self.observer.v2.last, note)
        return with_server_builds(sample, self.monitor.metrics.last)

    def _index_costs_the_server(self) -> bool:
        """True on a server before 1.27, whose index read marshals every changed group-version
        under its OpenAPI controller's lock (module doc); False while the version is unknown."""
        version = self.monitor.latest.get("version")
        minor = server_minor(version.minor) if isinstance(version, VersionSample) else None
        return minor is not None and minor < LAZY_INDEX_MINOR

    def _place_by_regenerations(self, crds: dict[str, CRDRecord]) -> None:
        """Time the v3 stage of new CRDs from the server's regeneration series in the latest shared scrape."""
        scrape = self.monitor.metrics.last
        if scrape is None or not scrape.ok or not scrape.covers((REGENERATION_FAMILY,)):
            return
        if scrape.timestamp == self._regenerations_read:
            return
        self._regenerations_read = scrape.timestamp
        self.tracker.observe_regenerations(scrape.timestamp, published_versions(scrape), crds)

    def _discovery_view(self) -> DiscoveryView | None:
        """The discovery probe's view when it is fresh (then /apis is not fetched twice), else None."""
        view = self.monitor.shared.discovery
        discovery = self.monitor.pacing("discovery")
        slowest = discovery.cadence(quiet=True) if discovery is not None else 0.0
        if view is None or time.time() - view.timestamp > max(30.0, 3 * slowest):
            return None
        return view

    def _maybe_start_v2(self, watch: CRDWatch) -> str:
        if self.v2_cadence <= 0:
            return V2_OFF_NOTE
        if self._v2_task is not None and not self._v2_task.done():
            return "fetching"
        if watch.status.events == self._v2_events:
            return "" if self.observer.v2.last else "waiting for a CRD change (fetching v2 makes the server build it)"
        if time.time() - self._v2_started < self.v2_cadence:
            return f"next fetch at most every {self.v2_cadence:.0f}s"
        if not self.monitor.shared.guard.allows("openapi_v2"):
            return f"held back: {self.monitor.shared.guard.reason}"
        self._v2_events = watch.status.events
        self._v2_started = time.time()
        self._v2_task = asyncio.create_task(self.observer.v2.fetch(), name="openapi-v2")
        return "fetching"


def server_minor(minor: str) -> int | None:
    """The minor of ``/version`` as a number (``"26+"`` -> 26); None when it is not one."""
    digits = minor.rstrip("+")
    return int(digits) if digits.isdigit() else None


def published_versions(scrape: Scrape) -> set[tuple[str, str]]:
    """(CRD name, version) the server's CRD OpenAPI v3 controller has published, from its
    regeneration series (reasons ``add``/``update``; ``remove`` is a withdrawal)."""
    return {(labels.get("crd", ""), labels.get("version", "")) for labels, _ in scrape.series(REGENERATION_FAMILY)
            if labels.get("reason") != "remove"}


#: Why the index waits on a server before 1.27 (the panel and --json say so).
INDEX_DEFERRED_NOTE = ("read once CRDs settle: on this server each read marshals every changed group-version "
                       "under the lock its OpenAPI controller needs; new CRDs are timed from its "
                       "regeneration metric meanwhile")


#: Why /openapi/v2 is not fetched by default (the panel and --json say so).
V2_OFF_NOTE = ("off: each fetch makes the server build the whole document (--openapi-v2 measures it "
               "at that cost)")


def with_server_builds(sample: OpenAPISample, scrape: Scrape | None) -> OpenAPISample:
    """The sample with the server's own count of /openapi/v2 requests, from a scrape taken anyway."""
    if scrape is None or not scrape.ok or sample.error:
        return sample
    served = scrape.total(f"{REQUEST_DURATION_FAMILY}_count", subresource=V2_SUBRESOURCE)
    seconds = scrape.total(f"{REQUEST_DURATION_FAMILY}_sum", subresource=V2_SUBRESOURCE)
    return dataclasses.replace(sample, v2_server_requests=int(served) if served is not None else None,
                               v2_server_seconds=seconds)


def make_probe(parts: ProbeParts) -> OpenAPIProbe:
    """The OpenAPI readiness probe on the monitor's cluster and shared CRD watch."""
    return OpenAPIProbe(parts)

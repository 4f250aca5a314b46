"""One list + watch of CustomResourceDefinitions, shared by everything that needs CRD state.

The inventory, the OpenAPI lag stages, the memory-per-CRD fit and the
loader's wait for Established all read this one watch: the monitor never
polls CRDs one by one.  It lists (paginated), then watches from the list's
resourceVersion with bookmarks, re-lists on 410 Gone, and reconnects with
backoff when the server goes away, reconciling so that no CRD is lost or
counted twice across a restart.

Reconciliation rules (what makes a restart safe):

- CRDs are keyed by name; a name whose uid changed is a different CRD
  (deleted and created again while we were away): listeners get DELETED for
  the old one and ADDED for the new one.
- A re-list emits ADDED only for CRDs not known before, DELETED for known
  CRDs missing from the list, MODIFIED for changed resourceVersions: a
  listener that counts ADDED minus DELETED always equals ``len(crds)``.
- After a reconnect the watch resumes from the last resourceVersion seen
  (events or bookmarks); a server that no longer has it answers 410, and the
  re-list above takes over.

CRDs are large (a schema can be megabytes, and ``kubectl apply`` doubles it in
an annotation); only what the monitor needs is kept (:class:`CRDRecord`),
pages are decoded and reduced off the event loop, and watch lines are split
without re-copying the buffer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from .cluster import Cluster, explain, status_message
from .credentials import parse_rfc3339
from . import crd_proto
from .crd_decode import decode_event, decode_page
# Re-exported: the CRD watch is where readers of these marks have always found them.
from .crd_marks import (CRD_PATH as CRD_PATH, MANAGED_BY_LABEL as MANAGED_BY_LABEL,
                        MANAGED_BY_VALUE as MANAGED_BY_VALUE, RUN_ANNOTATION as RUN_ANNOTATION)
from .traffic import CRD_WATCH, LOADER, REQUEST_ORIGIN
from .transport import TRANSPORT_ERRORS

log = logging.getLogger("crdscope.crdwatch")

CROSSPLANE_LABELS = ("pkg.crossplane.io/revision", "pkg.crossplane.io/package", "pkg.crossplane.io/provider")
#: Decode documents larger than this in a thread (a 1.7 MB CRD takes ~10 ms to parse).
THREAD_DECODE_BYTES = 256 * 1024
#: Real provider CRDs average ~50 KB (twice that with kubectl's last-applied annotation):
#: 100 per page keeps one decoded page in the tens of MB.
LIST_PAGE = 100
WATCH_TIMEOUT_SECONDS = 240
#: A read of the watch stream that waited longer than this for its bytes found the stream drained:
#: reads of bytes already received return in tens of microseconds, even beside other tasks.
CAUGHT_UP_SECONDS = 0.005
#: A paginated list whose continue token expired (410) starts over this many times.
LIST_RESTARTS = 3
#: How long a first list that is still running (no error) is waited on before it is reported.
FIRST_LIST_PATIENCE = 120.0


#: Where a CRD is in its life: what ``kubectl get crd`` readers and the inventory count by.
CRDState = Literal["Established", "NamesAccepted", "Terminating", "Pending"]
#: The change a watch event (or a re-list's comparison) reports.
ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True)
class CRDRecord:
    """What the monitor keeps of one CRD (its schema is dropped, its size kept)."""

    name: str
    uid: str
    group: str
    kind: str
    plural: str
    scope: str
    served_versions: tuple[str, ...]
    storage_version: str
    owner: str
    labels: tuple[tuple[str, str], ...]
    run_id: str | None
    resource_version: str
    created: float
    names_accepted: float | None
    established: float | None
    terminating: bool
    #: Wall-clock time this watch first saw the CRD, and first saw it Established:
    #: condition timestamps have one-second resolution, these are sub-second.
    seen: float = 0.0
    seen_established: float | None = None
    #: True when ``seen_established`` comes from a watch event (the transition was seen
    #: as it happened), False when a list found the CRD already Established.
    established_live: bool = False
    #: Where the server calls to convert between the CRD's versions (``spec.conversion``, strategy
    #: Webhook): the URL, or ``service <namespace>/<name>:<port><path>``; None: it converts by itself.
    conversion_webhook: str | None = None
    #: Bytes of the served versions' schemas as the server sends them (compact JSON; in protobuf their
    #: encoding, as long within a few percent: :func:`connection.crd_proto._schema_bytes`): with the
    #: served versions, what the cost model prices a CRD by.
    schema_bytes: int = 0

    @property
    def state(self) -> CRDState:
        """Terminating, Established, NamesAccepted or Pending."""
        if self.terminating:
            return "Terminating"
        if self.established is not None:
            return "Established"
        if self.names_accepted is not None:
            return "NamesAccepted"
        return "Pending"

    @property
    def managed_by_crdscope(self) -> bool:
        return dict(self.labels).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE

    @property
    def group_versions(self) -> tuple[str, ...]:
        return tuple(f"{self.group}/{v}" for v in self.served_versions)

    @property
    def served(self) -> int:
        """Served versions as the cost model counts them (a CRD serving none still costs its storage)."""
        return max(1, len(self.served_versions))


def owner_of(metadata: dict[str, Any]) -> str:
    """Who installed a CRD: an ownerReference, Crossplane's package labels, crdscope, or other."""
    references = metadata.get("ownerReferences") or []
    if references:
        chosen = next((r for r in references if r.get("controller")), references[0])
        return f"{chosen.get('kind', '?')}/{chosen.get('name', '?')}"
    labels = metadata.get("labels") or {}
    for key in CROSSPLANE_LABELS:
        if labels.get(key):
            return f"crossplane/{labels[key]}"
    if labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE:
        return "crdscope"
    return "other"


def _condition_time(conditions: list[dict[str, Any]], kind: str) -> float | None:
    for condition in conditions:
        if condition.get("type") == kind and condition.get("status") == "True":
            stamp = condition.get("lastTransitionTime")
            try:
                return parse_rfc3339(stamp) if stamp else 0.0
            except Exception:  # noqa: BLE001 - a malformed time must not drop the CRD
                return 0.0
    return None


def conversion_webhook(spec: dict[str, Any]) -> str | None:
    """Where a CRD's conversion webhook is: its URL or its Service (port 443 unless given), as the
    API server calls it; None for a CRD converted by the server itself (strategy None, the default)."""
    conversion = spec.get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    if config.get("url"):
        return str(config["url"])
    service = config.get("service") or {}
    return (f"service {service.get('namespace', '?')}/{service.get('name', '?')}:{service.get('port') or 443}"
            f"{service.get('path') or ''}")


def schema_bytes(version: dict[str, Any]) -> int:
    """Bytes of one version's ``openAPIV3Schema``: the count a slim dict carries, else the schema's
    compact JSON (as the server sends it and as the cost model's calibration measured it)."""
    counted = version.get("schemaBytes")
    if counted is not None:
        return int(counted)
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return len(json.dumps(schema, separators=(",", ":"))) if schema is not None else 0


def record_from(obj: dict[str, Any], previous: CRDRecord | None = None, now: float | None = None,
                *, live: bool = False) -> CRDRecord:
    """Reduce a CRD object to a :class:`CRDRecord`.

    First-seen times are kept from ``previous`` when it is the same CRD (same
    uid); ``live`` says the object comes from a watch event rather than a list.
    """
    now = time.time() if now is None else now
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    versions = spec.get("versions") or []
    conditions = (obj.get("status") or {}).get("conditions") or []
    established = _condition_time(conditions, "Established")
    created_text = metadata.get("creationTimestamp")
    try:
        created = parse_rfc3339(created_text) if created_text else now
    except Exception:  # noqa: BLE001
        created = now
    uid = str(metadata.get("uid", ""))
    if previous is not None and previous.uid != uid:
        previous = None  # same name, another object: nothing carries over
    seen = previous.seen if previous else now
    seen_established = previous.seen_established if previous else None
    established_live = previous.established_live if previous else False
    if established is not None and seen_established is None:
        seen_established = now
        established_live = live
    labels = metadata.get("labels") or {}
    return CRDRecord(
        name=str(metadata.get("name", "")),
        uid=uid,
        group=str(spec.get("group", "")),
        kind=str(names.get("kind", "")),
        plural=str(names.get("plural", "")),
        scope=str(spec.get("scope", "")),
        served_versions=tuple(str(v.get("name")) for v in versions if v.get("served", True)),
        storage_version=next((str(v.get("name")) for v in versions if v.get("storage")), ""),
        owner=owner_of(metadata),
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        run_id=(metadata.get("annotations") or {}).get(RUN_ANNOTATION),
        resource_version=str(metadata.get("resourceVersion", "")),
        created=created,
        names_accepted=_condition_time(conditions, "NamesAccepted"),
        established=established,
        terminating=bool(metadata.get("deletionTimestamp")),
        seen=seen,
        seen_established=seen_established,
        established_live=established_live,
        conversion_webhook=conversion_webhook(spec),
        schema_bytes=sum(schema_bytes(v) for v in versions if v.get("served", True)),
    )


def slim(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of a CRD object :func:`record_from` reads (schemas, counted, and annotations dropped)."""
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    kept_metadata = {k: metadata[k] for k in ("name", "uid", "resourceVersion", "creationTimestamp",
                                               "deletionTimestamp", "labels", "ownerReferences")
                     if k in metadata}
    if RUN_ANNOTATION in annotations:
        kept_metadata["annotations"] = {RUN_ANNOTATION: annotations[RUN_ANNOTATION]}
    conversion = spec.get("conversion") or {}
    config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    return {
        "metadata": kept_metadata,
        "spec": {
            "group": spec.get("group"),
            "scope": spec.get("scope"),
            "names": spec.get("names") or {},
            "versions": [{**{k: v.get(k) for k in ("name", "served", "storage")}, "schemaBytes": schema_bytes(v)}
                         for v in spec.get("versions") or []],
            # Where the conversion webhook is (its caBundle dropped).
            "conversion": {"strategy": conversion.get("strategy"),
                           "webhook": {"clientConfig": {k: config[k] for k in ("url", "service") if config.get(k)}}},
        },
        "status": {"conditions": (obj.get("status") or {}).get("conditions") or []},
    }


def _decode_page(raw: bytes, content_type: str | None = None) -> dict[str, Any]:
    """A list page with its items slimmed (their schemas are never built).

    Protobuf pages (:mod:`connection.crd_proto`) come out slim; JSON ones are decoded by
    :mod:`connection.crd_decode` and slimmed here.
    """
    if crd_proto.is_protobuf(content_type):
        return crd_proto.decode_page(raw)
    page = decode_page(raw)
    page["items"] = [slim(item) for item in page.get("items") or []]
    return page


@dataclass(frozen=True)
class CRDEvent:
    """A change seen by the watch: ADDED, MODIFIED or DELETED (re-lists produce these too)."""

    type: ChangeType
    record: CRDRecord
    previous: CRDRecord | None
    timestamp: float


Listener = Callable[[CRDEvent], None]


async def _decode(raw: bytes, protobuf: bool = False) -> Any:
    decoder = crd_proto.decode_event if protobuf else decode_event
    if len(raw) > THREAD_DECODE_BYTES:
        return await asyncio.to_thread(decoder, raw)
    return decoder(raw)


class LineSplitter:
    """Splits a byte stream into lines, copying each byte about once.

    (Appending to a ``bytes`` buffer and re-slicing it is quadratic for a
    megabyte watch event arriving in 16 KB chunks.)
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete lines (without their newline) found after adding ``chunk``."""
        self._buffer += chunk
        lines: list[bytes] = []
        start = 0
        search = self._scanned
        while True:
            newline = self._buffer.find(b"\n", search)
            if newline == -1:
                break
            lines.append(bytes(self._buffer[start:newline]))
            start = search = newline + 1
        if start:
            del self._buffer[:start]
        self._scanned = len(self._buffer)
        return lines


@dataclass
class WatchStatus:
    """How the watch is doing (for the header and the reliability tests)."""

    connected: bool = False
    synced: bool = False
    lists: int = 0
    relists_after_gone: int = 0
    reconnects: int = 0
    events: int = 0
    last_error: str | None = None
    last_event: float | None = None
    resource_version: str = ""
    #: Wall-clock time of the last completed list.
    last_list: float | None = None
    #: How the server encoded the last list page and watch stream: "protobuf" or "json".
    list_encoding: str = ""
    watch_encoding: str = ""
    #: Pauses after the stream was found drained (see ``CRDWatch.coalesce``).
    pauses: int = 0
    errors: list[str] = field(default_factory=list)


class WatchError(Exception):
    """A list or watch request failed (non-200 answer or an ERROR event); one line."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


#: What ends one list-or-watch attempt and makes the watch retry (after a backoff).
_WATCH_INTERRUPTIONS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, WatchError, ValueError)


class CRDWatch:
    """Keeps :attr:`crds` equal to the server's CRDs, and tells listeners what changed."""

    def __init__(self, cluster: Cluster, *, label_selector: str | None = None,
                 backoff_max: float = 10.0, protobuf: bool = True, coalesce: float = 0.0) -> None:
        self.cluster = cluster
        self.label_selector = label_selector
        #: Ask for protobuf (JSON where the server cannot): see :mod:`connection.crd_proto`.
        self.protobuf = protobuf
        #: Seconds to pause after the stream was found drained, so that the events of the next
        #: moments wait in the socket and are read back to back (see :meth:`_watch`); 0 reads each
        #: event as it arrives.
        self.coalesce = coalesce
        self.crds: dict[str, CRDRecord] = {}
        self.status = WatchStatus()
        self.synced = asyncio.Event()
        self._listeners: list[Listener] = []
        self._backoff_max = backoff_max
        self._changed = asyncio.Condition()

    # -- listeners -------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` for every change (synchronously, keep it cheap)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    async def wait_until(self, predicate: Callable[[dict[str, CRDRecord]], bool],
                         timeout: float | None = None) -> bool:
        """Wait until ``predicate(crds)`` holds (re-checked on every change); False on timeout."""
        async def waiter() -> bool:
            async with self._changed:
                await self._changed.wait_for(lambda: predicate(self.crds))
            return True

        try:
            return await asyncio.wait_for(waiter(), timeout)
        except TimeoutError:
            return False

    async def wait_synced(self, timeout: float, *, patience: float = FIRST_LIST_PATIENCE) -> str | None:
        """Wait for the first list: None once synced, else a one-line reason.

        After ``timeout`` seconds a watch that has met an error is reported; one whose first list
        is simply still running (thousands of CRDs take a while to list) is waited on for up to
        ``patience`` seconds in all, since a slow start is not a failure.
        """
        started = time.monotonic()
        while not self.synced.is_set():
            try:
                await asyncio.wait_for(self.synced.wait(), timeout=timeout)
            except TimeoutError:
                if self.status.last_error or time.monotonic() - started >= patience:
                    return f"CRD watch not synced: {self.status.last_error or 'the first CRD list has not finished'}"
        return None

    def _emit(self, kind: ChangeType, record: CRDRecord, previous: CRDRecord | None) -> None:
        self.status.events += 1
        self.status.last_event = time.time()
        event = CRDEvent(kind, record, previous, self.status.last_event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener bug must not stop the watch
                log.exception("CRD watch listener failed")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- list and watch ----------------------------------------------------------
    def _accept(self, *, watch: bool) -> dict[str, str]:
        if not self.protobuf:
            return {"Accept": "application/json"}
        return {"Accept": crd_proto.WATCH_ACCEPT if watch else crd_proto.LIST_ACCEPT}

    def _params(self, **extra: Any) -> dict[str, Any]:
        params = dict(extra)
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        return params

    async def _list_pages(self) -> tuple[dict[str, dict[str, Any]], str]:
        """Every CRD (slimmed) by name and the list's resourceVersion, one consistent snapshot."""
        for _ in range(LIST_RESTARTS):
            items: dict[str, dict[str, Any]] = {}
            token: str | None = None
            resource_version = ""
            while True:
                params = self._params(limit=LIST_PAGE)
                if token:
                    params["continue"] = token
                response = await self.cluster.client.get(CRD_PATH, params=params, headers=self._accept(watch=False))
                if response.status_code == 410 and token:
                    break  # the continue token expired (compaction): take a new snapshot
                if response.status_code != 200:
                    raise WatchError(f"list CRDs answered {response.status_code}: {status_message(response)}",
                                     response.status_code)
                content_type = response.headers.get("content-type")
                self.status.list_encoding = "protobuf" if crd_proto.is_protobuf(content_type) else "json"
                page = await asyncio.to_thread(_decode_page, response.content, content_type)
                for item in page["items"]:
                    name = item["metadata"].get("name")
                    if name:
                        items[name] = item
                meta = page.get("metadata") or {}
                resource_version = meta.get("resourceVersion", resource_version)
                token = meta.get("continue") or None
                if not token:
                    return items, resource_version
        raise WatchError("list CRDs: the continue token kept expiring (410)", 410)

    async def list_once(self) -> str:
        """List every CRD (paginated), reconcile :attr:`crds`, return the list's resourceVersion."""
        listed, resource_version = await self._list_pages()
        now = time.time()
        for name in [n for n in self.crds if n not in listed]:  # deleted while we were not watching
            gone = self.crds.pop(name)
            self._emit("DELETED", gone, gone)
        for name, item in listed.items():
            previous = self.crds.get(name)
            record = record_from(item, previous, now)
            self.crds[name] = record
            if previous is not None and previous.uid != record.uid:
                self._emit("DELETED", previous, previous)  # replaced while we were away
                previous = None
            if previous is None:
                self._emit("ADDED", record, None)
            elif previous.resource_version != record.resource_version:
                self._emit("MODIFIED", record, previous)
        self.status.lists += 1
        self.status.last_list = now
        self.status.resource_version = resource_version
        self.status.synced = True
        self.synced.set()
        await self._notify()
        return resource_version

    async def sync_once(self) -> str | None:
        """One list (for one-shot probes): None on success, else a one-line reason."""
        try:
            await self.list_once()
        except TRANSPORT_ERRORS as exc:
            return explain(exc, self.cluster.server)
        except (WatchError, ValueError) as exc:
            return str(exc) or "invalid CRD list answer"
        return None

    async def _watch(self, resource_version: str) -> str:
        """Follow changes from ``resource_version``; returns the last one seen."""
        params = self._params(watch="true", resourceVersion=resource_version,
                              allowWatchBookmarks="true", timeoutSeconds=WATCH_TIMEOUT_SECONDS)
        timeout = httpx.Timeout(connect=5.0, read=WATCH_TIMEOUT_SECONDS + 30.0, write=10.0, pool=10.0)
        # The watch streams every CRD of an install three times or more: over the cluster's
        # streaming client (HTTP/1.1), see Cluster.streaming_client.
        async with self.cluster.streaming_client().stream("GET", CRD_PATH, params=params, timeout=timeout,
                                                         headers=self._accept(watch=True)) as response:
            if response.status_code == 410:
                raise _GoneError()
            if response.status_code != 200:
                await response.aread()
                raise WatchError(f"watch CRDs answered {response.status_code}: {status_message(response)}",
                                 response.status_code)
            if not self.status.connected and self.status.last_error is not None:
                log.info("CRD watch recovered")
            self.status.connected = True
            self.status.last_error = None
            protobuf = crd_proto.is_protobuf(response.headers.get("content-type"))
            self.status.watch_encoding = "protobuf" if protobuf else "json"
            splitter: LineSplitter | crd_proto.FrameSplitter = crd_proto.FrameSplitter() if protobuf else LineSplitter()
            chunks = response.aiter_bytes()
            while True:
                asked = time.monotonic()
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                drained = time.monotonic() - asked > CAUGHT_UP_SECONDS
                for item in splitter.feed(chunk):
                    if protobuf or item.strip():
                        resource_version = await self._apply(await _decode(item, protobuf), resource_version)
                if drained and self.coalesce > 0:
                    # During an install the server writes an event every few milliseconds; read as
                    # they come, each costs a wake-up of the loop and several small reads through
                    # TLS and HTTP. After a pause they are read from the socket back to back: the
                    # watch then costs under half the CPU on the machine it shares with the server
                    # (bench/RESULTS.md, footprint), and an event is seen at most this much later.
                    self.status.pauses += 1
                    await asyncio.sleep(self.coalesce)
        return resource_version

    async def _apply(self, event: dict[str, Any], resource_version: str) -> str:
        kind = event.get("type")
        obj = event.get("object") or {}
        metadata = obj.get("metadata") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise _GoneError()
            raise WatchError(f"watch error: {obj.get('message', obj)}", obj.get("code"))
        new_rv = metadata.get("resourceVersion") or resource_version
        self.status.resource_version = new_rv
        if kind == "BOOKMARK":
            return new_rv
        name = metadata.get("name")
        if not name:
            return new_rv
        previous = self.crds.get(name)
        if kind == "DELETED":
            if previous is not None and previous.uid == metadata.get("uid", previous.uid):
                gone = record_from(obj, previous)
                del self.crds[name]
                self._emit("DELETED", gone, previous)
        else:
            record = record_from(obj, previous, live=True)
            if previous is not None and previous.uid != record.uid:
                self._emit("DELETED", previous, previous)
                previous = None
            self.crds[name] = record
            self._emit("ADDED" if previous is None else "MODIFIED", record, previous)
        await self._notify()
        return new_rv

    async def run(self) -> None:
        """List, then watch forever: re-list on 410 Gone, reconnect with backoff on failures."""
        if REQUEST_ORIGIN.get() != LOADER:  # the loader's own watch is the loader's cost
            REQUEST_ORIGIN.set(CRD_WATCH)  # run() is a task of its own: this context is the task's
        backoff = 0.5
        resource_version: str | None = None
        while True:
            try:
                if resource_version is None:
                    resource_version = await self.list_once()
                    backoff = 0.5
                resource_version = await self._watch(resource_version)
                backoff = 0.5  # a watch that ended by its own timeout is healthy
            except _GoneError:
                self.status.relists_after_gone += 1
                resource_version = None
            except _WATCH_INTERRUPTIONS as exc:
                message = explain(exc, self.cluster.server) if isinstance(exc, TRANSPORT_ERRORS) else str(exc)
                if self.status.connected or self.status.last_error is None:
                    log.warning("CRD watch interrupted: %s", message)  # a transition, logged once
                if self.status.connected:
                    backoff = 0.5  # it was working: retry soon
                self.status.connected = False
                self.status.last_error = message
                self.status.errors = (self.status.errors + [message])[-20:]
                self.status.reconnects += 1
                # Jitter keeps many monitors from reconnecting to a restarted server in step.
                await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
                backoff = min(self._backoff_max, backoff * 2)
                # Resume from the last resourceVersion; a 410 then forces a re-list,
                # and a re-list reconciles whatever changed while we were away.
            finally:
                self.status.connected = False

    # -- queries ---------------------------------------------------------------------
    def by_state(self) -> dict[CRDState, int]:
        """Number of CRDs in each state (Established, NamesAccepted, Terminating, Pending)."""
        counts: dict[CRDState, int] = {"Established": 0, "NamesAccepted": 0, "Terminating": 0, "Pending": 0}
        for record in self.crds.values():
            counts[record.state] += 1
        return counts


class _GoneError(Exception):
    """The watch's resourceVersion is too old (410): list again."""

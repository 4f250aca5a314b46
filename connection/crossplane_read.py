"""Reading the Crossplane install chain: a few list requests, only for APIs that exist.

Which Crossplane APIs exist comes from the shared CRD watch (no discovery request);
each part is listed only when its CRD is Established:

- providers: ``GET .../providers`` (small objects);
- providerrevisions: ``GET .../providerrevisions`` (with ``status.objectRefs``: what each lists);
- mrds: ``GET .../managedresourcedefinitions`` as a Table without objects (an MRD embeds a
  whole CRD schema: megabytes), 2,000 rows a page;
- mraps: ``GET .../managedresourceactivationpolicies`` (small objects);
- compositions: ``GET .../compositions`` (what each pipeline step composes: :mod:`base.activation`);
- nodes: ``GET /api/v1/nodes?limit=1``, metadata only, at most every 10 minutes and only
  while a revision's runtime says its Deployment is not Available (is there a kubelet at all?).

Lists ask for ``resourceVersion=0``: the API server answers from its watch cache,
without a quorum read of etcd (an MRD list from etcd would decode every schema to
build the Table).  A monitor can take a few seconds of staleness.  Lists carry no
ETag, so unchanged answers cannot be 304s: :class:`ChainReader` re-reads on its own
cadence instead (``cadences.crossplane`` while CRDs change, ``crossplane_idle``
otherwise), five requests a read plus one per further 2,000 MRDs.  Expected failures
(403, 5xx, a timeout) leave that part unread with the reason, never an exception.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .cluster import Cluster, explain, status_message
from .credentials import parse_rfc3339
from crdscope.base.errors import ConfigError
from .crdwatch import CRDRecord
from crdscope.base.activation import read_composition
from crdscope.base.crossplane import (
    COMPOSITIONS_CRD, MRAPS_CRD, MRDS_CRD, PACKAGE_LABEL, PROVIDERS_CRD, REVISIONS_CRD, CrossplaneObjects, MRAPObject,
    MRDRow,
    ProviderObject, RevisionInfo, RevisionObject, deployment_unavailable, is_safe_start,
)
from .transport import TRANSPORT_ERRORS

TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
METADATA_ACCEPT = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
PAGE = 500
#: Table rows without objects are ~150 bytes: 2,000 a page (300 KB) reads the whole AWS family in one.
TABLE_PAGE = 2000
#: Answers larger than this are decoded in a thread (the event loop serves the screen).
THREAD_DECODE_BYTES = 256 * 1024
#: Whether the cluster has a Node changes rarely: asked at most this often, and only when it matters.
NODES_REFRESH_SECONDS = 600.0

T = TypeVar("T")


def served_version(record: CRDRecord) -> str:
    """Any served version will do for reading: the storage one when served."""
    if record.storage_version in record.served_versions:
        return record.storage_version
    return record.served_versions[0] if record.served_versions else ""


# --------------------------------------------------------------------------- parsing


def _condition(obj: Mapping[str, Any], kind: str) -> tuple[str, str] | None:
    """(status, message) of condition ``kind`` in ``status.conditions``, None when absent."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            return str(condition.get("status") or ""), str(condition.get("message") or "")
    return None


def _condition_detail(obj: Mapping[str, Any], kind: str) -> tuple[str, float | None]:
    """(reason, lastTransitionTime as epoch seconds) of condition ``kind``; ("", None) when absent."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == kind:
            stamp = condition.get("lastTransitionTime")
            try:
                since = parse_rfc3339(str(stamp)) if stamp else None
            except ConfigError:  # a malformed time: no time, the condition kept
                since = None
            return str(condition.get("reason") or ""), since
    return "", None


def _status_and_message(obj: Mapping[str, Any], kind: str) -> tuple[str, str]:
    found = _condition(obj, kind)
    if found is None:
        return "", ""
    status, message = found
    return status, "" if status == "True" else message


def parse_provider(obj: Mapping[str, Any]) -> ProviderObject:
    """A Provider object reduced to what the chain shows."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    healthy, message = _status_and_message(obj, "Healthy")
    return ProviderObject(
        name=str((obj.get("metadata") or {}).get("name", "")), package=str(spec.get("package") or ""),
        resolved_package=str(status.get("resolvedPackage") or ""),
        current_revision=str(status.get("currentRevision") or ""),
        installed=_status_and_message(obj, "Installed")[0], healthy=healthy, healthy_message=message)


def revision_provider(metadata: Mapping[str, Any]) -> str:
    """The Provider a revision belongs to: its package label, else a Provider ownerReference."""
    label = (metadata.get("labels") or {}).get(PACKAGE_LABEL)
    if label:
        return str(label)
    references = [r for r in metadata.get("ownerReferences") or [] if isinstance(r, dict)
                  and r.get("kind") == "Provider" and str(r.get("apiVersion", "")).startswith("pkg.crossplane.io/")]
    chosen = next((r for r in references if r.get("controller")), references[0] if references else None)
    return str(chosen.get("name", "")) if chosen else ""


def parse_revision(obj: Mapping[str, Any]) -> RevisionObject:
    """A ProviderRevision reduced to what the chain shows (runtime classified later, with Nodes known)."""
    metadata, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    refs = [r for r in status.get("objectRefs") or [] if isinstance(r, dict)]
    mrd_names = tuple(str(r.get("name", "")) for r in refs if r.get("kind") == "ManagedResourceDefinition")
    crd_names = tuple(str(r.get("name", "")) for r in refs if r.get("kind") == "CustomResourceDefinition")
    healthy, message = _status_and_message(obj, "RevisionHealthy")
    try:
        number = int(spec.get("revision") or 0)
    except (TypeError, ValueError):
        number = 0
    # RuntimeActive: Crossplane v2.4+ (AwaitingActivation while a safe-start runtime is scaled to zero).
    active_reason, _ = _condition_detail(obj, "RuntimeActive")
    info = RevisionInfo(
        name=str(metadata.get("name", "")), revision=number, desired_state=str(spec.get("desiredState") or ""),
        image=str(spec.get("image") or ""), healthy=healthy, healthy_message=message,
        runtime_since=_condition_detail(obj, "RuntimeHealthy")[1],
        runtime_active=_status_and_message(obj, "RuntimeActive")[0], runtime_active_reason=active_reason,
        mrd_refs=len(mrd_names), crd_refs=len(crd_names),
        safe_start=is_safe_start(status.get("capabilities") or ()))
    return RevisionObject(info=info, provider=revision_provider(metadata), mrd_names=mrd_names,
                          crd_names=crd_names, runtime_condition=_condition(obj, "RuntimeHealthy"))


def parse_mrap(obj: Mapping[str, Any]) -> MRAPObject:
    """A ManagedResourceActivationPolicy's patterns, what it activated, and its health."""
    healthy, message = _status_and_message(obj, "Healthy")
    if not message:  # Blocked and Terminating are said by the Established condition
        established = _condition(obj, "Established")
        if established and established[0] == "False":
            message = established[1] or "not established"
    activate = (obj.get("spec") or {}).get("activate") or []
    activated = (obj.get("status") or {}).get("activated") or []
    return MRAPObject(name=str((obj.get("metadata") or {}).get("name", "")),
                      patterns=tuple(str(p) for p in activate if isinstance(p, str)),
                      activated=tuple(sorted(str(n) for n in activated if isinstance(n, str))),
                      healthy=healthy, message=message)


def parse_mrd_table(table: Mapping[str, Any]) -> list[MRDRow]:
    """Rows of an MRD list served as a Table: name, STATE and ESTABLISHED printer columns."""
    columns = [str(c.get("name", "")).upper() for c in table.get("columnDefinitions") or [] if isinstance(c, dict)]
    name_at = columns.index("NAME") if "NAME" in columns else 0
    state_at = columns.index("STATE") if "STATE" in columns else None
    established_at = columns.index("ESTABLISHED") if "ESTABLISHED" in columns else None
    rows: list[MRDRow] = []
    for row in table.get("rows") or []:
        cells = row.get("cells") if isinstance(row, dict) else None
        if not isinstance(cells, list) or name_at >= len(cells):
            continue  # a row without its name cannot be attributed: skipped, not guessed

        def cell(index: int | None, cells: list[Any] = cells) -> str:
            return str(cells[index]) if index is not None and index < len(cells) and cells[index] is not None else ""

        rows.append(MRDRow(name=cell(name_at), state=cell(state_at), established=cell(established_at) == "True"))
    return rows


# --------------------------------------------------------------------------- reading


def _available(crds: Mapping[str, CRDRecord], name: str) -> CRDRecord | None:
    record = crds.get(name)
    return record if record is not None and record.established is not None and not record.terminating else None


async def _decode(content: bytes) -> Any:
    if len(content) > THREAD_DECODE_BYTES:
        return await asyncio.to_thread(json.loads, content)
    return json.loads(content)


async def list_all(cluster: Cluster, path: str, *, accept: str | None = None, limit: int = PAGE,
                   cached: bool = True, follow: bool = True) -> tuple[list[Any], list[Any]] | str:
    """Every item (or Table row) of a list: (items, Table columns), or a one-line reason it could
    not be read.  ``cached``: from the watch cache (``resourceVersion=0``); ``follow``: continue
    tokens are followed (else the first page is all)."""
    items: list[Any] = []
    columns: list[Any] = []
    token = None
    headers = {"Accept": accept} if accept else {}
    try:
        while True:
            params: dict[str, str | int] = {"limit": limit}
            if token:  # a continue token carries its own resourceVersion: the server refuses both
                params["continue"] = token
            elif cached:
                params["resourceVersion"] = "0"
            if accept == TABLE_ACCEPT:
                params["includeObject"] = "None"
            response = await cluster.client.get(path, params=params, headers=headers)
            if response.status_code != 200:
                return f"list {path.rsplit('/', 1)[-1]} answered {response.status_code}: {status_message(response)}"
            page = await _decode(response.content)
            if not isinstance(page, dict):
                raise ValueError("not an object")
            found = page.get("rows" if accept == TABLE_ACCEPT else "items") or []
            if not isinstance(found, list) or not isinstance(page.get("columnDefinitions") or [], list):
                raise ValueError("not a list")
            items.extend(found)
            columns = page.get("columnDefinitions") or columns
            token = (page.get("metadata") or {}).get("continue") or None
            if not token or not follow:
                return items, columns
    except TRANSPORT_ERRORS as exc:
        return explain(exc, cluster.server)
    except ValueError:
        return f"list {path.rsplit('/', 1)[-1]}: not a JSON list answer"


def _parsed(answer: tuple[list[Any], list[Any]] | str, parse: Callable[[dict[str, Any]], T],
            part: str, unobservable: dict[str, str]) -> tuple[T, ...] | None:
    if isinstance(answer, str):
        unobservable[part] = answer
        return None
    parsed = []
    for item in answer[0]:
        try:
            parsed.append(parse(item))
        except (AttributeError, TypeError, ValueError):  # an object of another shape: skipped, not fatal
            continue
    return tuple(parsed)


async def read_nodes(cluster: Cluster) -> bool | str:
    """Whether the cluster has a Node (one metadata-only item at most), or why that is unknown."""
    # One item, never the rest: not from the watch cache (an older server ignores the limit there
    # and would send every Node), and no continue token followed.
    answer = await list_all(cluster, "/api/v1/nodes", accept=METADATA_ACCEPT, limit=1, cached=False, follow=False)
    if isinstance(answer, str):
        return answer
    return bool(answer[0])


async def read_objects(cluster: Cluster, crds: Mapping[str, CRDRecord], *,
                       has_nodes: bool | None = None, nodes_due: bool = True) -> CrossplaneObjects:
    """One read of every Crossplane part whose API exists; Nodes only when a runtime needs them
    (``nodes_due`` False reuses ``has_nodes``)."""
    records = {name: _available(crds, name) for name in (PROVIDERS_CRD, REVISIONS_CRD, MRDS_CRD, MRAPS_CRD,
                                                         COMPOSITIONS_CRD)}
    present = bool(records[PROVIDERS_CRD] or records[REVISIONS_CRD])
    unobservable: dict[str, str] = {}
    if not present and not records[MRDS_CRD]:
        return CrossplaneObjects(unobservable={"crossplane": "no Crossplane package API on this cluster"},
                                 read_at=time.time())

    async def listed(name: str) -> tuple[list[Any], list[Any]] | str:
        record = records[name]
        if record is None:
            return f"no {name.split('.', 1)[0]} API on this cluster"
        path = f"/apis/{record.group}/{served_version(record)}/{record.plural}"
        if name == MRDS_CRD:
            return await list_all(cluster, path, accept=TABLE_ACCEPT, limit=TABLE_PAGE)
        return await list_all(cluster, path)

    answers = await asyncio.gather(*(listed(n) for n in (PROVIDERS_CRD, REVISIONS_CRD, MRDS_CRD, MRAPS_CRD,
                                                         COMPOSITIONS_CRD)))
    providers = _parsed(answers[0], parse_provider, "providers", unobservable)
    revisions = _parsed(answers[1], parse_revision, "providerrevisions", unobservable)
    mraps = _parsed(answers[3], parse_mrap, "mraps", unobservable)
    # No Composition API (Crossplane's core absent) is no failure: nothing composes, nothing to say.
    compositions = _parsed(answers[4], read_composition, "compositions", unobservable) \
        if records[COMPOSITIONS_CRD] else None
    mrds = None
    if isinstance(answers[2], str):
        unobservable["mrds"] = answers[2]
    else:
        mrds = tuple(parse_mrd_table({"columnDefinitions": answers[2][1], "rows": answers[2][0]}))
    if nodes_due and revisions and deployment_unavailable(revisions):
        nodes = await read_nodes(cluster)
        if isinstance(nodes, str):
            unobservable["nodes"] = nodes
            has_nodes = None
        else:
            has_nodes = nodes
    mrd_record = records[MRDS_CRD]
    return CrossplaneObjects(
        providers=providers, revisions=revisions, mrds=mrds,
        mrds_version=served_version(mrd_record) if mrd_record else "", mraps=mraps, compositions=compositions,
        has_nodes=has_nodes,
        unobservable=unobservable, read_at=time.time(), present=present)


class ChainReader:
    """Re-reads the chain after CRD changes at most every ``busy`` seconds, else every ``idle``.

    A CRD change is how an install shows (an Active MRD makes a CRD).  A ``safe-start`` package
    changes no CRD while its MRDs appear, so a read that found the chain moving (:func:`progress`
    differs from the read before) keeps the busy cadence too; an MRAP edited or a runtime turning
    healthy on a still chain are caught by the idle cadence.
    """

    def __init__(self, cluster: Cluster, busy: float, idle: float) -> None:
        self.cluster = cluster
        self.busy = busy
        self.idle = max(busy, idle)
        self.objects = CrossplaneObjects()
        self._read_at: float | None = None
        self._events = -1
        self._apis: tuple[str, ...] = ()
        self._nodes_read_at: float | None = None
        #: The last read found the chain moving (MRDs, revisions or activations changed).
        self.moving = False

    def due(self, crds: Mapping[str, CRDRecord], events: int, now: float) -> bool:
        """Whether to read now: first time, a Crossplane API came or went, or the cadence says so."""
        if self._read_at is None or self._apis != self._present(crds):
            return True
        age = now - self._read_at
        return age >= self.idle or ((events != self._events or self.moving) and age >= self.busy)

    @staticmethod
    def _present(crds: Mapping[str, CRDRecord]) -> tuple[str, ...]:
        return tuple(n for n in (PROVIDERS_CRD, REVISIONS_CRD, MRDS_CRD, MRAPS_CRD, COMPOSITIONS_CRD)
                     if _available(crds, n))

    async def refresh(self, crds: Mapping[str, CRDRecord], events: int, now: float | None = None) -> CrossplaneObjects:
        """The objects as last read, read again first when due."""
        now = time.time() if now is None else now
        if not self.due(crds, events, now):
            return self.objects
        self._read_at, self._events, self._apis = now, events, self._present(crds)
        nodes_due = self._nodes_read_at is None or now - self._nodes_read_at >= NODES_REFRESH_SECONDS
        objects = await read_objects(self.cluster, crds, has_nodes=self.objects.has_nodes, nodes_due=nodes_due)
        if nodes_due and (objects.has_nodes is not None or "nodes" in objects.unobservable):
            self._nodes_read_at = now
        elif "nodes" in self.objects.unobservable:  # not asked again: the reason still holds
            objects = dataclasses.replace(objects, unobservable={**objects.unobservable,
                                                                 "nodes": self.objects.unobservable["nodes"]})
        self.moving = progress(objects) != progress(self.objects)
        self.objects = objects
        return objects


def progress(objects: CrossplaneObjects) -> tuple[int, ...]:
    """How far the chain has come: providers, revisions, MRDs, Active and Established MRDs, MRAPs."""
    mrds = objects.mrds or ()
    return (len(objects.providers or ()), len(objects.revisions or ()), len(mrds),
            sum(1 for m in mrds if m.state == "Active"), sum(1 for m in mrds if m.established),
            len(objects.mraps or ()))

"""What a source yields: CRDs ready to apply and per-item problems, and the base of all sources.

Split from :mod:`loader.sources` so that :mod:`loader.synthetic` and the file-based
sources both build on it without importing each other (``sources.open_source``
names the synthetic source; the synthetic source needs only this module).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Literal
from collections.abc import AsyncIterator, Iterator

from crdscope.connection.crd_marks import MANAGED_BY_LABEL, RUN_ANNOTATION

CRD_GROUP = "apiextensions.k8s.io"
CRD_API_VERSION = f"{CRD_GROUP}/v1"
CRD_KIND = "CustomResourceDefinition"
#: Annotations that describe another client's state, not the CRD (kubectl's is as big as the CRD).
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", RUN_ANNOTATION)


# --------------------------------------------------------------------------- items


@dataclass(frozen=True)
class CRDDocument:
    """One CRD of the source, reduced to what is applied (server-set fields dropped)."""

    name: str
    origin: str
    group: str
    kind: str
    #: name, labels and annotations as the source has them
    metadata: dict[str, Any] = field(repr=False)
    #: ``spec`` serialised once, off the event loop
    spec_json: bytes = field(repr=False)

    def apply_body(self, *, run_id: str, resource_version: str) -> bytes:
        """The server-side apply body: crdscope's label, the run annotation, a precondition.

        ``resource_version`` is the optimistic-concurrency precondition; see
        :mod:`loader.safety` for why ``"1"`` means "create only".
        """
        metadata = {
            "name": self.name,
            "labels": {**(self.metadata.get("labels") or {}), MANAGED_BY_LABEL: "crdscope"},
            "annotations": {**(self.metadata.get("annotations") or {}), RUN_ANNOTATION: run_id},
            "resourceVersion": resource_version,
        }
        head = json.dumps({"apiVersion": CRD_API_VERSION, "kind": CRD_KIND}, separators=(",", ":"))[:-1]
        return b"".join((head.encode(), b',"metadata":', json.dumps(metadata).encode(),
                         b',"spec":', self.spec_json, b"}"))


@dataclass(frozen=True)
class SourceProblem:
    """An entry of the source that cannot be applied.

    ``outcome`` is ``failed`` (unreadable, not valid), ``skipped`` (a name
    repeated within the source) or ``not-crd`` (a document of another kind:
    ignored, only counted).
    """

    origin: str
    reason: str
    outcome: Literal["failed", "skipped", "not-crd"] = "failed"


Item = CRDDocument | SourceProblem


class UniqueNames:
    """Names must be unique within a source: the first CRD of a name wins, later ones are skipped."""

    def __init__(self) -> None:
        self.first: dict[str, str] = {}

    def check(self, item: Item) -> Item:
        """``item`` itself, or a ``skipped`` problem when its name came earlier in the source."""
        if not isinstance(item, CRDDocument):
            return item
        earlier = self.first.setdefault(item.name, item.origin)
        if earlier is item.origin:
            return item
        return SourceProblem(f"{item.origin} ({item.name})", f"duplicate name {item.name}: already in {earlier}",
                             "skipped")


def document_items(document: Any, origin: str) -> Iterator[Item]:
    """Classify one parsed document: a CRD, a list of them, or a problem."""
    if document is None:
        return  # an empty document (a trailing ``---``): nothing there
    if not isinstance(document, dict):
        yield SourceProblem(origin, "not a Kubernetes object (a YAML mapping)", "not-crd")
        return
    api_version = str(document.get("apiVersion", ""))
    kind = str(document.get("kind", ""))
    if kind.endswith("List") and isinstance(document.get("items"), list):
        for index, item in enumerate(document["items"]):
            yield from document_items(item, f"{origin}[{index}]")
        return
    if kind != CRD_KIND or not api_version.startswith(CRD_GROUP + "/"):
        what = f"{api_version} {kind}".strip() or "a document without apiVersion/kind"
        yield SourceProblem(origin, f"{what} is not a CustomResourceDefinition", "not-crd")
        return
    if api_version != CRD_API_VERSION:
        yield SourceProblem(origin, f"{api_version} is not served since Kubernetes 1.22; convert it to v1")
        return
    found = document.get("metadata")
    metadata: dict[str, Any] = found if isinstance(found, dict) else {}
    name = metadata.get("name")
    spec = document.get("spec")
    if not name or not isinstance(name, str):
        yield SourceProblem(origin, "CustomResourceDefinition without metadata.name")
        return
    if not isinstance(spec, dict):
        yield SourceProblem(f"{origin} ({name})", "CustomResourceDefinition without a spec")
        return
    annotations = {k: str(v) for k, v in (metadata.get("annotations") or {}).items()
                   if k not in DROPPED_ANNOTATIONS}
    kept = {"labels": {k: str(v) for k, v in (metadata.get("labels") or {}).items()},
            "annotations": annotations}
    found_names = spec.get("names")
    names: dict[str, Any] = found_names if isinstance(found_names, dict) else {}
    yield CRDDocument(
        name=name,
        origin=origin,
        group=str(spec.get("group", "")),
        kind=str(names.get("kind", "")),
        metadata=kept,
        spec_json=json.dumps(spec, separators=(",", ":"), default=str).encode(),
    )


# --------------------------------------------------------------------------- sources


class Source:
    """Base of all sources.  ``spec`` is what the user typed, ``key`` identifies the content.

    Two loads with the same ``key`` against the same cluster are the same run
    (a stopped run is resumed); ``key`` must change when the content does.
    """

    spec: str = ""

    def __init__(self) -> None:
        self.key = ""
        #: Number of items expected (None: unknown until read).
        self.estimate: int | None = None

    def prepare(self) -> None:
        """Blocking set-up before the first item (identity, estimate)."""

    async def aprepare(self) -> None:
        """:meth:`prepare` in a worker thread; sets :attr:`key` and :attr:`estimate`."""
        await asyncio.to_thread(self.prepare)

    def items(self) -> Iterator[Item]:
        """The items, in a deterministic order (blocking; the engine calls it in a thread)."""
        raise NotImplementedError

    async def aitems(self) -> AsyncIterator[Item]:
        """The items without blocking the event loop: each one is produced in a worker thread.

        Call :meth:`aprepare` first.
        """
        iterator = self.items()
        finished = object()
        while True:
            item = await asyncio.to_thread(next, iterator, finished)
            if not isinstance(item, (CRDDocument, SourceProblem)):  # the iterator is exhausted
                return
            yield item

"""What crdscope may touch, and how it cleans up after itself.

The rule: crdscope changes or deletes only CRDs that carry its label
``app.kubernetes.io/managed-by=crdscope``.  Checking the label first and
writing afterwards leaves a race (someone creates the name in between), so
every write carries a server-side precondition the API server checks in the
same etcd transaction as the write:

* **Apply of a name believed absent** sends ``metadata.resourceVersion: "1"``.
  Server-side apply creates a missing object regardless (resourceVersion is
  ignored on create), but an existing object is compared with it, and no
  object can have resourceVersion 1 (etcd's first write is revision 2), so an
  existing CRD always answers 409 Conflict and is never taken over.  (``"0"``
  would not do: the server reads it as "no precondition".)  A dry-run first
  would leave the same race open between the dry-run and the write.
* **Apply of a crdscope CRD** (a resumed or repeated load) sends the
  resourceVersion at which the CRD watch saw it labelled: if anyone changed it
  since (say, removed the label), the server answers 409 and the engine looks
  again.
* **Delete** sends ``preconditions: {uid, resourceVersion}`` of the listed,
  labelled object: a CRD replaced or relabelled since the list is not deleted.

Lab detection: a context is a crdscope lab when its server is the one the
running lab recorded (``crdscope lab up``), or when the context is named
``crdscope-lab*`` *and* its server is on loopback (a production context given
that name by mistake does not pass).  Anything else needs ``--context NAME``
spelled out before crdscope writes to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable
from urllib.parse import quote

import httpx

from crdscope.connection.cluster import Cluster, explain, parse_retry_after, raise_for_status, status_message
from crdscope.connection.crdwatch import CRD_PATH, CRDRecord, CRDWatch, MANAGED_BY_LABEL, MANAGED_BY_VALUE
from crdscope.base.errors import ClusterError, ConfigError
from crdscope.connection.kubeconfig import ClusterConfig
from crdscope.connection.transport import TRANSPORT_ERRORS

log = logging.getLogger("crdscope.loader")

#: The apply precondition that means "create only" (see the module docstring).
CREATE_ONLY = "1"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
LAB_CONTEXT_PREFIX = "crdscope-lab"
ACCESS_REVIEW_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


# --------------------------------------------------------------------------- ownership


def ownership(record: CRDRecord | None) -> str:
    """``absent``, ``ours`` (carries crdscope's label) or ``foreign``."""
    if record is None:
        return "absent"
    return "ours" if record.managed_by_crdscope else "foreign"


def apply_precondition(record: CRDRecord | None) -> str | None:
    """The resourceVersion to send with an apply, or None when crdscope must not write."""
    owner = ownership(record)
    if owner == "absent":
        return CREATE_ONLY
    if record is not None and owner == "ours":
        return record.resource_version
    return None


FOREIGN_REASON = f"exists without crdscope's label {MANAGED_SELECTOR}: not taken over"


def crd_url(name: str) -> str:
    """The path of one CRD (the name is quoted: it comes from files)."""
    return f"{CRD_PATH}/{quote(name, safe='')}"


# --------------------------------------------------------------------------- labs and contexts


def is_lab(config: ClusterConfig) -> bool:
    """True when ``config`` points at a crdscope lab (see the module docstring)."""
    try:
        from crdscope.base.labrecord import lab_home, read_state

        state = read_state(lab_home() / "state.json")
    except Exception:  # noqa: BLE001 - a broken lab state file only means "not known as a lab"
        state = None
    if state is not None and _same_server(state.server, config.server):
        return True
    return config.context.startswith(LAB_CONTEXT_PREFIX) and _loopback(config.server)


def _same_server(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def _loopback(server: str) -> bool:
    host = httpx.URL(server).host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_target(config: ClusterConfig, context_flag: str | None, command: str) -> bool:
    """Refuse to write to a non-lab cluster unless ``--context`` named it; True when it is a lab."""
    if is_lab(config):
        return True
    if context_flag != config.context:
        raise ConfigError(
            f"context '{config.context}' ({config.server}) is not a crdscope lab: "
            f"`crdscope {command}` writes to it only with --context {config.context} spelled out"
        )
    return False


# --------------------------------------------------------------------------- permissions


async def check_permissions(cluster: Cluster, verbs: tuple[str, ...], command: str) -> None:
    """Raise :class:`ClusterError` naming the CRD verbs the user lacks (SelfSubjectAccessReview).

    When the review itself cannot be made the check passes: the first write's
    403 then stops the run with the server's own message.
    """
    async def allowed(verb: str) -> bool | None:
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"group": "apiextensions.k8s.io",
                                                  "resource": "customresourcedefinitions", "verb": verb}}}
        try:
            response = await cluster.client.post(ACCESS_REVIEW_PATH, json=review)
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, cluster.server)) from None
        if response.status_code == 401:
            raise_for_status(response)
        if response.status_code not in (200, 201):
            log.info("access review unavailable (%s): %s", response.status_code, status_message(response))
            return None
        return bool((response.json().get("status") or {}).get("allowed"))

    answers = await asyncio.gather(*(allowed(verb) for verb in verbs))
    missing = [verb for verb, ok in zip(verbs, answers, strict=True) if ok is False]
    if missing:
        who = f"user '{cluster.config.user}'" if cluster.config.user else "this user"
        raise ClusterError(
            f"{who} of context '{cluster.context}' may not {', '.join(missing)} "
            f"customresourcedefinitions.apiextensions.k8s.io (cluster scope), which `crdscope {command}` "
            "needs; nothing was changed"
        )


# --------------------------------------------------------------------------- clean


@dataclass(frozen=True)
class CleanItem:
    """One crdscope CRD that clean would delete, with the objects that would go with it."""

    name: str
    kind: str
    group: str
    run_id: str | None
    uid: str
    resource_version: str
    #: None when the count could not be observed (see ``objects_error``).
    objects: int | None
    objects_error: str | None = None


@dataclass(frozen=True)
class CleanPlan:
    """What ``crdscope clean`` would delete."""

    server: str
    context: str
    run_id: str | None
    items: tuple[CleanItem, ...]

    @property
    def names(self) -> list[str]:
        return [item.name for item in self.items]

    @property
    def objects(self) -> int:
        """Objects that would be deleted with the CRDs (those that could be counted)."""
        return sum(item.objects or 0 for item in self.items)

    @property
    def uncounted(self) -> int:
        """CRDs whose objects could not be counted."""
        return sum(1 for item in self.items if item.objects is None)

    @property
    def question(self) -> str:
        """The confirmation question, with what goes with the CRDs."""
        which = f" of run {self.run_id}" if self.run_id else ""
        unknown = f" (objects of {self.uncounted} CRDs could not be counted)" if self.uncounted else ""
        return (f"Delete {len(self.items)} crdscope CRDs{which} from {self.context} ({self.server}) "
                f"and the {self.objects} objects of their kinds{unknown}?")

    def lines(self, detail_limit: int = 30) -> list[str]:
        """A listing for people: every CRD when few, else those with objects and a count of the rest."""
        shown = [item for item in self.items if len(self.items) <= detail_limit or item.objects != 0]
        lines = [f"{item.name}  {_objects_text(item)}  run {item.run_id or '-'}" for item in shown]
        rest = len(self.items) - len(shown)
        if rest:
            groups = {item.group for item in self.items if item not in shown}
            lines.append(f"... and {rest} more CRDs in {len(groups)} API groups, with no objects")
        return lines


def _objects_text(item: CleanItem) -> str:
    if item.objects is None:
        return f"objects unknown ({item.objects_error})"
    return f"{item.objects} object{'s' if item.objects != 1 else ''}"


async def plan_clean(cluster: Cluster, run_id: str | None = None, *, concurrency: int = 8) -> CleanPlan:
    """List crdscope's CRDs (optionally one run's) and count the objects of each kind."""
    watch = CRDWatch(cluster, label_selector=MANAGED_SELECTOR)
    failure = await watch.sync_once()
    if failure:
        raise ClusterError(f"cannot list CRDs: {failure}")
    records = sorted((r for r in watch.crds.values()
                      if r.managed_by_crdscope and (run_id is None or r.run_id == run_id)),
                     key=lambda r: r.name)
    slots = asyncio.Semaphore(concurrency)

    async def counted(record: CRDRecord) -> CleanItem:
        async with slots:
            objects, error = await count_objects(cluster, record)
        return CleanItem(name=record.name, kind=record.kind, group=record.group, run_id=record.run_id,
                         uid=record.uid, resource_version=record.resource_version,
                         objects=objects, objects_error=error)

    items = await asyncio.gather(*(counted(record) for record in records))
    return CleanPlan(server=cluster.server, context=cluster.context, run_id=run_id, items=tuple(items))


async def count_objects(cluster: Cluster, record: CRDRecord) -> tuple[int | None, str | None]:
    """How many objects of a CRD's kind exist (all namespaces): (count, None) or (None, reason).

    One list with ``limit=1`` answers with ``remainingItemCount``; a CRD that
    is not served yet has no objects.
    """
    version = record.storage_version if record.storage_version in record.served_versions else (
        record.served_versions[0] if record.served_versions else "")
    if not version or not record.plural:
        return 0, None
    path = f"/apis/{record.group}/{version}/{record.plural}"
    total = 0
    token: str | None = None
    throttled = 0
    try:
        while True:
            params: dict[str, Any] = {"limit": 1 if token is None else 500}
            if token:
                params["continue"] = token
            response = await cluster.client.get(path, params=params)
            if response.status_code == 429 and throttled < 3:
                # Also what a kind whose storage is still initializing answers ("(re)initializing").
                throttled += 1
                await asyncio.sleep(parse_retry_after(response.headers.get("Retry-After")) or 1.0)
                continue
            if response.status_code == 404:
                return 0, None
            if response.status_code != 200:
                return None, f"list {record.plural} answered {response.status_code}: {status_message(response)}"
            page = response.json()
            total += len(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return total, None
            remaining = meta.get("remainingItemCount")
            if remaining is not None:
                return total + int(remaining), None
    except TRANSPORT_ERRORS as exc:
        return None, explain(exc, cluster.server)


@dataclass(frozen=True)
class CleanResult:
    """What a clean did."""

    deleted: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    gone: bool
    seconds: float


async def execute_clean(cluster: Cluster, plan: CleanPlan, *, wait: bool = True, timeout: float = 300.0,
                        concurrency: int = 8, on_deleted: Callable[[str], None] | None = None) -> CleanResult:
    """Delete the planned CRDs (each only if still the listed, labelled object), then wait until gone."""
    started = time.monotonic()
    watch = CRDWatch(cluster, label_selector=MANAGED_SELECTOR)
    watcher = asyncio.create_task(watch.run(), name="clean-watch") if wait else None
    slots = asyncio.Semaphore(concurrency)
    deleted: list[str] = []
    refused: list[tuple[str, str]] = []

    async def delete(item: CleanItem) -> None:
        async with slots:
            reason = await delete_if_ours(cluster, item)
        if reason is None:
            deleted.append(item.name)
            if on_deleted:
                on_deleted(item.name)
        else:
            refused.append((item.name, reason))

    gone = False
    try:
        await asyncio.gather(*(delete(item) for item in plan.items))
        if watcher is not None:
            gone = await _wait_gone(cluster, watch, set(deleted), started + timeout)
    finally:
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
    return CleanResult(deleted=tuple(sorted(deleted)), refused=tuple(sorted(refused)), gone=gone,
                       seconds=time.monotonic() - started)


#: Seconds between touches of CRDs that stay Terminating (see :func:`_wait_gone`).
NUDGE_SECONDS = 10.0
NUDGE_ANNOTATION = "crdscope.dev/clean-retry"


async def _wait_gone(cluster: Cluster, watch: CRDWatch, names: set[str], deadline: float) -> bool:
    """Wait until the deleted CRDs are gone, touching the ones that linger.

    The API server's CRD finalizer lists a CRD's objects before it lets the
    CRD go; on a CRD created moments before, that list can fail with "storage
    is (re)initializing" and the finalizer retries with exponential backoff
    (minutes, seen on the lab).  Any update of the CRD puts it back on the
    finalizer's queue at once, so lingering CRDs get an annotation touched.
    """
    def gone(crds: dict[str, CRDRecord]) -> bool:
        return watch.status.synced and not names & crds.keys()

    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if await watch.wait_until(gone, min(NUDGE_SECONDS, remaining)):
            return True
        for name in sorted(names & watch.crds.keys()):
            patch = {"metadata": {"annotations": {NUDGE_ANNOTATION: str(int(time.time()))}}}
            with contextlib.suppress(*TRANSPORT_ERRORS):  # the wait goes on; the deadline decides
                await cluster.client.patch(crd_url(name), json=patch,
                                           headers={"Content-Type": "application/merge-patch+json"})


async def delete_if_ours(cluster: Cluster, item: CleanItem, attempts: int = 4) -> str | None:
    """Delete one CRD with uid/resourceVersion preconditions; None when deleted, else why not."""
    uid, resource_version = item.uid, item.resource_version
    for _ in range(attempts):
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": uid, "resourceVersion": resource_version}}
        try:
            response = await cluster.client.request("DELETE", crd_url(item.name), json=body)
        except TRANSPORT_ERRORS as exc:
            return explain(exc, cluster.server)
        if response.status_code in (200, 202, 404):
            return None
        if response.status_code != 409:
            return f"delete answered {response.status_code}: {status_message(response)}"
        # Changed since the list (a status update, most often): look again before retrying.
        try:
            current = await cluster.client.get(crd_url(item.name))
        except TRANSPORT_ERRORS as exc:
            return explain(exc, cluster.server)
        if current.status_code == 404:
            return None
        if current.status_code != 200:
            return f"get answered {current.status_code}: {status_message(current)}"
        metadata = current.json().get("metadata") or {}
        if metadata.get("uid") != item.uid:
            return "replaced by another CRD of the same name since the list: not deleted"
        if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return f"lost crdscope's label {MANAGED_SELECTOR} since the list: not deleted"
        resource_version = str(metadata.get("resourceVersion", ""))
    return "kept changing while being deleted; try again"

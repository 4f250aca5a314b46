"""One server-side apply of one CRD, with retries, conflicts resolved safely.

``PATCH /apis/apiextensions.k8s.io/v1/customresourcedefinitions/NAME
?fieldManager=crdscope&force=true`` with ``application/apply-patch+yaml``;
the body carries a resourceVersion precondition (:mod:`loader.safety`), so
the server itself refuses to touch a CRD crdscope does not own.

* 429: wait ``Retry-After`` (1 s when absent) and send again;
* 5xx and transport errors: exponential backoff (0.5 s doubling, at most 10 s,
  with jitter), then the CRD fails with the last reason;
* 409: look at the CRD as it is now: unlabelled means someone else's (skip),
  ours with this run's annotation after a lost answer means our create went
  through, otherwise apply again over its current resourceVersion;
* 401/403 (and 404: no CRD API) end the whole run: :class:`ApplyFatalError`.

The engine records what :meth:`Applier.apply` returns; nothing here writes
the record.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Literal

from crdscope.connection.cluster import Cluster, explain, parse_retry_after, status_message
from crdscope.connection.crdwatch import MANAGED_BY_LABEL, MANAGED_BY_VALUE, RUN_ANNOTATION
from crdscope.connection.transport import TRANSPORT_ERRORS

from .safety import CREATE_ONLY, FOREIGN_REASON, crd_url
from .documents import CRDDocument

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
FIELD_MANAGER = "crdscope"
#: 0.5 + 1 + 2 + 4 + 8 + 10 + 10 s of backoff: an API server restart fits in it.
MAX_TRANSIENT_ATTEMPTS = 8
MAX_THROTTLED_ATTEMPTS = 30
MAX_CONFLICT_ATTEMPTS = 5
BACKOFF_MAX_SECONDS = 10.0


class ApplyFatalError(Exception):
    """The whole run cannot go on (403, 401, the CRD API missing); one line."""


#: What became of one apply; ``pending``: the run stopped first (the next attempt sends it again).
ApplyOutcome = Literal["created", "updated", "skipped", "failed", "pending"]


@dataclass(frozen=True)
class ApplyResult:
    """What became of one CRD: created, updated, skipped, failed, or pending (stopped first)."""

    outcome: ApplyOutcome
    reason: str | None = None
    uid: str = ""


class Applier:
    """Applies CRDs for one run over the cluster's shared client; counts retries."""

    def __init__(self, cluster: Cluster, run_id: str, stop: asyncio.Event) -> None:
        self.cluster = cluster
        self.run_id = run_id
        self._stop = stop
        self.retries_429 = 0
        self.retries_5xx = 0
        self.retries_transport = 0

    async def apply(self, item: CRDDocument, precondition: str) -> ApplyResult:
        """Apply ``item`` with the resourceVersion ``precondition`` until it is settled."""
        transient = throttled = conflicts = 0
        maybe_applied = False  # an earlier attempt may have been applied without us hearing it
        while True:
            body = item.apply_body(run_id=self.run_id, resource_version=precondition)
            try:
                response = await self.cluster.client.patch(
                    crd_url(item.name), params={"fieldManager": FIELD_MANAGER, "force": "true"},
                    content=body, headers={"Content-Type": APPLY_CONTENT_TYPE})
            except TRANSPORT_ERRORS as exc:
                maybe_applied = True
                transient += 1
                self.retries_transport += 1
                if transient >= MAX_TRANSIENT_ATTEMPTS or not await self._backoff(transient):
                    return self._give_up(explain(exc, self.cluster.server), transient)
                continue
            status = response.status_code
            if status in (200, 201):
                uid = str((response.json().get("metadata") or {}).get("uid", ""))
                return ApplyResult("created" if status == 201 else "updated", uid=uid)
            if status == 429:
                throttled += 1
                self.retries_429 += 1
                delay = parse_retry_after(response.headers.get("Retry-After"))
                if throttled >= MAX_THROTTLED_ATTEMPTS or not await self._sleep(1.0 if delay is None else delay):
                    return self._give_up(f"throttled (429): {status_message(response)}", throttled)
                continue
            if status >= 500:
                maybe_applied = True
                transient += 1
                self.retries_5xx += 1
                if transient >= MAX_TRANSIENT_ATTEMPTS or not await self._backoff(transient):
                    return self._give_up(f"server error {status}: {status_message(response)}", transient)
                continue
            if status == 409:
                conflicts += 1
                if conflicts > MAX_CONFLICT_ATTEMPTS:
                    return ApplyResult("failed", f"kept conflicting (409): {status_message(response)}")
                settled, precondition = await self._after_conflict(item, precondition, maybe_applied)
                if settled is not None:
                    return settled
                continue
            if status in (401, 403):
                what = "forbidden (403)" if status == 403 else "unauthorized (401)"
                raise ApplyFatalError(f"{what}: {status_message(response)}")
            if status == 404:
                raise ApplyFatalError(f"{self.cluster.server} does not serve apiextensions.k8s.io/v1 CRDs (404)")
            return ApplyResult("failed", f"rejected ({status}): {status_message(response)}")

    async def _after_conflict(self, item: CRDDocument, precondition: str,
                              maybe_applied: bool) -> tuple[ApplyResult | None, str]:
        """After a 409: (a final result, -) or (None, the precondition to retry with)."""
        try:
            response = await self.cluster.client.get(crd_url(item.name))
        except TRANSPORT_ERRORS as exc:
            return ApplyResult("failed", f"conflict (409), then {explain(exc, self.cluster.server)}"), precondition
        if response.status_code == 404:
            return None, CREATE_ONLY  # deleted meanwhile: create it
        if response.status_code != 200:
            return ApplyResult("failed", f"conflict (409), then get answered {response.status_code}: "
                                         f"{status_message(response)}"), precondition
        metadata = response.json().get("metadata") or {}
        if (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
            return ApplyResult("skipped", FOREIGN_REASON), precondition
        if maybe_applied and precondition == CREATE_ONLY and \
                (metadata.get("annotations") or {}).get(RUN_ANNOTATION) == self.run_id:
            return ApplyResult("created", uid=str(metadata.get("uid", ""))), precondition  # answer lost
        return None, str(metadata.get("resourceVersion", ""))  # ours: apply over the current version

    async def _backoff(self, attempt: int) -> bool:
        delay = min(BACKOFF_MAX_SECONDS, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)
        return await self._sleep(delay)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless the run is stopped first (False then)."""
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)
        except TimeoutError:
            return True
        return False

    def _give_up(self, reason: str, attempts: int) -> ApplyResult:
        if self._stop.is_set():
            return ApplyResult("pending")  # the next attempt of the run sends it again
        return ApplyResult("failed", f"{reason} (after {attempts} attempts)")

"""Waiting for applied CRDs to become Established: fed by the CRD watch, never by polling.

The engine hands each applied CRD (name and the uid the server gave it) to an
:class:`EstablishWaiter`; the watch's events settle it (Established, or deleted
first).  A CRD stuck at NamesAccepted is touched now and then (see
:data:`ESTABLISH_NUDGE_SECONDS`), and what never becomes Established fails with
the server's own conditions once the server has established nothing for
``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import CRDEvent, CRDWatch
from crdscope.connection.transport import TRANSPORT_ERRORS

from .safety import crd_url

#: CRDs still waiting for Established fail when, this long after the last apply, the
#: server has not established any CRD (a busy server establishes late, but it moves).
ESTABLISHED_TIMEOUT_SECONDS = 120.0
#: A CRD still NamesAccepted but not Established after this long is touched (an annotation):
#: an API server restarted between the two conditions leaves it so, since its establishing
#: controller is fed by CRD *update* events only (seen on the lab after a SIGKILL mid-load:
#: CRDs stuck until the informer's periodic resync, minutes later).
ESTABLISH_NUDGE_SECONDS = 15.0
ESTABLISH_NUDGE_ANNOTATION = "crdscope.dev/establish-retry"

#: ``interruptible(awaitable, timeout)``: the engine's wait that a stop ends early.
Interruptible = Callable[[Awaitable[Any], float], Awaitable[Any]]


class EstablishWaiter:
    """The CRDs of one attempt that were applied and are not Established yet."""

    def __init__(self, cluster: Cluster, watch: CRDWatch, *, timeout: float,
                 established: Callable[[str], None], failed: Callable[[str, str], None]) -> None:
        self.cluster = cluster
        self.watch = watch
        self.timeout = timeout
        self._established = established
        self._failed = failed
        #: name -> uid of the applied object
        self.awaiting: dict[str, str] = {}
        self._all_established = asyncio.Event()
        self._last_progress = 0.0  # when a CRD last began to wait for Established, or one got it

    def add(self, name: str, uid: str) -> None:
        """Wait for CRD ``name`` (the object with ``uid``) to become Established."""
        current = self.watch.crds.get(name)
        if current is not None and current.uid == uid and current.established is not None:
            self._settled(name)
            return
        self.awaiting[name] = uid
        self._last_progress = time.monotonic()
        self._all_established.clear()

    def on_watch_event(self, event: CRDEvent) -> None:
        """The CRD watch's listener: settles the awaited CRD the event is about."""
        name = event.record.name
        uid = self.awaiting.get(name)
        if uid is None or event.record.uid != uid:
            return
        if event.type == "DELETED":
            del self.awaiting[name]
            self._failed(name, "deleted before it was Established")
        elif event.record.established is not None:
            del self.awaiting[name]
            self._settled(name)
        if not self.awaiting:
            self._all_established.set()

    def _settled(self, name: str) -> None:
        self._last_progress = time.monotonic()
        self._established(name)

    async def wait(self, interruptible: Interruptible, stopping: Callable[[], bool]) -> None:
        """Until everything awaited is settled, the timeout passes, or ``stopping()``."""
        while self.awaiting and not stopping():
            remaining = self._last_progress + self.timeout - time.monotonic()
            if remaining <= 0:
                break
            await interruptible(self._all_established.wait(), min(remaining, ESTABLISH_NUDGE_SECONDS))
            await self._nudge_names_accepted(stopping)
        if self.awaiting and not stopping():
            await self._report_not_established()

    async def _nudge_names_accepted(self, stopping: Callable[[], bool]) -> None:
        """Touch awaited CRDs that are NamesAccepted but not Established (see ESTABLISH_NUDGE_SECONDS).

        The patch names the applied uid: a CRD replaced meanwhile is refused by the server, not touched.
        """
        for name, uid in list(self.awaiting.items()):
            current = self.watch.crds.get(name)
            if stopping() or current is None or current.uid != uid or current.names_accepted is None \
                    or current.established is not None:
                continue
            patch = {"metadata": {"uid": uid, "annotations": {ESTABLISH_NUDGE_ANNOTATION: str(int(time.time()))}}}
            with contextlib.suppress(*TRANSPORT_ERRORS):  # the wait goes on; the timeout decides
                await self.cluster.client.patch(crd_url(name), json=patch,
                                                headers={"Content-Type": "application/merge-patch+json"})

    async def _report_not_established(self) -> None:
        """Fail what never became Established, with the server's conditions as the reason."""
        for name in list(self.awaiting):
            reason = (f"not Established: the server established no CRD for {self.timeout:.0f}s "
                      "after the last apply")
            try:
                response = await self.cluster.client.get(crd_url(name))
                conditions = (response.json().get("status") or {}).get("conditions") or []
                false = [f"{c.get('type')}={c.get('status')} ({c.get('reason')}): {c.get('message')}"
                         for c in conditions if c.get("status") != "True"]
                if false:
                    reason += f" ({'; '.join(false)})"
            except TRANSPORT_ERRORS + (ValueError,):  # the reason then goes without the conditions
                pass
            self.awaiting.pop(name, None)
            self._failed(name, reason)

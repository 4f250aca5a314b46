"""Is the API server answering at all? The age of the oldest unanswered request, every second.

A server frozen by SIGSTOP (or a stuck process, a dead node behind a live load
balancer) accepts connections and never answers: every probe's request waits
for its read timeout (10 to 30 s) before anything fails.  The shared client's
transport knows which requests are waiting and since when
(:class:`probes.cluster.InFlightRequests`); this probe reads that every second,
so a hang shows within seconds, not at the end of a timeout.

When no request is in flight and the server has not answered for
:data:`HEARTBEAT_SECONDS`, one ``GET /livez`` is sent in the background (at most
one at a time, never awaited by the run), so a hang is noticed even between
the other probes' runs: at most one request every 2 s while CRDs change (an install,
and the monitor's first minute), every 4 s once all is quiet, and none while the other
probes keep the server busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from .cluster import Cluster
from .samples import Sample

if TYPE_CHECKING:
    from .monitor import Monitor

#: With nothing in flight and no answer for this long, a heartbeat request is sent: while CRDs
#: change (and in the monitor's first minute), a hang right after an answer is critical within
#: 2 + 5 + 0.5 = 7.5 s (5 s threshold, 0.5 s cadence) ...
HEARTBEAT_SECONDS = 2.0
#: ... and once all is quiet within 4 + 5 + 0.5 = 9.5 s.  A heartbeat every 2 s of silence sets a
#: floor of 0.5 requests/s whatever else the monitor does: at rest on 2,065 CRDs the heartbeats
#: were 26 of the monitor's 41 requests a minute (bench/RESULTS.md, footprint).
HEARTBEAT_QUIET_SECONDS = 4.0
HEARTBEAT_PATH = "/livez"
HEARTBEAT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=10.0, pool=10.0)


@dataclass(frozen=True, kw_only=True)
class ResponsivenessSample(Sample):
    """Requests of crdscope's shared client waiting for the server, and for how long."""

    probe = "responsiveness"

    server: str = ""
    in_flight: int = 0
    #: How long the oldest request in flight has waited for its answer (0: none in flight).
    oldest_request_seconds: float = 0.0
    #: That request, "GET /readyz".
    oldest_request: str = ""
    #: How long the server has left crdscope without an answer: the oldest request's wait, or
    #: the time since the first transport failure (refused, timed out) after the last answer.
    unanswered_seconds: float = 0.0
    #: Since the server last answered anything (None: it never has, since the monitor started).
    since_answer_seconds: float | None = None
    #: The latest transport failure since the last answer ("ConnectError", "ReadTimeout").
    last_failure: str | None = None
    heartbeats: int = 0


class ResponsivenessProbe:
    """Reads the shared client's in-flight requests; sends a heartbeat when all is quiet."""

    name = "responsiveness"

    def __init__(self, cluster: Cluster, cadence: float = 0.5,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, *,
                 quiet: Callable[[], bool] | None = None,
                 quiet_heartbeat_seconds: float = HEARTBEAT_QUIET_SECONDS) -> None:
        self.cluster = cluster
        self.cadence = cadence
        self.heartbeat_seconds = heartbeat_seconds
        #: True while nothing changes (the monitor's): heartbeats then wait longer.
        self.quiet = quiet
        self.quiet_heartbeat_seconds = max(heartbeat_seconds, quiet_heartbeat_seconds)
        self.heartbeats = 0
        self._started = time.monotonic()
        self._heartbeat: asyncio.Task[None] | None = None

    async def run(self) -> ResponsivenessSample:
        """A snapshot of the in-flight requests (never waits on the server)."""
        tracker = self.cluster.in_flight
        now = time.monotonic()
        oldest = tracker.oldest()
        waited = now - oldest.started if oldest else 0.0
        failing = now - tracker.failing_since if tracker.failing_since is not None else 0.0
        quiet_since = tracker.last_answer if tracker.last_answer is not None else self._started
        silence = self.quiet_heartbeat_seconds if self.quiet is not None and self.quiet() else self.heartbeat_seconds
        if oldest is None and now - quiet_since >= silence:
            self._send_heartbeat()
        return ResponsivenessSample(
            server=self.cluster.server,
            in_flight=len(tracker),
            oldest_request_seconds=round(waited, 3),
            oldest_request=f"{oldest.method} {oldest.path}" if oldest else "",
            unanswered_seconds=round(max(waited, failing), 3),
            since_answer_seconds=None if tracker.last_answer is None else round(now - tracker.last_answer, 3),
            last_failure=tracker.last_failure,
            heartbeats=self.heartbeats,
        )

    def _send_heartbeat(self) -> None:
        if self._heartbeat is not None and not self._heartbeat.done():
            return
        self.heartbeats += 1
        self._heartbeat = asyncio.create_task(self._beat(), name="responsiveness-heartbeat")

    async def _beat(self) -> None:
        # The answer itself does not matter (a 403 is an answer): the transport records it.
        with contextlib.suppress(httpx.HTTPError):
            response = await self.cluster.client.get(HEARTBEAT_PATH, timeout=HEARTBEAT_TIMEOUT)
            await response.aclose()

    async def aclose(self) -> None:
        """Cancel a heartbeat still waiting."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat


def make_probe(monitor: Monitor) -> ResponsivenessProbe:
    """The responsiveness probe on the monitor's shared client."""
    cadence = monitor.settings.cadences.responsiveness
    return ResponsivenessProbe(monitor.cluster, cadence=cadence, quiet=monitor.quiet)


async def once(cluster: Cluster) -> ResponsivenessSample:
    """One snapshot after a heartbeat (``crdscope probe responsiveness``)."""
    probe = ResponsivenessProbe(cluster, heartbeat_seconds=0.0)
    await probe.run()
    if probe._heartbeat is not None:
        await probe._heartbeat
    return await probe.run()

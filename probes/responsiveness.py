"""Is the API server answering at all? The age of the oldest unanswered request, every second.

A server frozen by SIGSTOP (or a stuck process, a dead node behind a live load
balancer) accepts connections and never answers: every probe's request waits
for its read timeout (10 to 30 s) before anything fails.  The shared client's
transport knows which requests are waiting and since when
(:class:`connection.cluster.InFlightRequests`); this probe reads that every second,
so a hang shows within seconds, not at the end of a timeout.

Between the other probes' requests, an HTTP/2 PING every second on a connection of its
own (:mod:`connection.h2ping`) tells whether the server is alive without a request: the
server answers PINGs without authentication, APF or a line in its metrics.  A PING
unanswered for ``thresholds.ping_unanswered_seconds_critical`` (2.5 s) is the critical
"not answering" finding, so a hang shows within 5 s (bench/RESULTS.md, hang detection).

Where PINGs cannot be sent (plain http, a proxy, no h2 by ALPN, ``cadences.responsiveness_ping``
= 0), the old heartbeat remains: when no request is in flight and the server has not answered
for :data:`HEARTBEAT_SECONDS`, one ``GET /livez`` is sent in the background (at most one at a
time, never awaited by the run): at most one request every 2 s while CRDs change (an install,
and the monitor's first minute), every 4 s once all is quiet, and none while the other probes
keep the server busy.
"""

from __future__ import annotations

from crdscope.base.samples.responsiveness import ResponsivenessSample

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from crdscope.connection.cluster import Cluster, effective_proxy
from crdscope.connection.h2ping import H2Pinger

from .probe import Pacing, ProbeBase

if TYPE_CHECKING:
    from .probe import ProbeParts

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
#: ``crdscope probe responsiveness`` waits this long at most for the first PING's answer.
ONCE_PING_SECONDS = 5.0


class ResponsivenessProbe(ProbeBase):
    """Reads the shared client's in-flight requests and the PING's wait; sends a heartbeat when
    all is quiet and PINGs cannot be sent."""

    name = "responsiveness"
    #: Reads the shared client's in-flight requests and the HTTP/2 PING's wait (no request; the
    #: heartbeats, where PINGs cannot go, are its budget: 12/min).
    pacing = Pacing(busy=0.5, budget=12.0)

    def __init__(self, cluster: Cluster,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, *,
                 quiet: Callable[[], bool] | None = None,
                 quiet_heartbeat_seconds: float = HEARTBEAT_QUIET_SECONDS,
                 ping: H2Pinger | None = None) -> None:
        self.cluster = cluster
        #: The cluster's PINGs (None: none, the heartbeat alone); started by the first run.
        self.ping = ping
        self.heartbeat_seconds = heartbeat_seconds
        #: True while nothing changes (the monitor's): heartbeats then wait longer.
        self.quiet = quiet
        self.quiet_heartbeat_seconds = max(heartbeat_seconds, quiet_heartbeat_seconds)
        self.heartbeats = 0
        self._started = time.monotonic()
        self._heartbeat: asyncio.Task[None] | None = None

    async def run(self) -> ResponsivenessSample:
        """A snapshot of the in-flight requests and the PING (never waits on the server)."""
        tracker = self.cluster.in_flight
        if self.ping is not None:
            self.ping.start()  # its one task, started from the loop the probe runs in
        now = time.monotonic()
        ping = self.ping.status(now) if self.ping is not None else None
        oldest = tracker.oldest()
        waited = now - oldest.started if oldest else 0.0
        failing_since, last_failure = tracker.failing_since, tracker.last_failure
        if failing_since is not None and ping is not None and (ping.answered_at or 0.0) > failing_since:
            # The server answered a PING since that request failed: without heartbeats no request may
            # come for a minute to clear the failure, and its age would read as an outage that is over.
            failing_since = last_failure = None
        failing = now - failing_since if failing_since is not None else 0.0
        quiet_since = tracker.last_answer if tracker.last_answer is not None else self._started
        silence = self.quiet_heartbeat_seconds if self.quiet is not None and self.quiet() else self.heartbeat_seconds
        # PINGs say whether the server is alive without a request: the heartbeat only without them.
        pinging = self.ping is not None and self.ping.active
        if oldest is None and now - quiet_since >= silence and not pinging:
            self._send_heartbeat()
        return ResponsivenessSample(
            server=self.cluster.server,
            in_flight=len(tracker),
            oldest_request_seconds=round(waited, 3),
            oldest_request=f"{oldest.method} {oldest.path}" if oldest else "",
            unanswered_seconds=round(max(waited, failing), 3),
            since_answer_seconds=None if tracker.last_answer is None else round(now - tracker.last_answer, 3),
            last_failure=last_failure,
            heartbeats=self.heartbeats,
            ping_state=ping.state if ping is not None else "",
            ping_waiting_seconds=ping.waiting_seconds if ping is not None else None,
            ping_rtt_seconds=ping.rtt_seconds if ping is not None else None,
            ping_failure=ping.failure if ping is not None else None,
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
        """Cancel a heartbeat still waiting; stop the PINGs and close their connection."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat
        if self.ping is not None:
            await self.ping.aclose()


def pinger(cluster: Cluster, interval: float) -> H2Pinger:
    """The cluster's PINGs every ``interval`` s (0: off), over its TLS settings and proxy choice."""
    return H2Pinger(cluster.config, interval=interval, proxy=effective_proxy(cluster.config))


def make_probe(parts: ProbeParts) -> ResponsivenessProbe:
    """The responsiveness probe on the monitor's shared client, with the cluster's PINGs."""
    return ResponsivenessProbe(parts.cluster, quiet=parts.quiet,
                               ping=pinger(parts.cluster, parts.settings.cadences.responsiveness_ping))


async def once(cluster: Cluster) -> ResponsivenessSample:
    """One snapshot after the first PING's answer, or a heartbeat where PINGs cannot be sent
    (``crdscope probe responsiveness``)."""
    probe = ResponsivenessProbe(cluster, heartbeat_seconds=0.0, ping=pinger(cluster, 1.0))
    try:
        await probe.run()
        assert probe.ping is not None
        await probe.ping.wait_settled(ONCE_PING_SECONDS)
        await probe.run()
        if probe._heartbeat is not None:
            await probe._heartbeat
        return await probe.run()
    finally:
        await probe.aclose()

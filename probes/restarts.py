"""API server restarts from every source that can see them, and when each happened.

No single source sees every restart:

* ``process start time`` (the shared ``/metrics`` scrape): exact times and the memory the
  dead process was last seen with, but only for processes that answered a scrape; a replica
  killed and restarted between two scrapes of another replica is never seen;
* ``identity lease``: each kube-apiserver process renews its replica's identity Lease under
  a holder drawn at process start (:mod:`probes.leases`), so a new holder is a restart of
  that replica whether or not it was ever scraped (two restarts between two readings count
  as one; readings are :data:`probes.health.LEASE_INTERVAL_SECONDS` apart);
* ``lab supervisor``: on crdscope's lab, the supervisor that restarts the API server logs
  each death (and whether the cgroup's OOM-kill counter rose): every restart, exact times;
* ``kube-state-metrics`` (``--prometheus``): the container's restart counter and its last
  terminated reason (``OOMKilled``), at the resolution of Prometheus' scrapes.

They count the same restarts with different blind spots, so they are not added: the
:class:`RestartLedger` keeps each source's count since the watch began, reports the largest
(the closest lower bound of the truth) and names the source that counted it, with the
times it saw (what the crash-loop finding reads).  Probes never import the lab: the lab's
source is a :class:`PlatformRestarts` reading that lab-aware callers hand in.
"""

from __future__ import annotations

from collections import deque

from crdscope.base.restarts import KEEP_EVENTS, PREFERENCE, PlatformRestarts, RestartEvent


class RestartLedger:
    """Each source's restarts since ``baseline`` (None: every one the source knows, as ``probe health``)."""

    def __init__(self, *, since_start: bool = True) -> None:
        self.since_start = since_start
        self.counts: dict[str, int] = {}
        self.events: dict[str, deque[RestartEvent]] = {}
        self._totals: dict[str, int] = {}
        self._baselines: dict[str, int] = {}
        self.oom_kills: int | None = None
        self._oom_baseline: int | None = None

    def counter(self, source: str, total: int, at: float, *, replica: str = "",
                rss_bytes_at_death: int | None = None, uptime_seconds: float | None = None,
                oom_killed: bool | None = None) -> None:
        """A source that only counts: each rise of ``total`` is that many restarts at ``at``.

        A fall (a restart taken back, a counter reset) takes the newest events back.
        """
        baseline = self._baselines.setdefault(source, total if self.since_start else 0)
        if total < baseline:  # a counter reset (kube-state-metrics restarted, a pod replaced)
            self._baselines[source] = baseline = total
        previous = self._totals.get(source, baseline)
        self._totals[source] = total
        events = self.events.setdefault(source, deque(maxlen=KEEP_EVENTS))
        for _ in range(total - previous):
            events.append(RestartEvent(at, source, replica, oom_killed, uptime_seconds, rss_bytes_at_death))
        for _ in range(min(previous - total, len(events))):
            events.pop()
        self.counts[source] = max(0, total - baseline)

    def observed(self, event: RestartEvent) -> None:
        """A source that sees single restarts as they are noticed (a Lease's holder changed)."""
        self.events.setdefault(event.source, deque(maxlen=KEEP_EVENTS)).append(event)
        self.counts[event.source] = self.counts.get(event.source, 0) + 1

    def watching(self, source: str) -> None:
        """``source`` is read and has counted nothing yet (it reports 0, not "unknown")."""
        self.counts.setdefault(source, 0)

    def platform(self, reading: PlatformRestarts) -> None:
        """The platform's own count (since the watch began) and its recent events.

        The events reach back before the watch: a platform's log says when each death was, so
        a crash loop that began before ``crdscope doctor`` started is still seen as one.
        """
        baseline = self._baselines.setdefault(reading.source, reading.restarts if self.since_start else 0)
        self.counts[reading.source] = max(0, reading.restarts - baseline)
        self.events[reading.source] = deque(reading.events, maxlen=KEEP_EVENTS)
        if reading.oom_kills is not None:
            if self._oom_baseline is None:
                self._oom_baseline = reading.oom_kills if self.since_start else 0
            self.oom_kills = max(0, reading.oom_kills - self._oom_baseline)

    def best(self) -> str | None:
        """The source that counted the most restarts (ties: the one whose events say more)."""
        if not self.counts:
            return None
        return max(self.counts, key=lambda s: (self.counts[s], -_rank(s)))

    def total(self) -> int | None:
        """Restarts since the watch began, by the source that saw the most (None: no source)."""
        source = self.best()
        return None if source is None else self.counts[source]

    def recent(self) -> tuple[RestartEvent, ...]:
        """The best source's events, oldest first, each filled from the others where they saw more
        (a platform's reach back before the watch; the others' begin with it).

        The process-start source knows the memory a dead process was last seen with; a
        platform knows whether it was OOM-killed: an event of one gains the other's figures
        when both saw the same restart (the nearest within :data:`MATCH_SECONDS`, each event of
        another source lending its figures to one restart only).
        """
        source = self.best()
        if source is None:
            return ()
        others = [e for name, events in self.events.items() if name != source for e in events]
        return tuple(_enriched(event, others) for event in self.events.get(source, ()))


#: Two sources' events this close in time are one restart (a process's start follows its
#: predecessor's death by the platform's back-off, at most 30 s on the lab, 5 min on a kubelet).
MATCH_SECONDS = 60.0


def _rank(source: str) -> int:
    return PREFERENCE.index(source) if source in PREFERENCE else len(PREFERENCE)


def _enriched(event: RestartEvent, others: list[RestartEvent]) -> RestartEvent:
    """``event`` with what the nearest other source's event adds (taken out of ``others``)."""
    near = [o for o in others if abs(o.at - event.at) <= MATCH_SECONDS]
    if not near:
        return event
    nearest = min(near, key=lambda o: abs(o.at - event.at))
    others.remove(nearest)
    return RestartEvent(
        event.at, event.source, event.replica or nearest.replica,
        event.oom_killed if event.oom_killed is not None else nearest.oom_killed,
        event.uptime_seconds if event.uptime_seconds is not None else nearest.uptime_seconds,
        event.rss_bytes_at_death if event.rss_bytes_at_death is not None else nearest.rss_bytes_at_death)

"""One watched cluster's session: the typed core every front end goes through.

A :class:`WatchCore` holds, for one cluster:

* one :class:`SessionStore` (``base.store.SampleStore`` plus the events log), handed in by whoever
  builds the core (:func:`session.live.open_live_core`, a replay): the only holder of "the latest
  sample of each probe" and of each probe's health; the live probes read it too (``Monitor.latest``);
* one :class:`SampleSource`: the live :class:`probes.monitor.Monitor` or a recording played by
  :class:`session.replay.ReplayFeed`; each of its samples goes straight to :meth:`WatchCore.take`;
* one :class:`findings.engine.FindingsEngine` reading that store, the events detector, and what
  is known beyond the samples: the local kubectl (its version, limits and own cache TTL) and the
  cluster's :class:`base.facts.ClusterFacts` (the API server's memory limit by one precedence, the
  lab's hooks, the guard's verdict...), which the core owns: its probes and findings read it.

What a sample caused (:class:`Taken`: the sample, the events it raised, the findings it changed)
goes to the core's listeners: the headless lines, the recording, the TUI's redraws.  Many clusters
are many cores: ``cluster`` names the one a core watches (the ``cluster`` label of issue 28), and
nothing here is global.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from crdscope.base.facts import ClusterFacts
from crdscope.base.samples import Sample
from crdscope.base.samples.health import HealthSample
from crdscope.base.settings import Thresholds
from crdscope.base.silences import Silence
from crdscope.base.store import SampleStore
from crdscope.findings.checks import server_away
from crdscope.findings.engine import FindingsEngine, check_silences
from crdscope.findings.resources import memory_pressure
from crdscope.findings.kubectl import KubectlClient, read_local_kubectl
from crdscope.findings.kubectl_discovery import KUBECTL_DISCOVERY_CHECK
from crdscope.findings.model import Finding, FindingChange
from crdscope.base.samples import Sink

from .events import Event, EventDetector

log = logging.getLogger("crdscope.session")

#: Events kept for the events log.
EVENTS = 500


class SessionStore(SampleStore):
    """:class:`SampleStore` with the events detector's transitions (the events log reads them)."""

    def __init__(self, history: int | None = None) -> None:
        if history is None:
            super().__init__()
        else:
            super().__init__(history)
        #: Transitions from the events detector, oldest first.
        self.events: deque[Event] = deque(maxlen=EVENTS)

    def add_event(self, event: Event) -> None:
        """Keep an event for the events log."""
        self.events.append(event)
        self.version += 1

    def clear(self) -> None:
        """Forget samples and events (replay seeks back)."""
        super().clear()
        self.events.clear()


class SampleSource(Protocol):
    """Where a core's samples come from: the live monitor (``probes.monitor.Monitor``), or a
    recording's replay (``session.replay.ReplayFeed``); the front ends run, pause and show it."""

    def add_sink(self, sink: Sink) -> None: ...

    async def run(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    @property
    def paused(self) -> bool: ...

    def now(self) -> float:
        """The source's clock (seconds since the epoch): wall time live, recording time in a replay."""
        ...

    @property
    def context(self) -> str: ...

    @property
    def server(self) -> str: ...


class LatestSamples(Mapping[str, Sample]):
    """Probe name -> its latest sample, read from a store at each access (no copy kept): what the
    live probes read of each other (``Monitor.latest``)."""

    def __init__(self, store: SampleStore) -> None:
        self._store = store

    def __getitem__(self, probe: str) -> Sample:
        found = self._store.latest(probe)
        if found is None:
            raise KeyError(probe)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.health())

    def __len__(self) -> int:
        return len(self._store.health())


@dataclasses.dataclass(frozen=True)
class Taken:
    """What one sample caused: the events it raised and the findings it opened, closed or changed."""

    sample: Sample
    events: tuple[Event, ...] = ()
    changes: tuple[FindingChange, ...] = ()


def engine_on(store: SampleStore, thresholds: Thresholds, facts: ClusterFacts) -> FindingsEngine:
    """A findings engine whose checks read ``store`` and ``facts``."""
    return FindingsEngine(thresholds, facts=facts, store=store)


class WatchCore:
    """One cluster's store, source, findings engine, events detector and local knowledge."""

    def __init__(self, source: SampleSource | None, *, store: SessionStore, thresholds: Thresholds | None = None,
                 facts: ClusterFacts | None = None, kubectl: KubectlClient | None = None,
                 cluster: str = "") -> None:
        #: None: the caller hands samples to :meth:`take` itself (a report reading a recording).
        self.source = source
        #: The cluster this core watches (the context name): the ``cluster`` label of a fleet.
        self.cluster = cluster
        self.thresholds = thresholds or Thresholds()
        self.store = store
        self.detector = EventDetector(self.thresholds)
        #: What is known of the cluster beyond the samples: made by whoever opens the core (or here),
        #: owned here, read by the probes (``ProbeParts.facts``) and the findings (``Observations.facts``).
        self.facts = facts if facts is not None else ClusterFacts()
        self.kubectl: KubectlClient | None = None
        self.findings = engine_on(self.store, self.thresholds, self.facts)
        #: Called with what each sample caused (the headless lines, the recording, the TUI's redraws).
        self.listeners: list[Callable[[Taken], None]] = []
        #: Called after a reset (the TUI redraws its panels).
        self.reset_listeners: list[Callable[[], None]] = []
        #: Samples taken since the core began (or was reset).
        self.samples = 0
        #: Accepted findings (``[[silence]]``): judged and shown, not paged on (:meth:`accept`).
        self.silences: tuple[Silence, ...] = ()
        self.know_kubectl(kubectl)
        if source is not None:
            source.add_sink(self._sink)

    # -- samples in ------------------------------------------------------------------------
    def _sink(self, sample: Sample) -> None:
        self.take(sample)

    def take(self, sample: Sample) -> Taken:
        """Keep a sample, detect transitions and evaluate the findings; tell the listeners."""
        self.samples += 1
        # Kept first, so a findings bug cannot lose it (the engine sees it is there already).
        self.store.add(sample)
        if isinstance(sample, HealthSample):  # the limit Prometheus shows, for the facts to weigh
            self.facts.observe_limit(sample.memory_limit_bytes, sample.sources.get("memory_limit_bytes", ""))
        try:
            changes = tuple(self.findings.observe(sample))
        except Exception:  # a findings bug must not lose the sample or the events
            log.exception("findings failed on a %s sample", sample.probe)
            changes = ()
        # The memory finding's verdict holds the monitor's heavy reads back (probes.guard reads it); the
        # "not answering" one dates the health probe's outage and hurries its checks.
        self.facts.memory_pressure = memory_pressure(self.findings.open)
        self.facts.server_away = server_away(self.findings.open)
        try:
            events = tuple(self.detector.observe(sample, self.findings.open))
        except Exception:
            log.exception("events detector failed on a %s sample", sample.probe)
            events = ()
        for event in events:
            self.store.add_event(event)
        taken = Taken(sample, events, changes)
        for listener in list(self.listeners):
            listener(taken)
        return taken

    def add_listener(self, listener: Callable[[Taken], None]) -> None:
        """Receive what each sample caused."""
        self.listeners.append(listener)

    async def run(self) -> None:
        """Run the source until it ends (a recording) or is cancelled."""
        if self.source is None:
            raise RuntimeError("this core has no source of samples")
        await self.source.run()

    def reset(self) -> None:
        """Forget every sample, event and finding (a replay seeking backwards); the store stays the
        same object, so views over it keep working."""
        self.store.clear()
        self.samples = 0
        self.detector = EventDetector(self.thresholds)
        self.facts.forget_observed()
        self.facts.memory_pressure = None
        self.facts.server_away = None
        self.findings = engine_on(self.store, self.thresholds, self.facts)
        self.findings.accept(self.silences, self.cluster)
        self.know_kubectl(self.kubectl)
        for listener in list(self.reset_listeners):
            listener()

    # -- what is known beyond the samples ------------------------------------------------
    def know_kubectl(self, client: KubectlClient | None) -> None:
        """The local kubectl: the findings judge discovery as it lives it (its own cache TTL)."""
        self.kubectl = client
        self.findings.observations.kubectl = client
        if client is not None and KUBECTL_DISCOVERY_CHECK not in self.findings.checks:
            self.findings.checks.append(KUBECTL_DISCOVERY_CHECK)

    async def learn_local_kubectl(self, path: str | None = None) -> KubectlClient | None:
        """Find the kubectl on PATH (its version read in a thread: a process) and know it."""
        client = await asyncio.to_thread(read_local_kubectl, path)
        self.know_kubectl(client)
        return client

    def accept(self, silences: tuple[Silence, ...]) -> None:
        """Accepted findings (the settings' ``[[silence]]``, a collector's): those covering this
        cluster are shown as accepted and do not page until they lapse; an entry naming no finding
        kind is a :class:`ConfigError`."""
        check_silences(silences)
        self.silences = silences
        self.findings.accept(silences, self.cluster)

    def acceptances(self, now: float) -> list[Silence]:
        """The acceptances in force for this cluster at ``now`` (the exporter's series)."""
        return self.findings.acceptances(now)

    # -- findings out --------------------------------------------------------------------
    def open_findings(self) -> list[Finding]:
        """Open findings, most severe first."""
        return self.findings.current()

    def evaluate(self, now: float) -> list[FindingChange]:
        """Evaluate again (after learning something new, e.g. kubectl timed for real)."""
        return self.findings.evaluate(now)


class Runs(Protocol):
    """What :func:`run_each` runs: a core, or a live core with its monitor and memory-limit follower."""

    async def run(self) -> None: ...


async def run_for(core: Runs, seconds: float | None,
                  *stops: Awaitable[object]) -> tuple[bool, BaseException | None]:
    """Run ``core``'s source for ``seconds`` (None: until it ends) or until one of ``stops`` is done.

    Returns (the source ended by itself, the exception it ended with, if any).
    """
    return await run_each([core], seconds, *stops)


async def run_each(cores: Sequence[Runs], seconds: float | None,
                   *stops: Awaitable[object]) -> tuple[bool, BaseException | None]:
    """Run every core's source (a fleet) for ``seconds`` (None: until all end) or until one of
    ``stops`` is done, or one source fails.

    Returns (every source ended by itself, the first exception one ended with, if any).
    """
    running = [asyncio.ensure_future(core.run()) for core in cores]
    waiters = [asyncio.ensure_future(stop) for stop in stops]
    pending: set[asyncio.Future[Any]] = {*running, *waiters}
    deadline = None if seconds is None else asyncio.get_running_loop().time() + seconds
    failure: BaseException | None = None
    while failure is None and any(not task.done() for task in running):
        timeout = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done or any(task in done for task in waiters):
            break  # time is up, or a stop came
        failure = next((task.exception() for task in done if not task.cancelled() and task.exception()), None)
    ended = all(task.done() and not task.cancelled() for task in running)
    for task in (*running, *waiters):
        task.cancel()
    await asyncio.gather(*running, *waiters, return_exceptions=True)
    if failure is None and ended:
        failure = next((task.exception() for task in running if task.exception()), None)
    return ended, failure

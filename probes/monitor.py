"""The composition root: one cluster, its shared sources, its probes and their scheduler.

The TUI, the headless watcher and the benchmarks all build a :class:`Monitor`
and add their sinks; nothing else wires probes together.

Probes are built from the table in :mod:`probes.registry` as ``make_probe(parts) -> Probe``
(``parts`` is the monitor, a :class:`probes.probe.ProbeParts`; their modules are imported when
the monitor is built), each paced as it declares with ``config.toml``'s overrides.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping

from crdscope.base.facts import ClusterFacts
from crdscope.base.samples import Sample, Sink
from crdscope.base.settings import Settings
from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import MANAGED_BY_VALUE, CRDEvent, CRDWatch
from crdscope.connection.heap import give_back_freed_memory
from crdscope.connection.metrics import MetricsSource

from .guard import Guard
from .probe import Pacing, Probe, paced
from .registry import factory, monitor_probes, pacing_of
from .scheduler import Scheduler
from .shared import SharedState

log = logging.getLogger("crdscope.monitor")

#: How often freed memory is given back (one malloc_trim: a few milliseconds on a 100 MB heap).
TRIM_EVERY_SECONDS = 30.0


def shared_budgets(settings: Settings) -> dict[str, float]:
    """Requests per minute of the parts every probe shares: the ``metrics`` scrape, the ``crd-watch``."""
    return {"metrics": settings.budgets.metrics, "crd-watch": settings.budgets.crd_watch}


def request_budgets(settings: Settings, probes: Iterable[str] | None = None) -> dict[str, float]:
    """Part -> requests per minute for a monitor running ``probes`` (default: every one), as
    :meth:`Monitor.budget_of` answers (the probes' declarations with config.toml's keys over them)."""
    budgets = shared_budgets(settings)
    for name in probes if probes is not None else monitor_probes():
        pacing = pacing_of(name, settings.cadences, settings.budgets)
        if pacing is not None and pacing.budget is not None:
            budgets[name] = pacing.budget
    return budgets


class Monitor:
    """Everything that observes one cluster, wired together (a :class:`probes.probe.ProbeParts`)."""

    def __init__(self, cluster: Cluster, settings: Settings | None = None,
                 probes: list[str] | None = None, *, latest: Mapping[str, Sample],
                 facts: ClusterFacts | None = None) -> None:
        self.cluster = cluster
        self.settings = settings or Settings()
        #: Probe name -> its latest sample, read where the samples are kept (the session core's
        #: store; a monitor keeps none): the throttling probe reads discovery's client models there.
        self.latest = latest
        #: What the session knows beyond the samples (its core owns it; probes only read it).
        self.facts = facts if facts is not None else ClusterFacts()
        self.metrics = MetricsSource(cluster)
        self.crds = CRDWatch(cluster, protobuf=self.settings.budgets.crd_watch_protobuf,
                             coalesce=self.settings.budgets.crd_watch_coalesce_seconds)
        #: Probes with an idle cadence slow down once no CRD changed for ``cadences.settle`` s.
        self.scheduler = Scheduler(quiet=self.quiet)
        self._tasks: list[asyncio.Task[None]] = []
        #: What probes hand each other beyond metrics and CRDs (e.g. the discovery view for OpenAPI's stages).
        self.shared = SharedState(guard=Guard(self.facts))
        self._started = time.time()
        for name in probes if probes is not None else monitor_probes():
            probe = factory(name)(self)
            self.scheduler.add(probe, paced(name, probe.pacing, self.settings.cadences, self.settings.budgets))
        self.crds.add_listener(self._wake_on_change)

    def pacing(self, name: str) -> Pacing | None:
        """Probe ``name``'s pacing as this monitor runs it (None: it does not run it)."""
        return self.scheduler.pacing(name)

    def budget_of(self, part: str) -> float | None:
        """Requests per minute allowed to one part of the monitor: a probe (its declared budget, or
        config.toml's), the shared ``metrics`` scrape or the ``crd-watch``; None: not budgeted."""
        pacing = self.pacing(part)
        if pacing is not None:
            return pacing.budget
        return shared_budgets(self.settings).get(part)

    def quiet(self) -> bool:
        """True once no CRD changed for ``cadences.settle`` seconds, counting the monitor's start
        as a change (its first minute is when a person looks at everything)."""
        last = self.shared.last_crd_change or self._started
        return time.time() - last >= self.settings.cadences.settle

    def _wake_on_change(self, event: CRDEvent) -> None:
        """A CRD changed: probes waiting on their idle cadence wait on their busy one instead."""
        if not self.crds.status.synced:
            return  # the first list tells what exists, not what changes: no install in progress
        self.shared.last_crd_change = time.time()
        self.scheduler.nudge_idle()

    def probe(self, name: str) -> Probe:
        """A registered probe by name."""
        for probe in self.scheduler.probes:
            if probe.name == name:
                return probe
        raise KeyError(name)

    def add_sink(self, sink: Sink) -> None:
        """Receive every sample of every probe."""
        self.scheduler.add_sink(sink)

    # -- a source of samples (``session.core.SampleSource``), as a recording's replay is ----------
    @property
    def context(self) -> str:
        return self.cluster.context

    @property
    def server(self) -> str:
        return self.cluster.server

    def pause(self) -> None:
        """Stop starting probe runs (runs in flight finish)."""
        self.scheduler.pause()

    def resume(self) -> None:
        self.scheduler.resume()

    @property
    def paused(self) -> bool:
        return self.scheduler.paused

    def now(self) -> float:
        """Live: the wall clock."""
        return time.time()

    def crd_counts(self) -> tuple[int, int] | None:
        """CRDs installed and owned by crdscope, from the shared watch once it has listed (the header
        shows them before the inventory probe reports)."""
        if not self.crds.status.synced:
            return None
        records = list(self.crds.crds.values())
        return len(records), sum(1 for r in records if r.owner == MANAGED_BY_VALUE)

    async def run(self) -> None:
        """Run the CRD watch and every probe until cancelled."""
        self._tasks = [
            asyncio.create_task(self.crds.run(), name="crd-watch"),
            asyncio.create_task(self.scheduler.run(), name="scheduler"),
            asyncio.create_task(self._trim_heap(), name="heap-trim"),
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._close_probes()

    async def _close_probes(self) -> None:
        """Close what probes hold beyond the shared client (the responsiveness probe's PING
        connection and task, a heartbeat in flight): every front end stops the monitor here."""
        for probe in self.scheduler.probes:
            with contextlib.suppress(Exception):
                await probe.aclose()

    async def _trim_heap(self) -> None:
        """Every :data:`TRIM_EVERY_SECONDS`, give the memory big answers left freed back to the system
        (at rest on 2,065 CRDs the headless watch holds 63 MB with it; bench/RESULTS.md, footprint)."""
        while True:
            await asyncio.sleep(TRIM_EVERY_SECONDS)  # a cadence, not a wait for a condition
            await asyncio.to_thread(give_back_freed_memory)  # ctypes lets the event loop go on

    def stop(self) -> None:
        """Stop :meth:`run` (from the same event loop)."""
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """Stop and close the cluster's shared client."""
        self.stop()
        await self.cluster.aclose()

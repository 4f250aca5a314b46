"""The composition root: one cluster, its shared sources, its probes and their scheduler.

The TUI, the headless watcher and the benchmarks all build a :class:`Monitor`
and add their sinks; nothing else wires probes together.

Probes are built from the table in :mod:`probes.registry` as
``factory(monitor) -> Probe`` (their modules are imported when the monitor is built).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping

from crdscope.connection.cluster import Cluster
from crdscope.connection.crdwatch import MANAGED_BY_VALUE, CRDEvent, CRDWatch
from crdscope.base.samples.health import HealthSample
from crdscope.connection.heap import give_back_freed_memory
from crdscope.connection.metrics import MetricsSource
from .registry import factory, monitor_probes
from crdscope.base.samples import Sample
from .probe import Probe
from crdscope.base.samples import Sink

from .scheduler import Scheduler
from crdscope.base.settings import Settings
from .shared import SharedState

log = logging.getLogger("crdscope.monitor")

#: How often freed memory is given back (one malloc_trim: a few milliseconds on a 100 MB heap).
TRIM_EVERY_SECONDS = 30.0


class Monitor:
    """Everything that observes one cluster, wired together."""

    def __init__(self, cluster: Cluster, settings: Settings | None = None,
                 probes: list[str] | None = None, *, latest: Mapping[str, Sample]) -> None:
        self.cluster = cluster
        self.settings = settings or Settings()
        #: Probe name -> its latest sample, read where the samples are kept (the session core's
        #: store; a monitor keeps none): the throttling probe reads discovery's client models there.
        self.latest = latest
        self.metrics = MetricsSource(cluster)
        self.crds = CRDWatch(cluster, protobuf=self.settings.budgets.crd_watch_protobuf,
                             coalesce=self.settings.budgets.crd_watch_coalesce_seconds)
        #: Probes with an ``*_idle`` cadence slow down once no CRD changed for ``cadences.settle`` s.
        self.scheduler = Scheduler(quiet=self.quiet)
        self._tasks: list[asyncio.Task[None]] = []
        #: What probes share beyond metrics and CRDs (e.g. the discovery view for OpenAPI's stages).
        self.shared = SharedState()
        self._started = time.time()
        self.shared.guard.fraction = self.settings.thresholds.memory_limit_fraction_warn
        for name in probes if probes is not None else monitor_probes():
            probe = factory(name)(self)
            idle = getattr(self.settings.cadences, f"{name}_idle", None)
            if idle is not None:  # the scheduler paces it (Scheduler.pace)
                probe.busy_cadence, probe.idle_cadence = probe.cadence, idle  # type: ignore[attr-defined]
            self.scheduler.add(probe)
        self.scheduler.add_sink(self._guard_memory)
        self.crds.add_listener(self._wake_on_change)

    def set_memory_limit(self, limit_bytes: int | None) -> None:
        """The API server's memory limit as the front end knows it (flag, lab cap); None: unknown."""
        self.shared.guard.known_limit_bytes = limit_bytes

    def _guard_memory(self, sample: Sample) -> None:
        if isinstance(sample, HealthSample) and sample.ok:
            self.shared.guard.observe_memory(sample.rss_bytes, sample.memory_limit_bytes)

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
        for probe in self.scheduler.probes:
            if getattr(probe, "busy_cadence", None) is not None:
                self.scheduler.nudge(probe.name)

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
            close = getattr(probe, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

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

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

from .cluster import Cluster
from .crdwatch import CRDWatch
from .metrics import MetricsSource
from .registry import factory, monitor_probes
from .scheduler import Probe, Scheduler, Sink
from .settings import Settings
from .shared import SharedState

log = logging.getLogger("crdscope.monitor")


class Monitor:
    """Everything that observes one cluster, wired together."""

    def __init__(self, cluster: Cluster, settings: Settings | None = None,
                 probes: list[str] | None = None) -> None:
        self.cluster = cluster
        self.settings = settings or Settings()
        self.metrics = MetricsSource(cluster)
        self.crds = CRDWatch(cluster)
        self.scheduler = Scheduler()
        self._tasks: list[asyncio.Task[None]] = []
        #: What probes share beyond metrics and CRDs (e.g. the discovery view for OpenAPI's stages).
        self.shared = SharedState()
        for name in probes if probes is not None else monitor_probes():
            self.scheduler.add(factory(name)(self))

    def probe(self, name: str) -> Probe:
        """A registered probe by name."""
        for probe in self.scheduler.probes:
            if probe.name == name:
                return probe
        raise KeyError(name)

    def add_sink(self, sink: Sink) -> None:
        """Receive every sample of every probe."""
        self.scheduler.add_sink(sink)

    async def run(self) -> None:
        """Run the CRD watch and every probe until cancelled."""
        self._tasks = [
            asyncio.create_task(self.crds.run(), name="crd-watch"),
            asyncio.create_task(self.scheduler.run(), name="scheduler"),
        ]
        try:
            await asyncio.gather(*self._tasks)
        finally:
            for task in self._tasks:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*self._tasks, return_exceptions=True)

    def stop(self) -> None:
        """Stop :meth:`run` (from the same event loop)."""
        for task in self._tasks:
            task.cancel()

    async def aclose(self) -> None:
        """Stop and close the cluster's shared client."""
        self.stop()
        await self.cluster.aclose()

"""The composition root: one cluster, its shared sources, its probes and their scheduler.

The TUI, the headless watcher and the benchmarks all build a :class:`Monitor`
and add their sinks; nothing else wires probes together.

Probe factories are registered by name as ``module:function`` (imported when
the monitor is built) and called as ``factory(monitor) -> Probe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from dataclasses import dataclass
from collections.abc import Awaitable, Callable

from .cluster import Cluster
from .crdwatch import CRDWatch
from .metrics import MetricsSource
from .samples import Sample
from .scheduler import Probe, Scheduler, Sink
from .settings import Settings

log = logging.getLogger("crdscope.monitor")

#: name -> "module:factory"; order is the order panels and reports list them in.
PROBE_FACTORIES: dict[str, str] = {
    "version": "crdscope.probes.version:make_probe",
    "inventory": "crdscope.probes.inventory:make_probe",
    "discovery": "crdscope.probes.discovery:make_probe",
    "throttling": "crdscope.probes.throttling:make_probe",
    "openapi": "crdscope.probes.openapi:make_probe",
    "health": "crdscope.probes.health:make_probe",
    "latency": "crdscope.probes.latency:make_probe",
}


@dataclass
class FunctionProbe:
    """Adapts ``async def f() -> Sample`` to the scheduler's Probe protocol."""

    name: str
    cadence: float
    function: Callable[[], Awaitable[Sample]]

    async def run(self) -> Sample:
        return await self.function()


class Monitor:
    """Everything that observes one cluster, wired together."""

    def __init__(self, cluster: Cluster, settings: Settings | None = None,
                 probes: list[str] | None = None) -> None:
        self.cluster = cluster
        self.settings = settings or Settings()
        self.metrics = MetricsSource(cluster)
        self.crds = CRDWatch(cluster)
        self.scheduler = Scheduler()
        self._tasks: list[asyncio.Task] = []
        #: Objects probes share beyond metrics and CRDs (e.g. the discovery result for OpenAPI stages).
        self.shared: dict[str, object] = {}
        for name in probes if probes is not None else list(PROBE_FACTORIES):
            self.scheduler.add(self._build(name))

    def _build(self, name: str) -> Probe:
        module, _, factory = PROBE_FACTORIES[name].partition(":")
        return getattr(importlib.import_module(module), factory)(self)

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
        self.stop()
        await self.cluster.aclose()

"""A monitor's handle on the loader engine: start, pause, resume, stop, clean (the TUI's loader,
and a collector's when it allows its viewers control).

It drives :class:`loader.engine.LoadEngine` on the monitor's own cluster
client and CRD watch (no second watch, no polling), gives the session's facts
the engine's token bucket (the throttling probe reports it), and hands every
progress sample to the app's sink like any probe's.  The safety rules are the command line's: a
cluster that is not a crdscope lab is written to only when ``--context`` named it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol
from collections.abc import Callable

from crdscope.loader.engine import LoadEngine
from crdscope.base.samples.loader import LoaderSample
from crdscope.loader.safety import CleanPlan, check_target, execute_clean, plan_clean
from crdscope.loader.sources import open_source
from crdscope.base.errors import CrdscopeError
from crdscope.probes.monitor import Monitor
from crdscope.base.settings import LoaderSettings
from crdscope.connection.traffic import LOADER, origin

from crdscope.findings.model import format_duration


class LoaderHandle(Protocol):
    """What the monitor's loader actions call: a :class:`LoaderControl` on the monitor's own cluster,
    or a viewer's ``session.control.RemoteLoader`` (the collector's loader)."""

    source: str

    @property
    def state(self) -> str: ...

    @property
    def settings(self) -> LoaderSettings: ...

    def configure(self, source: str, profile: str, rate: float, concurrency: int) -> None: ...

    def describe(self) -> str: ...

    async def run(self) -> LoaderSample | None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def stop(self) -> None: ...

    async def clean_plan(self) -> CleanPlan: ...

    async def clean(self, plan: CleanPlan) -> str: ...


class LoaderChoice:
    """What the next start loads and at what pace: the loader dialog's choice, here or on a collector."""

    def __init__(self, settings: LoaderSettings, source: str | None = None) -> None:
        self.settings = settings
        self.source = source or settings.source

    def configure(self, source: str, profile: str, rate: float, concurrency: int) -> None:
        """What the next start loads, and at what pace (the loader dialog's choice)."""
        self.source = source
        self.settings = dataclasses.replace(self.settings, profile=profile, rate=rate, concurrency=concurrency)

    def pace(self) -> str:
        """``steady, 5 CRDs/s, concurrency 4``."""
        s = self.settings
        speed = "as fast as allowed" if s.profile == "burst" else f"{s.rate:g} CRDs/s"
        return f"{s.profile}, {speed}, concurrency {s.concurrency}"


class LoaderControl(LoaderChoice):
    """One loader for the monitor: a new engine per start (a stopped run resumes where it ended)."""

    def __init__(self, monitor: Monitor, settings: LoaderSettings, *, context_flag: str | None = None,
                 source: str | None = None) -> None:
        super().__init__(settings, source)
        self.monitor = monitor
        #: The --context the user spelled out (None: the kubeconfig's current context).
        self.context_flag = context_flag
        self.engine: LoadEngine | None = None
        self._sinks: list[Callable[[LoaderSample], Any]] = []

    # -- what the app reads ------------------------------------------------------------
    def add_sink(self, sink: Callable[[LoaderSample], Any]) -> None:
        """Receive every progress sample."""
        self._sinks.append(sink)

    @property
    def state(self) -> str:
        """idle, running, paused, stopping, stopped or done."""
        return self.engine.state if self.engine is not None else "idle"

    def describe(self) -> str:
        """The pace a start would use, for menus and the idle panel."""
        return f"{self.pace()}, {self.settings.schema_props} schema props"

    def _emit(self, sample: LoaderSample) -> None:
        for sink in list(self._sinks):
            sink(sample)

    def _refuse(self, message: str) -> None:
        """A load that cannot start is a loader sample with an error: one line in the loader panel."""
        self._emit(LoaderSample(source=self.source, state="idle", error=message))

    # -- actions -----------------------------------------------------------------------
    async def run(self) -> LoaderSample | None:
        """Load the configured source until done or stopped (run it as a worker)."""
        cluster = self.monitor.cluster
        try:
            check_target(cluster.config, self.context_flag, "load")
            source = open_source(self.source, schema_props=self.settings.schema_props)
            self.engine = LoadEngine(cluster, source, rate=self.settings.rate,
                                     concurrency=self.settings.concurrency, profile=self.settings.profile,
                                     crd_watch=self.monitor.crds, on_progress=self._emit)
        except CrdscopeError as exc:
            self._refuse(str(exc))
            return None
        if self.engine.limiter is not None:  # into the session's facts: the throttling probe reports it
            self.monitor.facts.client_limiter = self.engine.limiter
        final = await self.engine.run()  # its error, if any, says why the run ended early
        self._emit(final)
        return final

    def pause(self) -> None:
        if self.engine is not None:
            self.engine.pause()

    def resume(self) -> None:
        if self.engine is not None:
            self.engine.resume()

    def stop(self) -> None:
        if self.engine is not None:
            self.engine.stop()

    async def clean_plan(self) -> CleanPlan:
        """What clean would delete (crdscope's labelled CRDs and the objects of their kinds)."""
        cluster = self.monitor.cluster
        check_target(cluster.config, self.context_flag, "clean")
        with origin(LOADER):  # the loader's clean is the user's change, not the monitor's cost
            return await plan_clean(cluster)

    async def clean(self, plan: CleanPlan) -> str:
        """Delete what the confirmed plan lists (each CRD only if still the one listed); one line."""
        with origin(LOADER):
            result = await execute_clean(self.monitor.cluster, plan)
        line = f"clean: deleted {len(result.deleted)} CRDs in {format_duration(result.seconds)}"
        if result.refused:
            line += f"; {len(result.refused)} refused ({result.refused[0][0]}: {result.refused[0][1]})"
        if not result.gone:
            line += "; some were still terminating when the wait ended"
        return line

"""Run probes on their cadences and fan their samples out to sinks.

Each probe has its own loop: run, hand the sample to every sink, then wait
its cadence *after* the run finished, so a probe never overlaps itself and a
slow server slows the monitor down instead of piling requests up (the habit
of Home Assistant's DataUpdateCoordinator).  Failures are samples; the log
records transitions (down, recovered), not every failure.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from collections.abc import Awaitable, Callable

from .probe import DEFAULT_DEADLINE_SECONDS, Pacing, Probe, ProbeBase
from .registry import sample_type
from crdscope.base.samples import Sample, Sink, deliver
from crdscope.connection.traffic import REQUEST_ORIGIN

log = logging.getLogger("crdscope.scheduler")


@dataclass
class FunctionProbe(ProbeBase):
    """Adapts ``async def f() -> Sample`` to the :class:`Probe` contract, run every ``every`` seconds."""

    name: str
    every: float
    function: Callable[[], Awaitable[Sample]]

    def __post_init__(self) -> None:
        self.pacing = Pacing(busy=self.every)

    async def run(self) -> Sample:
        return await self.function()


@dataclass
class _Entry:
    probe: Probe
    #: How it is paced: its declaration, with config.toml's overrides (``probes.probe.paced``).
    pacing: Pacing
    #: Whether its last run failed: the log says "down" and "recovered" once each.  Runs and failures
    #: are counted where the samples are kept (the session core's store), not here.
    failing: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set with ``wake`` by :meth:`Scheduler.trigger` (run now); a wake without it re-paces the wait.
    forced: bool = False
    task: asyncio.Task[None] | None = None


def error_sample(probe: str, error: str) -> Sample:
    """A failed sample of ``probe``'s own type, so its panel and events name the right probe."""
    try:
        return sample_type(probe)(error=error)
    except TypeError:  # a sample type with a required field: the base class still carries the error
        return Sample(error=error)


class Scheduler:
    """Runs each probe on its own cadence; pause/resume; hands samples to sinks."""

    def __init__(self, probes: list[Probe] | None = None, sinks: list[Sink] | None = None, *,
                 quiet: Callable[[], bool] | None = None) -> None:
        self._entries: dict[str, _Entry] = {}
        #: True while nothing changes: a probe with an ``idle_cadence`` (and not ``busy``) uses it.
        self._quiet = quiet
        self.sinks: list[Sink] = list(sinks or [])
        self._running = asyncio.Event()
        self._running.set()
        for probe in probes or []:
            self.add(probe)

    # -- configuration -----------------------------------------------------------
    def add(self, probe: Probe, pacing: Pacing | None = None) -> None:
        """Register a probe, paced as it declares or by ``pacing`` (starts at once if the scheduler
        is running)."""
        if probe.name in self._entries:
            raise ValueError(f"probe {probe.name!r} registered twice")
        entry = _Entry(probe, pacing or probe.pacing)
        probe.cadence = entry.pacing.busy
        self._entries[probe.name] = entry
        if self._started:
            entry.task = asyncio.create_task(self._loop(entry), name=f"probe:{probe.name}")

    def add_sink(self, sink: Sink) -> None:
        self.sinks.append(sink)

    @property
    def probes(self) -> list[Probe]:
        return [entry.probe for entry in self._entries.values()]

    def pacing(self, name: str) -> Pacing | None:
        """How probe ``name`` is paced (None: no such probe here)."""
        entry = self._entries.get(name)
        return entry.pacing if entry is not None else None

    # -- control -------------------------------------------------------------------
    _started = False
    _stopped: asyncio.Event | None = None

    async def run(self) -> None:
        """Run every probe until :meth:`stop` is called or the task is cancelled."""
        self._started = True
        self._stopped = asyncio.Event()
        for entry in self._entries.values():
            if entry.task is None:
                entry.task = asyncio.create_task(self._loop(entry), name=f"probe:{entry.probe.name}")
        try:
            await self._stopped.wait()
        finally:
            tasks = [e.task for e in self._entries.values() if e.task is not None and not e.task.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            self._started = False

    def stop(self) -> None:
        """Ask :meth:`run` to cancel every probe loop and return."""
        if self._started and self._stopped is not None:
            self._stopped.set()

    def pause(self) -> None:
        """Stop starting new runs (runs in flight finish)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def trigger(self, name: str) -> None:
        """Run probe ``name`` as soon as its current run (if any) finishes."""
        entry = self._entries[name]
        entry.forced = True
        entry.wake.set()

    def nudge(self, name: str) -> None:
        """Something changed: probe ``name`` waits by its pace as it is now (an idle wait becomes a
        busy one, counted from the end of its last run); a run in flight is not doubled."""
        self._entries[name].wake.set()

    def nudge_idle(self) -> None:
        """Something changed: every probe with an idle cadence waits by its busy one (:meth:`nudge`)."""
        for entry in self._entries.values():
            if entry.pacing.idle is not None:
                entry.wake.set()

    # -- the loop ------------------------------------------------------------------
    async def run_probe_once(self, name: str) -> Sample:
        """Run one probe now (outside its cadence) and deliver the sample."""
        return await self._run_once(self._entries[name])

    async def _run_once(self, entry: _Entry) -> Sample:
        probe = entry.probe
        deadline = probe.deadline or DEFAULT_DEADLINE_SECONDS
        token = REQUEST_ORIGIN.set(probe.name)  # its requests (and its tasks') count as this probe's
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for swallows a cancellation that arrives
            # in the loop iteration where the probe finishes, and a stopped scheduler then spins on.
            async with asyncio.timeout(deadline):
                sample = await probe.run()
        except TimeoutError:
            sample = error_sample(probe.name, f"probe {probe.name} did not finish within {deadline:g}s "
                                              "(the server answers too slowly)")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("probe %s raised instead of returning an error sample", probe.name)
            sample = error_sample(probe.name, f"internal error in probe {probe.name}: {type(exc).__name__}: {exc}")
        finally:
            REQUEST_ORIGIN.reset(token)
        if sample.error and not entry.failing:
            log.warning("probe %s down: %s", probe.name, sample.error)
        elif not sample.error and entry.failing:
            log.info("probe %s recovered", probe.name)
        entry.failing = bool(sample.error)
        await self._deliver(sample)
        return sample

    async def _deliver(self, sample: Sample) -> None:
        await deliver(self.sinks, sample)
        self._repace()

    def _repace(self) -> None:
        """A sample can change how another probe is paced (once the session judges the server away,
        the health probe dates the outage): wake each probe whose wait would now be shorter."""
        for entry in self._entries.values():
            if self._cadence_of(entry) < entry.probe.cadence:
                entry.wake.set()

    async def _loop(self, entry: _Entry) -> None:
        # The stop check is belt and braces: cancellation ends the loop, but a loop that lost
        # its cancellation (a third-party await that swallows it) must still end on stop().
        while not self._stopping():
            await self._running.wait()
            entry.wake.clear()
            entry.forced = False
            self.pace(entry)
            await self._run_once(entry)
            await self._wait_for_next_run(entry, time.monotonic())

    async def _wait_for_next_run(self, entry: _Entry, ended: float) -> None:
        """Until the probe's cadence has passed since ``ended``, a :meth:`trigger`, or a
        :meth:`nudge` that shortens the wait (the cadence is read again after each one)."""
        while True:
            remaining = ended + self.pace(entry) - time.monotonic()
            if remaining <= 0:
                return
            try:
                async with asyncio.timeout(remaining):
                    await entry.wake.wait()
            except TimeoutError:
                return
            if entry.forced:
                return
            entry.wake.clear()

    def pace(self, entry: _Entry) -> float:
        """Set and return the probe's ``cadence`` for its next run and wait.

        A probe whose pacing has an idle cadence runs on it while all is quiet (and the probe is
        not ``busy``), else on the busy one; a probe ``dating`` an outage runs on its outage
        cadence.  The probe's ``cadence`` itself changes, so what a probe derives from it (how old
        a shared scrape it takes) follows.
        """
        entry.probe.cadence = self._cadence_of(entry)
        return entry.probe.cadence

    def _cadence_of(self, entry: _Entry) -> float:
        probe = entry.probe
        quiet = entry.pacing.idle is not None and self._quiet is not None and self._quiet() and not probe.busy
        return entry.pacing.cadence(quiet, dating=probe.dating)

    def _stopping(self) -> bool:
        return self._stopped is not None and self._stopped.is_set()

"""One way in: :func:`open_live_core` opens a live core for a cluster, for every front end.

The TUI (one per cluster of a fleet), the headless watch, ``doctor`` and the hang benchmark each
call it, so the live wiring is written once:

* one :class:`session.core.SessionStore`, made here and handed to the core (which fills it) and to
  the monitor (whose probes read each other's latest samples from it): one store per core;
* the monitor (:class:`probes.monitor.Monitor`: the probes and their scheduler), the core's source;
* the cluster's :class:`base.facts.ClusterFacts`, made here and owned by the core, which the
  monitor's probes read: the lab's hooks when the cluster is a crdscope lab (its etcd connection
  count, its supervisor's account of restarts), which probes cannot fetch themselves (probes never
  import the lab), and the API server's memory limit given (``--memory-limit``, else a capped lab's
  cap, followed while the monitor runs: ``crdscope lab limit`` resizes it live);
* the recording, as one listener of what each sample caused (and of each given limit).

The local kubectl is learned by the front end (``core.learn_local_kubectl``): a fleet learns it once,
``doctor`` times it for real beside the probes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

from crdscope.base.facts import ClusterFacts, LabHooks, LimitRecord, MemoryLimit
from crdscope.base.settings import Settings
from crdscope.connection.cluster import Cluster
from crdscope.findings.model import FindingChange
from crdscope.probes.monitor import Monitor
from crdscope.base.samples import Sample

from .core import LatestSamples, SessionStore, Taken, WatchCore
from .events import Event
from .notes import Note
from .recorder import Recorder

log = logging.getLogger("crdscope.session")

#: How often a running monitor re-reads a crdscope lab's memory cap (``crdscope lab limit`` resizes it live).
LIMIT_REFRESH_SECONDS = 5.0


class TakenRecorder:
    """A core's listener that writes each sample and what it caused (events, then finding changes)
    to a recorder.  A failing write stops the recording, never the watch: ``on_failure`` says so."""

    def __init__(self, recorder: Recorder, on_failure: Callable[[Recorder, Exception], None]) -> None:
        self.recorder: Recorder | None = recorder
        #: The recorder, kept after a failure stopped the recording (where it went).
        self.opened = recorder
        self.on_failure = on_failure
        self._given: MemoryLimit | None = None

    def __call__(self, taken: Taken) -> None:
        self.record(taken.sample)
        for event in taken.events:
            self.record(event)
        for change in taken.changes:
            self.record(change)

    def follow_limits(self, facts: ClusterFacts) -> None:
        """Record the given memory limit now and each time it changes (a replay judges by it)."""

        def changed(_limit: MemoryLimit | None = None) -> None:
            if facts.given_limit != self._given:
                self._given = facts.given_limit
                self.record(LimitRecord(time.time(), self._given))

        if facts.given_limit is not None:
            changed()
        facts.limit_listeners.append(changed)

    def record(self, item: Sample | Event | FindingChange | LimitRecord | Note) -> None:
        """Record one item (also what the core learned beyond a sample: a finding re-judged)."""
        if self.recorder is None:
            return
        try:
            self.recorder.record(item)
        except Exception as exc:  # noqa: BLE001 - a full disk, a removed directory: the watch goes on
            recorder, self.recorder = self.recorder, None
            self.on_failure(recorder, exc)

    def close(self) -> Path:
        """Close the recording (idempotent); where it went."""
        self.opened.close()
        return self.opened.first_path


class LiveCore:
    """One live cluster: its connection, monitor and core, its recording.  :meth:`run` runs the
    monitor (and follows a lab's cap into the core's facts) until cancelled, then closes the
    cluster's client."""

    def __init__(self, cluster: Cluster, monitor: Monitor, core: WatchCore, *, recording: TakenRecorder | None,
                 follows_limit: bool, lab_home: Path | None) -> None:
        self.cluster = cluster
        self.monitor = monitor
        self.core = core
        self.recording = recording
        #: Whether :meth:`run` follows the lab's cap (the limit was not given as a flag).
        self.follows_limit = follows_limit
        #: The lab's directory when the caller holds the lab (None: the default lab's is looked up).
        self.lab_home = lab_home

    @property
    def store(self) -> SessionStore:
        return self.core.store

    @property
    def facts(self) -> ClusterFacts:
        """The core's facts (the monitor's probes read the same object)."""
        return self.core.facts

    @property
    def limit_listeners(self) -> list[Callable[[MemoryLimit | None], None]]:
        """Told each new memory limit (the TUI redraws)."""
        return self.core.facts.limit_listeners

    async def run(self) -> None:
        """Run the monitor until cancelled (following a lab's cap), then close the cluster's client."""
        follower = None
        lab = self.facts.given_limit
        if self.follows_limit and lab is not None:
            follower = asyncio.create_task(
                follow_memory_limit(self.cluster.server, self.lab_home, lab.bytes, self.facts.set_lab_limit),
                name=f"memory-limit {self.core.cluster}")
        try:
            await self.monitor.run()
        finally:
            if follower is not None:
                follower.cancel()
                with contextlib.suppress(BaseException):
                    await follower
            await self.cluster.aclose()


def open_live_core(cluster: Cluster, settings: Settings, *, lab_home: Path | None = None,
                   memory_limit: int | None = None, recorder: Recorder | None = None,
                   on_record_failure: Callable[[Recorder, Exception], None] | None = None) -> LiveCore:
    """The live core of ``cluster``: its store, facts, monitor and findings core, and ``recorder`` as a
    listener (``on_record_failure``: told when writing fails).

    ``memory_limit`` (bytes, ``--memory-limit``) is the API server's limit when the caller knows it;
    else a capped crdscope lab's cap (``lab_home``: the lab's directory when the caller holds the
    lab, else the default lab's is looked up), followed while the core runs.
    """
    store = SessionStore()
    facts = ClusterFacts(flag_limit=memory_limit, lab=lab_hooks(cluster.server, lab_home),
                         lab_limit=None if memory_limit else lab_cap(cluster.server, lab_home))
    monitor = Monitor(cluster, settings, latest=LatestSamples(store), facts=facts)
    core = WatchCore(monitor, store=store, thresholds=settings.thresholds, cluster=cluster.context, facts=facts)
    core.accept(settings.silences)
    recording = None
    if recorder is not None:
        recording = TakenRecorder(recorder, on_record_failure or log_record_failure)
        core.add_listener(recording)
        recording.follow_limits(facts)
    # A lab's cap changes under the monitor (`crdscope lab limit`); a limit given as a flag does not.
    return LiveCore(cluster, monitor, core, recording=recording, follows_limit=not memory_limit,
                    lab_home=lab_home)


def log_record_failure(recorder: Recorder, exc: Exception) -> None:
    log.error("recording to %s failed and stopped: %s", recorder.path, exc)


def lab_cap(server: str, lab_home: Path | None = None) -> int | None:
    """The memory cap of the crdscope lab serving ``server`` (None: no lab, or not capped)."""
    try:
        from crdscope.lab.lookup import lab_memory_limit
    except ImportError:
        return None
    return lab_memory_limit(server, lab_home)


async def follow_memory_limit(server: str, lab_home: Path | None, known: int | None,
                              apply: Callable[[int | None], None], *,
                              every: float = LIMIT_REFRESH_SECONDS) -> None:
    """Tell ``apply`` each new memory limit of the lab serving ``server`` until cancelled.

    ``crdscope lab limit`` changes a lab's cap under a running monitor, as a provider resizes a
    control plane; ``known`` is the limit the caller already uses.  Only a capped lab's cap can
    change (``lab limit`` refuses an uncapped one), so with ``known`` None, or ``server`` no lab,
    this returns at once.  The lab is found once; each turn reads its state file alone, in a
    thread: a slow disk never holds the event loop.  Callers given ``--memory-limit`` do not follow.
    """
    if known is None:
        return
    from crdscope.lab.lookup import lab_for_server, lab_memory_limit

    found = await asyncio.to_thread(lab_for_server, server, lab_home)
    if found is None:
        return
    home = found[0].home
    while True:
        await asyncio.sleep(every)  # a cadence, not a wait for a condition
        try:
            now = await asyncio.to_thread(lab_memory_limit, server, home)
        except Exception:  # noqa: BLE001 - an unreadable state file keeps the limit already known
            continue
        if now != known:
            known = now
            apply(now)


def lab_hooks(server: str, lab_home: Path | None = None) -> LabHooks | None:
    """When ``server`` is crdscope's lab, its etcd connection count and its supervisor's account of
    restarts, for the health probe (probes never import ``lab``), and its name (the crash loop's remedy
    names ``crdscope lab limit ... --name NAME``); None otherwise.

    ``lab_home`` is the lab's directory when the caller holds the lab (``crdscope lab``); otherwise
    the default lab's is looked up.
    """
    try:
        from crdscope.lab.sockets import etcd_connection_counter
    except ImportError:
        return None
    from crdscope.lab.lookup import lab_for_server
    from crdscope.lab.restarts import restart_reader

    found = lab_for_server(server, lab_home)
    return LabHooks(etcd_connections=etcd_connection_counter(server, lab_home),
                    restarts=restart_reader(server, lab_home), name=found[1].name if found else None)

"""The monitor's clusters: one :class:`ClusterSession` per watched cluster.

A session is what the single-cluster monitor always held (a feed, its session core, the
recorder, the loader's control and the lab), now one object per cluster so that one app can
watch a fleet.  The app shows one session at a time in its monitor screen (``app.session``);
every attribute the header, panels and palette read (``app.store``, ``app.feed``,
``app.now()``...) is that session's.  Samples carry their session in the message that brings
them to the app (:class:`tui.messages.SampleArrived`), so each reaches its own core.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from crdscope.base.samples import Sample
from crdscope.base.settings import Settings
from crdscope.base.store import ProbeHealth
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import Finding
from crdscope.session.core import SessionStore, Taken, WatchCore

from .feeds import Feed

log = logging.getLogger("crdscope.tui")

#: Runs until cancelled, telling its argument each new memory limit (a lab's cap resized live).
LimitFollower = Callable[[Callable[[int | None], None]], Awaitable[None]]


class ClusterSession:
    """One watched cluster: its feed, session core, recorder, loader control and lab."""

    def __init__(self, feed: Feed, *, settings: Settings | None = None, memory_limit: int | None = None,
                 detector: Any = None, kubectl: KubectlClient | None = None, loader: Any = None,
                 lab: Any = None, recorder: Any = None, clock: Callable[[], float] | None = None,
                 follow_memory_limit: LimitFollower | None = None) -> None:
        self.feed = feed
        settings = settings or Settings()
        #: The session core: samples reach it through the app (as messages), not as a feed sink.
        self.core = WatchCore(feed, thresholds=settings.thresholds, memory_limit=memory_limit,
                              cluster=str(getattr(feed, "context", "") or ""), subscribe=False)
        if detector is not None:
            self.core.detector = detector
        if kubectl is not None:
            self.core.know_kubectl(kubectl)
        #: The loader's controller (tui.loader_control.LoaderControl), None in a replay.
        self.loader = loader
        #: A lab.controlplane.Lab when watching a lab: its faults go in the palette.
        self.lab = lab
        self.recorder = recorder
        self.follow_memory_limit = follow_memory_limit
        #: Called once when recording fails (the app says so on screen).
        self.record_failed: Callable[[], None] | None = None
        self._clock = clock

    @property
    def name(self) -> str:
        """The cluster's name: its context (the ``cluster`` label of the fleet exporter)."""
        return self.core.cluster or str(getattr(self.feed, "server", "") or "")

    @property
    def store(self) -> SessionStore:
        return self.core.store

    @property
    def memory_limit(self) -> int | None:
        """The API server's memory limit in bytes when known (``--memory-limit``, the lab's cap)."""
        return self.core.memory_limit

    def now(self) -> float:
        """The feed's clock: wall time live, recording time in a replay."""
        return self._clock() if self._clock is not None else self.feed.now()

    @property
    def probes_paused(self) -> bool:
        return self.feed.paused

    def probe_health(self) -> dict[str, ProbeHealth]:
        """Per-probe health: the scheduler's when the feed has one, else from the samples seen."""
        health = getattr(self.feed, "health", None)
        found = health() if callable(health) else None
        return found if found else self.store.health()

    def current_findings(self) -> list[Finding]:
        """Open findings, most severe first."""
        return self.core.open_findings()

    def take(self, sample: Sample) -> Taken:
        """Hand a sample to the core and record it with what it caused."""
        taken = self.core.take(sample)
        self.record(sample)
        for change in taken.changes:
            self.record(change)
        for event in taken.events:
            self.record(event)
        return taken

    def record(self, item: Any) -> bool:
        """Record an item; False when recording failed (it then stops, and the caller says so)."""
        if self.recorder is None:
            return True
        try:
            self.recorder(item)
        except Exception:
            log.exception("recording of %s failed; recording stops", self.name)
            self.recorder = None
            if self.record_failed is not None:
                self.record_failed()
            return False
        return True

    def close_recorder(self) -> str | None:
        """Close the recording; where it went (None: nothing recorded)."""
        if self.recorder is None:
            return None
        self.recorder.close()
        return str(self.recorder.first_path)

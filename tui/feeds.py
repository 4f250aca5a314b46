"""Where the monitor's samples come from: a *feed*.

A feed is any object with the members of :class:`Feed`: ``add_sink(callable)``,
``async run()``, ``pause()``, ``resume()``, ``paused``, ``now()`` (the feed's
clock: wall time live, recording time in a replay, for "last good sample N s
ago"), and ``context``/``server`` (shown in the header); the app runs it as a
worker in its own event loop and renders whatever reaches its sink.  The live
feed wraps :class:`probes.monitor.Monitor`; replay (``session/replay.py``)
offers the same interface over a recording.  Optional members the app uses when
present:

- ``health()``: per-probe :class:`probes.scheduler.ProbeHealth` (else the app
  derives it from the samples it saw);
- ``crd_counts()``: ``(installed, owned by crdscope)`` before the inventory probe reports;
- ``add_reset_listener(callable)``: called before a replay seeks backwards;
- ``share_store(store)``: the live scheduler reads the session core's store.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from crdscope.connection.crdwatch import MANAGED_BY_VALUE
from crdscope.probes.monitor import Monitor
from crdscope.base.store import ProbeHealth, SampleStore
from crdscope.probes.scheduler import Sink


@runtime_checkable
class Feed(Protocol):
    """What the app needs from a source of samples."""

    def add_sink(self, sink: Sink) -> None: ...

    async def run(self) -> None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    @property
    def paused(self) -> bool: ...

    def now(self) -> float:
        """The feed's clock (seconds since the epoch)."""
        ...

    @property
    def context(self) -> str: ...

    @property
    def server(self) -> str: ...


class LiveFeed:
    """The live monitor as a feed: probes run on their cadences in the app's loop."""

    def __init__(self, monitor: Monitor) -> None:
        self.monitor = monitor

    @property
    def context(self) -> str:
        return self.monitor.cluster.context

    @property
    def server(self) -> str:
        return self.monitor.cluster.server

    def add_sink(self, sink: Sink) -> None:
        """Receive every sample of every probe."""
        self.monitor.add_sink(sink)

    def share_store(self, store: SampleStore) -> None:
        """The scheduler reads the session core's store (which the core fills) instead of its own."""
        self.monitor.scheduler.share_store(store)

    async def run(self) -> None:
        """Run the CRD watch and the probes until cancelled, then close the cluster's client."""
        try:
            await self.monitor.run()
        finally:
            await self.monitor.cluster.aclose()

    def pause(self) -> None:
        """Stop starting probe runs (runs in flight finish)."""
        self.monitor.scheduler.pause()

    def resume(self) -> None:
        self.monitor.scheduler.resume()

    @property
    def paused(self) -> bool:
        return self.monitor.scheduler.paused

    def now(self) -> float:
        """Live: the wall clock."""
        return time.time()

    def health(self) -> dict[str, ProbeHealth]:
        """The scheduler's per-probe health."""
        return self.monitor.scheduler.health()

    def crd_counts(self) -> tuple[int, int] | None:
        """CRDs installed and owned by crdscope, from the shared watch once it has listed."""
        watch = self.monitor.crds
        if not watch.status.synced:
            return None
        records = list(watch.crds.values())
        return len(records), sum(1 for r in records if r.owner == MANAGED_BY_VALUE)

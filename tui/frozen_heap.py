"""Keep CPython's cyclic garbage collector from stalling key presses.

The monitor's heap is mostly long-lived: Textual's widgets and their strip caches, the imported
modules, the CRD watch's records, the discovery model.  CPython's oldest-generation collection
walks all of it, and the panels' redraws make enough surviving garbage to trigger one every few
seconds.  Measured on a lab with 500 AWS provider CRDs (tabs layout, 120x40, a key every 0.25 s):
ten full collections a minute of 113 to 136 ms each, the p99 of key-to-frame 148 ms.  With the
settled heap frozen (``gc.freeze``: moved to a generation the collector never walks) the same
collections took 23 to 33 ms and the key p99 fell to 49 ms.

Frozen objects are still freed by reference counting; only cycles among them that become garbage
wait for the next :meth:`FrozenHeap.settle`, which thaws, collects everything once and freezes
again: the first time when the first samples are drawn, then every :data:`SETTLE_EVERY_SECONDS`.

Between settles the heap keeps growing (every cluster's sample history, up to 720 samples per
probe), and a fleet of 20 clusters had 740,000 objects: full collections of what was not frozen
took 200 to 800 ms and fell into key presses (``bench fleet_ui``: Enter p99 795 ms).  So the
survivors of every full collection the collector runs on its own are frozen too, at no cost: it
has just freed every cycle of garbage, so nothing frozen then is garbage.  Only while a screen
that will be dismissed is up (a cluster's monitor opened from the fleet, a dialog) are they not,
as its widgets, frozen, would outlive it until the next settle.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import TYPE_CHECKING
from collections.abc import Callable, Mapping

if TYPE_CHECKING:
    from crdscope.base.store import SampleStore

log = logging.getLogger("crdscope.tui")

#: How often the frozen heap is thawed and collected in full: one stall of the length of a full
#: collection (about 50 to 150 ms) this often, against one such stall every few seconds unfrozen.
SETTLE_EVERY_SECONDS = 600.0

#: The longest the collector is held off while a screen builds, should its first frame never come.
HOLD_COLLECTIONS_SECONDS = 3.0

#: The samples that bring most of the long-lived data (CRD records, the discovery model).
FIRST_SAMPLES = ("inventory", "discovery")


class FrozenHeap:
    """Freezes the settled heap of a running app; thaws it when the app stops."""

    def __init__(self, may_freeze: Callable[[], bool] = lambda: True) -> None:
        self.settled = False
        self.settles = 0
        self.last_settle_seconds = 0.0
        #: Full collections whose survivors were frozen since the app started.
        self.refreezes = 0
        self._queued = False
        #: False while the heap holds what will soon be garbage (a screen that will be dismissed).
        self._may_freeze = may_freeze
        self._watching = False
        self._holding = False

    def first_samples_in(self, store: SampleStore, later: Callable[[Callable[[], None]], object]) -> None:
        """Settle once, through ``later`` (after the next frame), when the first samples are in."""
        if self.settled or self._queued:
            return
        if all(store.latest(probe) is not None for probe in FIRST_SAMPLES):
            self._queued = True
            later(self.settle)

    def settle(self) -> None:
        """Collect everything once, then freeze what survived."""
        started = time.perf_counter()
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self.settled = True
        self.settles += 1
        if not self._watching:
            gc.callbacks.append(self._after_collection)
            self._watching = True
        self.last_settle_seconds = time.perf_counter() - started
        log.debug("heap settled in %.0f ms; %d objects frozen", self.last_settle_seconds * 1000,
                  gc.get_freeze_count())

    def hold_collections(self, until: Callable[[Callable[[], None]], object]) -> None:
        """Hold the collector off while a screen builds: ``until`` calls back once its first frame is
        out, and a collection the build made due runs then, after the frame rather than before it."""
        if not gc.isenabled():
            return
        gc.disable()
        self._holding = True
        until(self.release_collections)

    def release_collections(self) -> None:
        """End :meth:`hold_collections` (also the fallback if the screen never drew)."""
        if self._holding:
            self._holding = False
            gc.enable()

    def _after_collection(self, phase: str, info: Mapping[str, int]) -> None:
        """gc callback: freeze the survivors of a full collection (see the module doc)."""
        # Runs inside the collector, after it finished: gc.freeze only moves its lists.
        if phase == "stop" and info.get("generation") == 2 and self.settled and self._may_freeze():
            gc.freeze()
            self.refreezes += 1

    def thaw(self) -> None:
        """Give the collector everything back (the app is stopping; another may start in this process)."""
        self.release_collections()
        if self._watching:
            gc.callbacks.remove(self._after_collection)
            self._watching = False
        if self.settled:
            gc.unfreeze()
            self.settled = False

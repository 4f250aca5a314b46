"""What the health probe remembers between runs: restarts, outage windows, Leases and fits.

Split from :mod:`probes.health` (the probe and its sample): a :class:`HealthTracker` holds the
replicas told apart by start time (:mod:`probes.replicas`), the identity Leases and their
holders (:mod:`probes.leases`), the restart ledger of every source (:mod:`probes.restarts`),
the outage windows and the per-process fits of memory and descriptors against the CRD count.
"""

from __future__ import annotations

from crdscope.base.samples.health import Outage, ReplicaFigures

import logging
from collections import deque

from crdscope.base.fit import PlaneFit, ProcessFits
from .leases import LeaseReading, LeaseWatcher
from .replicas import ReplicaTracker
from crdscope.base.restarts import START_TIME

from .restarts import RestartLedger

log = logging.getLogger("crdscope.health")

MIB = float(1 << 20)
KEEP_OUTAGES = 20
#: fit name -> (figure it fits, sample fields of slope and R², divisor of the slope)
FITS = {
    "rss": ("rss_bytes", "mib_per_crd", "r2", MIB),
    "heap": ("heap_bytes", "heap_mib_per_crd", "heap_r2", MIB),
    "fds": ("open_fds", "fds_per_crd", "fds_r2", 1.0),
}


# --------------------------------------------------------------------------- state across runs


class HealthTracker:
    """Restarts, outage windows and per-CRD fits, remembered between runs."""

    def __init__(self, *, since_start: bool = True) -> None:
        self.start_time: float | None = None
        self.replicas = ReplicaTracker()
        self.ledger = RestartLedger(since_start=since_start)
        self.leases = LeaseWatcher()
        self.lease_reading: LeaseReading | None = None
        self.lease_read_at = 0.0
        self.outages: deque[Outage] = deque(maxlen=KEEP_OUTAGES)
        self.open_outage: Outage | None = None
        self.fits = {name: ProcessFits() for name in FITS}
        #: RSS against CRDs and Crossplane's MRDs, and RSS less the MRDs' measured cost against CRDs.
        self.mrd_fits = {"plane": ProcessFits(factory=PlaneFit), "rss_less_mrds": ProcessFits()}

    @property
    def restarts(self) -> int:
        """Restarts over every replica (see :class:`~probes.replicas.ReplicaTracker`)."""
        return self.replicas.restarts

    @property
    def apiservers(self) -> int | None:
        """API servers renewing their identity Lease (None: not read, or not allowed)."""
        return self.lease_reading.live if self.lease_reading is not None else None

    def observe_start(self, start_time: float, now: float, figures: dict[str, float],
                      crds: int | None = None) -> str:
        """Attribute a scrape to its replica; returns the replica's name."""
        self.start_time = start_time
        before = {r.name: r for r in self.replicas.figures()}
        # No live Lease at all (clock skew, or Leases not renewed): as good as not knowing.
        name = self.replicas.observe(start_time, now, figures, replicas=self.apiservers or None, crds=crds)
        self._count_start_time_restarts(name, before, start_time)
        return name

    def _count_start_time_restarts(self, name: str, before: dict[str, ReplicaFigures], start_time: float) -> None:
        """Hand the start-time count to the ledger, with what was last seen of a process that died."""
        dead = before.get(name)
        replaced = dead is not None and abs(dead.start_time - start_time) > 0.5
        self.ledger.counter(
            START_TIME, self.replicas.restarts, start_time, replica=name,
            rss_bytes_at_death=dead.rss_bytes if replaced and dead else None,
            # At least this long: it served from its start to its last scrape.
            uptime_seconds=max(0.0, dead.last_seen - dead.start_time) if replaced and dead and dead.last_seen else None)

    def observe_availability(self, now: float, down: bool, reason: str) -> None:
        """Open an outage window on the first bad run, close it on the first good one."""
        if down and self.open_outage is None:
            self.open_outage = Outage(start=now, reason=reason)
            log.warning("API server down: %s", reason)
        elif not down and self.open_outage is not None:
            start = self.open_outage.start
            self.outages.append(Outage(start, now, now - start, self.open_outage.reason))
            self.open_outage = None
            log.info("API server back after %.1f s", now - start)

    def outage_windows(self, now: float) -> tuple[Outage, ...]:
        """Closed windows, then the open one (its duration so far)."""
        windows = tuple(self.outages)
        if self.open_outage is not None:
            start = self.open_outage.start
            windows += (Outage(start, None, now - start, self.open_outage.reason),)
        return windows

"""What the health probe remembers between runs: restarts, outage windows, Leases and fits.

Split from :mod:`probes.health` (the probe) and :mod:`probes.health_figures` (its readers of
``/metrics``, Prometheus and the lab): a :class:`HealthTracker` holds the replicas told apart by
start time (:mod:`probes.replicas`), the identity Leases and their holders
(:mod:`probes.leases`), the restart ledger of every source (:mod:`probes.restarts`), the outage
windows and the per-process fits of memory and descriptors against the CRD count.  Its readers
turn a run's typed figures into restarts (:meth:`HealthTracker.restarts_of`), fitted slopes
(:meth:`HealthTracker.slopes`) and the CRDs' own share beside Crossplane's MRDs
(:meth:`HealthTracker.own_share`).
"""

from __future__ import annotations

from crdscope.base.samples.health import Outage, ReplicaFigures

import logging
import dataclasses
from collections import deque
from collections.abc import Callable

from crdscope.base.activation import MRD_BYTES, MRDS_RESOURCE
from crdscope.base.fit import PlaneFit, ProcessFits
from crdscope.connection.prometheus import PrometheusReading
from .health_figures import ProcessFigures, ProcessGauges
from .leases import LeaseReading, LeaseWatcher
from .replicas import ReplicaTracker
from crdscope.base.restarts import START_TIME

from .restarts import RestartLedger

log = logging.getLogger("crdscope.health")

MIB = float(1 << 20)
KEEP_OUTAGES = 20



@dataclasses.dataclass(frozen=True)
class FitSpec:
    """One fit against the CRD count: the figure it fits, the sample's fields of its slope and R²
    (where their reasons go in ``unobservable``), the divisor of the slope."""

    figure: str
    value: Callable[[ProcessGauges], float | None]
    slope_field: str
    r2_field: str
    unit: float


FITS = {
    "rss": FitSpec("rss_bytes", lambda g: g.rss_bytes, "mib_per_crd", "r2", MIB),
    "heap": FitSpec("heap_bytes", lambda g: g.heap_bytes, "heap_mib_per_crd", "heap_r2", MIB),
    "fds": FitSpec("open_fds", lambda g: g.open_fds, "fds_per_crd", "fds_r2", 1.0),
}


@dataclasses.dataclass(frozen=True)
class Slope:
    """A fitted figure per CRD (in the fit's unit) and how well the line explains it."""

    per_crd: float | None = None
    r2: float | None = None


@dataclasses.dataclass(frozen=True)
class OwnShare:
    """The CRDs' own memory per CRD beside Crossplane's MRDs (see :meth:`HealthTracker.own_share`)."""

    mrds: int | None = None
    mib_per_crd_own: float | None = None
    mib_per_mrd: float | None = None
    own_share_by: str = ""


@dataclasses.dataclass(frozen=True)
class Restarts:
    """Restarts so far and the replica whose process answered this run's scrape (None: unnamed)."""

    count: int | None
    replica: str | None = None
    missing: str = ""


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

    def observe_start(self, start_time: float, now: float, figures: ProcessGauges,
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
        """Open an outage window on the first bad run, close it on the first good one; a bad run
        that knows an earlier start (the first attempt left unanswered) dates the open window back."""
        if down and self.open_outage is None:
            self.open_outage = Outage(start=now, reason=reason)
            log.warning("API server down: %s", reason)
        elif down and self.open_outage is not None and now < self.open_outage.start:
            self.open_outage = dataclasses.replace(self.open_outage, start=now)
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

    # -- readers: this run's figures in, what the sample says out -------------------------------
    def restarts_of(self, process: ProcessFigures, reading: PrometheusReading | None, now: float,
                    crds: int | None) -> Restarts:
        """Restarts by start time (this run's scrape attributed to its replica, with this run's CRD
        count for its fits); without a start time, the count kept, else Prometheus' per instance."""
        start = process.start_time.value
        if start is None:
            return self._restarts_without_start(reading)
        gauges = process.gauges()
        replica = self.replicas.name_of(start)
        if replica is None:  # a scrape the listener did not see
            replica = self.observe_start(start, now, gauges, crds)
        elif crds is not None:  # this run's CRD count goes with this run's scrape
            self.replicas.fit(replica, crds, gauges)
        self.replicas.answering = replica
        return Restarts(self.restarts, replica)

    def _restarts_without_start(self, reading: PrometheusReading | None) -> Restarts:
        if self.start_time is not None:
            return Restarts(self.restarts)  # seen before: the server is away, the count stands
        instances = reading.figures.instances if reading is not None and reading.figures is not None else ()
        counted = [i.restarts for i in instances if i.restarts is not None]
        if counted:  # start-time changes per instance, within Prometheus' window
            return Restarts(sum(counted))
        return Restarts(None, missing="needs process_start_time_seconds (see start_time)")

    def fits_of(self, replica: str | None) -> dict[str, ProcessFits]:
        """The answering replica's fits; the tracker's own when no start time names the process."""
        return self.replicas.slot_fits(replica) if replica else self.fits

    def slopes(self, process: ProcessFigures, crds: int | None, replica: str | None,
               unobservable: dict[str, str]) -> dict[str, Slope]:
        """Fit name -> its slope per CRD and R², this run's figures added where no replica fits them;
        the reason for each one missing in ``unobservable``."""
        start = process.start_time.value or self.start_time or 0.0
        gauges = process.gauges()
        slopes: dict[str, Slope] = {}
        for name, spec in FITS.items():
            fits = self.fits_of(replica)[name]
            value = spec.value(gauges)
            if replica is None and crds is not None and value is not None:  # a replica's fits: filled by it
                fits.add(start, crds, value)
            result = fits.result()
            slopes[name] = Slope(result.slope / spec.unit, result.r2) if result else Slope()
            if result is None:
                unobservable[spec.slope_field] = unobservable[spec.r2_field] = self._no_fit_reason(
                    name, spec, value, crds, replica)
            elif result.r2 is None:
                unobservable[spec.r2_field] = f"{spec.figure} did not vary"
        return slopes

    def _no_fit_reason(self, name: str, spec: FitSpec, value: float | None, crds: int | None,
                       replica: str | None) -> str:
        if crds is None:
            return "no CRD count (see crds)"
        if value is None:
            return f"no {spec.figure} (see {spec.figure})"
        current = self.fits_of(replica)[name].current()
        seen = current.distinct_x if current else 0
        return f"needs samples at two or more CRD counts from one API server process (seen {seen})"

    def own_share(self, process: ProcessFigures, crds: int | None, objects: dict[str, int],
                  unobservable: dict[str, str]) -> OwnShare:
        """The CRDs' own MiB per CRD where Crossplane's MRDs arrived too (they cost memory of their own).

        Both counts varying apart: a least-squares plane through RSS against CRDs and MRDs gives each
        its slope.  Grown together (a provider install makes each MRD's CRD at once): the MRDs'
        measured cost is taken out of RSS first.  MRD count constant: ``mib_per_crd`` is the CRDs' own.
        """
        if not objects:
            return OwnShare()
        mrds = objects.get(MRDS_RESOURCE, 0)
        rss = process.rss_bytes.value
        start = process.start_time.value or self.start_time or 0.0
        fits = self.mrd_fits
        if crds is not None and rss is not None:
            fits["plane"].add(start, crds, mrds, rss)
            fits["rss_less_mrds"].add(start, crds, rss - mrds * MRD_BYTES)
        plane = fits["plane"].result()
        if plane is None or plane.state == "x2-constant":
            unobservable["mib_per_crd_own"] = ("no MRD count changed while this API server ran: mib_per_crd is "
                                               "the CRDs' own")
            return OwnShare(mrds)
        if plane.state == "separated" and (plane.slope1 or 0) > 0 and (plane.slope2 or 0) > 0:
            return OwnShare(mrds, (plane.slope1 or 0) / MIB, (plane.slope2 or 0) / MIB, "fit")
        line = fits["rss_less_mrds"].result()
        unobservable["mib_per_mrd"] = (f"MRDs and CRDs grew together: their shares cannot be told apart, so "
                                       f"each MRD is taken at its measured {MRD_BYTES / MIB:.1f} MiB")
        if line is None:
            return OwnShare(mrds)
        return OwnShare(mrds, line.slope / MIB, own_share_by="mrd-cost")

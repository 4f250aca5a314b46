"""Several API servers behind one address: which replica answered, and their restarts.

Behind a load balancer each ``/metrics`` scrape reads whichever kube-apiserver
answered.  A scrape names its process by ``process_start_time_seconds`` (two
processes started within the same clock tick are not told apart).  A
:class:`ReplicaTracker` keeps one *slot* per replica: the process running in
it, its latest figures, its fits against the CRD count and its restarts.

A new start time is either another replica seen for the first time or the
restart of a known one.  The tracker decides with the number of replicas the
cluster reports (its identity Leases, :mod:`probes.leases`):

* fewer slots than replicas: a new slot (another replica, not a restart);
* otherwise: one restart of the slot seen least recently (a replica that went
  away and came back with a new start time), among slots whose process
  started before the new one (a process cannot replace a younger one);
* a process that was counted as replaced and answers again proves the
  "restart" was of another replica.  With every replica already holding a slot,
  the restart moves to the slot that has not answered since the newer process
  appeared (the least recently seen one was a guess, and a replica that was not
  scraped for a while makes it wrong).  Otherwise the count is taken back and
  the newer process gets a slot of its own (this is what keeps a balancer
  flipping between replicas from counting restarts when the Leases are not
  readable).

Switching between known processes is never a restart.
"""

from __future__ import annotations

from crdscope.base.samples.health import ReplicaFigures, same_process

import logging
from dataclasses import dataclass, field

from collections.abc import Callable

from crdscope.base.fit import ProcessFits
from crdscope.connection.metrics import Scrape
from crdscope.connection.prometheus import RESTART_WINDOW, PrometheusReading

from .health_figures import ProcessGauges

log = logging.getLogger("crdscope.replicas")

#: Slots kept (a cluster scaled down leaves slots that are no longer seen; the oldest go first).
KEEP_SLOTS = 8
MIB = float(1 << 20)
#: fit name -> (the figure it fits against the CRD count, divisor of the slope)
REPLICA_FITS: dict[str, tuple[Callable[[ProcessGauges], float | None], float]] = {
    "rss": (lambda g: g.rss_bytes, MIB), "heap": (lambda g: g.heap_bytes, MIB), "fds": (lambda g: g.open_fds, 1.0)}


@dataclass
class _Slot:
    """Mutable state of one replica slot."""

    name: str
    start_time: float
    first_seen: float
    last_seen: float
    restarts: int = 0
    scrapes: int = 0
    #: When the process it holds now was first seen (a restart resets it).
    since: float = 0.0
    #: Start times of the processes this slot held before (newest last), for take-backs.
    replaced: list[float] = field(default_factory=list)
    figures: ProcessGauges = ProcessGauges()
    fits: dict[str, ProcessFits] = field(default_factory=lambda: {name: ProcessFits() for name in REPLICA_FITS})


#: The family naming the process of a scrape: probes computing rates want it (:func:`process_of`).
PROCESS_FAMILY = "process_start_time_seconds"


def start_time_of(scrape: Scrape) -> float | None:
    """``process_start_time_seconds`` of the process that answered ``scrape``, None when unknown."""
    return scrape.value(PROCESS_FAMILY) if scrape.ok else None


def process_of(scrape: Scrape) -> int | None:
    """Which process answered ``scrape`` (its start time, whole seconds), None when unknown.

    Probes that compute rates from counters keep their previous scrape per process, so that
    behind a load balancer two replicas' counters are never subtracted from each other.
    """
    start = start_time_of(scrape)
    return None if start is None else round(start)


class ReplicaTracker:
    """Slots of the replicas seen so far (see the module docstring for the rules)."""

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._named = 0
        self.answering: str | None = None

    @property
    def restarts(self) -> int:
        """Restarts over every replica."""
        return sum(slot.restarts for slot in self._slots)

    @property
    def known(self) -> int:
        """How many replicas were told apart so far."""
        return len(self._slots)

    def observe(self, start_time: float, now: float, figures: ProcessGauges, *,
                replicas: int | None = None, crds: int | None = None) -> str:
        """Record one scrape's process and figures; returns the name of the replica that answered.

        ``replicas`` is how many API servers the cluster reports (None: unknown).
        """
        late = self._late(start_time, now)
        if late is not None:
            return late.name
        slot = self._slot_for(start_time, now, replicas)
        slot.last_seen = now
        slot.scrapes += 1
        slot.figures = figures
        if crds is not None:
            _fit(slot, crds, figures)
        self.answering = slot.name
        return slot.name

    def _late(self, start_time: float, now: float) -> _Slot | None:
        """The slot whose replaced process took a scrape that began before its successor was seen.

        Such a scrape proves nothing about which replica restarted; it changes no figure.
        """
        for slot in self._slots:
            if slot.replaced and same_process(slot.replaced[-1], start_time) and now < slot.since:
                return slot
        return None

    def _slot_for(self, start_time: float, now: float, replicas: int | None) -> _Slot:
        for slot in self._slots:
            if same_process(slot.start_time, start_time):
                return slot
        for slot in self._slots:
            if slot.replaced and same_process(slot.replaced[-1], start_time):
                return self._take_back(slot, replicas)
        return self._new_process(start_time, now, replicas)

    def _take_back(self, slot: _Slot, replicas: int | None) -> _Slot:
        """The process ``slot`` held before answers again: its "restart" was of another replica."""
        newer_start, newer_since = slot.start_time, slot.since
        moved = (slot.scrapes, slot.figures, slot.fits, slot.last_seen)
        slot.start_time = slot.replaced.pop()
        slot.restarts -= 1
        slot.since = slot.first_seen if not slot.replaced else slot.since
        slot.fits = {name: ProcessFits() for name in REPLICA_FITS}
        slot.scrapes = 0
        # Every replica holds a slot: the newer process replaced one that fell silent before it appeared.
        silent = [other for other in self._slots if other is not slot
                  and other.start_time < newer_start and other.last_seen < newer_since]
        if silent and replicas is not None and len(self._slots) >= replicas:
            other = min(silent, key=lambda s: s.last_seen)
            self._replace(other, newer_start, newer_since)
            other.scrapes, other.figures, other.fits, other.last_seen = moved
            log.warning("API server replica %s answers again: the restart was of replica %s",
                        slot.name, other.name)
            return slot
        newer = _Slot(self._next_name(), newer_start, newer_since, moved[3], since=newer_since,
                      scrapes=moved[0], figures=moved[1], fits=moved[2])
        self._slots.append(newer)
        log.info("API server replica %s answers again: %s is another replica, not a restart",
                 slot.name, newer.name)
        self._trim()
        return slot

    def _new_process(self, start_time: float, now: float, replicas: int | None) -> _Slot:
        older = [slot for slot in self._slots if slot.start_time < start_time]
        if older and (replicas is None or len(self._slots) >= replicas):
            slot = min(older, key=lambda s: s.last_seen)
            log.warning("API server replica %s restarted (process start time moved by %.0f s)",
                        slot.name, start_time - slot.start_time)
            self._replace(slot, start_time, now)
            slot.scrapes = 0
            return slot
        slot = _Slot(self._next_name(), start_time, now, now, since=now)
        self._slots.append(slot)
        self._trim()
        return slot

    @staticmethod
    def _replace(slot: _Slot, start_time: float, since: float) -> None:
        """One restart of ``slot``: the process started at ``start_time`` (first seen at ``since``) holds it now."""
        slot.replaced.append(slot.start_time)
        del slot.replaced[:-2]
        slot.start_time = start_time
        slot.since = since
        slot.restarts += 1

    def _next_name(self) -> str:
        self._named += 1
        return f"r{self._named}"

    def _trim(self) -> None:
        while len(self._slots) > KEEP_SLOTS:
            self._slots.remove(min(self._slots, key=lambda s: s.last_seen))

    def fit(self, name: str, crds: int, figures: ProcessGauges) -> None:
        """Add one observation at ``crds`` CRDs to replica ``name``'s fits."""
        for slot in self._slots:
            if slot.name == name:
                _fit(slot, crds, figures)

    def name_of(self, start_time: float) -> str | None:
        """The replica whose current process started at ``start_time``, if known."""
        for slot in self._slots:
            if same_process(slot.start_time, start_time):
                return slot.name
        return None

    def slot_fits(self, name: str) -> dict[str, ProcessFits]:
        """The fits of replica ``name`` (empty when unknown)."""
        for slot in self._slots:
            if slot.name == name:
                return slot.fits
        return {}

    def figures(self) -> tuple[ReplicaFigures, ...]:
        """Every known replica, in the order they were first seen."""
        return tuple(self._figures(slot) for slot in sorted(self._slots, key=lambda s: s.first_seen))

    def _figures(self, slot: _Slot) -> ReplicaFigures:
        gauges = slot.figures
        slopes: dict[str, float | None] = {}
        r2 = None
        for name, (_figure, unit) in REPLICA_FITS.items():
            result = slot.fits[name].result()
            slopes[name] = result.slope / unit if result else None
            if name == "rss" and result is not None:
                r2 = result.r2
        current = slot.fits["rss"].current()
        return ReplicaFigures(
            name=slot.name, start_time=slot.start_time, restarts=slot.restarts, last_seen=slot.last_seen,
            scrapes=slot.scrapes, answering=slot.name == self.answering,
            mib_per_crd=slopes["rss"], r2=r2, heap_mib_per_crd=slopes["heap"], fds_per_crd=slopes["fds"],
            fit_points=current.n if current else 0, fit_crd_counts=current.distinct_x if current else 0,
            rss_bytes=_whole(gauges.rss_bytes), heap_bytes=_whole(gauges.heap_bytes),
            goroutines=_whole(gauges.goroutines), open_fds=_whole(gauges.open_fds), max_fds=_whole(gauges.max_fds),
        )


def _whole(value: float | None) -> int | None:
    return None if value is None else int(value)


def _fit(slot: _Slot, crds: int, figures: ProcessGauges) -> None:
    """One observation of each figure the scrape had, at ``crds`` CRDs, into the slot's fits."""
    for name, (figure, _unit) in REPLICA_FITS.items():
        value = figure(figures)
        if value is not None:
            slot.fits[name].add(slot.start_time, crds, value)


def from_instances(reading: PrometheusReading | None, sources: dict[str, str]) -> tuple[ReplicaFigures, ...]:
    """Replicas as Prometheus' instances, where ``/metrics`` named none (a managed control plane).

    Restarts are the start-time changes Prometheus saw within :data:`RESTART_WINDOW`; ``sources``
    gains where the list came from.
    """
    if reading is None or reading.figures is None or not reading.figures.instances:
        return ()
    sources["replicas"] = ("prometheus: process metrics per instance; restarts = "
                           f"changes(process_start_time_seconds[{RESTART_WINDOW}])")
    return tuple(
        ReplicaFigures(name=i.instance, start_time=i.start_time or 0.0, restarts=i.restarts or 0,
                       last_seen=reading.timestamp, rss_bytes=i.rss_bytes, heap_bytes=i.heap_bytes,
                       goroutines=i.goroutines, open_fds=i.open_fds)
        for i in reading.figures.instances)

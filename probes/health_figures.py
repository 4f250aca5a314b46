"""The health probe's readers: each a typed function from one source to typed figures.

* **metrics** (the server's own ``/metrics``, the shared scrape): :func:`read_process` (the process
  and Go runtime gauges) and :func:`read_storage` (stored objects per resource, the database size);
* **process and cgroup** as a Prometheus server holds them (``--prometheus``): :func:`read_container`
  (the container's working set and memory limit, kube-state-metrics' restarts) and
  :func:`with_prometheus` (the process gauges ``/metrics`` could not give);
* **etcd**: :func:`read_etcd_connections` (established connections, counted from ``/proc`` on
  crdscope's lab by the hook the session's facts hold);
* **restarts**: :class:`probes.health_tracker.HealthTracker` (start times, Leases, the lab's
  supervisor, kube-state-metrics), which keeps what it needs between runs.

Each figure is a :class:`Gauge`: its value, where it came from when not ``/metrics``, or why it is
missing; the sample's ``sources`` and ``unobservable`` are made from them in one place
(:meth:`ProcessFigures.by_field`, :meth:`ContainerFigures.by_field`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from crdscope.connection.metrics import PROCESS_FAMILIES, Scrape
from crdscope.connection.prometheus import PrometheusReading

OBJECT_FAMILIES = ("apiserver_resource_objects", "apiserver_storage_objects")  # 1.37 name first
SIZE_FAMILIES = ("apiserver_storage_size_bytes", "etcd_db_total_size_in_bytes")
#: Why the container's figures are missing without a Prometheus server.
NEEDS_PROMETHEUS = "needs --prometheus (a kubelet/cAdvisor and kube-state-metrics figure)"


@dataclasses.dataclass(frozen=True)
class Gauge:
    """One figure as read: its value, where it came from (empty: the server's own ``/metrics``),
    or why it is missing."""

    value: float | None = None
    source: str = ""
    missing: str = ""

    def whole(self) -> int | None:
        return None if self.value is None else int(self.value)

    def or_else(self, other: Gauge) -> Gauge:
        """This figure when it has a value, else ``other``'s; with neither, both reasons."""
        if self.value is not None or other.value is not None:
            return self if self.value is not None else other
        reasons = "; ".join(reason for reason in (self.missing, other.missing) if reason)
        return Gauge(missing=reasons)


@dataclasses.dataclass(frozen=True)
class ProcessGauges:
    """What one scrape says of the process that answered it (a replica's figures)."""

    rss_bytes: float | None = None
    heap_bytes: float | None = None
    goroutines: float | None = None
    open_fds: float | None = None
    max_fds: float | None = None


@dataclasses.dataclass(frozen=True)
class ProcessFigures:
    """The API server process's gauges, each with where it came from or why it is missing."""

    rss_bytes: Gauge = Gauge()
    heap_bytes: Gauge = Gauge()
    goroutines: Gauge = Gauge()
    start_time: Gauge = Gauge()
    open_fds: Gauge = Gauge()
    max_fds: Gauge = Gauge()

    def gauges(self) -> ProcessGauges:
        """The values a replica keeps."""
        return ProcessGauges(self.rss_bytes.value, self.heap_bytes.value, self.goroutines.value,
                             self.open_fds.value, self.max_fds.value)

    def by_field(self) -> dict[str, Gauge]:
        """The health sample's field -> its gauge (for ``sources`` and ``unobservable``)."""
        return {"rss_bytes": self.rss_bytes, "heap_bytes": self.heap_bytes, "goroutines": self.goroutines,
                "start_time": self.start_time, "open_fds": self.open_fds, "max_fds": self.max_fds}


@dataclasses.dataclass(frozen=True)
class ContainerFigures:
    """The API server's container (its cgroup) as Prometheus shows it; ``pod_restarts`` carries no
    value (the sample keeps the count per pod), only its source or why it is missing."""

    working_set_bytes: Gauge = Gauge(missing=NEEDS_PROMETHEUS)
    memory_limit_bytes: Gauge = Gauge(missing=NEEDS_PROMETHEUS)
    pod_restarts: Gauge = Gauge(missing=NEEDS_PROMETHEUS)

    def by_field(self) -> dict[str, Gauge]:
        return {"working_set_bytes": self.working_set_bytes, "memory_limit_bytes": self.memory_limit_bytes,
                "pod_restarts": self.pod_restarts}


@dataclasses.dataclass(frozen=True)
class Storage:
    """Stored objects per resource (``resource.group``) and the database size, as the server reports."""

    objects: dict[str, int] = dataclasses.field(default_factory=dict)
    size_bytes: int | None = None
    objects_missing: str = ""
    size_missing: str = ""


def sources_of(*gauges: dict[str, Gauge]) -> dict[str, str]:
    """Field -> where its figure came from, for the figures that did not come from ``/metrics``."""
    return {name: gauge.source for table in gauges for name, gauge in table.items() if gauge.source}


def missing_of(*gauges: dict[str, Gauge]) -> dict[str, str]:
    """Field -> why its figure is missing."""
    return {name: gauge.missing for table in gauges for name, gauge in table.items()
            if gauge.value is None and gauge.missing}


# --------------------------------------------------------------------------- /metrics


def read_process(scrape: Scrape) -> ProcessFigures:
    """The process and Go runtime gauges of the scrape; a reason for each one missing."""

    def gauge(field: str) -> Gauge:
        family = PROCESS_FAMILIES[field]
        if not scrape.ok:
            return Gauge(missing=scrape.error or "/metrics failed")
        value = scrape.value(family)
        return Gauge(value) if value is not None else Gauge(missing=f"/metrics has no {family}")

    return ProcessFigures(rss_bytes=gauge("rss_bytes"), heap_bytes=gauge("heap_bytes"),
                          goroutines=gauge("goroutines"), start_time=gauge("start_time"),
                          open_fds=gauge("open_fds"), max_fds=gauge("max_fds"))


def scraped_gauges(scrape: Scrape) -> ProcessGauges:
    """What a scrape says of the process that answered it (no reasons: a replica's figures)."""
    return read_process(scrape).gauges()


def read_storage(scrape: Scrape) -> Storage:
    """Stored objects per resource ("resource.group") and the database size, as the server reports."""
    if not scrape.ok:
        reason = scrape.error or "/metrics failed"
        return Storage(objects_missing=reason, size_missing=reason)
    grouped = next((found for family in OBJECT_FAMILIES if (found := scrape.by(family, "group", "resource"))), {})
    objects = {f"{resource}.{group}" if group else resource: int(value)
               for (group, resource), value in grouped.items() if value >= 0}  # -1: the server failed to count it
    size = next((int(total) for family in SIZE_FAMILIES if (total := scrape.total(family)) is not None), None)
    return Storage(objects, size,
                   objects_missing="" if grouped else f"/metrics has none of {', '.join(OBJECT_FAMILIES)}",
                   size_missing="" if size is not None else f"/metrics has none of {', '.join(SIZE_FAMILIES)}")


# --------------------------------------------------------------------------- process and cgroup (Prometheus)


def _from_prometheus(reading: PrometheusReading, field: str) -> Gauge:
    """One figure of a Prometheus reading (its ``values``, ``sources`` and ``unobservable`` share the field's name)."""
    return Gauge(reading.values.get(field), reading.sources.get(field, ""), reading.unobservable.get(field, ""))


def read_container(reading: PrometheusReading | None) -> ContainerFigures:
    """The container's working set and memory limit, and where kube-state-metrics' restarts come from."""
    if reading is None:
        return ContainerFigures()
    restarts = Gauge(source=reading.sources.get("pod_restarts", "") if reading.pod_restarts else "",
                     missing=reading.unobservable.get("pod_restarts", ""))
    return ContainerFigures(working_set_bytes=_from_prometheus(reading, "working_set_bytes"),
                            memory_limit_bytes=_from_prometheus(reading, "memory_limit_bytes"),
                            pod_restarts=restarts)


def with_prometheus(process: ProcessFigures, reading: PrometheusReading | None,
                    container: ContainerFigures) -> ProcessFigures:
    """The process gauges ``/metrics`` could not give, from Prometheus (same meaning first); resident
    memory from the container's working set last (not the process's RSS, but the closest a managed
    cluster shows)."""
    if reading is None:
        return process

    def filled(gauge: Gauge, field: str) -> Gauge:
        return gauge.or_else(_from_prometheus(reading, field))

    rss = filled(process.rss_bytes, "rss_bytes")
    if rss.value is None and container.working_set_bytes.value is not None:
        rss = container.working_set_bytes
    return ProcessFigures(rss_bytes=rss, heap_bytes=filled(process.heap_bytes, "heap_bytes"),
                          goroutines=filled(process.goroutines, "goroutines"),
                          start_time=filled(process.start_time, "start_time"),
                          open_fds=filled(process.open_fds, "open_fds"), max_fds=filled(process.max_fds, "max_fds"))


# --------------------------------------------------------------------------- etcd


async def read_etcd_connections(counter: Callable[[], int | None] | None) -> Gauge:
    """The API server's established connections to etcd, from ``/proc`` through the lab's hook (read
    in a thread); why not, elsewhere."""
    if counter is None:
        return Gauge(missing="counted from /proc on a lab only (this session did not wire the lab's counter)")
    count = await asyncio.to_thread(counter)
    if count is None:
        return Gauge(missing="the lab's API server process is not running")
    return Gauge(float(count))

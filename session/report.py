"""``crdscope report FILE``: what happened during a recorded session, in Markdown or HTML.

:func:`summarise` streams a recording once and keeps only what the report
shows: the cluster, the duration, CRDs loaded and their rate, discovery at the
start and at the end with the client models, the peak of APF rejections,
OpenAPI lag percentiles, memory per CRD with its fit, restarts and outage
windows, SLO breaches and the events.  Restarts and outages are re-derived from
the samples with :class:`session.events.EventDetector` (the same rules as the
live events log), so a recording made without events still reports them.

:mod:`session.report_render` turns a :class:`Summary` into Markdown or HTML.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from crdscope.base.facts import LimitRecord
from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.samples import Sample
from crdscope.base.samples.throttling import ThrottlingSample
from crdscope.base.settings import load_settings
from crdscope.base.store import SampleStore
from crdscope.findings.kubectl import KubectlClient, read_local_kubectl
from crdscope.findings.model import Finding, FindingChange
from crdscope.findings.kubectl_discovery import kubectl_124_seconds

from .core import SessionStore, WatchCore
from .events import Event
from .recorder import ClusterInfo
from .notes import Note
from .replay import Damage, RecordingReader
from .values import finite_number, members, names_of, read_field

MIB = float(1 << 20)


@dataclasses.dataclass(frozen=True)
class ClientModel:
    name: str
    qps: float | None
    burst: float | None
    seconds: float | None
    waited_seconds: float | None


@dataclasses.dataclass(frozen=True)
class DiscoveryPoint:
    """Discovery as measured at one moment, with what each client model would have taken."""

    timestamp: float
    mode: str
    seconds: float | None
    group_versions: float | None
    resources: float | None
    requests: float | None
    models: tuple[ClientModel, ...]
    kubectl_124_seconds: float | None


@dataclasses.dataclass(frozen=True)
class Window:
    """An outage: ``end`` None while it was still open when the recording ended."""

    start: float
    end: float | None
    seconds: float
    reason: str


@dataclasses.dataclass
class Summary:
    """Everything the report shows, computed from one pass over a recording."""

    path: Path
    cluster: ClusterInfo
    header: dict[str, Any]
    start: float | None = None
    end: float | None = None
    ended_cleanly: bool = False
    damage: Damage | None = None
    samples: dict[str, int] = dataclasses.field(default_factory=dict)
    # CRDs
    crds_start: float | None = None
    crds_end: float | None = None
    crds_loaded: float | None = None
    load_rate_per_s: float | None = None
    load_source: str = ""
    loader: dict[str, Any] = dataclasses.field(default_factory=dict)
    # discovery
    discovery_start: DiscoveryPoint | None = None
    discovery_end: DiscoveryPoint | None = None
    # throttling
    apf_peak_per_s: float | None = None
    apf_peak_at: float | None = None
    apf_peak_levels: str = ""
    responses_429: float | None = None
    # openapi
    openapi_lag: dict[str, dict[str, float | None]] = dataclasses.field(default_factory=dict)
    backlog_peak: float | None = None
    backlog_peak_at: float | None = None
    # health
    mib_per_crd: float | None = None
    r2: float | None = None
    heap_mib_per_crd: float | None = None
    fds_per_crd: float | None = None
    fit_points: float | None = None
    fit_crd_counts: float | None = None
    #: Start time of the API server process whose memory fit is reported.
    fit_start_time: float | None = None
    rss_start: float | None = None
    rss_end: float | None = None
    restarts: list[float] = dataclasses.field(default_factory=list)
    outages: list[Window] = dataclasses.field(default_factory=list)
    slo_breaches: list[str] = dataclasses.field(default_factory=list)
    recorded_events: list[Event] = dataclasses.field(default_factory=list)
    derived_events: list[Event] = dataclasses.field(default_factory=list)
    #: Findings opening, closing and changing severity, re-derived from the samples.
    findings: list[FindingChange] = dataclasses.field(default_factory=list)
    #: The findings still open when the recording ends, most severe first.
    open_findings: list[Finding] = dataclasses.field(default_factory=list)
    #: Plot data: name -> [(x, y)].
    series: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)
    #: (crds, rss MiB, process start time) points for the memory plot.
    memory_points: list[tuple[float, float, float | None]] = dataclasses.field(default_factory=list)

    @property
    def duration(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def events(self) -> list[Event]:
        """The events log: as recorded live, else as re-derived from the samples."""
        return self.recorded_events or self.derived_events

    def add_point(self, name: str, x: float, y: float | None) -> None:
        if y is not None:
            self.series.setdefault(name, []).append((x, y))


def summarise(path: str | Path, *, kubectl: KubectlClient | None | bool = True) -> Summary:
    """Read a recording once (up to any damage) and summarise it.

    Events and findings are re-derived by a session core (:class:`session.core.WatchCore`), the
    local kubectl's finding included (``kubectl`` True: the one on PATH; a client: that one;
    None: none), so the report states what the live front ends would have.
    """
    reader = RecordingReader(path)
    summary = Summary(path=Path(path), cluster=reader.cluster, header=reader.header)
    core = WatchCore(None, store=SessionStore(), thresholds=load_settings().thresholds, cluster=reader.cluster.context)
    core.know_kubectl(read_local_kubectl() if kubectl is True else kubectl or None)
    #: probe -> times its CRD count changed (inventory or health).
    crd_changes: dict[str, list[float]] = {}
    for item in reader:
        if isinstance(item, Event):
            summary.recorded_events.append(item)
            continue
        if isinstance(item, LimitRecord):  # the memory limit given from then on
            core.facts.give_limit(item.limit)
            continue
        if isinstance(item, Note):  # a narrator's line (crdscope demo): no figure of the cluster's
            continue
        probe = type(item).probe
        summary.samples[probe] = summary.samples.get(probe, 0) + 1
        summary.start = item.timestamp if summary.start is None else min(summary.start, item.timestamp)
        summary.end = item.timestamp if summary.end is None else max(summary.end, item.timestamp)
        taken = core.take(item)
        summary.derived_events.extend(taken.events)
        summary.findings.extend(taken.changes)
        if not item.error:
            _take(summary, probe, item, crd_changes)
    summary.damage = reader.damage
    summary.ended_cleanly = reader.ended
    summary.open_findings = core.open_findings()
    _finish(summary, core.store, crd_changes)
    return summary


def _take(summary: Summary, probe: str, sample: Sample, changes: dict[str, list[float]]) -> None:
    t = sample.timestamp
    if probe in ("inventory", "health"):
        crds = finite_number(read_field(sample, "crds"))
        if crds is not None:
            key = f"crds:{probe}"
            previous = summary.series.get(key, [])
            if previous and previous[-1][1] != crds:
                changes.setdefault(probe, []).append(t)
            summary.add_point(key, t, crds)
    if isinstance(sample, DiscoverySample):
        point = discovery_point(sample)
        summary.discovery_start = summary.discovery_start or point
        summary.discovery_end = point
        summary.add_point("discovery_seconds", t, point.seconds)
        summary.add_point("discovery_kubectl_124", t, point.kubectl_124_seconds)
    elif isinstance(sample, ThrottlingSample):
        levels = [(level.name, finite_number(level.rejected_per_s) or 0.0) for level in sample.priority_levels]
        total = sum(rate for _, rate in levels)
        summary.add_point("apf_rejected_per_s", t, total)
        if total > 0 and (summary.apf_peak_per_s is None or total > summary.apf_peak_per_s):
            summary.apf_peak_per_s, summary.apf_peak_at = total, t
            summary.apf_peak_levels = ", ".join(f"{name} {rate:.1f}/s" for name, rate in levels if rate)
        seen = float(sample.responses_429.total)
        summary.responses_429 = max(summary.responses_429 or 0.0, seen)
    elif isinstance(sample, OpenAPISample):
        backlog = float(sample.backlog)
        summary.add_point("openapi_backlog", t, backlog)
        if summary.backlog_peak is None or backlog > summary.backlog_peak:
            summary.backlog_peak, summary.backlog_peak_at = backlog, t
        if sample.lag_seconds:
            # The report's generic table: every figure of each stage's record, by name.
            summary.openapi_lag = {stage: {name: finite_number(read_field(stats, name)) for name in names_of(stats)}
                                   for stage, stats in sample.lag_seconds.items()}
    elif isinstance(sample, HealthSample):
        rss = finite_number(sample.rss_bytes)
        crds = finite_number(sample.crds)
        summary.add_point("rss_mib", t, rss / MIB if rss is not None else None)
        if rss is not None:
            summary.rss_start = summary.rss_start if summary.rss_start is not None else rss
            summary.rss_end = rss
            if crds is not None:
                summary.memory_points.append((crds, rss / MIB, finite_number(sample.start_time)))
        # A restarted server starts a new fit with no slope yet: report the last fit that had one.
        if finite_number(sample.mib_per_crd) is not None:
            summary.mib_per_crd = finite_number(sample.mib_per_crd)
            summary.r2 = finite_number(sample.r2)
            summary.heap_mib_per_crd = finite_number(sample.heap_mib_per_crd)
            summary.fds_per_crd = finite_number(sample.fds_per_crd)
            summary.fit_points = float(sample.fit_points)
            summary.fit_crd_counts = float(sample.fit_crd_counts)
            summary.fit_start_time = finite_number(sample.start_time)
    elif isinstance(sample, LatencySample):
        for key in sample.slo_breaches:
            if key not in summary.slo_breaches:
                summary.slo_breaches.append(key)


def _crd_source(summary: Summary) -> str:
    """The CRD count the report trusts: the inventory probe's, else the health probe's."""
    return "inventory" if "crds:inventory" in summary.series else "health"


def discovery_point(sample: DiscoverySample) -> DiscoveryPoint:
    """The report's view of one discovery sample."""
    models = tuple(
        ClientModel(name=m.name, qps=finite_number(m.qps), burst=finite_number(m.burst),
                    seconds=finite_number(m.seconds), waited_seconds=finite_number(m.waited_seconds))
        for m in sample.client_models
    )
    return DiscoveryPoint(timestamp=sample.timestamp, mode=sample.mode, seconds=finite_number(sample.seconds),
                          group_versions=float(sample.group_versions), resources=float(sample.resources),
                          requests=float(sample.requests), models=models,
                          kubectl_124_seconds=kubectl_124_seconds(sample.client_models))


def _finish(summary: Summary, store: SampleStore, crd_changes: dict[str, list[float]]) -> None:
    source = _crd_source(summary)
    changes = crd_changes.get(source, [])
    counts = summary.series.get(f"crds:{source}", [])
    if counts:
        summary.crds_start, summary.crds_end = counts[0][1], counts[-1][1]
    loader = store.last_good("loader")
    if loader is not None:
        summary.loader = {k: read_field(loader, k) for k in ("source", "state", "requested", "created", "established",
                                                       "skipped", "failed", "elapsed_seconds")}
        loaded = finite_number(read_field(loader, "established"))
        summary.crds_loaded = loaded if loaded is not None else finite_number(read_field(loader, "created"))
        summary.load_rate_per_s = finite_number(read_field(loader, "crds_per_second"))
        summary.load_source = f"loader ({read_field(loader, 'source', '')})"
    elif counts:
        summary.crds_loaded = max(0.0, counts[-1][1] - counts[0][1])
        if changes and summary.crds_loaded:
            # The rate over the time the count was moving (from the sample before the first change).
            before = max((t for t, _ in counts if t < changes[0]), default=changes[0])
            span = changes[-1] - before
            summary.load_rate_per_s = summary.crds_loaded / span if span > 0 else None
        summary.load_source = f"{source} probe (CRD count at the end minus at the start)"
    summary.restarts = [e.timestamp for e in summary.derived_events if e.kind == "apiserver-restarted"]
    # The newest health sample, good or failed: its outage windows stay current while the server is away.
    summary.outages = _outages(summary, store.latest("health"))


def _outages(summary: Summary, health: Sample | None) -> list[Window]:
    """The health probe's own outage windows, else probe-down/recovered pairs of any probe."""
    windows = []
    for outage in members(read_field(health, "outages")) if health is not None else []:
        start = finite_number(read_field(outage, "start"))
        if start is None:
            continue
        end = finite_number(read_field(outage, "end"))
        seconds = finite_number(read_field(outage, "duration_seconds"))
        if seconds is None:
            seconds = (end if end is not None else (summary.end or start)) - start
        windows.append(Window(start, end, seconds, str(read_field(outage, "reason", "") or "")))
    if windows or health is not None:
        return windows
    opened: dict[str, Event] = {}
    for event in summary.derived_events:
        if event.kind == "probe-down":
            opened.setdefault(event.probe, event)
        elif event.kind == "probe-recovered" and event.probe in opened:
            down = opened.pop(event.probe)
            windows.append(Window(down.timestamp, event.timestamp, event.timestamp - down.timestamp,
                                  f"{event.probe}: {down.message}"))
    for probe, down in opened.items():
        windows.append(Window(down.timestamp, None, (summary.end or down.timestamp) - down.timestamp,
                              f"{probe}: {down.message}"))
    return sorted(windows, key=lambda w: w.start)

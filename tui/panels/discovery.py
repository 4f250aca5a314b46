"""Discovery: aggregated and legacy latency over time, the cold figure (what a new client pays)
beside the periodic one (mostly 304s), what kubectl's client limits cost, kubectl's disk cache
against the local kubectl's own TTL, and the slowest group-versions."""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from crdscope.base.settings import Thresholds
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.kubectl_discovery import DISCOVERY_SECONDS
from crdscope.base.samples.discovery import DiscoverySample

from ..format import age, duration, number as fmt, size
from .base import ProbePanel, one_line
from .plots import RolePlot, time_axis
from .text import Cell, columns, pairs

SLOWEST_SHOWN = 3


def latency_series(samples: list[DiscoverySample], now: float) -> tuple[list[tuple[float, float]],
                                                                      list[tuple[float, float]]]:
    """(minutes ago, seconds) of aggregated runs, and of legacy walks (each walk once)."""
    aggregated: list[tuple[float, float]] = []
    legacy: list[tuple[float, float]] = []
    walks: set[float] = set()
    for sample in samples:
        if sample.mode == "aggregated":
            aggregated.append(((sample.timestamp - now) / 60, float(sample.seconds)))
        elif sample.mode == "legacy":
            legacy.append(((sample.timestamp - now) / 60, float(sample.seconds)))
            walks.add(sample.timestamp)
        walked = sample.walk_timestamp
        seconds = sample.walk_seconds
        if walked is not None and seconds is not None and walked not in walks:
            walks.add(walked)
            legacy.append(((walked - now) / 60, seconds))
    return aggregated, sorted(legacy)


def models_table(sample: DiscoverySample, thresholds: Thresholds) -> str:
    """The client models side by side: total seconds (over budget as the discovery findings and
    events judge it: ``DISCOVERY_SECONDS``) and seconds waiting on the limiter."""
    rows: list[list[Cell]] = []
    for model in sample.client_models:
        seconds = model.seconds
        over = DISCOVERY_SECONDS.crossed(seconds, thresholds)
        rows.append([model.name, f"{model.qps or 0:g}", fmt(model.burst),
                     (duration(seconds), "probe-warn" if over else ""), duration(model.waited_seconds)])
    if not rows:
        reason = sample.unobservable.get("client_models") or "needs a legacy walk"
        return f"[$probe-idle]client models: {one_line(reason)}[/]"
    return columns(("client model", "qps", "burst", "total", "waited"), rows, max_widths=(20, 0, 0, 0, 0))


def cache_line(sample: DiscoverySample, local: KubectlClient | None = None) -> str:
    """kubectl's discovery cache for this server: files, bytes, age against the TTL of the local
    kubectl (``local``: 10 minutes up to 1.23, 6 hours after; else the probe's), read time."""
    cache = sample.kubectl_cache
    parts = []
    if cache is not None:
        if not cache.present:
            parts.append("[$probe-idle]kubectl cache: none for this server[/]")
        else:
            ttl = local.cache_ttl_seconds if local is not None else cache.ttl_seconds
            expired = cache.age_seconds > ttl if cache.age_seconds is not None else cache.expired
            whose = f" of {one_line(local.git_version)}" if local is not None else ""
            role = "probe-warn" if expired else "probe-ok"
            parts.append(f"kubectl cache {fmt(cache.files)} files {size(cache.bytes)}, "
                         f"[${role}]age {age(cache.age_seconds)}/{age(ttl)} TTL{whose}[/], "
                         f"read {duration(cache.read_seconds)}")
    kubectl = sample.kubectl
    if kubectl is not None and not kubectl.error:
        parts.append(pairs(("kubectl cold", duration(kubectl.cold_seconds)),
                           ("warm", duration(kubectl.warm_seconds))))
    return "\n".join(parts)


class DiscoveryPanel(ProbePanel):
    """What discovery costs now, and what kubectl's limits make of it."""

    probes = ("discovery",)
    panel_title = "Discovery"
    tab_label = "Discovery"
    shows = "aggregated and legacy latency; what kubectl's limits cost"
    MIN_REDRAW_SECONDS = 1.0

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="discovery-summary")
        with Horizontal(classes="split"):
            with Vertical(classes="split-text"):
                yield Static("", id="discovery-models")
                yield Static("", id="discovery-cache")
                yield Static("", id="discovery-slowest")
            yield RolePlot(id="plot-discovery")

    def draw(self) -> None:
        sample = self.store.last_good_of(DiscoverySample)
        if sample is None:
            return
        now = self.now()
        self.query_one("#discovery-summary", Static).update(summary_text(sample, now))
        self.query_one("#discovery-models", Static).update(
            models_table(sample, self.cluster.thresholds))
        # The local kubectl, once the session core knows it.
        self.query_one("#discovery-cache", Static).update(cache_line(sample, self.cluster.kubectl))
        slowest = sample.slowest[:SLOWEST_SHOWN]
        self.query_one("#discovery-slowest", Static).update(
            ("slowest: " + ", ".join(f"{one_line(s.group_version)} {duration(s.seconds)}" for s in slowest))
            if slowest else "")
        self.draw_plot(now)

    def draw_plot(self, now: float) -> None:
        plot = self.query_one("#plot-discovery", RolePlot)
        aggregated, legacy = latency_series(self.store.good_history_of(DiscoverySample), now)
        if not aggregated and not legacy:
            plot.empty("discovery latency", "no discovery runs yet")
            return
        plot.start("discovery seconds")
        if aggregated:
            plot.plt.plot([x for x, _ in aggregated], [y for _, y in aggregated],
                          color=plot.rgb("plot-aggregated"), label="aggregated", marker="braille")
        if legacy:
            plot.plt.plot([x for x, _ in legacy], [y for _, y in legacy], color=plot.rgb("plot-legacy"),
                          label="legacy", marker="braille")
        plot.plt.ylim(0, max(y for _, y in aggregated + legacy) * 1.1)
        time_axis(plot, min(x for x, _ in aggregated + legacy))
        plot.refresh()


def summary_text(sample: DiscoverySample, now: float) -> str:
    """Mode, counts, cost of this run; the latest legacy walk; what changed."""
    # The periodic run is mostly a conditional GET answered 304; the cold figure (a full GET
    # without ETag) is what a new client, or kubectl after its cache expires, pays.
    cold = sample.cold_seconds
    summary = pairs((sample.mode, f"{fmt(sample.group_versions)} GVs"),
                    ("resources", fmt(sample.resources)), ("requests", fmt(sample.requests)),
                    ("", size(sample.bytes)), ("periodic", duration(sample.seconds)),
                    ("cold", duration(cold)) if cold is not None else None,
                    ("304s", fmt(sample.not_modified_total)))
    if sample.fallback_reason:
        summary += f"\n[$probe-warn]fallback: {one_line(sample.fallback_reason)}[/]"
    walked = sample.walk_timestamp
    if walked is not None:
        summary += "\nlegacy walk " + pairs(
            ("", f"{fmt(sample.walk_requests)} req"), ("", size(sample.walk_bytes)),
            ("", duration(sample.walk_seconds)),
            ("per GV p50", duration(sample.gv_p50_seconds)),
            ("p95", duration(sample.gv_p95_seconds)), ("", f"{age(now - walked)} ago"))
    changes = [f"[$probe-warn]+{len(sample.appeared)} −{len(sample.vanished)} GVs[/]"] if sample.changed else []
    stale = sample.stale_group_versions
    if stale:
        changes.append(f"[$probe-warn]{len(stale)} stale GVs[/]")
    if changes:
        summary += " · " + " · ".join(changes)
    return summary

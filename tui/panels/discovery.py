"""Discovery: aggregated and legacy latency over time, what kubectl's client limits cost,
kubectl's disk cache against its TTL, and the slowest group-versions."""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from crdscope.session.values import get, items, number

from ..format import age, duration, number as fmt, size
from .base import ProbePanel, one_line
from .plots import RolePlot, time_axis
from .text import columns, pairs

SLOWEST_SHOWN = 3


def latency_series(samples: list, now: float) -> tuple[list, list]:
    """(minutes ago, seconds) of aggregated runs, and of legacy walks (each walk once)."""
    aggregated, legacy, walks = [], [], set()
    for sample in samples:
        if get(sample, "mode") == "aggregated":
            aggregated.append(((sample.timestamp - now) / 60, float(get(sample, "seconds", 0.0))))
        elif get(sample, "mode") == "legacy":
            legacy.append(((sample.timestamp - now) / 60, float(get(sample, "seconds", 0.0))))
            walks.add(sample.timestamp)
        walked = number(get(sample, "walk_timestamp"))
        seconds = number(get(sample, "walk_seconds"))
        if walked is not None and seconds is not None and walked not in walks:
            walks.add(walked)
            legacy.append(((walked - now) / 60, seconds))
    return aggregated, sorted(legacy)


def models_table(sample: object, budget: float | None) -> str:
    """The client models side by side: total seconds and seconds waiting on the limiter."""
    rows = []
    for model in items(get(sample, "client_models")):
        seconds = number(get(model, "seconds"))
        over = budget is not None and seconds is not None and seconds > budget
        rows.append([str(get(model, "name", "?")), f"{number(get(model, 'qps')) or 0:g}",
                     fmt(get(model, "burst")), (duration(seconds), "probe-warn" if over else ""),
                     duration(number(get(model, "waited_seconds")))])
    if not rows:
        reason = (get(sample, "unobservable", {}) or {}).get("client_models") or "needs a legacy walk"
        return f"[$probe-idle]client models: {one_line(reason)}[/]"
    return columns(("client model", "qps", "burst", "total", "waited"), rows, max_widths=(20, 0, 0, 0, 0))


def cache_line(sample: object) -> str:
    """kubectl's discovery cache for this server: files, bytes, age against the TTL, read time."""
    cache = get(sample, "kubectl_cache")
    parts = []
    if cache is not None:
        if not get(cache, "present"):
            parts.append("[$probe-idle]kubectl cache: none for this server[/]")
        else:
            age_seconds = number(get(cache, "age_seconds"))
            ttl = number(get(cache, "ttl_seconds"))
            expired = bool(get(cache, "expired"))
            role = "probe-warn" if expired else "probe-ok"
            parts.append(f"kubectl cache {fmt(get(cache, 'files'))} files {size(number(get(cache, 'bytes')))}, "
                         f"[${role}]age {age(age_seconds)}/{age(ttl)} TTL[/], "
                         f"read {duration(number(get(cache, 'read_seconds')))}")
    kubectl = get(sample, "kubectl")
    if kubectl is not None and not get(kubectl, "error"):
        parts.append(pairs(("kubectl cold", duration(number(get(kubectl, "cold_seconds")))),
                           ("warm", duration(number(get(kubectl, "warm_seconds"))))))
    return "\n".join(parts)


class DiscoveryPanel(ProbePanel):
    """What discovery costs now, and what kubectl's limits make of it."""

    probes = ("discovery",)
    panel_title = "Discovery"
    tab_label = "Discovery"
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
        sample = self.store.last_good("discovery")
        if sample is None:
            return
        now = self.now()
        summary = pairs((str(get(sample, "mode", "?")), f"{fmt(get(sample, 'group_versions'))} GVs"),
                        ("resources", fmt(get(sample, "resources"))), ("requests", fmt(get(sample, "requests"))),
                        ("", size(number(get(sample, "bytes")))), ("", duration(number(get(sample, "seconds")))),
                        ("304s", fmt(get(sample, "not_modified_total"))))
        if get(sample, "fallback_reason"):
            summary += f"\n[$probe-warn]fallback: {one_line(get(sample, 'fallback_reason'))}[/]"
        walked = number(get(sample, "walk_timestamp"))
        if walked is not None:
            summary += "\nlegacy walk " + pairs(
                ("", f"{fmt(get(sample, 'walk_requests'))} req"), ("", size(number(get(sample, "walk_bytes")))),
                ("", duration(number(get(sample, "walk_seconds")))),
                ("per GV p50", duration(number(get(sample, "gv_p50_seconds")))),
                ("p95", duration(number(get(sample, "gv_p95_seconds")))), ("", f"{age(now - walked)} ago"))
        changes = [f"[$probe-warn]+{len(get(sample, 'appeared', ()))} −{len(get(sample, 'vanished', ()))} GVs[/]"] \
            if get(sample, "changed") else []
        stale = items(get(sample, "stale_group_versions"))
        if stale:
            changes.append(f"[$probe-warn]{len(stale)} stale GVs[/]")
        if changes:
            summary += " · " + " · ".join(changes)
        self.query_one("#discovery-summary", Static).update(summary)
        budget = getattr(getattr(self.app, "settings", None), "thresholds", None)
        self.query_one("#discovery-models", Static).update(
            models_table(sample, getattr(budget, "discovery_seconds_warn", None)))
        self.query_one("#discovery-cache", Static).update(cache_line(sample))
        slowest = items(get(sample, "slowest"))[:SLOWEST_SHOWN]
        self.query_one("#discovery-slowest", Static).update(
            ("slowest: " + ", ".join(f"{one_line(get(s, 'group_version', '?'))} "
                                     f"{duration(number(get(s, 'seconds')))}" for s in slowest)) if slowest else "")
        self.draw_plot(now)

    def draw_plot(self, now: float) -> None:
        plot = self.query_one("#plot-discovery", RolePlot)
        aggregated, legacy = latency_series(self.store.good_history("discovery"), now)
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




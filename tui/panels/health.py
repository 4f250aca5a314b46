"""Health: memory against the number of CRDs with the fitted MiB-per-CRD line, restarts,
outages, readyz, and canary latency against the SLOs (health and latency probes)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Static

from crdscope.session.values import get, items, number

from ..format import DASH, age, duration, number as fmt, size
from .base import ProbePanel, one_line
from .plots import MIB, RolePlot, line_through, time_axis
from .text import pairs


def memory_points(samples: list) -> tuple[list, list, list[float]]:
    """(crds, RSS MiB) and (crds, heap MiB) of the newest process, and the CRD counts at restarts."""
    rss: list[tuple[float, float]] = []
    heap: list[tuple[float, float]] = []
    restarts: list[float] = []
    process = None
    for sample in samples:
        crds = number(get(sample, "crds"))
        start = number(get(sample, "start_time"))
        if start is not None and process is not None and start != process:
            restarts.append(crds if crds is not None else 0.0)
            rss, heap = [], []  # a new process starts from scratch: fit only its points
        if start is not None:
            process = start
        if crds is None:
            continue
        if (value := number(get(sample, "rss_bytes"))) is not None:
            rss.append((crds, value / MIB))
        if (value := number(get(sample, "heap_bytes"))) is not None:
            heap.append((crds, value / MIB))
    return rss, heap, restarts


def availability_line(latest: object, now: float) -> str:
    """readyz/livez, restarts and outage windows."""
    def check(name: str) -> str:
        value = get(latest, name)
        if value is None:
            return f"{name} [$probe-idle]?[/]"
        return f"{name} [$probe-ok]✓[/]" if value else f"{name} [$probe-fail]✗[/]"

    parts = [check("ready"), check("live")]
    failing = items(get(latest, "failing_checks"))
    if failing:
        parts.append(f"[$probe-fail]failing: {one_line(', '.join(map(str, failing)))}[/]")
    restarts = number(get(latest, "restarts"))
    parts.append(f"restarts [b]{fmt(restarts)}[/b]" if not restarts else f"[$probe-fail]restarts [b]{fmt(restarts)}[/b][/]")
    outages = items(get(latest, "outages"))
    if outages:
        last = outages[-1]
        if get(last, "end") is None:
            parts.append(f"[$probe-fail b]DOWN for {age(number(get(last, 'duration_seconds')))}[/]")
        else:
            parts.append(f"outages [b]{len(outages)}[/b] (last {age(number(get(last, 'duration_seconds')))},"
                         f" {age(now - float(get(last, 'end')))} ago)")
    return " · ".join(parts)


def canary_line(latency: object | None) -> str:
    """Each canary's rolling p99 and the SLO breaches, server side and canary side."""
    if latency is None:
        return "[$probe-idle]canaries: no latency sample yet[/]"
    canaries = get(latency, "canaries", {}) or {}
    shown = []
    for name, canary in canaries.items():
        p99 = number(get(canary, "p99_seconds"))
        slo = number(get(canary, "slo_seconds"))
        text = f"{one_line(name)} {duration(p99)}"
        shown.append(f"[$probe-fail]{text}[/]" if p99 is not None and slo and p99 > slo else text)
    breaches = [*items(get(latency, "slo_breaches")), *items(get(latency, "canary_slo_breaches"))]
    slo_text = ("[$probe-fail]SLO over: " + one_line(", ".join(map(str, breaches))) + "[/]") if breaches \
        else "[$probe-ok]SLOs met[/]"
    return "p99 " + " · ".join(shown) + " · " + slo_text


class HealthPanel(ProbePanel):
    """Figures on top, two plots below: memory vs CRDs, and canary p99 vs time with SLO lines."""

    probes = ("health", "latency")
    panel_title = "Health"
    tab_label = "Health"
    MIN_REDRAW_SECONDS = 1.0

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="health-figures")
        yield Static("", id="health-availability")
        yield Static("", id="health-fit")
        yield Static("", id="health-canaries")
        with Horizontal(classes="plots"):
            yield RolePlot(id="plot-memory")
            yield RolePlot(id="plot-latency")

    def draw(self) -> None:
        latest = self.store.latest("health")
        good = self.store.last_good("health")
        now = self.now()
        if good is not None:
            fds = fmt(get(good, "open_fds"))
            if get(good, "etcd_connections") is not None:
                fds += f" (etcd conns {fmt(get(good, 'etcd_connections'))})"
            figures = pairs(
                ("RSS", size(number(get(good, "rss_bytes")))), ("heap", size(number(get(good, "heap_bytes")))),
                ("goroutines", fmt(get(good, "goroutines"))), ("fds", fds))
            hidden = (get(good, "unobservable", {}) or {}).get("rss_bytes")
            if hidden and number(get(good, "rss_bytes")) is None:  # say why, e.g. /metrics forbidden
                figures += f" · [$probe-idle]{one_line(hidden)}[/]"
            self.query_one("#health-figures", Static).update(figures)
            self.query_one("#health-fit", Static).update(fit_line(good))
        if latest is not None:
            self.query_one("#health-availability", Static).update(availability_line(latest, now))
        self.query_one("#health-canaries", Static).update(canary_line(self.store.last_good("latency")))
        self.draw_memory()
        self.draw_latency(now)

    def draw_memory(self) -> None:
        plot = self.query_one("#plot-memory", RolePlot)
        rss, heap, restarts = memory_points(self.store.good_history("health"))
        if not rss:
            plot.empty("memory vs CRDs", "no memory figures yet")
            return
        plot.start("MiB vs CRDs", xlabel="CRDs")
        plt = plot.plt
        plt.scatter([x for x, _ in rss], [y for _, y in rss], color=plot.rgb("plot-memory"), label="RSS",
                    marker="braille")
        if heap:
            plt.scatter([x for x, _ in heap], [y for _, y in heap], color=plot.rgb("plot-heap"), label="heap",
                        marker="braille")
        good = self.store.last_good("health")
        slope = number(get(good, "mib_per_crd"))
        ends = line_through(rss, slope) if slope is not None else None
        if ends:
            plt.plot([x for x, _ in ends], [y for _, y in ends], color=plot.rgb("plot-fit"),
                     label=f"{slope:.2f} MiB/CRD", marker="braille")
        for crds in restarts:
            plt.vline(crds, color=plot.rgb("plot-outage"))
        plot.refresh()

    def draw_latency(self, now: float) -> None:
        plot = self.query_one("#plot-latency", RolePlot)
        samples = self.store.good_history("latency")
        points = []
        for sample in samples:
            values = [number(get(c, "p99_seconds")) for c in (get(sample, "canaries", {}) or {}).values()]
            values = [v for v in values if v]
            if values:
                points.append(((sample.timestamp - now) / 60, max(values)))
        if not points:
            plot.empty("canary p99", "no canary figures yet")
            return
        plot.start("worst canary p99 (s)")
        plt = plot.plt
        plt.plot([x for x, _ in points], [y for _, y in points], color=plot.rgb("plot-canary"), marker="braille")
        slos = sorted({v for v in (get(self.store.last_good("latency"), "slo_seconds", {}) or {}).values() if v})
        top = max(y for _, y in points)
        # The tightest SLO is always in view (far below it is the good news); looser ones once approached.
        shown = [slo for i, slo in enumerate(slos) if i == 0 or top > slo / 2]
        for slo in shown:
            plt.hline(slo, color=plot.rgb("plot-slo"))
        plt.ylim(0, max([top, *shown]) * 1.1)
        time_axis(plot, min(x for x, _ in points))
        low = min(x for x, _ in points)
        for outage in items(get(self.store.latest("health"), "outages")):
            start = (float(get(outage, "start", now)) - now) / 60
            end = get(outage, "end")
            for edge in (start, (float(end) - now) / 60 if end is not None else 0.0):
                if edge >= low:
                    plt.vline(edge, color=plot.rgb("plot-outage"))
        plot.refresh()


def fit_line(sample: object) -> str:
    """The memory fit: MiB per CRD (RSS and heap), fds per CRD, over how many points."""
    slope = number(get(sample, "mib_per_crd"))
    missing = get(sample, "unobservable", {}) or {}
    if slope is None:
        reason = missing.get("mib_per_crd") or "needs CRD counts that change"
        return f"CRDs [b]{fmt(get(sample, 'crds'))}[/b] · MiB/CRD [$probe-idle]{one_line(reason)}[/]"
    heap = number(get(sample, "heap_mib_per_crd"))
    fds = number(get(sample, "fds_per_crd"))
    return pairs(("CRDs", fmt(get(sample, "crds"))), ("RSS/CRD", f"{slope:.2f} MiB"),
                 ("heap/CRD", f"{heap:.2f} MiB" if heap is not None else DASH),
                 ("fds/CRD", f"{fds:.3f}" if fds is not None else DASH),
                 ("fit", f"{fmt(get(sample, 'fit_points'))} pts at {fmt(get(sample, 'fit_crd_counts'))} counts"))

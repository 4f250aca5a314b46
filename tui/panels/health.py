"""Health: memory against the number of CRDs with the fitted MiB-per-CRD line, restarts,
outages, readyz, canary latency against the SLOs, the webhooks the server calls, and the cost model's
attribution of the memory to the cluster's CRDs by their own schemas and to Crossplane's MRDs (health,
latency, webhooks and attribution probes)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Static

from crdscope.findings.checks import canaries_over_slo, canary_slo_seconds
from crdscope.findings.webhooks import WEBHOOK_SLOW_SECONDS
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import LatencySample
from crdscope.base.samples.attribution import AttributionSample, attribution_line
from crdscope.base.samples.webhooks import WebhooksSample
from crdscope.session.values import finite_number

from ..format import DASH, age, duration, escape, number as fmt, size
from .base import ProbePanel, one_line
from .plots import MIB, RolePlot, line_through, time_axis
from .text import pairs


def memory_points(samples: list[HealthSample]) -> tuple[list[tuple[float, float]], list[tuple[float, float]],
                                                         list[float]]:
    """(crds, RSS MiB) and (crds, heap MiB) of the newest sample's process, and the CRD counts at restarts.

    Behind a load balancer samples alternate between replicas: points are kept per process (start
    time) and a restart is where the restart count grew, not where the start time changed.
    """
    points: dict[float | None, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
    restarts: list[float] = []
    counted: int | None = None
    start: float | None = None
    for sample in samples:
        crds = finite_number(sample.crds)
        start = finite_number(sample.start_time)
        if sample.restarts is not None:
            if counted is not None and sample.restarts > counted:
                restarts.append(crds if crds is not None else 0.0)
            counted = sample.restarts
        if crds is None:
            continue
        rss, heap = points.setdefault(start, ([], []))
        if (value := finite_number(sample.rss_bytes)) is not None:
            rss.append((crds, value / MIB))
        if (value := finite_number(sample.heap_bytes)) is not None:
            heap.append((crds, value / MIB))
    rss, heap = points.get(start, ([], []))
    return rss, heap, restarts


def replica_availability(name: str, history: Sequence[HealthSample], sample: HealthSample, now: float) -> str:
    """One replica's readyz (from the newest run whose scrape it answered) and its outages (its
    deaths in the restart ledger: each time the process went, the replica was out)."""
    answered = next((s for s in reversed(history) if s.replica == name), None)
    ready = answered.ready if answered is not None else None
    parts = ["ready [$probe-idle]?[/]" if ready is None else
             ("ready [$probe-ok]✓[/]" if ready else "ready [$probe-fail]✗[/]")]
    deaths = [event for event in sample.restart_events if event.replica == name]
    if deaths:
        last = deaths[-1]
        oom = ", OOM-killed" if last.oom_killed else ""
        parts.append(f"[$probe-fail]outages [b]{len(deaths)}[/b][/] (last {age(now - last.at)} ago{oom})")
    else:
        parts.append("outages [b]0[/b]")
    return " · ".join(parts)


def replica_lines(sample: HealthSample, now: float, history: Sequence[HealthSample] = ()) -> str:
    """One line per API server replica behind the load balancer (figures, readyz, outages), then
    their total (empty for one).  ``history``: recent health samples, oldest first."""
    replicas = sample.replicas
    if len(replicas) < 2 and (sample.apiservers or 0) < 2:
        return ""
    lines = []
    for replica in replicas:
        mark = "[$probe-ok]●[/]" if replica.answering else " "
        restarts = (f"[$probe-fail]restarts [b]{replica.restarts}[/b][/]" if replica.restarts
                    else "restarts [b]0[/b]")
        slope = f"{replica.mib_per_crd:.2f} MiB/CRD" if replica.mib_per_crd is not None else DASH
        lines.append(f"{mark}{one_line(replica.name)} " + pairs(
            ("RSS", size(replica.rss_bytes)), ("heap", size(replica.heap_bytes)),
            ("goroutines", fmt(replica.goroutines)), ("fds", fmt(replica.open_fds)), ("fit", slope))
            + f" · {restarts} · seen {age(now - replica.last_seen)} ago"
            + "\n   " + replica_availability(replica.name, history, sample, now))
    total_rss = sum(r.rss_bytes for r in replicas if r.rss_bytes is not None)
    leases = f" · Leases: [b]{fmt(sample.apiservers)}[/b] live" if sample.apiservers is not None else ""
    lines.append(f" total of {len(replicas)} · RSS [b]{size(total_rss)}[/b] · restarts "
                 f"[b]{fmt(sample.restarts)}[/b]{leases}")
    return "\n".join(lines)


def availability_line(latest: HealthSample, now: float) -> str:
    """readyz/livez, restarts and outage windows."""
    def check(name: str, value: bool | None) -> str:
        if value is None:
            return f"{name} [$probe-idle]?[/]"
        return f"{name} [$probe-ok]✓[/]" if value else f"{name} [$probe-fail]✗[/]"

    parts = [check("ready", latest.ready), check("live", latest.live)]
    failing = latest.failing_checks
    if failing:
        parts.append(f"[$probe-fail]failing: {one_line(', '.join(map(str, failing)))}[/]")
    restarts = latest.restarts
    if restarts:
        # Which source counted them (a Lease's holder, the lab's supervisor...), and OOM kills.
        said = [latest.restarts_source or ""]
        if latest.oom_kills:
            said.append(f"{latest.oom_kills} OOM-killed")
        detail = ", ".join(one_line(part) for part in said if part)
        parts.append(f"[$probe-fail]restarts [b]{fmt(restarts)}[/b][/]" + (f" ({detail})" if detail else ""))
    else:
        parts.append(f"restarts [b]{fmt(restarts)}[/b]")
    outages = latest.outages
    if outages:
        last = outages[-1]
        if last.end is None:
            parts.append(f"[$probe-fail b]DOWN for {age(last.duration_seconds)}[/]")
        else:
            parts.append(f"outages [b]{len(outages)}[/b] (last {age(last.duration_seconds)},"
                         f" {age(now - last.end)} ago)")
    return " · ".join(parts)


def canary_line(latency: LatencySample | None) -> str:
    """Each canary's rolling p99 and the SLO breaches, server side and canary side."""
    if latency is None:
        return "[$probe-idle]canaries: no latency sample yet[/]"
    shown = []
    for name, canary in latency.canaries.items():
        p99 = finite_number(canary.p99_seconds)
        slo = canary_slo_seconds(name, canary)  # a canary with no official SLO is held to 1 s
        text = f"{one_line(name)} {duration(p99)}"
        shown.append(f"[$probe-fail]{text}[/]" if p99 is not None and p99 > slo else text)
    # The findings' view of the canaries, so a 19 s /version canary is never "SLOs met".
    over = [f"canary {name}" for name in canaries_over_slo(latency)]
    breaches = [*latency.slo_breaches, *over]
    slo_text = ("[$probe-fail]SLO over: " + one_line(", ".join(map(str, breaches))) + "[/]") if breaches \
        else "[$probe-ok]SLOs met[/]"
    return "p99 " + " · ".join(shown) + " · " + slo_text


def webhooks_line(sample: WebhooksSample | None) -> str:
    """The webhooks the server calls: a failing conversion webhook with the CRDs it leaves unreadable in
    other versions, else each kind's count and slowest p99 (empty: no webhook to show)."""
    if sample is None or not (sample.conversion_webhooks or sample.admission_webhooks):
        return ""
    failing = sample.failing
    if failing:
        crds = ", ".join(sample.affected_crds[:3]) + ("…" if sample.affected_crd_count > 3 else "")
        return (f"[$probe-fail]conversion webhook failing: [b]{one_line(failing[0].name)}[/b] · "
                f"{fmt(sample.affected_crd_count)} CRDs unreadable in other versions ({one_line(crds)})[/]")

    def slowest(label: str, p99s: list[float | None], failing_count: int = 0) -> str:
        timed = [p for p in p99s if p is not None]
        worst = max(timed) if timed else None
        text = f"{label} [b]{len(p99s)}[/b] p99 {duration(worst)}"
        if failing_count:
            return f"[$probe-fail]{text} · {failing_count} failing[/]"
        return f"[$probe-warn]{text}[/]" if worst is not None and worst > WEBHOOK_SLOW_SECONDS else text

    return "webhooks: " + " · ".join((
        slowest("conversion", [hook.p99_seconds for hook in sample.conversion_webhooks])
        + f" ({fmt(sample.conversion_crds)} CRDs)",
        slowest("admission", [hook.p99_seconds for hook in sample.admission_webhooks],
                sample.failing_admission_webhooks)))


class HealthPanel(ProbePanel):
    """Figures on top, two plots below: memory vs CRDs, and canary p99 vs time with SLO lines."""

    probes = ("health", "latency", "webhooks", "attribution")
    panel_title = "Health"
    tab_label = "Health"
    shows = ("memory against the number of CRDs (fitted MiB per CRD),\n"
             "restarts, readyz, canary latency against the SLOs")
    MIN_REDRAW_SECONDS = 1.0

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="health-figures")
        yield Static("", id="health-availability")
        replicas = Static("", id="health-replicas")
        replicas.display = False  # shown behind a load balancer only (several API servers)
        yield replicas
        yield Static("", id="health-fit")
        yield Static("", id="health-canaries")
        webhooks = Static("", id="health-webhooks")
        webhooks.display = False  # shown once the server calls a webhook
        yield webhooks
        with Horizontal(classes="plots"):
            yield RolePlot(id="plot-memory")
            yield RolePlot(id="plot-latency")

    def memory_limit(self) -> float | None:
        """The API server's memory limit when known, as the session's facts hold it: the one the
        monitor was given (``--memory-limit``), else the lab's cap as it is now (the app follows
        ``lab limit``), else the one Prometheus shows."""
        limit = self.cluster.memory_limit
        return float(limit) if limit else None

    def draw(self) -> None:
        latest = self.store.latest_of(HealthSample)
        good = self.store.last_good_of(HealthSample)
        now = self.now()
        if good is not None:
            fds = fmt(good.open_fds)
            if good.etcd_connections is not None:
                fds += f" (etcd conns {fmt(good.etcd_connections)})"
            figures = pairs(
                ("RSS", size(good.rss_bytes)), ("heap", size(good.heap_bytes)),
                ("goroutines", fmt(good.goroutines)), ("fds", fds))
            hidden = good.unobservable.get("rss_bytes")
            if hidden and good.rss_bytes is None:  # say why, e.g. /metrics forbidden
                figures += f" · [$probe-idle]{one_line(hidden)}[/]"
            self.query_one("#health-figures", Static).update(figures)
            self.query_one("#health-fit", Static).update(fit_line(good, self.store.last_good_of(AttributionSample)))
        if latest is not None:
            self.query_one("#health-availability", Static).update(availability_line(latest, now))
        if good is not None:
            history = self.store.history_of(HealthSample)
            lines, widget = replica_lines(good, now, history), self.query_one("#health-replicas", Static)
            widget.display = bool(lines)  # a single API server: no line
            widget.update(lines)
        self.query_one("#health-canaries", Static).update(canary_line(self.store.last_good_of(LatencySample)))
        hooks = webhooks_line(self.store.last_good_of(WebhooksSample))
        widget = self.query_one("#health-webhooks", Static)
        widget.display = bool(hooks)  # no webhook called: no line
        widget.update(hooks)
        self.draw_memory()
        self.draw_latency(now)

    def draw_memory(self) -> None:
        plot = self.query_one("#plot-memory", RolePlot)
        rss, heap, restarts = memory_points(self.store.good_history_of(HealthSample))
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
        good = self.store.last_good_of(HealthSample)
        slope = finite_number(good.mib_per_crd) if good is not None else None
        ends = line_through(rss, slope) if slope is not None else None
        if ends:
            plt.plot([x for x, _ in ends], [y for _, y in ends], color=plot.rgb("plot-fit"),
                     label=f"{slope:.2f} MiB/CRD", marker="braille")
        for crds in restarts:
            plt.vline(crds, color=plot.rgb("plot-outage"))
        plot.refresh()

    def draw_latency(self, now: float) -> None:
        plot = self.query_one("#plot-latency", RolePlot)
        samples = self.store.good_history_of(LatencySample)
        points = []
        for sample in samples:
            values = [finite_number(c.p99_seconds) for c in sample.canaries.values()]
            worst = [v for v in values if v]
            if worst:
                points.append(((sample.timestamp - now) / 60, max(worst)))
        if not points:
            plot.empty("canary p99", "no canary figures yet")
            return
        plot.start("worst canary p99 (s)")
        plt = plot.plt
        plt.plot([x for x, _ in points], [y for _, y in points], color=plot.rgb("plot-canary"), marker="braille")
        latency = self.store.last_good_of(LatencySample)
        slos = sorted({v for v in (latency.slo_seconds if latency is not None else {}).values() if v})
        top = max(y for _, y in points)
        # The tightest SLO is always in view (far below it is the good news); looser ones once approached.
        shown = [slo for i, slo in enumerate(slos) if i == 0 or top > slo / 2]
        for slo in shown:
            plt.hline(slo, color=plot.rgb("plot-slo"))
        plt.ylim(0, max([top, *shown]) * 1.1)
        time_axis(plot, min(x for x, _ in points))
        low = min(x for x, _ in points)
        health = self.store.latest_of(HealthSample)
        for outage in health.outages if health is not None else ():
            start = (outage.start - now) / 60
            end = outage.end
            for edge in (start, (end - now) / 60 if end is not None else 0.0):
                if edge >= low:
                    plt.vline(edge, color=plot.rgb("plot-outage"))
        plot.refresh()


def model_attribution(attribution: AttributionSample | None) -> str:
    """The cost model's share of RSS: the cluster's CRDs priced by their own schemas, the MRDs at their
    measured cost (works from one CRD count, unlike the fit), and with a memory limit how many more
    CRDs like these fit under it; the attribution probe's sample, "" while it prices nothing."""
    return escape(attribution_line(attribution)) if attribution is not None else ""


def fit_line(sample: HealthSample, attribution: AttributionSample | None = None) -> str:
    """The memory fit: MiB per CRD (RSS and heap), fds per CRD, over how many points; beside it
    the model's attribution (alone while the fit needs a second CRD count)."""
    slope = finite_number(sample.mib_per_crd)
    modelled = model_attribution(attribution)
    model = f" · {modelled}" if modelled else ""
    if slope is None:
        reason = sample.unobservable.get("mib_per_crd") or "needs CRD counts that change"
        return f"CRDs [b]{fmt(sample.crds)}[/b] · MiB/CRD [$probe-idle]{one_line(reason)}[/]{model}"
    heap = finite_number(sample.heap_mib_per_crd)
    fds = finite_number(sample.fds_per_crd)
    own = finite_number(sample.mib_per_crd_own)
    if own is not None:  # Crossplane's MRDs arrived too: their memory is theirs, not the CRDs'
        per_mrd = finite_number(sample.mib_per_mrd)
        mrd = f"{per_mrd:.2f} MiB" if per_mrd is not None else "0.8 MiB (measured)"
        priced = finite_number(attribution.mib_per_crd) if attribution is not None else None
        by_schemas = f" (model {priced:.2f} MiB)" if priced is not None else ""
        return pairs(("CRDs", fmt(sample.crds)), ("RSS/CRD own", f"{own:.2f} MiB{by_schemas}"),
                     ("with MRDs", f"{slope:.2f} MiB"), ("MRDs", fmt(sample.mrds)), ("RSS/MRD", mrd),
                     ("fit", f"{fmt(sample.fit_points)} pts at {fmt(sample.fit_crd_counts)} counts")) + model
    return pairs(("CRDs", fmt(sample.crds)), ("RSS/CRD", f"{slope:.2f} MiB"),
                 ("heap/CRD", f"{heap:.2f} MiB" if heap is not None else DASH),
                 ("fds/CRD", f"{fds:.3f}" if fds is not None else DASH),
                 ("fit", f"{fmt(sample.fit_points)} pts at {fmt(sample.fit_crd_counts)} counts")) + model

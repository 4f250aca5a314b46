"""OpenAPI: v3 paths, the publication backlog and its oldest age, lag per stage, v2 size and time."""

from __future__ import annotations

from collections.abc import Iterable

from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from crdscope.base.samples.openapi import OpenAPISample
from crdscope.base.settings import Thresholds
from crdscope.findings.checks import OPENAPI_BACKLOG

from ..format import age, duration, number as fmt, size
from .base import ProbePanel, one_line
from .plots import RolePlot, time_axis
from .text import columns, pairs

#: Stage keys of ``lag_seconds`` in pipeline order, and how they read.
STAGE_LABELS = {"names_accepted": "NamesAccepted", "established": "Established",
                "discovery": "in discovery", "openapi_v3": "in OpenAPI v3"}
BACKLOG_NAMES_SHOWN = 2


def backlog_text(sample: OpenAPISample, thresholds: Thresholds) -> str:
    """The backlog, coloured as the OpenAPI finding and events judge it (``OPENAPI_BACKLOG``), and its oldest."""
    backlog = sample.backlog
    role = "probe-warn" if OPENAPI_BACKLOG.crossed(backlog, thresholds) else "probe-ok" if backlog == 0 else ""
    text = f"[${role}]{fmt(backlog)}[/]" if role else fmt(backlog)
    if backlog:
        text += f" (oldest {age(sample.backlog_oldest_seconds)})"
    return text


def lag_table(sample: OpenAPISample) -> str:
    """p50/p95/max seconds from creation to each stage."""
    lags = sample.lag_seconds
    ordered = [key for key in STAGE_LABELS if key in lags] + [key for key in lags if key not in STAGE_LABELS]
    rows = [[STAGE_LABELS.get(key, key), duration(lags[key].p50), duration(lags[key].p95), duration(lags[key].max)]
            for key in ordered]
    if not rows:
        return "[$probe-idle]lag: no CRD created while watching yet[/]"
    return columns(("created →", "p50", "p95", "max"), rows)


def v2_line(sample: OpenAPISample) -> str:
    """The last /openapi/v2 fetch: size, time to first byte, total; or why there was none."""
    if sample.v2_error:
        return f"[$probe-fail]v2: {one_line(sample.v2_error)}[/]"
    if sample.v2_fetched_at is None:
        note = sample.v2_note or "not fetched yet"
        return f"[$probe-idle]v2: {one_line(note)}[/]{server_builds(sample)}"
    # Asked for explicitly (--openapi-v2): the line says what each fetch costs the server.
    return "v2 " + pairs(("", size(sample.v2_bytes)),
                         ("first byte", duration(sample.v2_first_byte_seconds)),
                         ("built+sent", duration(sample.v2_seconds)),
                         ("status", fmt(sample.v2_status))) + \
        f"\n[$probe-warn]each v2 fetch makes the server build {size(sample.v2_bytes)} " \
        f"({duration(sample.v2_first_byte_seconds)} before the first byte)[/]{server_builds(sample)}"


def server_builds(sample: OpenAPISample) -> str:
    """`` · server served v2 3x in 41.2s`` from the server's own metrics (any client's fetches)."""
    if sample.v2_server_requests is None:
        return ""
    spent = f" in {duration(sample.v2_server_seconds)}" if sample.v2_server_seconds else ""
    return f" · server served v2 {sample.v2_server_requests}x{spent}"


class OpenAPIPanel(ProbePanel):
    """Publication of CRD schemas: from creation to the v3 index, and v2's cost."""

    probes = ("openapi",)
    panel_title = "OpenAPI"
    tab_label = "OpenAPI"
    shows = "v3 paths, publication backlog and lag, v2 size and build time"
    MIN_REDRAW_SECONDS = 1.0

    def compose_body(self) -> Iterable[Widget]:
        yield Static("", id="openapi-summary")
        with Horizontal(classes="split"):
            with Vertical(classes="split-text"):
                yield Static("", id="openapi-lag")
                yield Static("", id="openapi-v2")
            yield RolePlot(id="plot-backlog")

    def draw(self) -> None:
        sample = self.store.last_good_of(OpenAPISample)
        if sample is None:
            return
        summary = pairs(("v3 paths", fmt(sample.v3_paths)),
                        ("index", f"{duration(sample.v3_seconds)} {size(sample.v3_bytes)}"),
                        ("backlog", backlog_text(sample, self.cluster.thresholds)))
        names = sample.backlog_names[:BACKLOG_NAMES_SHOWN]
        if names:
            summary += "\n[$probe-warn]waiting: " + one_line(", ".join(map(str, names))) + "[/]"
        if sample.v3_deferred:  # a server before 1.27, while CRDs change: the index figures are the last read's
            summary += f"\n[$probe-idle]index {one_line(sample.v3_deferred)}[/]"
        if sample.discovery_unobservable:
            summary += f"\n[$probe-idle]discovery stage: {one_line(sample.discovery_unobservable)}[/]"
        self.query_one("#openapi-summary", Static).update(summary)
        self.query_one("#openapi-lag", Static).update(lag_table(sample))
        self.query_one("#openapi-v2", Static).update(v2_line(sample))
        self.draw_plot()

    def draw_plot(self) -> None:
        plot = self.query_one("#plot-backlog", RolePlot)
        now = self.now()
        points = [((s.timestamp - now) / 60, float(s.backlog)) for s in self.store.good_history_of(OpenAPISample)]
        if not points:
            plot.empty("backlog", "no OpenAPI runs yet")
            return
        plot.start("OpenAPI backlog (CRDs)")
        plot.plt.plot([x for x, _ in points], [y for _, y in points], color=plot.rgb("plot-backlog"),
                      marker="braille")
        plot.plt.ylim(0, max(1.0, max(y for _, y in points) * 1.1))
        time_axis(plot, min(x for x, _ in points))
        plot.refresh()

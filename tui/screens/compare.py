"""The compare screen: two clusters' key figures side by side, their differences in words, and
memory, latency and discovery against each cluster's CRD count on one chart (issue 28).

``c`` goes back to the fleet screen, ``1`` and ``2`` open either cluster's full monitor.
"""

from __future__ import annotations

import bisect
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from ..format import escape
from textual.widgets import Static

from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.latency import LatencySample
from crdscope.session.core import SessionStore
from crdscope.session.values import finite_number

from ..footer import KeyFooter
from ..fleet_figures import COLUMNS, differences, figures_of
from ..panels.health import memory_points
from ..panels.plots import RolePlot
from ..panels.text import columns
from ..sessions import ClusterSession
from .throttled import ThrottledScreen

#: Series markers: the colour says the figure (its theme role), the marker the cluster.
MARKERS = ("braille", "dot")

Points = list[tuple[float, float]]


def crd_count_at(store: SessionStore) -> list[tuple[float, int]]:
    """(time, CRDs) of the inventory samples, oldest first: the CRD count at any moment."""
    return [(s.timestamp, s.crds) for s in store.good_history_of(InventorySample)]


def at(counts: list[tuple[float, int]], timestamp: float) -> int | None:
    """The CRD count last seen at or before ``timestamp`` (None: none yet)."""
    index = bisect.bisect_right([t for t, _ in counts], timestamp)
    return counts[index - 1][1] if index else None


def against_crds(store: SessionStore) -> tuple[Points, Points, Points]:
    """(CRDs, RSS MiB), (CRDs, worst canary p99 s) and (CRDs, discovery s: cold, else the periodic
    run) of one cluster."""
    memory, _, _ = memory_points(store.good_history_of(HealthSample))
    counts = crd_count_at(store)
    latency: Points = []
    for sample in store.good_history_of(LatencySample):
        p99s = [p for c in sample.canaries.values() if (p := finite_number(c.p99_seconds))]
        crds = at(counts, sample.timestamp)
        if p99s and crds is not None:
            latency.append((float(crds), max(p99s)))
    discovery: Points = []
    for found in store.good_history_of(DiscoverySample):
        seconds = finite_number(found.cold_seconds) or finite_number(found.seconds)
        crds = at(counts, found.timestamp)
        if seconds is not None and crds is not None:
            discovery.append((float(crds), seconds))
    return memory, latency, discovery


class CompareScreen(ThrottledScreen):
    """Two clusters compared (the fleet's ``c`` with exactly two, or ``crdscope compare A B``)."""

    CSS_PATH = "fleet.tcss"
    MIN_REDRAW_SECONDS: ClassVar[float] = 1.0  # the chart is the costly part
    BINDINGS = [
        Binding("c", "back", "Fleet"),
        Binding("1", "open(0)", "Open A"),
        Binding("2", "open(1)", "Open B"),
        Binding("l", "load_everywhere", "Load both"),
    ]

    def __init__(self) -> None:
        super().__init__(id="compare")

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        yield Static("", id="compare-table")
        yield Static("", id="compare-differences")
        yield RolePlot(id="compare-plot")
        yield KeyFooter()

    @property
    def pair(self) -> tuple[ClusterSession, ClusterSession]:
        first, second = self.monitor_app.sessions[:2]
        return first, second

    def draw(self) -> None:
        a, b = (figures_of(s) for s in self.pair)
        self.query_one("#compare-title", Static).update(
            f"[b]crdscope[/b] · [b]{escape(a.name)}[/b] compared with [b]{escape(b.name)}[/b]")
        rows = [[column.header, column.cell(a), column.cell(b)] for column in COLUMNS[1:]]
        self.query_one("#compare-table", Static).update(
            columns(("", a.name, b.name), rows, max_widths=(14, 40, 40)))
        said = differences(a, b)
        self.query_one("#compare-differences", Static).update(
            "\n".join(f"• {escape(line)}" for line in said) if said
            else "[$probe-idle]no difference yet: waiting for figures of both clusters[/]")
        self.draw_plot()

    def draw_plot(self) -> None:
        plot = self.query_one("#compare-plot", RolePlot)
        series = [(session.name, against_crds(session.store)) for session in self.pair]
        if not any(points for _, found in series for points in found):
            plot.empty("memory, latency and discovery vs CRDs", "no figures yet")
            return
        plot.start("RSS MiB (left) · canary p99 and discovery s (right) vs CRDs", xlabel="CRDs")
        plt = plot.plt
        for (name, (memory, latency, discovery)), marker in zip(series, MARKERS, strict=True):
            for points, role, label, side in ((memory, "plot-memory", "RSS", "left"),
                                              (latency, "plot-canary", "p99", "right"),
                                              (discovery, "plot-aggregated", "discovery", "right")):
                if points:
                    plt.scatter([x for x, _ in points], [y for _, y in points], color=plot.rgb(role),
                                marker=marker, label=f"{name} {label}", yside=side)
        plot.refresh()

    def action_load_everywhere(self) -> None:
        """The same source into both clusters at the same pace."""
        self.monitor_app.load_everywhere()

    def action_back(self) -> None:
        """Back to the fleet screen."""
        self.dismiss()

    def action_open(self, index: int) -> None:
        """Cluster A's (0) or B's (1) full monitor."""
        self.monitor_app.open_session(self.pair[index])

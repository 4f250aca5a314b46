"""Plots in theme colours (textual-plotext), fed by the panels from the sample store."""

from __future__ import annotations

from textual.color import Color
from textual_plotext import PlotextPlot

from crdscope.themes import role_defaults

MIB = 1024 * 1024


class RolePlot(PlotextPlot):
    """A plotext plot whose series take their colours from theme roles (``plot-memory``...)."""

    def rgb(self, role: str) -> tuple[int, int, int]:
        """The current theme's colour for ``role`` as plotext wants it."""
        variables = self.app.theme_variables
        return Color.parse(variables.get(role) or role_defaults()[role]).rgb

    def start(self, title: str, xlabel: str = "", ylabel: str = "") -> None:
        """Clear the figure and set its labels (call before adding series)."""
        plt = self.plt
        plt.clear_figure()
        plt.title(title)
        if xlabel:
            plt.xlabel(xlabel)
        if ylabel:
            plt.ylabel(ylabel)

    def empty(self, title: str, reason: str) -> None:
        """A plot with nothing to show says why."""
        self.start(title)
        self.plt.text(reason, 0.5, 0.5, alignment="center")
        self.plt.xlim(0, 1)
        self.plt.ylim(0, 1)
        self.plt.xticks([])
        self.plt.yticks([])
        self.refresh()


def line_through(points: list[tuple[float, float]], slope: float) -> list[tuple[float, float]] | None:
    """Ends of the line of ``slope`` through the centroid of ``points`` (over their x range)."""
    if not points:
        return None
    xs = [x for x, _ in points]
    mean_x = sum(xs) / len(xs)
    mean_y = sum(y for _, y in points) / len(points)
    low, high = min(xs), max(xs)
    if low == high:
        return None
    return [(x, mean_y + slope * (x - mean_x)) for x in (low, high)]


#: Tick spacings for a time axis, in minutes (10 s up to 2 h).
TICK_STEPS = (1 / 6, 0.5, 1, 2, 5, 10, 15, 30, 60, 120)


def tick_label(minutes: float) -> str:
    if minutes == 0:
        return "now"
    if abs(minutes) < 1:
        return f"{minutes * 60:.0f}s"
    return f"{minutes:g}m"


def time_axis(plot: RolePlot, oldest_minutes: float) -> None:
    """An x axis of minutes before now (negative), ticked as ``-5m … now``.

    plotext's own ticks print negative values in a confusing order; these are ours.
    """
    span = max(-oldest_minutes, 1 / 6)
    step = next((s for s in TICK_STEPS if span / s <= 4), TICK_STEPS[-1])
    ticks = [-step * i for i in range(int(span // step) + 1)][::-1]
    plot.plt.xticks(ticks, [tick_label(t) for t in ticks])
    plot.plt.xlim(-span, 0)

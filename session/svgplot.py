"""Small, self-contained SVG charts for the HTML report (no JavaScript, no network).

One function, :func:`chart`: line and scatter series on linear axes with
"nice" ticks, optional shaded bands (outage windows), vertical markers
(restarts) and straight lines (a fitted MiB-per-CRD line).  Colours are CSS
classes (``series-0``..., ``band``, ``marker``, ``fit``) styled by the report's
stylesheet, so the SVG carries no colours of its own.
"""

from __future__ import annotations

import dataclasses
import math
import time
from html import escape
from collections.abc import Callable, Sequence

WIDTH, HEIGHT = 720, 260
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 28, 44
#: Approximate width of a legend character (11 px sans-serif), to lay legends out side by side.
LEGEND_CHAR_WIDTH = 6.2
#: Share of the x range left empty on each side of a scatter plot.
SCATTER_PAD = 0.03
#: Tick labels closer than this to the plot's right edge are right-aligned.
EDGE_LABEL_PX = 30


@dataclasses.dataclass(frozen=True)
class Series:
    """Points to draw: ``line`` joins them, ``scatter`` marks each one."""

    label: str
    points: Sequence[tuple[float, float]]
    style: str = "line"


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 2.5, 5 times a power of ten)."""
    if not math.isfinite(low) or not math.isfinite(high):
        return []
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _format_number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000 or abs(value) < 0.01:
        return f"{value:.3g}"
    return f"{value:g}"


def clock_label(timestamp: float) -> str:
    """``HH:MM:SS`` in local time (time axes)."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def _x_range(xs: Sequence[float], *, scatter_only: bool) -> tuple[float, float]:
    """The x axis's span: never empty, with room around dots so that none is cut in half."""
    x_min, x_max = min(xs), max(xs)
    if x_max == x_min:
        x_max = x_min + 1.0
    if scatter_only:
        pad = (x_max - x_min) * SCATTER_PAD
        x_min, x_max = x_min - pad, x_max + pad
    return x_min, x_max


def _y_scale(ys: Sequence[float], from_zero: bool) -> tuple[list[float], float, float]:
    """(ticks, bottom, top) of the y axis; the top is a labelled tick above the highest point."""
    y_min, y_max = (min(0.0, min(ys)) if from_zero else min(ys)), max(ys)
    y_ticks = nice_ticks(y_min, y_max)
    if len(y_ticks) >= 2 and y_ticks[-1] < y_max:
        # The top of the plot is a labelled tick above the highest point, never an unlabelled value.
        y_ticks.append(round(y_ticks[-1] + (y_ticks[1] - y_ticks[0]), 10))
    y_low, y_high = y_ticks[0], max(y_ticks[-1], y_max)
    if y_high == y_low:
        y_high = y_low + 1.0
    return y_ticks, y_low, y_high


@dataclasses.dataclass(frozen=True)
class _Frame:
    """The plot area and the data ranges it shows: where a value lands on the chart."""

    x_min: float
    x_max: float
    y_low: float
    y_high: float
    plot_w: float = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h: float = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def sx(self, x: float) -> float:
        return MARGIN_LEFT + (x - self.x_min) / (self.x_max - self.x_min) * self.plot_w

    def sy(self, y: float) -> float:
        return MARGIN_TOP + self.plot_h - (y - self.y_low) / (self.y_high - self.y_low) * self.plot_h


def chart(title: str, series: Sequence[Series], *, x_label: str = "", y_label: str = "",
          time_axis: bool = False, bands: Sequence[tuple[float, float]] = (),
          markers: Sequence[tuple[float, str]] = (), lines: Sequence[tuple[str, float, float]] = (),
          y_from_zero: bool = True) -> str:
    """An ``<svg>`` element; ``lines`` are (label, slope, intercept) drawn across the x range."""
    points = [p for s in series for p in s.points if math.isfinite(p[0]) and math.isfinite(p[1])]
    if not points:
        return (f'<svg class="chart" viewBox="0 0 {WIDTH} 60" role="img"><title>{escape(title)}</title>'
                f'<text x="8" y="36" class="empty">{escape(title)}: no data recorded</text></svg>')
    xs = [p[0] for p in points] + [b for band in bands for b in band] + [m[0] for m in markers]
    x_min, x_max = _x_range(xs, scatter_only=all(item.style == "scatter" for item in series))
    ys = [p[1] for p in points]
    for _, slope, intercept in lines:
        ys += [slope * x_min + intercept, slope * x_max + intercept]
    y_ticks, y_low, y_high = _y_scale(ys, y_from_zero)
    frame = _Frame(x_min, x_max, y_low, y_high)
    x_text: Callable[[float], str] = clock_label if time_axis else _format_number
    parts = [f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" xmlns="http://www.w3.org/2000/svg">',
             f"<title>{escape(title)}</title>",
             f'<text x="{MARGIN_LEFT}" y="18" class="title">{escape(title)}</text>']
    parts += _bands(frame, bands, x_text)
    parts += _axes(frame, y_ticks, time_axis, x_text)
    parts += _axis_labels(x_label, y_label, frame.plot_w, frame.plot_h)
    drawn, legend = _drawn_series(frame, series, lines)
    parts += drawn
    parts += _legend(legend)
    if all(p[1] == 0 for p in points) and not lines:
        # A line along the axis is easy to miss: say it in words.
        parts.append(f'<text class="flat" x="{MARGIN_LEFT + frame.plot_w / 2:.1f}" '
                     f'y="{MARGIN_TOP + frame.plot_h / 2:.1f}" text-anchor="middle">0 throughout ({len(points)} '
                     "samples)</text>")
    for x, label in markers:
        parts.append(f'<line class="marker" x1="{frame.sx(x):.1f}" x2="{frame.sx(x):.1f}" y1="{MARGIN_TOP}" '
                     f'y2="{MARGIN_TOP + frame.plot_h}"><title>{escape(label)} {x_text(x)}</title></line>')
    parts.append("</svg>")
    return "\n".join(parts)


def _bands(frame: _Frame, bands: Sequence[tuple[float, float]], x_text: Callable[[float], str]) -> list[str]:
    """Shaded outage windows, clipped to the x range."""
    parts = []
    for start, end in bands:
        x0, x1 = frame.sx(max(start, frame.x_min)), frame.sx(min(end, frame.x_max))
        parts.append(f'<rect class="band" x="{x0:.1f}" y="{MARGIN_TOP}" width="{max(1.0, x1 - x0):.1f}" '
                     f'height="{frame.plot_h}"><title>outage {x_text(start)} - {x_text(end)}</title></rect>')
    return parts


def _axes(frame: _Frame, y_ticks: Sequence[float], time_axis: bool, x_text: Callable[[float], str]) -> list[str]:
    """Grid lines with their y tick labels, the x tick labels, and the two axes."""
    parts = []
    for tick in y_ticks:
        y = frame.sy(tick)
        parts.append(f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{_format_number(tick)}</text>")
    x_ticks = _time_ticks(frame.x_min, frame.x_max) if time_axis else nice_ticks(frame.x_min, frame.x_max, 6)
    for tick in x_ticks:
        if frame.x_min <= tick <= frame.x_max:
            x = frame.sx(tick)
            # A label centred on the plot's right edge would run off the chart: align it inside.
            anchor = "end" if x > WIDTH - MARGIN_RIGHT - EDGE_LABEL_PX else "middle"
            parts.append(f'<text class="tick" x="{x:.1f}" y="{HEIGHT - MARGIN_BOTTOM + 16}" '
                         f'text-anchor="{anchor}">{x_text(tick)}</text>')
    bottom = MARGIN_TOP + frame.plot_h
    parts.append(f'<line class="axis" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{bottom}" y2="{bottom}"/>')
    parts.append(f'<line class="axis" x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{MARGIN_TOP}" y2="{bottom}"/>')
    return parts


def _drawn_series(frame: _Frame, series: Sequence[Series],
                  lines: Sequence[tuple[str, float, float]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Each series as dots or a polyline, then the fitted lines; and their legend entries."""
    parts: list[str] = []
    legend: list[tuple[str, str]] = []
    for index, item in enumerate(series):
        css = f"series-{index % 6}"
        drawn = [(frame.sx(x), frame.sy(y)) for x, y in item.points if math.isfinite(x) and math.isfinite(y)]
        if item.style == "scatter":
            parts += [f'<circle class="{css} dot" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>' for x, y in drawn]
        elif drawn:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in drawn)
            parts.append(f'<polyline class="{css} line" points="{path}"/>')
        legend.append((f"{css}-text", item.label))
    x_min, x_max = frame.x_min, frame.x_max
    for label, slope, intercept in lines:
        parts.append(f'<line class="fit" x1="{frame.sx(x_min):.1f}" y1="{frame.sy(slope * x_min + intercept):.1f}" '
                     f'x2="{frame.sx(x_max):.1f}" y2="{frame.sy(slope * x_max + intercept):.1f}"><title>'
                     f"{escape(label)}</title></line>")
        legend.append(("fit-text", label))
    return parts, legend


def _axis_labels(x_label: str, y_label: str, plot_w: float, plot_h: float) -> list[str]:
    """The x label under the plot, the y label turned along its left side."""
    parts = []
    if x_label:
        parts.append(f'<text class="label" x="{MARGIN_LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" '
                     f'text-anchor="middle">{escape(x_label)}</text>')
    if y_label:
        parts.append(f'<text class="label" x="12" y="{MARGIN_TOP + plot_h / 2:.1f}" text-anchor="middle" '
                     f'transform="rotate(-90 12 {MARGIN_TOP + plot_h / 2:.1f})">{escape(y_label)}</text>')
    return parts


def _legend(entries: Sequence[tuple[str, str]]) -> list[str]:
    """(css class, label) entries in the title row, right-aligned, so that they never hide a line."""
    parts = []
    right: float = WIDTH - MARGIN_RIGHT
    for css, label in reversed(entries):
        parts.append(f'<text class="legend {css}" x="{right}" y="18" text-anchor="end">{escape(label)}</text>')
        right -= LEGEND_CHAR_WIDTH * len(label) + 14
    return parts


def _time_ticks(low: float, high: float) -> list[float]:
    """Ticks on round clock times (every 10 s ... 6 h) for a time axis."""
    span = high - low
    step = next((s for s in (10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600) if span / s <= 6), 43200)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) // step) + 1)]

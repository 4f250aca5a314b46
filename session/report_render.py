"""Render a :class:`session.report.Summary` as Markdown or as one self-contained HTML page.

Both formats come from the same list of :class:`Section` (facts, tables), so
they cannot disagree; the HTML page adds inline SVG charts
(:mod:`session.svgplot`) and a small stylesheet, and loads nothing from anywhere.
"""

from __future__ import annotations

import dataclasses
import time
from html import escape
from typing import Any
from collections.abc import Sequence

from crdscope.base.version import __version__
from crdscope.base.fit import LinearFit

from crdscope.findings.model import format_duration
from .report import Summary
from .svgplot import Series, chart

DASH = "—"


@dataclasses.dataclass
class Table:
    header: Sequence[str]
    rows: list[Sequence[str]]


@dataclasses.dataclass
class Section:
    title: str
    facts: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    tables: list[Table] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    charts: list[str] = dataclasses.field(default_factory=list)  # HTML only


def clock(timestamp: float | None, with_date: bool = False) -> str:
    if timestamp is None:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S" if with_date else "%H:%M:%S", time.localtime(timestamp))


def fmt(value: Any, unit: str = "", digits: int | None = None) -> str:
    """A figure for people: ``DASH`` when unknown; whole numbers without decimals unless
    ``digits`` asks for them (seconds always get two)."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif digits is None and unit != "s" and (isinstance(value, int) or (
            isinstance(value, float) and value.is_integer() and abs(value) < 1e15)):
        text = f"{int(value):,}"
    elif isinstance(value, (int, float)):
        text = f"{value:,.{2 if digits is None else digits}f}"
    else:
        text = str(value)
    return f"{text} {unit}".rstrip()


def sections(summary: Summary) -> list[Section]:
    """The report's content, format-neutral."""
    out = [_session(summary), _crds(summary), _discovery(summary), _apf(summary), _openapi(summary),
           _memory(summary), _availability(summary)]
    if summary.slo_breaches:
        out.append(Section("Latency SLOs", facts=[("Breached", ", ".join(summary.slo_breaches))]))
    out.append(_findings(summary))
    out.append(_events(summary))
    return out


def _findings(s: Summary) -> Section:
    section = Section("Findings (derived from the samples)")
    if s.findings:
        rows: list[Sequence[str]] = [[clock(c.timestamp), c.change, c.finding.severity.value, c.finding.title,
                 format_duration(c.duration_seconds) if c.change == "closed" else ""] for c in s.findings]
        section.tables.append(Table(["time", "change", "severity", "finding", "open for"], rows))
    else:
        section.notes.append("No findings.")
    return section


def _session(s: Summary) -> Section:
    cluster = s.cluster
    section = Section("Session", facts=[
        ("Cluster", f"{cluster.server} (context {cluster.context or DASH})"),
        ("Kubernetes", cluster.kubernetes_version or DASH),
        ("Recorded by", f"crdscope {s.header.get('crdscope_version', '?')}"),
        ("From", clock(s.start, with_date=True)),
        ("To", clock(s.end, with_date=True)),
        ("Duration", format_duration(s.duration) if s.duration is not None else DASH),
        ("Samples", ", ".join(f"{probe} {n}" for probe, n in sorted(s.samples.items())) or DASH),
    ])
    if s.damage is not None:
        section.notes.append(f"The recording is damaged: {s.damage.message()}.")
    elif not s.ended_cleanly:
        section.notes.append("The recording has no end record: crdscope stopped without closing it "
                             "(killed or crashed); everything written before is included.")
    return section


def _crds(s: Summary) -> Section:
    section = Section("CRDs", facts=[
        ("At start", fmt(s.crds_start)), ("At end", fmt(s.crds_end)),
        ("Loaded", fmt(s.crds_loaded)), ("Rate", fmt(s.load_rate_per_s, "CRDs/s")),
        ("Measured by", s.load_source or DASH),
    ])
    if s.loader:
        section.facts += [(f"Loader {k.replace('_', ' ')}", fmt(v)) for k, v in s.loader.items() if v is not None]
    counts = s.series.get("crds:inventory") or s.series.get("crds:health") or []
    section.charts.append(chart("CRDs installed", [Series("CRDs", counts)], time_axis=True, y_label="CRDs",
                                bands=_bands(s), markers=_markers(s)))
    return section


def _discovery(s: Summary) -> Section:
    section = Section("Discovery")
    points = [("start", s.discovery_start), ("end", s.discovery_end)]
    names: list[str] = []
    for _, point in points:
        for model in point.models if point else ():
            if model.name not in names:
                names.append(model.name)
    rows: list[Sequence[str]] = []
    for label, point in points:
        if point is None:
            continue
        by_name = {m.name: m for m in point.models}
        model_cells = []
        for name in names:
            measured = by_name.get(name)
            if measured is None or measured.seconds is None:
                model_cells.append(DASH)
            else:
                waited = f" (waited {measured.waited_seconds:.2f})" if measured.waited_seconds else ""
                model_cells.append(f"{measured.seconds:.2f} s{waited}")
        rows.append([label, clock(point.timestamp), point.mode or DASH, fmt(point.group_versions),
                     fmt(point.resources), fmt(point.seconds, "s", 3), *model_cells])
    if rows:
        section.tables.append(Table(["", "time", "mode", "group-versions", "resources", "measured",
                                     *names], rows))
    else:
        section.notes.append("No discovery sample was recorded.")
    series = [Series("measured", s.series.get("discovery_seconds", [])),
              Series("kubectl 1.24+ model", s.series.get("discovery_kubectl_124", []))]
    section.charts.append(chart("Discovery seconds", series, time_axis=True, y_label="seconds",
                                bands=_bands(s), markers=_markers(s)))
    return section


def _apf(s: Summary) -> Section:
    section = Section("API Priority and Fairness", facts=[
        ("Peak rejections", f"{fmt(s.apf_peak_per_s, '/s')} at {clock(s.apf_peak_at)} ({s.apf_peak_levels})"
         if s.apf_peak_per_s else "none recorded"),
        ("429s received by crdscope", fmt(s.responses_429)),
    ])
    section.charts.append(chart("APF rejections", [Series("rejected/s", s.series.get("apf_rejected_per_s", []))],
                                time_axis=True, y_label="requests/s", bands=_bands(s), markers=_markers(s)))
    return section


def _openapi(s: Summary) -> Section:
    section = Section("OpenAPI publication", facts=[
        ("Peak backlog", f"{fmt(s.backlog_peak)} at {clock(s.backlog_peak_at)}" if s.backlog_peak else
         fmt(s.backlog_peak)),
    ])
    if s.openapi_lag:
        keys = []
        for figures in s.openapi_lag.values():
            keys += [k for k in figures if k not in keys]
        lag_rows: list[Sequence[str]] = [[stage, *(fmt(figures.get(k), "" if k == "count" else "s") for k in keys)]
                                         for stage, figures in s.openapi_lag.items()]
        section.tables.append(Table(["stage (lag)", *keys], lag_rows))
    else:
        section.notes.append("No OpenAPI lag percentiles were recorded.")
    section.charts.append(chart("OpenAPI backlog", [Series("backlog", s.series.get("openapi_backlog", []))],
                                time_axis=True, y_label="CRDs", bands=_bands(s), markers=_markers(s)))
    return section


def _memory(s: Summary) -> Section:
    section = Section("Memory", facts=[
        ("Memory per CRD", f"{fmt(s.mib_per_crd, 'MiB', 3)} (fit R² {fmt(s.r2, '', 3)}, "
                           f"{fmt(s.fit_points)} samples at {fmt(s.fit_crd_counts)} CRD counts)"),
        ("Heap per CRD", fmt(s.heap_mib_per_crd, "MiB", 3)),
        ("Open descriptors per CRD", fmt(s.fds_per_crd, "", 3)),
        ("Resident memory", f"{fmt(_mib(s.rss_start), 'MiB', 0)} → {fmt(_mib(s.rss_end), 'MiB', 0)}"),
    ])
    # The line drawn is the fit of the process the reported slope belongs to (one per process).
    fitted_start = s.fit_start_time if s.fit_start_time is not None else (
        s.memory_points[-1][2] if s.memory_points else None)
    current = [(crds, rss) for crds, rss, start in s.memory_points if start == fitted_start]
    others = [(crds, rss) for crds, rss, start in s.memory_points if start != fitted_start]
    lines = []
    if s.mib_per_crd is not None and current:
        # The line has the slope reported above (the health probe's fit over all its samples), placed
        # through the points shown: a second, different slope in the legend would contradict the fact.
        mean_x = sum(c for c, _ in current) / len(current)
        mean_y = sum(r for _, r in current) / len(current)
        lines.append((f"{s.mib_per_crd:.3f} MiB/CRD (reported fit)", s.mib_per_crd,
                      mean_y - s.mib_per_crd * mean_x))
    else:
        fit = LinearFit()
        for crds, rss in current:
            fit.add(crds, rss)
        result = fit.result()
        if result is not None:
            lines.append((f"fit of these points {result.slope:.3f} MiB/CRD", result.slope, result.intercept))
    series = [Series("RSS", current, "scatter")]
    if others:
        series.append(Series("RSS, other API server processes", others, "scatter"))
    section.charts.append(chart("Resident memory against CRDs", series,
                                x_label="CRDs", y_label="MiB", lines=lines, y_from_zero=False))
    return section


def _availability(s: Summary) -> Section:
    section = Section("Restarts and outages", facts=[
        ("Restarts", f"{len(s.restarts)}" + (f" (at {', '.join(clock(t) for t in s.restarts)})"
                                              if s.restarts else "")),
        ("Outage windows", str(len(s.outages))),
    ])
    if s.outages:
        section.tables.append(Table(["start", "end", "duration", "reason"], [
            [clock(w.start), clock(w.end) if w.end is not None else "(still down)", format_duration(w.seconds),
             w.reason or DASH] for w in s.outages]))
    return section


def _events(s: Summary) -> Section:
    source = "recorded live" if s.recorded_events else "derived from the samples"
    section = Section(f"Events ({source})")
    if s.events:
        section.tables.append(Table(["time", "severity", "probe", "event"],
                                    [[clock(e.timestamp), e.severity, e.probe, e.message] for e in s.events]))
    else:
        section.notes.append("No events.")
    return section


def _mib(value: float | None) -> float | None:
    return None if value is None else value / float(1 << 20)


def _bands(s: Summary) -> list[tuple[float, float]]:
    return [(w.start, w.end if w.end is not None else (s.end or w.start)) for w in s.outages]


def _markers(s: Summary) -> list[tuple[float, str]]:
    return [(t, "restart") for t in s.restarts]


# --------------------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(summary: Summary, level: int = 1) -> str:
    """The report as GitHub-flavoured Markdown (``level``: its title's heading level; a fleet
    report nests each cluster's one level down)."""
    lines = [f"{'#' * level} crdscope session report: {summary.cluster.server}", ""]
    for section in sections(summary):
        lines += [f"{'#' * (level + 1)} {section.title}", ""]
        lines += [f"- **{key}**: {_md_cell(value)}" for key, value in section.facts]
        if section.facts:
            lines.append("")
        for table in section.tables:
            lines.append("| " + " | ".join(_md_cell(h) for h in table.header) + " |")
            lines.append("|" + "---|" * len(table.header))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
            lines.append("")
        for note in section.notes:
            lines += [f"> {note}", ""]
    lines.append(f"_Report by crdscope {__version__} from {summary.path.name}._")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- HTML

#: The charts' rules (svgplot's classes), also used alone by a standalone SVG (bench versions).
SVG_STYLE = """
svg .title { font-weight: bold; font-size: 13px; } svg .tick, svg .legend, svg .label { font-size: 11px; }
svg .grid { stroke: gainsboro; } svg .axis { stroke: gray; }
svg polyline.line { fill: none; stroke-width: 1.8; } svg .band { fill: mistyrose; } svg .marker { stroke: crimson;
  stroke-dasharray: 4 3; } svg .fit { stroke: darkorange; stroke-width: 2; } svg .fit-text { fill: darkorange; }
svg .series-0 { stroke: steelblue; fill: steelblue; } svg .series-0-text { fill: steelblue; }
svg .series-1 { stroke: seagreen; fill: seagreen; } svg .series-1-text { fill: seagreen; }
svg .series-2 { stroke: purple; fill: purple; } svg .series-2-text { fill: purple; }
svg .empty { fill: gray; font-style: italic; font-size: 12px; }
svg .flat { fill: gray; font-style: italic; font-size: 12px; }
"""
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: black; background: white; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid silver; margin-top: 1.6em; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; } dd { margin: 0; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid silver; padding: 0.25em 0.6em; text-align: left; }
th { background: whitesmoke; }
.note { border-left: 4px solid orange; padding: 0.3em 0.8em; background: oldlace; }
svg.chart { width: 100%; max-width: 720px; height: auto; display: block; margin: 0.6em 0; }
""" + SVG_STYLE


def render_html(summary: Summary) -> str:
    """The report as one HTML page with inline SVG charts (no scripts, nothing fetched)."""
    title = f"crdscope session report: {summary.cluster.server}"
    return _page(title, _html_body(summary, 1))


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _html_body(summary: Summary, level: int) -> list[str]:
    """One cluster's report as HTML elements, its title an ``h<level>``."""
    title = f"crdscope session report: {summary.cluster.server}"
    body = [f"<h{level}>{escape(title)}</h{level}>"]
    for section in sections(summary):
        body.append(f"<section><h{level + 1}>{escape(section.title)}</h{level + 1}>")
        if section.facts:
            body.append("<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in section.facts)
                        + "</dl>")
        for table in section.tables:
            head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
            rows = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                           for row in table.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        body += [f'<p class="note">{escape(note)}</p>' for note in section.notes]
        body += section.charts
        body.append("</section>")
    body.append(f"<footer><small>Report by crdscope {escape(__version__)} from "
                f"{escape(summary.path.name)}.</small></footer>")
    return body


def render(summary: Summary, form: str) -> str:
    """``md`` or ``html``."""
    return render_html(summary) if form == "html" else render_markdown(summary)


def fleet_overview(summaries: Sequence[Summary]) -> Table:
    """One row per cluster of a fleet report: what each ended with."""
    rows: list[Sequence[str]] = []
    for s in summaries:
        worst = s.open_findings[0] if s.open_findings else None
        rows.append([s.cluster.context or s.cluster.server, s.cluster.kubernetes_version or "-",
                     fmt(s.crds_end), fmt(s.mib_per_crd, " MiB"), str(len(s.restarts)),
                     f"{worst.severity.value}: {worst.title}" if worst else "none", s.path.name])
    return Table(("cluster", "Kubernetes", "CRDs at the end", "MiB per CRD", "restarts", "worst open finding",
                  "recording"), rows)


def render_fleet(summaries: Sequence[Summary], form: str) -> str:
    """Several clusters' recordings (a fleet watch writes one per cluster) as one report: an
    overview row per cluster, then each cluster's report."""
    if len(summaries) == 1:
        return render(summaries[0], form)
    overview = fleet_overview(summaries)
    title = f"crdscope fleet report: {len(summaries)} clusters"
    if form == "html":
        head = "".join(f"<th>{escape(h)}</th>" for h in overview.header)
        rows = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in overview.rows)
        body = [f"<h1>{escape(title)}</h1>", f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"]
        for summary in summaries:
            body += ["<article>", *_html_body(summary, 2), "</article>"]
        return _page(title, body)
    lines = [f"# {title}", "", "| " + " | ".join(overview.header) + " |", "|" + "---|" * len(overview.header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in overview.rows]
    return "\n".join(lines) + "\n\n" + "\n".join(render_markdown(summary, 2) for summary in summaries)

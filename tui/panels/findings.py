"""The findings strip under the header: open findings, most severe first, one line each.

A critical finding also shows its first piece of evidence and what to do,
so the on-call engineer reads the verdict and the next step without knowing
which panel holds the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format import escape
from textual.widgets import Static

from crdscope.findings.model import Finding, Severity, format_duration, paging

if TYPE_CHECKING:
    from ..sessions import ClusterSession

#: Findings listed in the strip (one line each, cut at the edge); the rest are counted.
SHOWN = 2
ROLE = {Severity.CRITICAL: "probe-fail", Severity.WARNING: "probe-warn", Severity.INFO: "probe-idle"}


def finding_line(finding: Finding, now: float) -> str:
    """``● critical 12s  API server not answering: ...`` in the severity's role colour; an accepted
    one (``[[silence]]``) greyed, with its until and why."""
    running = format_duration(max(0.0, now - finding.since))
    if finding.accepted is not None:
        return (f"[$probe-idle]○ {finding.severity.value} {running} accepted[/]  {escape(finding.title)}  "
                f"[$probe-idle]({escape(finding.accepted_note)})[/]")
    role = ROLE[finding.severity]
    return f"[${role}]● {finding.severity.value} {running}[/]  {escape(finding.title)}"


def strip_markup(findings: list[Finding], now: float) -> str:
    """The strip's text: nothing open, or the findings with the worst one's evidence and remedy."""
    if not findings:
        return "[$probe-ok]no findings[/]"
    lines = [finding_line(f, now) for f in findings[:SHOWN]]
    more = f"+{len(findings) - SHOWN} more · " if len(findings) > SHOWN else ""
    lines[0] += f"  [$probe-idle]({more}f: evidence, cause, remedy)[/]"
    worst = findings[0]
    if worst.severity is Severity.CRITICAL and worst.pages:
        if worst.evidence:
            lines.append(f"  [$probe-idle]evidence:[/] {escape(worst.evidence[0])}")
        lines.append(f"  [$probe-idle]do:[/] {escape(worst.remedy)}")
    return "\n".join(lines)


class FindingsStrip(Static):
    """Open findings of one cluster's findings engine (refreshed every second and on each change)."""

    def __init__(self, cluster: ClusterSession, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cluster = cluster

    def on_mount(self) -> None:
        self.set_interval(1.0, self.redraw)
        self.redraw()

    def redraw(self) -> None:
        findings = self.cluster.current_findings()
        now = self.cluster.now()
        pages = paging(findings)
        self.set_class(bool(pages) and pages[0].severity is Severity.CRITICAL, "critical")
        self.display = bool(findings)  # nothing open: the panels keep the line
        self.update(strip_markup(findings, now))

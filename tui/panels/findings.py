"""A cluster's open findings, in one widget bound to its monitor screen's findings.

The widget has two forms.  The strip under the header lists the open findings, most severe
first, one line each; a critical one also shows its first piece of evidence and what to do, so
the on-call engineer reads the verdict and the next step without knowing which panel holds the
figures.  The header's status, before the probe chips, says the worst of them in a few words (the
critical finding and how long it has run, or how many warnings).  Both are bound to
``MonitorScreen.findings``, which the screen sets when its cluster's core judges a sample: they
redraw when the findings change, and their clock only runs the ages ("12s") while one is open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from textual.reactive import Reactive, reactive
from textual.timer import Timer

from crdscope.findings.model import Finding, Severity, format_duration, paging

from ..format import escape
from .text import TextView

if TYPE_CHECKING:
    from ..sessions import ClusterSession

#: Findings listed in the strip (one line each, cut at the edge); the rest are counted.
SHOWN = 2
ROLE = {Severity.CRITICAL: "probe-fail", Severity.WARNING: "probe-warn", Severity.INFO: "probe-idle"}
#: How often the ages of open findings move on.
AGES_EVERY_SECONDS = 1.0


def finding_line(finding: Finding, now: float) -> str:
    """``● critical 12s  API server not answering: ...`` in the severity's role colour; an accepted
    one (``[[silence]]``) greyed, with its until and why."""
    running = format_duration(max(0.0, now - finding.since))
    if finding.accepted is not None:
        return (f"[$probe-idle]○ {finding.severity.value} {running} accepted[/]  {escape(finding.title)}  "
                f"[$probe-idle]({escape(finding.accepted_note)})[/]")
    role = ROLE[finding.severity]
    return f"[${role}]● {finding.severity.value} {running}[/]  {escape(finding.title)}"


def strip_markup(findings: Sequence[Finding], now: float) -> str:
    """The strip's text: nothing while none is open, else the findings with the worst one's
    evidence and remedy."""
    if not findings:
        return ""
    lines = [finding_line(f, now) for f in findings[:SHOWN]]
    more = f"+{len(findings) - SHOWN} more · " if len(findings) > SHOWN else ""
    lines[0] += f"  [$probe-idle]({more}f: evidence, cause, remedy)[/]"
    worst = findings[0]
    if worst.severity is Severity.CRITICAL and worst.pages:
        if worst.evidence:
            lines.append(f"  [$probe-idle]evidence:[/] {escape(worst.evidence[0])}")
        lines.append(f"  [$probe-idle]do:[/] {escape(worst.remedy)}")
    return "\n".join(lines)


def status_markup(findings: Sequence[Finding], now: float) -> str:
    """The header's status: ``CRITICAL 12.0 s: API server not answering ·``, ``3 warning(s) ·``,
    or nothing when all is well (info findings are the strip's only; accepted ones, ``[[silence]]``,
    do not page: the strip lists them)."""
    findings = paging(tuple(findings))
    if not findings:
        return ""
    worst = findings[0]
    if worst.severity is Severity.CRITICAL:
        running = format_duration(max(0.0, now - worst.since))
        return f"[$probe-fail b]CRITICAL {running}: {escape(worst.title)}[/] ·"
    if worst.severity is Severity.WARNING:
        return f"[$probe-warn]{sum(1 for f in findings if f.severity is Severity.WARNING)} warning(s)[/] ·"
    return ""


def is_critical(findings: Sequence[Finding]) -> bool:
    """A critical finding that pages is open (most severe first: the first one says; an accepted
    one, ``[[silence]]``, does not page)."""
    pages = paging(tuple(findings))
    return bool(pages) and pages[0].severity is Severity.CRITICAL


Form = Literal["strip", "status"]
FORMS: dict[Form, Callable[[Sequence[Finding], float], str]] = {"strip": strip_markup, "status": status_markup}


class FindingsView(TextView):
    """One cluster's open findings as the strip or the header's status, drawn from ``findings``
    (bound to the monitor screen's) and the cluster's clock; hidden while it has nothing to say."""

    #: Open findings, most severe first (bound: the screen, or the header, sets them).
    findings: Reactive[tuple[Finding, ...]] = reactive((), init=False)

    def __init__(self, cluster: ClusterSession, *, form: Form = "strip", id: str | None = None) -> None:
        super().__init__(id=id)
        self.cluster = cluster
        self.form = form
        self._ages: Timer | None = None

    def on_mount(self) -> None:
        self._ages = self.set_interval(AGES_EVERY_SECONDS, self.redraw, pause=not self.findings)
        self.redraw()

    def watch_findings(self, findings: tuple[Finding, ...]) -> None:
        if self._ages is not None:  # the ages run only while a finding is open
            if findings:
                self._ages.resume()
            else:
                self._ages.pause()
        self.redraw()

    def redraw(self) -> None:
        """Draw the bound findings with their ages now (the core is not read); "" while hidden."""
        findings = self.findings
        self.show(FORMS[self.form](findings, self.cluster.now()))
        self.set_class(is_critical(findings), "critical")
        self.display = bool(self.shown)  # nothing open: the panels keep the line

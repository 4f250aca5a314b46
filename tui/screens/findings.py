"""The findings screen: every open finding, and for the one selected its evidence, cause and remedy.

The strip under the header has room for two lines; this screen is where the
on-call engineer reads the whole verdict.  It lists one cluster's open findings
(most severe first) and redraws every second, so a finding that closes while
the screen is open leaves the list and a new one joins it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from ..format import escape
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from crdscope.findings.model import Finding, format_duration

from ..panels.findings import ROLE, finding_line

if TYPE_CHECKING:
    from ..sessions import ClusterSession


def finding_details(finding: Finding, now: float) -> str:
    """Markup of one finding in full: severity and duration, evidence, likely cause, what to do."""
    role = ROLE[finding.severity]
    opened = time.strftime("%H:%M:%S", time.localtime(finding.since)) if finding.since else "?"
    lines = [f"[b]{escape(finding.title)}[/b]",
             f"[${role}]{finding.severity.value}[/] for {format_duration(max(0.0, now - finding.since))}"
             f" (since {opened})  [$probe-idle]{escape(finding.id)}[/]", ""]
    if finding.accepted is not None:
        lines += [f"[b]Accepted[/b] until {escape(finding.accepted.until_text)} for {escape(finding.accepted.cluster)}"
                  f" (it does not page until then)", f"  {escape(finding.accepted.why)}", ""]
    lines.append("[b]Evidence[/b]")
    lines += [f"  {escape(item)}" for item in finding.evidence] or ["  [$probe-idle](none recorded)[/]"]
    lines += ["", "[b]Likely cause[/b]", f"  {escape(finding.cause)}", "", "[b]What to do[/b]",
              f"  {escape(finding.remedy)}"]
    return "\n".join(lines)


class FindingsScreen(ModalScreen[None]):
    """Open findings as a list; the highlighted one in full below it."""

    BINDINGS = [Binding("escape,f,q", "close", "Close")]

    def __init__(self, source: ClusterSession, *, cluster: str = "") -> None:
        super().__init__(classes="dialog-screen")
        self._shown: list[Finding] = []
        #: The cluster whose open findings are listed.
        self.source = source
        #: Its name in the title (a fleet's cluster; "" when only one is watched).
        self.cluster = cluster

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog findings"):
            yield Static(f"Findings of {escape(self.cluster)}" if self.cluster else "Findings", classes="dialog-title")
            yield OptionList(id="findings-list")
            with VerticalScroll(id="finding-details-scroll"):
                yield Static(id="finding-details")
            yield Static("[dim]up/down: choose · escape, f or q: close[/dim]", classes="dialog-note")

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(1.0, self.redraw)
        self.query_one(OptionList).focus()

    def _now(self) -> float:
        return self.source.now()

    def _open_findings(self) -> list[Finding]:
        return self.source.current_findings()

    def redraw(self) -> None:
        """Refresh the list (keeping the selected finding when it is still open) and the details."""
        findings, now = self._open_findings(), self._now()
        options = self.query_one(OptionList)
        selected = self._selected()
        if [f.id for f in findings] != [f.id for f in self._shown]:
            options.clear_options()
            options.add_options([Option(finding_line(f, now), id=f.id) for f in findings])
            ids = [f.id for f in findings]
            if findings:
                options.highlighted = ids.index(selected.id) if selected and selected.id in ids else 0
        else:
            for index, finding in enumerate(findings):  # durations run
                options.replace_option_prompt_at_index(index, finding_line(finding, now))
        self._shown = findings
        self._show_details()

    def _selected(self) -> Finding | None:
        index = self.query_one(OptionList).highlighted
        return self._shown[index] if index is not None and 0 <= index < len(self._shown) else None

    def _show_details(self) -> None:
        details = self.query_one("#finding-details", Static)
        finding = self._selected()
        if finding is None:
            details.update("[$probe-ok]no findings[/]: nothing the probes measure is out of bounds")
        else:
            details.update(finding_details(finding, self._now()))

    def on_option_list_option_highlighted(self, _event: OptionList.OptionHighlighted) -> None:
        self._show_details()

    def action_close(self) -> None:
        self.dismiss(None)

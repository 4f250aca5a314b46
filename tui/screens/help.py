"""The help screen: keys, the palette, and what the panels show."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from ..format import escape
from textual.widgets import Static

from crdscope.base.samples.footprint import FootprintSample, table

from ..panels.base import ProbePanel
from .monitor import PANELS

#: Columns of a panel's key and label in the help's list (the label's longest is "Inventory").
LABEL_WIDTH = 12

HELP = """\
[b]crdscope[/b]: a Kubernetes API server under CRD pressure, live.

[b]Keys[/b]
  [b]?[/b]        this help            [b]q[/b]  quit
  [b]p[/b]        pause / resume the probes
  [b]l[/b]        loader: start, pause, resume, stop, clean (asks first)
  [b]t[/b]        next theme           [b]s[/b]  save an SVG screenshot
  [b]e[/b]        estimate: what installing a source would cost this API server
  [b]f[/b]        findings: each open one's evidence, likely cause and remedy
  [b]1[/b]-[b]{last_key}[/b]      show a panel (tabbed layout, small terminals)
  [b]ctrl+p[/b]   command palette: every action, themes, lab faults

[b]Fleet[/b] (several --context: one row per cluster)
  [b]up[/b]/[b]down[/b]  choose a cluster     [b]enter[/b]  its full monitor
  [b]escape[/b]   from a cluster's monitor back to the fleet
  [b]o[/b]        sort by next column  [b]r[/b]  reverse the sort
  [b]e[/b] [b]f[/b]      estimate and findings of the chosen cluster
  [b]l[/b]        load the same source into every cluster
  [b]p[/b]        pause / resume every cluster's probes
  [b]c[/b]        two clusters side by side ([b]1[/b]/[b]2[/b] open one, [b]c[/b] back)

[b]Panels[/b]
{panels}

Each panel's first line says how fresh its figures are; while the API
server is away it counts the time since the last good sample.

[b]What watching costs the server[/b] (the header's "own" figure)
{footprint}

[dim]escape, ? or q closes this help[/dim]"""


def panel_lines(panels: Sequence[type[ProbePanel]]) -> list[str]:
    """``  1 Loader      progress of crdscope's own CRD load``: each panel with its key (tab order)
    and what it shows, its second line under the first."""
    lines = []
    for key, panel in enumerate(panels, start=1):
        label = escape(panel.tab_label or panel.panel_title)
        first, *more = panel.shows.split("\n")
        lines.append(f"  [b]{key}[/b] {label}{' ' * max(1, LABEL_WIDTH - len(label))}{escape(first)}")
        lines += [f"  {' ' * (LABEL_WIDTH + 2)}{escape(line)}" for line in more]
    return lines


def help_text(panels: Sequence[type[ProbePanel]], footprint: FootprintSample | None) -> str:
    """The help's markup: keys (the panel keys as many as ``panels``), the panels, the footprint."""
    lines = table(footprint) if footprint is not None else ["not measured yet"]
    return (HELP.replace("{last_key}", str(len(panels)))
            .replace("{panels}", "\n".join(panel_lines(panels)))
            .replace("{footprint}", "\n".join("  " + escape(line) for line in lines)))


class HelpScreen(ModalScreen[None]):
    """Keys and panels, dismissed by escape, ? or q."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, footprint: FootprintSample | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.footprint = footprint

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog help"):
            yield Static(help_text(PANELS, self.footprint), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)

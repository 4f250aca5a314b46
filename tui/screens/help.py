"""The help screen: keys, the palette, and what the panels show."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from ..format import escape
from textual.widgets import Static

from crdscope.base.samples.footprint import FootprintSample, table

HELP = """\
[b]crdscope[/b]: a Kubernetes API server under CRD pressure, live.

[b]Keys[/b]
  [b]?[/b]        this help            [b]q[/b]  quit
  [b]p[/b]        pause / resume the probes
  [b]l[/b]        loader: start, pause, resume, stop, clean (asks first)
  [b]t[/b]        next theme           [b]s[/b]  save an SVG screenshot
  [b]e[/b]        estimate: what installing a source would cost this API server
  [b]f[/b]        findings: each open one's evidence, likely cause and remedy
  [b]1[/b]-[b]7[/b]      show a panel (tabbed layout, small terminals)
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
  Loader      progress of crdscope's own CRD load
  Inventory   CRDs by state and by owner, install rate and ETA
  Discovery   aggregated and legacy latency; what kubectl's limits cost
  APF         API Priority and Fairness: queues, seats, rejections, 429s
  OpenAPI     v3 paths, publication backlog and lag, v2 size and build time
  Health      memory against the number of CRDs (fitted MiB per CRD),
              restarts, readyz, canary latency against the SLOs
  Events      transitions worth attention, once each

Each panel's first line says how fresh its figures are; while the API
server is away it counts the time since the last good sample.

[b]What watching costs the server[/b] (the header's "own" figure)
{footprint}

[dim]escape, ? or q closes this help[/dim]"""


class HelpScreen(ModalScreen[None]):
    """Keys and panels, dismissed by escape, ? or q."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, footprint: FootprintSample | None = None) -> None:
        super().__init__(classes="dialog-screen")
        self.footprint = footprint

    def compose(self) -> ComposeResult:
        lines = table(self.footprint) if self.footprint is not None else ["not measured yet"]
        text = HELP.replace("{footprint}", "\n".join("  " + escape(line) for line in lines))
        with VerticalScroll(classes="dialog help"):
            yield Static(text, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)

"""The fleet screen: one row per watched cluster, sortable, updated live (issue 28).

The default screen when the monitor watches two or more clusters.  Each row is
:func:`tui.fleet_figures.figures_of` a cluster's store; Enter opens that cluster's full
monitor (Escape comes back), ``o`` cycles the sort column and ``r`` reverses it, ``l`` starts
the same load into every cluster, and with exactly two clusters ``c`` shows them compared.
The app's ``e`` and ``f`` (estimate, findings) act on the selected row's cluster.

However many samples arrive, the table redraws at most every ``MIN_REDRAW_SECONDS``: a
fleet of twenty clusters sends hundreds of samples a minute, and a key press must not wait
behind a redraw per sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from ..format import escape
from textual.widgets import Static

from ..footer import KeyFooter
from ..fleet_figures import COLUMNS, ClusterFigures, figures_of, sort_rows
from ..panels.text import columns
from .throttled import ThrottledScreen

if TYPE_CHECKING:
    from ..sessions import ClusterSession


class FleetScreen(ThrottledScreen):
    """Every cluster's key figures, one row each."""

    CSS_PATH = "fleet.tcss"
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("enter", "open", "Open"),
        Binding("o", "next_sort", "Sort column"),
        Binding("r", "reverse_sort", "Reverse"),
        Binding("c", "compare", "Compare"),
        Binding("l", "load_everywhere", "Load all"),
    ]

    def __init__(self) -> None:
        super().__init__(id="fleet")
        #: Index into COLUMNS of the sort column, and its direction.
        self.sort_index = 0
        self.descending = False
        #: The selected cluster (by name, so that it stays selected when rows reorder).
        self.selected = ""
        self.rows: list[ClusterFigures] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="fleet-title")
        yield Static("", id="fleet-table")
        yield Static("", id="fleet-sort")
        yield KeyFooter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "compare":
            return len(self.monitor_app.sessions) == 2
        return True

    @property
    def sort_column(self) -> str:
        return COLUMNS[self.sort_index].header

    def draw(self) -> None:
        app = self.monitor_app
        self.rows = sort_rows([figures_of(s) for s in app.sessions], COLUMNS[self.sort_index], self.descending)
        names = [row.name for row in self.rows]
        if self.selected not in names:
            self.selected = names[0] if names else ""
        table = columns([c.header for c in COLUMNS], [[c.cell(row) for c in COLUMNS] for row in self.rows],
                        max_widths=[24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 48])
        lines = table.split("\n")
        for index, row in enumerate(self.rows, start=1):
            mark = "▶ " if row.name == self.selected else "  "
            lines[index] = (f"[reverse]{mark}{lines[index]}[/reverse]" if row.name == self.selected
                            else mark + lines[index])
        lines[0] = "  " + lines[0]
        self.query_one("#fleet-table", Static).update("\n".join(lines))
        critical = sum(1 for r in self.rows if r.worst is not None and r.worst.pages and r.worst.severity.rank == 2)
        title = f"[b]crdscope[/b] · fleet of [b]{len(self.rows)}[/b] clusters"
        if critical:
            title += f" · [$probe-fail b]{critical} critical[/]"
        paused = sum(1 for s in app.sessions if s.probes_paused)
        if paused:
            title += f" · [$probe-warn b]⏸ probes paused in {paused}[/]"
        self.query_one("#fleet-title", Static).update(title)
        arrow = "▼" if self.descending else "▲"
        self.query_one("#fleet-sort", Static).update(
            f"sorted by [b]{escape(self.sort_column)}[/b] {arrow} · o: next column · r: reverse · "
            "enter: open the selected cluster (escape comes back)")

    # -- actions -------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        names = [row.name for row in self.rows]
        if not names:
            return
        at = names.index(self.selected) if self.selected in names else 0
        self.selected = names[max(0, min(len(names) - 1, at + step))]
        self.redraw()

    def selected_session(self) -> ClusterSession | None:
        """The highlighted row's cluster (what Enter opens and ``e``/``f`` act on)."""
        return next((s for s in self.monitor_app.sessions if s.name == self.selected), None)

    def action_open(self) -> None:
        """The selected cluster's full monitor."""
        session = self.selected_session()
        if session is not None:
            self.monitor_app.open_session(session)

    def action_next_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(COLUMNS)
        self.redraw()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self.redraw()

    def action_compare(self) -> None:
        if len(self.monitor_app.sessions) == 2:
            from .compare import CompareScreen

            self.app.push_screen(CompareScreen())

    def action_load_everywhere(self) -> None:
        """The same source into every cluster at the same pace."""
        self.monitor_app.load_everywhere()

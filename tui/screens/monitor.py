"""The main screen: header, the panels (a grid on a large terminal, tabs on a small one), footer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Grid
from textual.geometry import Size
from textual.reactive import Reactive, reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from crdscope.findings.model import Finding

from ..footer import KeyFooter
from ..header import ClusterHeader
from ..panels.findings import FindingsView
from ..panels.base import ProbePanel
from ..panels.discovery import DiscoveryPanel
from ..panels.events import EventsPanel
from ..panels.health import HealthPanel
from ..panels.inventory import InventoryPanel
from ..panels.loader import LoaderPanel
from ..panels.openapi import OpenAPIPanel
from ..panels.throttling import ThrottlingPanel
from ..host import host_of

if TYPE_CHECKING:
    from crdscope.session.core import Taken

    from ..sessions import ClusterSession

class PanelPlace(NamedTuple):
    """A panel's row in the monitor: the panel, its cell in the grid (three columns, rows as many as
    needed), and whether it spans two columns there."""

    panel: type[ProbePanel]
    cell: int
    wide: bool = False


#: Every panel once, in tab order (and the number keys, 1 to 9 at most: what someone watching an
#: install looks at first), with its place in the grid.  A new panel needs only its row here: the
#: keys, the tabs, the grid and the help screen follow.
PANEL_PLACES: tuple[PanelPlace, ...] = (
    PanelPlace(LoaderPanel, 0), PanelPlace(InventoryPanel, 1), PanelPlace(DiscoveryPanel, 3, wide=True),
    PanelPlace(ThrottlingPanel, 4), PanelPlace(OpenAPIPanel, 2), PanelPlace(HealthPanel, 5, wide=True),
    PanelPlace(EventsPanel, 6),
)
PANELS: tuple[type[ProbePanel], ...] = tuple(place.panel for place in PANEL_PLACES)
#: The grid's rows in the order the grid fills its cells.
GRID_ORDER: tuple[PanelPlace, ...] = tuple(sorted(PANEL_PLACES, key=lambda place: place.cell))
#: Below either size the panels collapse into tabs (80x24 is the classic terminal).
GRID_MIN_WIDTH = 150
GRID_MIN_HEIGHT = 40


def layout_for(size: Size) -> str:
    """``grid`` on a large terminal, else ``tabs``."""
    return "grid" if size.width >= GRID_MIN_WIDTH and size.height >= GRID_MIN_HEIGHT else "tabs"


class PanelTabs(Container):
    """The panels as tabs (small terminals)."""

    def __init__(self, cluster: ClusterSession, *, initial: str = "") -> None:
        super().__init__(id="tab-layout")
        self.cluster = cluster
        self.initial = initial

    def compose(self) -> ComposeResult:
        with TabbedContent(id="tabs", initial=self.initial):
            for panel in PANELS:
                with TabPane(panel.tab_label or panel.panel_title, id=f"tab-{panel.key()}"):
                    yield panel(self.cluster)


class MonitorScreen(Screen[None]):
    """Every panel of one cluster (its session's store)."""

    #: The cluster's open findings, most severe first, as its core judged them at the last sample:
    #: the header's status and the findings strip are bound to them (they redraw when they change).
    findings: Reactive[tuple[Finding, ...]] = reactive((), init=False)

    BINDINGS = [
        *(Binding(str(n), f"show_panel({n - 1})", show=False) for n in range(1, len(PANELS) + 1)),
        Binding("escape", "back", "Fleet"),
    ]

    def __init__(self, cluster: ClusterSession, *, layout: str | None = None, back: bool = False,
                 name: str = "monitor") -> None:
        # A fleet keeps one monitor screen per cluster: each needs an id of its own.
        super().__init__(id=name)
        #: The cluster shown (the header, the findings strip and every panel read it).
        self.cluster = cluster
        self.store = cluster.store
        #: Opened from the fleet (or compare) screen: Escape goes back to it.
        self.back = back
        #: Forced layout ("grid"/"tabs") for tests; None follows the terminal size.
        self.forced_layout = layout
        self.layout_mode = ""
        self._active_tab: str | None = None
        self._first_frame: list[Callable[[], None]] = []
        self.set_reactive(MonitorScreen.findings, tuple(cluster.current_findings()))

    def compose(self) -> ComposeResult:
        yield ClusterHeader(self.cluster, id="header").data_bind(MonitorScreen.findings)
        yield FindingsView(self.cluster, form="strip", id="findings-strip").data_bind(MonitorScreen.findings)
        # The panels are composed with the screen (not mounted after it): the first frame has them,
        # and Textual lays the screen out once rather than again for each later mount.
        self.layout_mode = self.forced_layout or layout_for(self.app.size)
        self.set_class(self.layout_mode == "grid", "-grid")
        self.set_class(self.layout_mode == "tabs", "-tabs")
        with Container(id="body"):
            yield self._panels_in(self.layout_mode)
        yield KeyFooter()

    def on_mount(self) -> None:
        for callback in self._first_frame:
            self.call_after_refresh(callback)

    def _panels_in(self, mode: str) -> Widget:
        """The panels laid out as ``mode``: a grid, or tabs."""
        if mode == "grid":
            return Grid(*(place.panel(self.cluster, wide=place.wide) for place in GRID_ORDER), id="grid")
        return PanelTabs(self.cluster, initial=self._active_tab or "")

    def after_first_frame(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the screen has drawn its panels the first time."""
        self._first_frame.append(callback)

    async def on_resize(self, event: events.Resize) -> None:
        await self.apply_layout(event.size)

    async def apply_layout(self, size: Size) -> None:
        """Build the grid or the tabs when the mode changes (panels redraw from the store)."""
        mode = self.forced_layout or layout_for(size)
        if mode == self.layout_mode:
            return
        body = self.query_one("#body", Container)
        if self.layout_mode == "tabs":
            self._active_tab = self.query_one(TabbedContent).active or None
        self.layout_mode = mode
        await body.remove_children()
        await body.mount(self._panels_in(mode))
        self.set_class(mode == "grid", "-grid")
        self.set_class(mode == "tabs", "-tabs")

    def panels(self) -> list[ProbePanel]:
        return list(self.query(ProbePanel))

    def panel(self, cls: type[ProbePanel]) -> ProbePanel:
        """The mounted panel of a class."""
        return self.query_one(cls)

    def sample_taken(self, taken: Taken) -> None:
        """What a sample of this cluster caused: the panels of its probe (and the events panel, for
        new events) redraw; the findings are read again when the core reports a change or one is
        open (an open finding's title and evidence carry figures the next sample may change)."""
        self.probe_changed(taken.sample.probe)
        if taken.events:
            self.probe_changed("events")
        if taken.changes or self.findings:
            self.findings_changed()

    def probe_changed(self, probe: str) -> None:
        """Tell the panels that render ``probe`` (or ``events``) that the store has news."""
        for panel in self.query(ProbePanel):
            if probe in panel.probes:
                panel.changed()

    def findings_changed(self) -> None:
        """The core judged again: its open findings, which the bound widgets draw if they differ."""
        self.findings = tuple(self.cluster.current_findings())

    def refresh_header(self) -> None:
        self.query_one(ClusterHeader).redraw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Escape (and its footer key) only where there is a fleet to go back to.
        return self.back if action == "back" else True

    def action_back(self) -> None:
        """Back to the fleet (or compare) screen this monitor was opened from."""
        if self.back:  # only crdscope's app opens a monitor from a fleet
            # Closing it frees its widgets: collect after the fleet's frame, not inside the key.
            host_of(self).hold_collections()
            self.dismiss()

    def action_show_panel(self, index: int) -> None:
        """Bring panel ``index`` (tab order) into view."""
        if self.layout_mode != "tabs" or not 0 <= index < len(PANELS):
            return
        self.query_one(TabbedContent).active = f"tab-{PANELS[index].key()}"

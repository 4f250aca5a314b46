"""A new panel needs only its row in ``PANEL_PLACES`` (issue 45): the number keys, the tabs, the
grid (monitor.tcss unchanged) and the help screen follow the table."""

from __future__ import annotations

import itertools

import pytest
from textual.widgets import TabbedContent

from crdscope.tui.panels.base import ProbePanel
from crdscope.tui.screens import help as help_screen
from crdscope.tui.screens import monitor
from crdscope.tui.screens.help import HelpScreen, help_text
from crdscope.tui.screens.monitor import PANEL_PLACES, PANELS, MonitorScreen, PanelPlace
from tests.tui.conftest import widget_text
from tests.tui.test_snapshots import make_app, settle


class ToyPanel(ProbePanel):
    """A ninth panel (the eighth of the table: the findings strip is the first thing under the header)."""

    probes = ("toy",)
    panel_title = "Toy"
    tab_label = "Toy"
    shows = "what a toy probe saw"

    def draw(self) -> None:
        pass


def with_toy(monkeypatch, *, wide: bool) -> tuple[PanelPlace, ...]:
    """The table with the toy's row last (its cell after every other one), in force for the screens."""
    places = (*PANEL_PLACES, PanelPlace(ToyPanel, max(p.cell for p in PANEL_PLACES) + 1, wide=wide))
    panels = tuple(place.panel for place in places)
    monkeypatch.setattr(monitor, "PANELS", panels)
    monkeypatch.setattr(monitor, "GRID_ORDER", tuple(sorted(places, key=lambda place: place.cell)))
    monkeypatch.setattr(help_screen, "PANELS", panels)
    return places


def test_every_panel_says_what_it_shows_and_has_a_number_key():
    assert 1 <= len(PANELS) <= 9, "the number keys are 1 to 9"
    assert len({place.cell for place in PANEL_PLACES}) == len(PANEL_PLACES), "two panels in one cell"
    text = help_text(PANELS, None)
    assert f"[b]1[/b]-[b]{len(PANELS)}[/b]" in text
    for key, panel in enumerate(PANELS, start=1):
        assert panel.shows, f"{panel.__name__} says nothing for the help screen"
        label = panel.tab_label or panel.panel_title
        assert f"[b]{key}[/b] {label}" in text and panel.shows.split("\n")[0] in text, panel.__name__
    assert [binding.key for binding in MonitorScreen.BINDINGS][:len(PANELS)] == [
        str(n) for n in range(1, len(PANELS) + 1)]


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
async def test_a_ninth_panel_takes_its_place_in_the_grid_with_no_style_written(monkeypatch, recorded_samples, utc,
                                                                              wide):
    places = with_toy(monkeypatch, wide=wide)
    app = make_app(recorded_samples, layout="grid")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        screen = app.monitor_screen
        regions = {place.panel: screen.query_one(place.panel).region for place in places}
        for panel, region in regions.items():
            assert region.width >= 30 and region.height >= 6, (panel.__name__, region)
        for (a, first), (b, second) in itertools.combinations(regions.items(), 2):
            assert not first.overlaps(second), (a.__name__, b.__name__)
        # Every panel stays inside the grid, and a wide one spans two of its three columns.
        body = screen.query_one("#grid").region
        assert all(body.contains_region(region) for region in regions.values())
        column = body.width // 3
        for place in places:
            assert (regions[place.panel].width > 1.5 * column) == place.wide, place.panel.__name__


async def test_a_ninth_panel_has_its_tab_key_and_help_line(monkeypatch, recorded_samples, utc):
    with_toy(monkeypatch, wide=False)
    app = make_app(recorded_samples, layout="tabs")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        screen = app.monitor_screen
        assert len(screen.panels()) == len(PANELS) + 1
        screen.action_show_panel(len(PANELS))  # what its number key does
        await pilot.pause()
        assert screen.query_one(TabbedContent).active == "tab-toy" and screen.query_one(ToyPanel).region.height > 0
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = widget_text(app.screen)
        assert f"1-{len(PANELS) + 1}" in text and f"{len(PANELS) + 1} Toy" in text and ToyPanel.shows in text

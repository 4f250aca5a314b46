"""Snapshots of every panel and every theme, rendered from samples recorded on the lab.

The samples come from ``fixtures/lab-session.jsonl`` (a real session: the
monitor watching while the loader added 80 CRDs); the clock is fixed just after
the last sample, so "updated N s ago" and the plots' time axes are the same on
every run.  Update with ``pytest tests/tui/test_snapshots.py --snapshot-update``
after checking the new SVGs by eye.
"""

from __future__ import annotations

import pytest

from tests.helpers import async_wait_for
from tests.tui.conftest import ListFeed
from crdscope.themes import THEME_NAMES
from crdscope.findings.kubectl import KubectlClient
from crdscope.tui.app import CrdscopeApp
from crdscope.tui.screens.monitor import PANELS


#: The local kubectl every snapshot is drawn with (the machine's own would make them differ).
KUBECTL = KubectlClient("/usr/local/bin/kubectl", "v1.32.4", 1, 32)


def make_app(samples: list, *, theme: str = "crdscope-dark", layout: str | None = None) -> CrdscopeApp:
    clock = max(s.timestamp for s in samples) + 2.0
    return CrdscopeApp(ListFeed(samples), theme=theme, clock=lambda: clock, layout=layout, kubectl=KUBECTL)


async def settle(pilot) -> None:
    """Wait until every recorded sample is in the store, then draw every panel once, now."""
    app = pilot.app
    await async_wait_for(lambda: app.feed.delivered.is_set(), timeout=10, message="samples delivered")
    await async_wait_for(lambda: app.store.version >= len(app.feed.samples), timeout=10,
                         message="samples in the store")
    for panel in app.monitor_screen.panels():
        panel.redraw()
    app.monitor_screen.refresh_header()
    # The findings as the core holds them after the last sample: the messages that tell the screen
    # may still be queued, and a title that only changed its figure (the last latency sample's p99)
    # would otherwise show the one before, or not, depending on how fast the machine replays.
    app.monitor_screen.findings_changed()
    await pilot.pause()


@pytest.mark.parametrize("index", range(len(PANELS)), ids=[p.key() for p in PANELS])
def test_each_panel_at_80x24(snap_compare, recorded_samples, utc, index):
    """Each panel in its tab on a classic 80x24 terminal (the tabbed layout)."""

    async def show(pilot) -> None:
        await settle(pilot)
        await pilot.press(str(index + 1))
        await settle(pilot)

    assert snap_compare(make_app(recorded_samples), terminal_size=(80, 24), run_before=show)


@pytest.mark.parametrize("theme", THEME_NAMES)
def test_each_theme_on_a_large_terminal(snap_compare, recorded_samples, utc, theme):
    """Every panel at once (the grid layout) in each theme."""
    assert snap_compare(make_app(recorded_samples, theme=theme), terminal_size=(200, 60), run_before=settle)


def test_help_screen(snap_compare, recorded_samples, utc):
    async def help_open(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(recorded_samples), terminal_size=(80, 24), run_before=help_open)

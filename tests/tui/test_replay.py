"""``crdscope replay`` on screen: the monitor app fed by a recording, with its controls."""

from __future__ import annotations

import pytest

from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.version import VersionSample
from crdscope.session.recorder import ClusterInfo, Recorder
from crdscope.session.replay import read_recording
from tests.helpers import async_wait_for
from tests.tui.conftest import widget_text

START = 1_800_000_000.0


@pytest.fixture
def recording(tmp_path):
    """Two minutes of a made-up session: a sample of each probe every 2 s, a restart at t+60 s."""
    path = tmp_path / "tui.jsonl"
    with Recorder(path, ClusterInfo(server="https://10.1.2.3:6443", context="prod-eu", kubernetes_version="v1.37.2")) as rec:
        rec(VersionSample(timestamp=START, server="https://10.1.2.3:6443", git_version="v1.37.2", seconds=0.01))
        for i in range(60):
            t = START + 2 * i
            rec(InventorySample(timestamp=t + 0.5, crds=10 * i, established=10 * i))
            rec(HealthSample(timestamp=t + 1.0, crds=10 * i, rss_bytes=(300 + 3 * i) << 20, ready=True,
                             restarts=0 if i < 30 else 1, start_time=START - 100 if i < 30 else START + 59))
    return read_recording(path)


def store_count(app, probe: str) -> int:
    return len(app.store.history(probe))


async def test_replay_opens_the_monitor_with_the_bar_and_plays(recording):
    from crdscope.tui.replay_bar import ReplayBar, build_replay_app

    app = build_replay_app(recording, speed=0, layout="tabs")
    async with app.run_test(size=(100, 30)) as pilot:
        await async_wait_for(lambda: app.feed.finished.is_set(), timeout=20, message="the replay's end")
        await pilot.pause()
        assert store_count(app, "health") == 60 and store_count(app, "inventory") == 60
        bar = app.screen.query_one(ReplayBar)
        assert "end" in bar.markup() and "100%" in bar.markup()
        kinds = [e.kind for e in app.store.events]
        assert kinds.count("apiserver-restarted") == 1  # the events log, derived as live
        header = widget_text(app.monitor_screen.query_one("#header"))
        assert "REPLAY" in header and "prod-eu" in header


async def test_pause_step_speed_and_seek_from_the_keyboard(recording):
    from crdscope.tui.replay_bar import build_replay_app

    app = build_replay_app(recording, speed=1.0, layout="tabs")
    app.feed.pause()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert store_count(app, "health") == 0
        await pilot.press("full_stop")
        await async_wait_for(lambda: app.store.latest("version") is not None, timeout=5, message="one step")
        await pilot.press("full_stop", "full_stop")
        await async_wait_for(lambda: store_count(app, "health") == 1 and store_count(app, "inventory") == 1,
                             timeout=5, message="two more steps")
        assert app.feed.paused
        await pilot.press("plus", "plus")
        assert app.feed.speed == 4.0
        await pilot.press("minus")
        assert app.feed.speed == 2.0
        # seek to the middle with the dialog: the panels rebuild from the samples before it
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(*"50%", "enter")
        middle = START + (recording.end - START) / 2
        await async_wait_for(lambda: abs(app.feed.now() - middle) < 1e-6, timeout=5, message="the seek")
        await pilot.pause()
        assert store_count(app, "health") == sum(1 for s in recording.samples
                                                 if s.probe == "health" and s.timestamp <= middle)
        # and back to the start: the store forgets, then replays what comes before
        await pilot.press("home")
        await async_wait_for(lambda: app.feed.now() == START, timeout=5, message="seek to the start")
        await pilot.pause()
        assert store_count(app, "health") == 0 and store_count(app, "version") == 1
        await pilot.press("space")
        assert not app.feed.paused


async def test_a_bad_seek_is_one_line_on_screen(recording):
    from crdscope.tui.replay_bar import build_replay_app

    app = build_replay_app(recording, speed=1.0, layout="tabs")
    app.feed.pause()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(*"later", "enter")
        # What a person reads: the toast on screen, one line.
        shown = await async_wait_for(lambda: [text for text in toasts(app) if "cannot seek to 'later'" in text],
                                     timeout=5, message="the seek error on screen")
        assert len(shown) == 1 and "\n" not in shown[0], shown
        assert app.feed.now() == START


def toasts(app) -> list[str]:
    """The text of the notifications on screen (Textual's Toast widgets, selected by type name)."""
    return [str(toast.render()) for toast in app.screen.query("Toast")]

"""The fleet and compare screens (issue 28), over recordings replayed as clusters.

Two clusters: the recorded lab session (``crdscope-lab``, a 1.37 lab loading 80 CRDs) and the same
session as a second cluster ``lab-126`` that runs 1.26, uses 31% less memory (per CRD too) and
whose discovery is 2.5x slower.  Each plays through :class:`session.replay.ReplayFeed` at full
speed and holds at its end, so every render is of the same samples at the same recording time.
Update the snapshots with ``pytest tests/tui/test_fleet.py --snapshot-update`` after checking
the SVGs by eye.
"""

from __future__ import annotations

import dataclasses

from crdscope.base.samples.discovery import DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.version import VersionSample
from crdscope.session.recorder import ClusterInfo
from crdscope.session.replay import ReplayFeed, read_recording, replay_core
from crdscope.tui.app import CrdscopeApp
from crdscope.tui.screens.compare import CompareScreen
from crdscope.tui.screens.fleet import FleetScreen
from crdscope.tui.screens.monitor import MonitorScreen
from crdscope.tui.sessions import ClusterSession
from tests.helpers import async_wait_for
from tests.tui.conftest import LAB_SESSION, widget_text
from tests.tui.test_snapshots import KUBECTL

#: The first cluster's fitted MiB per CRD and cold discovery (the recording's own fit is noisy:
#: 80 CRDs under a garbage collector), and the second cluster's figures against them.
MIB_PER_CRD = 0.42
COLD_SECONDS = 0.4
MEMORY = 0.69
DISCOVERY = 2.5


def as_cluster(recording, *, memory: float = 1.0, discovery: float = 1.0, version: str = "",
               context: str = ""):
    """The recording as a cluster whose memory and discovery figures are scaled."""
    def changed(sample):
        if isinstance(sample, HealthSample):
            return dataclasses.replace(
                sample, rss_bytes=sample.rss_bytes * memory if sample.rss_bytes else sample.rss_bytes,
                mib_per_crd=MIB_PER_CRD * memory if sample.mib_per_crd is not None else None)
        if isinstance(sample, DiscoverySample):
            return dataclasses.replace(sample, seconds=sample.seconds * discovery,
                                       cold_seconds=COLD_SECONDS * discovery)
        if isinstance(sample, VersionSample) and version:
            return dataclasses.replace(sample, git_version=version, minor=version.split(".")[1])
        return sample

    cluster = recording.cluster
    if context:
        cluster = ClusterInfo(server="https://127.0.0.1:40299", context=context, kubernetes_version=version)
    return dataclasses.replace(recording, cluster=cluster, samples=[changed(s) for s in recording.samples])


def older_cluster(recording):
    """The recording as another cluster: 1.26, 31% less memory, discovery 2.5x slower."""
    return as_cluster(recording, memory=MEMORY, discovery=DISCOVERY, version="v1.26.15", context="lab-126")


def fleet_app(*, compare: bool = False) -> CrdscopeApp:
    recording = read_recording(LAB_SESSION)
    sessions = [ClusterSession(replay_core(ReplayFeed(played, speed=0, hold_at_end=True)))
                for played in (as_cluster(recording), older_cluster(recording))]
    return CrdscopeApp(sessions=sessions, compare=compare, kubectl=KUBECTL, theme="crdscope-dark")


async def all_played(pilot) -> None:
    """Every sample of every cluster in its core, then the screen drawn from them, now."""
    app = pilot.app
    await async_wait_for(lambda: all(s.feed.finished.is_set() and s.core.samples == len(s.feed.samples)
                                     for s in app.sessions), timeout=20, message="both recordings played")
    app.screen.redraw()
    await pilot.pause()


def test_fleet_screen(snap_compare, utc):
    assert snap_compare(fleet_app(), terminal_size=(160, 20), run_before=all_played)


def test_compare_screen(snap_compare, utc):
    assert snap_compare(fleet_app(compare=True), terminal_size=(120, 50), run_before=all_played)


async def test_enter_opens_a_clusters_monitor_and_escape_returns(utc):
    app = fleet_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await all_played(pilot)
        assert isinstance(app.screen, FleetScreen)
        fleet = app.screen
        # Sorted by cluster name: crdscope-lab first; down selects lab-126.
        assert [row.name for row in fleet.rows] == ["crdscope-lab", "lab-126"]
        await pilot.press("down", "enter")
        assert isinstance(app.screen, MonitorScreen)
        assert app.session.name == "lab-126" and app.screen.store is app.sessions[1].store
        await pilot.pause()
        header = widget_text(app.screen.query_one("#header"))
        assert "lab-126" in header and "v1.26.15" in header
        # Samples of the other cluster reach its own core, and do not redraw this monitor's panels.
        panels = app.screen.panels()
        draws = [panel.draws for panel in panels]
        other = app.sessions[0]
        taken = other.core.samples
        for _ in range(5):
            other.core.take(other.store.latest("loader"))  # the shown tab's probe
        await pilot.pause(0.8)  # deliberate: nothing must happen, so wait past the panels' redraw throttle
        assert other.core.samples == taken + 5 and app.sessions[1].core.samples == len(app.sessions[1].feed.samples)
        assert [panel.draws for panel in panels] == draws
        await pilot.press("escape")
        assert app.screen is fleet
        await pilot.press("up", "enter")
        assert app.session.name == "crdscope-lab" and app.screen.store is app.sessions[0].store
        await pilot.press("escape")
        assert app.screen is fleet


async def test_e_and_f_act_on_the_selected_cluster(utc):
    from crdscope.tui.screens.estimate import EstimateScreen
    from crdscope.tui.screens.findings import FindingsScreen

    app = fleet_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await all_played(pilot)
        fleet = app.screen
        first, second = app.sessions
        await pilot.press("down", "e")
        assert isinstance(app.screen, EstimateScreen) and app.screen.store is second.store
        await pilot.press("escape")
        assert app.screen is fleet
        await pilot.press("f")
        assert isinstance(app.screen, FindingsScreen)
        # Both clusters play the same recording: the same findings, each cluster's own objects.
        listed = app.session.current_findings()
        assert listed and all(a is b for a, b in zip(listed, second.current_findings(), strict=True))
        await pilot.press("escape", "up", "f")
        assert isinstance(app.screen, FindingsScreen)
        assert all(a is b for a, b in zip(app.session.current_findings(), first.current_findings(), strict=True))
        await pilot.press("escape", "e")
        assert isinstance(app.screen, EstimateScreen) and app.screen.store is first.store


async def test_o_cycles_the_sort_column_and_r_reverses_it(utc):
    app = fleet_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await all_played(pilot)
        fleet = app.screen
        assert fleet.sort_column == "cluster"
        await pilot.press("o")
        assert fleet.sort_column == "k8s"
        # v1.26 before v1.37, then reversed.
        assert [row.name for row in fleet.rows] == ["lab-126", "crdscope-lab"]
        assert "sorted by k8s ▲" in widget_text(fleet.query_one("#fleet-sort"))
        await pilot.press("r")
        assert [row.name for row in fleet.rows] == ["crdscope-lab", "lab-126"]
        assert "sorted by k8s ▼" in widget_text(fleet.query_one("#fleet-sort"))
        while fleet.sort_column != "RSS":
            await pilot.press("o")
        assert [row.name for row in fleet.rows] == ["crdscope-lab", "lab-126"]  # descending: the larger first


async def test_compare_states_the_differences_and_c_toggles_with_the_fleet(utc):
    app = fleet_app()
    async with app.run_test(size=(120, 50)) as pilot:
        await all_played(pilot)
        await pilot.press("c")
        assert isinstance(app.screen, CompareScreen)
        await all_played(pilot)
        said = widget_text(app.screen.query_one("#compare-differences"))
        assert "lab-126 uses 31% less memory per CRD" in said
        assert "discovery 2.5x slower on lab-126" in said
        assert "crdscope-lab runs v1.37.2, lab-126 runs v1.26.15" in said
        await pilot.press("c")
        assert isinstance(app.screen, FleetScreen)


async def test_the_fleet_redraws_a_few_times_a_second_however_many_samples_arrive(utc):
    app = fleet_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await all_played(pilot)
        fleet = app.screen
        before = fleet.draws
        sample = app.sessions[0].store.last_good_of(HealthSample)
        for _ in range(500):
            app.sessions[0].core.take(sample)
        await pilot.pause(1.2)  # deliberate: the throttle is under test, so count redraws over two of its periods
        assert 1 <= fleet.draws - before <= 3, fleet.draws - before


def test_differences_are_stated_in_words_and_only_where_both_are_known():
    from crdscope.tui.fleet_figures import ClusterFigures, differences

    a = ClusterFigures("lab-a", version="v1.37.2", crds=800, rss_bytes=2e9, mib_per_crd=1.0,
                       discovery_cold_seconds=0.3)
    b = ClusterFigures("lab-b", version="v1.37.2", crds=800, rss_bytes=2.02e9, mib_per_crd=2.2,
                       discovery_cold_seconds=0.69, canary_p99_seconds=0.2)
    assert differences(a, b) == ["lab-b uses 2.2x the memory per CRD of lab-a", "discovery 2.3x slower on lab-b"]
    assert differences(a, a) == []


def test_unknown_figures_sort_last_either_way():
    from crdscope.tui.fleet_figures import COLUMNS, ClusterFigures, sort_rows

    rss = next(c for c in COLUMNS if c.header == "RSS")
    rows = [ClusterFigures("c", rss_bytes=None), ClusterFigures("a", rss_bytes=2.0), ClusterFigures("b", rss_bytes=5.0)]
    assert [r.name for r in sort_rows(rows, rss, descending=False)] == ["a", "b", "c"]
    assert [r.name for r in sort_rows(rows, rss, descending=True)] == ["b", "a", "c"]


async def test_l_on_the_fleet_and_compare_screens_asks_every_clusters_loader(utc):
    """``l`` reaches the loader's actions through the app (the screens do not import them): replays
    have no loader, so each screen answers that no cluster can load."""
    from crdscope.tui.loader_actions import NO_LOADER
    from tests.tui.test_replay import toasts

    app = fleet_app(compare=True)
    async with app.run_test(size=(160, 40), notifications=True) as pilot:
        await all_played(pilot)
        for screen in (CompareScreen, FleetScreen):
            assert isinstance(app.screen, screen)
            await pilot.press("l")
            await async_wait_for(lambda: any(NO_LOADER in " ".join(text.split()) for text in toasts(app)),
                                 timeout=5, message=f"the answer on the {screen.__name__}")
            app.clear_notifications()
            await pilot.press("c")  # compare -> back to the fleet
            await pilot.pause()

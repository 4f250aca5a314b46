"""The loader's set-up dialog, driven with Textual's Pilot.

Without a cluster: the dialog says what a run will do (how many CRDs, pace, how long)
from the source it reads, refuses what cannot start, and offers the shared CRD sets.
On the lab: ``--source`` (build_app's ``source``) is what the loader offers, and the
dialog's choice is what the loader then loads.
"""

from __future__ import annotations

import tarfile
import threading
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Button, Input, Select, Static

from crdscope.base.settings import LoaderSettings, Settings
from crdscope.themes import DEFAULT_THEME, THEMES, role_defaults
from crdscope.tui.launch import build_app
from crdscope.tui.screens.dialogs import ChoiceScreen, ConfirmScreen
from crdscope.tui.screens.loader_setup import LoadChoice, LoaderSetupScreen, shared_sets
from tests.conftest import SHARED_CRDS
from tests.helpers import async_wait_for
from tests.tui.loader_dialogs import choose, owned_crds

OWNED = "app.kubernetes.io/managed-by=crdscope"


class Host(App):
    """A bare app that opens the dialog and keeps its answer."""

    CSS_PATH = str(Path(__file__).parents[2] / "tui" / "monitor.tcss")

    def __init__(self, choice: LoadChoice) -> None:
        super().__init__()
        self.choice = choice
        self.answers: list[LoadChoice | None] = []
        for theme in THEMES:
            self.register_theme(theme)
        self.theme = DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return role_defaults()

    def on_mount(self) -> None:
        self.push_screen(LoaderSetupScreen(self.choice), self.answers.append)


def plan_text(app: App) -> str:
    return str(app.screen.query_one("#plan", Static).render())


async def set_value(pilot, selector: str, value: str) -> None:
    pilot.app.screen.query_one(selector, Input).value = value
    await pilot.pause()


async def test_the_dialog_says_what_the_run_will_do_then_starts_it():
    app = Host(LoadChoice("synthetic:300", "steady", 20.0, 8))
    async with app.run_test(size=(100, 30)) as pilot:
        await async_wait_for(lambda: "Will apply 300 CRDs at 20 per second, at most 8 in flight, about 15s"
                             in plan_text(app), timeout=20, message="the first plan")
        await set_value(pilot, "#source", "synthetic:50")
        await set_value(pilot, "#rate", "2.5")
        await set_value(pilot, "#concurrency", "4")
        await async_wait_for(lambda: "Will apply 50 CRDs at 2.5 per second, at most 4 in flight, about 20s"
                             in plan_text(app), timeout=20, message="the changed plan")
        app.screen.query_one("#profile", Select).value = "burst"
        await async_wait_for(lambda: "50 CRDs all at once, 4 in flight" in plan_text(app), timeout=20,
                             message="the burst plan")
        await pilot.press("ctrl+s")
        await async_wait_for(lambda: app.answers, timeout=10, message="the answer")
    assert app.answers == [LoadChoice("synthetic:50", "burst", 2.5, 4)]


@pytest.mark.parametrize("field, value, reason", [
    ("#source", "/no/such/crds.yaml", "no such file or directory"),
    ("#rate", "0", "rate must be above 0"),
    ("#concurrency", "0", "at least 1 apply in flight"),
])
async def test_what_cannot_start_is_said_and_start_is_refused(field, value, reason):
    app = Host(LoadChoice("synthetic:10", "steady", 5.0, 2))
    async with app.run_test(size=(100, 30)) as pilot:
        await async_wait_for(lambda: "Will apply 10 CRDs" in plan_text(app), timeout=20, message="the plan")
        await set_value(pilot, field, value)
        await async_wait_for(lambda: "Cannot start: " in plan_text(app) and reason in plan_text(app),
                             timeout=20, message=f"the refusal ({reason})")
        assert app.screen.query_one("#start", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.press("escape")
        await async_wait_for(lambda: app.answers, timeout=10, message="the answer")
    assert app.answers == [None]


async def test_closing_the_dialog_stops_a_count_still_reading(monkeypatch):
    """A count that finishes while the dialog is taken apart must not resume into it.

    Textual removes a screen's children before it unmounts the screen and cancels its
    workers; a count resuming in between found no #plan and failed the whole app (seen in
    CI). Closing the dialog cancels its counts itself, in the same turn.
    """
    import crdscope.tui.screens.loader_setup as loader_setup

    held, reading = threading.Event(), threading.Event()
    real_count = loader_setup.count_source

    def count(spec: str) -> int:
        if spec == "synthetic:7":
            reading.set()
            held.wait(timeout=30)
        return real_count(spec)

    monkeypatch.setattr(loader_setup, "count_source", count)
    app = Host(LoadChoice("synthetic:300", "steady", 20.0, 8))
    async with app.run_test(size=(100, 30)) as pilot:
        await async_wait_for(lambda: "Will apply 300" in plan_text(app), timeout=20, message="the first plan")
        dialog = app.screen
        await set_value(pilot, "#source", "synthetic:7")
        await async_wait_for(reading.is_set, timeout=20, message="the second count in its thread")
        counts = [w for w in app.workers if w.node is dialog and w.group == "count" and not w.is_finished]
        assert counts, "the held count is a running worker of the dialog"
        dialog.action_cancel()
        assert all(w.is_cancelled for w in counts), "closing the dialog cancels its counts at once"
        held.set()
        await async_wait_for(lambda: app.answers, timeout=10, message="the answer")
        await pilot.pause()
        assert app.is_running and app.return_code is None
    assert app.answers == [None]


def crds_in_archive(path: Path) -> int:
    """CRD documents of a set archive, counted here by reading every member."""
    count = 0
    with tarfile.open(path) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.endswith((".yaml", ".yml")):
                data = archive.extractfile(member).read()
                count += sum(1 for line in data.splitlines() if line.startswith(b"kind: CustomResourceDefinition"))
    return count


async def test_the_shared_sets_are_offered_and_counted(shared_crds):
    gcp = str((shared_crds / "provider-gcp.tar.xz").resolve())
    assert gcp in shared_sets()
    app = Host(LoadChoice("synthetic:10", "steady", 20.0, 8))
    async with app.run_test(size=(100, 30)):
        await async_wait_for(lambda: "Will apply 10 CRDs" in plan_text(app), timeout=20, message="the plan")
        app.screen.query_one("#sets", Select).value = gcp
        expected = crds_in_archive(Path(gcp))
        await async_wait_for(lambda: f"Will apply {expected:,} CRDs" in plan_text(app), timeout=120,
                             message=f"the plan for {expected} CRDs of the GCP set")
        assert app.screen.query_one("#source", Input).value == gcp


@pytest.mark.lab
async def test_source_flag_is_what_the_loader_offers_and_the_dialog_choice_is_loaded(lab, tmp_path):
    gcp = str(SHARED_CRDS / "provider-gcp.tar.xz")
    settings = Settings(loader=LoaderSettings(source="synthetic:300", rate=60.0, concurrency=8))
    app = build_app(lab.kubeconfig, lab.admin_context, record=None, settings=settings, lab=lab.lab, source=gcp)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("l")
        await choose(pilot, ChoiceScreen, "Start")
        await async_wait_for(lambda: isinstance(app.screen, LoaderSetupScreen), timeout=10, message="the dialog")
        assert app.screen.query_one("#source", Input).value == gcp
        # Changed in the dialog: a small synthetic set, quickly.
        await set_value(pilot, "#source", "synthetic:12")
        await set_value(pilot, "#rate", "30")
        await async_wait_for(lambda: "Will apply 12 CRDs at 30 per second" in plan_text(app), timeout=20,
                             message="the plan")
        await pilot.press("ctrl+s")
        done = await async_wait_for(
            lambda: (s := app.store.latest("loader")) is not None and s.state == "done" and s,
            timeout=300, message="the load to finish")
        assert (done.source, done.established, done.rate_limit_per_s) == ("synthetic:12", 12, 30.0)
        assert owned_crds(lab) == 12
        await pilot.press("l")
        await choose(pilot, ChoiceScreen, "Clean")
        await async_wait_for(lambda: isinstance(app.screen, ConfirmScreen), timeout=60, message="the question")
        await pilot.press("y")
        await async_wait_for(lambda: owned_crds(lab) == 0, timeout=180, interval=1.0, message="CRDs deleted")

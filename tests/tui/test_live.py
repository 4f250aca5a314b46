"""The monitor on the real lab, driven from the keyboard (Textual's Pilot).

The loader is started and cleaned with keys; the numbers on screen are
compared with ``crdscope probe NAME --json`` run at about the same time and
with kubectl; pausing stops the probes and resuming starts them again.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.helpers import async_wait_for, lab_app
from tests.tui.conftest import shown, status_text, widget_text
from tests.tui.loader_dialogs import choose, owned_crds
from crdscope.tui.panels.discovery import DiscoveryPanel
from crdscope.tui.panels.health import HealthPanel
from crdscope.tui.panels.inventory import InventoryPanel
from crdscope.tui.panels.loader import LoaderPanel
from crdscope.tui.panels.openapi import OpenAPIPanel
from crdscope.tui.screens.dialogs import ChoiceScreen, ConfirmScreen
from crdscope.tui.screens.loader_setup import LoaderSetupScreen

pytestmark = pytest.mark.lab

LOAD = 120


async def probe_json(handle, name: str) -> dict:
    """``crdscope probe NAME --json`` against the lab, as a user would run it."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crdscope.cli.main", "probe", name, "--json", "--kubeconfig", handle.kubeconfig,
        "--context", handle.admin_context, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return json.loads(out)


async def test_load_from_the_keyboard_and_panels_agree_with_probe_json(lab):
    app = lab_app(lab, load=LOAD)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.monitor_screen
        await async_wait_for(lambda: all(app.store.last_good(p) for p in ("inventory", "health", "openapi")),
                             timeout=90, message="first samples")

        await pilot.press("l")
        await choose(pilot, ChoiceScreen, "Start")
        # The set-up dialog shows what the run will do; ctrl+s starts it as configured.
        await async_wait_for(lambda: isinstance(app.screen, LoaderSetupScreen), timeout=10, message="the set-up")
        await async_wait_for(lambda: f"Will apply {LOAD} CRDs" in str(app.screen.query_one("#plan").render()),
                             timeout=30, message="the plan")
        await pilot.press("ctrl+s")
        done = await async_wait_for(
            lambda: (s := app.store.latest("loader")) is not None and s.state == "done" and s,
            timeout=300, message="the load to finish")
        assert done.error is None
        assert done.established == LOAD == owned_crds(lab)
        await async_wait_for(lambda: f"Established {LOAD}" in widget_text(shown(screen, LoaderPanel)),
                             timeout=10, message="the loader panel's count")

        # Figures taken after the load ended, on screen, against the one-shot probes' JSON.
        after = done.timestamp
        await async_wait_for(lambda: all((s := app.store.last_good(p)) and s.timestamp > after
                                         for p in ("discovery", "openapi", "health", "inventory")),
                             timeout=120, message="samples after the load")
        discovery, openapi, health = await asyncio.gather(
            probe_json(lab, "discovery"), probe_json(lab, "openapi"), probe_json(lab, "health"))
        total = len(lab.kubectl_json("get", "crd")["items"])

        await async_wait_for(
            lambda: f"{discovery['group_versions']} GVs" in widget_text(shown(screen, DiscoveryPanel))
            and f"resources {discovery['resources']}" in widget_text(shown(screen, DiscoveryPanel)),
            timeout=60, message=f"discovery panel showing {discovery['group_versions']} GVs")
        await async_wait_for(lambda: f"v3 paths {openapi['v3_paths']}" in widget_text(shown(screen, OpenAPIPanel)),
                             timeout=60, message=f"OpenAPI panel showing {openapi['v3_paths']} v3 paths")
        assert health["crds"] == total
        await async_wait_for(lambda: f"CRDs {total}" in widget_text(shown(screen, InventoryPanel)),
                             timeout=60, message=f"inventory showing {total} CRDs")
        await async_wait_for(lambda: f"CRDs {total}" in widget_text(shown(screen, HealthPanel)),
                             timeout=60, message=f"health showing {total} CRDs")
        assert "RSS" in widget_text(shown(screen, HealthPanel))

        # Clean asks first (as `crdscope clean` does); yes deletes exactly crdscope's CRDs.
        await pilot.press("l")
        await choose(pilot, ChoiceScreen, "Clean")
        await async_wait_for(lambda: isinstance(app.screen, ConfirmScreen), timeout=60, message="the question")
        assert f"Delete {LOAD} crdscope CRDs" in app.screen.question
        await pilot.press("y")
        await async_wait_for(lambda: owned_crds(lab) == 0, timeout=180, interval=1.0, message="CRDs deleted")


async def test_pause_stops_the_probes_and_resume_starts_them(lab):
    app = lab_app(lab, load=LOAD)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.monitor_screen
        await async_wait_for(lambda: app.store.last_good("inventory"), timeout=60, message="a first sample")
        await pilot.press("p")
        assert app.feed.paused
        runs = {name: health.runs for name, health in app.session.probe_health().items()}
        await async_wait_for(lambda: "PAUSED" in widget_text(screen.query_one("#header"))
                             and "probes paused" in status_text(shown(screen, InventoryPanel)),
                             timeout=10, message="paused on screen")
        # Inventory runs every 2 s; this can only come true while the probes are paused.
        cadence = app.session.live.monitor.pacing("inventory").busy
        await async_wait_for(lambda: time.time() - app.session.probe_health()["inventory"].last_run > 3 * cadence,
                             timeout=30, message="no inventory run for three cadences")
        assert all(app.session.probe_health()[name].runs <= count + 1 for name, count in runs.items())  # in flight only

        resumed = time.time()
        await pilot.press("p")
        assert not app.feed.paused
        await async_wait_for(lambda: app.store.latest("inventory").timestamp > resumed
                             and "updated" in status_text(shown(screen, InventoryPanel)),
                             timeout=30, message="a sample after resuming")

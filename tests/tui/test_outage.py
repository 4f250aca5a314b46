"""The API server goes away mid-run and comes back: every panel says so, then recovers.

A real kube-apiserver is SIGKILLed and restarted (``fresh_lab``: this test's own lab).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import async_wait_for, lab_app
from tests.tui.conftest import status_text, widget_text
from crdscope.tui.panels.discovery import DiscoveryPanel
from crdscope.tui.panels.health import HealthPanel
from crdscope.tui.panels.inventory import InventoryPanel
from crdscope.tui.panels.openapi import OpenAPIPanel
from crdscope.tui.panels.throttling import ThrottlingPanel

pytestmark = pytest.mark.lab

PROBE_PANELS = (InventoryPanel, DiscoveryPanel, ThrottlingPanel, OpenAPIPanel, HealthPanel)


async def test_outage_and_recovery_are_on_screen(fresh_lab):
    app = lab_app(fresh_lab, size="grid")
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.monitor_screen
        panels = [screen.panel(cls) for cls in PROBE_PANELS]
        await async_wait_for(lambda: all(app.store.last_good(p.probes[0]) for p in panels), timeout=120,
                             message="a good sample in every panel")

        fresh_lab.lab.kill("apiserver")
        await async_wait_for(lambda: all("since last good sample" in status_text(p) for p in panels),
                             timeout=120, message="every panel counting since its last good sample")
        health = screen.panel(HealthPanel)
        await async_wait_for(lambda: "DOWN for" in widget_text(health), timeout=30, message="the outage window")
        assert "✗" in widget_text(screen.query_one("#header"))
        assert "Traceback" not in "".join(widget_text(p) for p in screen.panels())

        await asyncio.to_thread(fresh_lab.lab.start, "apiserver")
        await async_wait_for(lambda: all("updated" in status_text(p) for p in panels), timeout=180,
                             message="every panel fresh again")
        await async_wait_for(lambda: "restarts 1" in widget_text(health) and "outages 1" in widget_text(health),
                             timeout=60, message="one restart and one outage on the health panel")
        kinds = [event.kind for event in app.store.events]
        assert kinds.count("apiserver-restarted") == 1
        await pilot.pause()

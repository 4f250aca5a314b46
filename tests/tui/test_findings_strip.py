"""The monitor on a frozen lab (SIGSTOP, Pilot): the header turns critical with the running duration,
the findings strip names the hang, and both clear after the resume."""

from __future__ import annotations

import asyncio
import time

import pytest

from crdscope.tui.launch import build_app
from tests.helpers import async_wait_for

pytestmark = pytest.mark.lab

LINE_WITHIN_SECONDS = 8.0


async def test_the_header_and_strip_show_a_frozen_apiserver_within_seconds(fresh_lab):
    app = build_app(fresh_lab.kubeconfig, fresh_lab.admin_context, record=None, layout="grid", lab=fresh_lab.lab)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.monitor_screen
        header, strip = screen.query_one("#header"), screen.query_one("#findings-strip")
        await async_wait_for(lambda: app.store.last_good("latency") is not None, timeout=90,
                             message="a latency sample")
        await asyncio.to_thread(fresh_lab.lab.stop, "apiserver")
        stopped = time.monotonic()
        try:
            await async_wait_for(lambda: header.has_class("critical"), timeout=LINE_WITHIN_SECONDS + 5,
                                 message="the header critical")
            shown_after = time.monotonic() - stopped
            await pilot.pause()
            markup = header.markup()
            assert "CRITICAL" in markup and "API server not answering" in markup, markup
            assert strip.display and strip.has_class("critical")
            first = str(strip.render())
            assert "critical" in first and "API server not answering" in first, first
            # The duration runs: a later redraw shows a longer one.
            await async_wait_for(lambda: header.markup() != markup, timeout=5, message="the duration running")
        finally:
            await asyncio.to_thread(fresh_lab.lab.start, "apiserver")
        await async_wait_for(lambda: not header.has_class("critical"), timeout=30, message="the header clear")
        assert not any(f.id == "apiserver-not-answering" for f in app.session.current_findings())
    assert shown_after <= LINE_WITHIN_SECONDS, shown_after

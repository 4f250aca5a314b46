"""kube-apiserver frozen (SIGSTOP for 30 s, then SIGCONT) under the TUI, with the loader running.

The monitor app runs as ``crdscope lab`` opens it (Pilot) and its loader is
started from the palette action.  Every request of the shared client goes
through a counting wrapper of its transport, so the test sees how many are
in flight at once and how long each one took.  While the server is frozen a
key is pressed again and again.

Proves: requests end by their own deadlines (the health checks' read timeout
fires; no request outlives the client's own timeouts); the number of requests
in flight stays under a bound that follows from the design, not from the
freeze's length (probes never overlap themselves, the loader holds at most
``concurrency`` applies); keys are answered throughout; after SIGCONT every
panel recovers and the loader finishes its set with nothing failed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from crdscope.connection.cluster import DEFAULT_TIMEOUT
from crdscope.probes.health_checks import CHECK_TIMEOUT
from crdscope.base.settings import LoaderSettings, Settings
from tests.faults.helpers import count_requests
from tests.helpers import async_wait_for, start_loader_as_configured, timed_action
from tests.tui.conftest import status_text
from crdscope.tui.launch import build_app
from crdscope.tui.panels.discovery import DiscoveryPanel
from crdscope.tui.panels.health import HealthPanel
from crdscope.tui.panels.inventory import InventoryPanel
from crdscope.tui.panels.openapi import OpenAPIPanel
from crdscope.tui.panels.throttling import ThrottlingPanel

#: ~2.5 min (a 30 s freeze, a load on each side of it): beyond `make test`'s few minutes,
#: so in `make soak`.
pytestmark = [pytest.mark.lab, pytest.mark.soak]

FREEZE_SECONDS = 30.0
LOAD = 150
CONCURRENCY = 8
PROBE_PANELS = (InventoryPanel, DiscoveryPanel, ThrottlingPanel, OpenAPIPanel, HealthPanel)
#: The longest a request may take against a frozen server: waiting for a pooled connection,
#: connecting, then one read, each under its own deadline (connection.cluster.DEFAULT_TIMEOUT).
LONGEST_REQUEST_SECONDS = DEFAULT_TIMEOUT.pool + DEFAULT_TIMEOUT.connect + DEFAULT_TIMEOUT.read
#: Requests in flight at once: the seven probes (the health probe sends three at a time, the
#: others at most two), the responsiveness probe's one heartbeat, the CRD watch, and the loader's applies.  The legacy discovery walk (2+N
#: requests) does not run in this window (its cadence is five minutes, and it ran at start).
MAX_IN_FLIGHT = 7 * 3 + 1 + 1 + CONCURRENCY


async def test_a_frozen_apiserver_times_out_piles_nothing_up_and_keys_answer(fresh_lab):
    settings = Settings(loader=LoaderSettings(source=f"synthetic:{LOAD}", rate=5.0, concurrency=CONCURRENCY))
    app = build_app(fresh_lab.kubeconfig, fresh_lab.admin_context, record=None, settings=settings, layout="grid",
                    lab=fresh_lab.lab)
    counting = count_requests(app.feed.monitor.cluster)

    async with app.run_test(size=(200, 60)):
        screen = app.monitor_screen
        panels = [screen.panel(cls) for cls in PROBE_PANELS]
        await async_wait_for(lambda: all(app.store.last_good(p.probes[0]) for p in panels), timeout=120,
                             message="a good sample in every panel")
        await start_loader_as_configured(app)
        await async_wait_for(lambda: (s := app.store.latest("loader")) is not None and s.sent >= LOAD // 4,
                             timeout=120, message="the loader sending")

        await asyncio.to_thread(fresh_lab.lab.stop, "apiserver")
        frozen_at = time.monotonic()
        try:
            with timed_action(app, "toggle_pause") as keys:
                while time.monotonic() - frozen_at < FREEZE_SECONDS:
                    await keys.press("p")
                    await asyncio.sleep(0.2)  # deliberate: a person's pace between presses (what is measured), not a synchronisation
        finally:
            if app.probes_paused:
                app.action_toggle_pause()
            in_flight_at_thaw = counting.in_flight
            await asyncio.to_thread(fresh_lab.lab.start, "apiserver")  # SIGCONT
        thawed_at = time.monotonic()

        await async_wait_for(lambda: all("updated" in status_text(p) and app.store.last_good(p.probes[0])
                                         .timestamp > time.time() - 10 for p in panels),
                             timeout=180, message="every panel fresh again")
        final = await async_wait_for(
            lambda: (s := app.store.latest("loader")) is not None and s.state in ("done", "stopped") and s,
            timeout=300, message="the load to finish")

    # Keys answered all along (the freeze is on the server, never in the UI's loop).
    timings = keys.timings
    ordered = sorted(timings)
    print(f"\n{len(timings)} key presses while frozen: median {ordered[len(ordered) // 2] * 1000:.1f} ms, "
          f"max {ordered[-1] * 1000:.1f} ms; requests in flight: peak {counting.peak} (while frozen "
          f"{max(n for t, n in counting.timeline if frozen_at <= t < thawed_at)}), "
          f"at thaw {in_flight_at_thaw}")
    assert len(timings) >= 50
    assert ordered[len(ordered) // 2] < 0.100 and ordered[-1] < 1.0, [round(t * 1000) for t in ordered]

    # Requests ended by their own deadlines: the health checks' read timeout fired while frozen,
    # and nothing outlived the client's timeouts.
    during = [f for f in counting.finished if frozen_at <= f.started < thawed_at]
    timed_out = [f for f in during if f.outcome == "ReadTimeout" and f.path in ("/readyz", "/livez")]
    assert timed_out, [(f.method, f.path[-40:], f.outcome, round(f.started - frozen_at, 1), round(f.seconds, 1))
                       for f in during if f.seconds > 1]
    # Over HTTP/2 the requests share one connection and one reader: a check waiting behind another
    # request's read ends when the first read deadline on the connection passes (httpcore then fails
    # every stream of it at once), so its bound is the connection's longest read deadline.
    assert all(CHECK_TIMEOUT.read - 0.5 <= f.seconds <= DEFAULT_TIMEOUT.read + 5 for f in timed_out), timed_out
    longest = max(counting.finished, key=lambda f: f.seconds)
    assert longest.seconds <= LONGEST_REQUEST_SECONDS + 5, longest

    # Bounded by construction, however long the freeze: not by how long it lasted.
    frozen_peak = max(n for t, n in counting.timeline if frozen_at <= t < thawed_at)
    assert frozen_peak <= MAX_IN_FLIGHT, frozen_peak
    assert in_flight_at_thaw <= MAX_IN_FLIGHT

    # The loader rode it out: the applies that hung were retried, nothing failed.
    assert final.state == "done" and final.error is None, final
    assert (final.established, final.failed) == (LOAD, 0), final
    applies = [f for f in counting.finished if f.method == "PATCH" and frozen_at <= f.started < thawed_at]
    assert len(applies) <= CONCURRENCY, len(applies)  # the loader did not pile applies up either

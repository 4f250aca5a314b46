"""Keys answer within 100 ms while big answers are parsed in the app's event loop.

Against the lab: a /metrics scrape that keeps every family (the parser's
heaviest case) and a legacy discovery walk (2+N concurrent requests) run back
to back in the app's own loop, as the probes do, while ``p`` is pressed; each
press is timed from sending the key until its action runs.
"""

from __future__ import annotations

import asyncio
import gc

import pytest

from crdscope.probes.discovery import once as discovery_once
from crdscope.connection.metrics import MetricsSource
from tests.helpers import async_wait_for, lab_app, timed_action

pytestmark = pytest.mark.lab

PRESSES = 40
#: Keys answer within 100 ms (the issue); on a shared 2-core machine one press in twenty may
#: meet another process's burst, so the 95th percentile is held to it and the worst to 250 ms
#: (the worst-stall goal of the UI latency benchmark).
BUDGET_SECONDS = 0.100
WORST_SECONDS = 0.250


@pytest.mark.alone  # milliseconds per key: another test's CPU would be measured too
async def test_keys_answer_within_100ms_during_a_scrape_and_a_legacy_walk(lab):
    app = lab_app(lab)
    async with app.run_test(size=(80, 24)):
        await async_wait_for(lambda: app.store.last_good("inventory"), timeout=60, message="the monitor running")
        # The one full collection at start-up (tui/frozen_heap.py) is not a key's wait: measure after it.
        await async_wait_for(lambda: app.heap.settled, timeout=90, message="the heap settled")
        cluster = lab.cluster()
        metrics = MetricsSource(cluster)  # no family wanted: every line is parsed and kept
        scraped: list[int] = []
        walks: list[int] = []
        stop = asyncio.Event()

        async def busy() -> None:
            while not stop.is_set():
                scrape, walk = await asyncio.gather(metrics.scrape(), discovery_once(cluster, legacy=True))
                assert scrape.ok and walk.error is None, scrape.error or walk.error
                scraped.append(scrape.bytes)
                walks.append(walk.requests)

        worker = asyncio.create_task(busy())
        try:
            in_flight = 0
            with timed_action(app, "toggle_pause") as keys:
                while len(keys.timings) < PRESSES:
                    paused_before = app.feed.paused
                    await keys.press("p")
                    in_flight += not worker.done()
                    assert app.feed.paused != paused_before
            timings = keys.timings
            await async_wait_for(lambda: scraped and walks, timeout=60, message="a scrape and a walk finished")
        finally:
            stop.set()
            await asyncio.gather(worker, return_exceptions=True)
            await cluster.aclose()
        assert in_flight == PRESSES, "the work must be in flight during every press"
        assert max(scraped) > 1_000_000, f"a /metrics of {max(scraped)} bytes is too small to prove anything"
        ordered = sorted(timings)
        p95 = ordered[int(0.95 * (PRESSES - 1))]
        print(f"\nkey latency during a {max(scraped) / 1e6:.1f} MB scrape and a {max(walks)}-request legacy walk: "
              f"median {ordered[PRESSES // 2] * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms")
        assert p95 < BUDGET_SECONDS, f"95% of keys should answer within 100 ms: {[round(t * 1000) for t in ordered]}"
        assert ordered[-1] < WORST_SECONDS, f"slowest key took {ordered[-1] * 1000:.0f} ms"


async def test_the_settled_heap_is_frozen_while_running_and_given_back_on_exit(lab):
    gc.unfreeze()
    app = lab_app(lab)
    async with app.run_test(size=(80, 24)):
        await async_wait_for(lambda: app.heap.settled, timeout=90, message="the heap settled")
        assert app.store.latest("inventory") is not None and app.store.latest("discovery") is not None
        # Widgets, modules and the watch's records: what the full collections no longer walk.
        assert gc.get_freeze_count() > 10_000
        settles = app.heap.settles
        app.heap.first_samples_in(app.store, lambda settle: settle())
        assert app.heap.settles == settles, "the first samples settle the heap once, not on every sample"
    assert gc.get_freeze_count() == 0

"""kube-apiserver SIGKILLed and restarted mid-load, with the monitor and the loader both running.

In one event loop, as the TUI runs them: a :class:`probes.monitor.Monitor`
(every probe, fast cadences) and a :class:`loader.engine.LoadEngine` sharing
its CRD watch.  When a third of the set is sent the API server is SIGKILLed
(``Lab.kill``), left dead for a few failed probe runs, then restarted with
the same certificates, data and port (``Lab.start``).

Proves: the monitor survives (its task never ends), counts exactly one
restart and one closed outage window, and every probe recovers; the loader
resumes by itself and ends ``done``; kubectl then lists every CRD of the set
Established, and the run's journal has each CRD applied once and Established
once, nothing else, nothing twice.
"""

from __future__ import annotations

import asyncio

import pytest

from crdscope.loader.engine import LoadEngine
from crdscope.loader.sources import open_source
from crdscope.loader.synthetic import synthetic_documents
from tests.faults.helpers import FAST_CADENCES, Watched, assert_loaded_once
from tests.helpers import async_wait_for

pytestmark = pytest.mark.lab

COUNT = 120
SEED = 9101


async def test_kill_and_restart_mid_load_loses_and_duplicates_nothing(fresh_lab, tmp_path):
    names = [d["metadata"]["name"] for d in synthetic_documents(COUNT, seed=SEED)]
    async with fresh_lab.cluster() as cluster, Watched(cluster) as watched:
        await async_wait_for(lambda: any(s.ok and s.start_time for s in watched.of("health")), timeout=90,
                             message="a first health sample")
        engine = LoadEngine(cluster, open_source(f"synthetic:{COUNT}", seed=SEED), rate=5, concurrency=8,
                            crd_watch=watched.monitor.crds, runs_directory=tmp_path / "runs")
        loading = asyncio.create_task(engine.run(), name="load")
        await async_wait_for(lambda: engine.progress().sent >= COUNT // 3, timeout=120,
                             message="a third of the set sent")

        killed_at = len(watched.samples)
        await asyncio.to_thread(fresh_lab.lab.kill, "apiserver")
        await async_wait_for(lambda: sum(1 for s in watched.of("health", killed_at) if s.error) >= 3
                             and engine.progress().retries_transport > 0,
                             timeout=90, message="failed health runs and loader retries while the server is dead")
        assert not watched.task.done() and not loading.done()
        await asyncio.to_thread(fresh_lab.lab.start, "apiserver")

        final = await asyncio.wait_for(loading, timeout=600)
        assert not watched.task.done(), "the monitor must outlive the outage"
        await async_wait_for(lambda: (h := watched.of("health")) and h[-1].ok and h[-1].restarts == 1,
                             timeout=120, message="the health probe counting the restart")
        back = len(watched.samples)
        await async_wait_for(lambda: all(any(s.ok for s in watched.of(name, back)) for name in FAST_CADENCES),
                             timeout=180, message="every probe recovered")

    # The loader rode it out: one run, done, each CRD applied and Established exactly once.
    assert final.retries_transport > 0  # the outage really hit applies in flight
    assert_loaded_once(fresh_lab, final, names, tmp_path / "runs")

    # The monitor: one restart, one closed outage, and the events say so once.
    health = [s for s in watched.of("health") if s.ok][-1]
    assert health.restarts == 1 and len(health.outages) == 1 and health.outages[0].end is not None
    kinds = [event.kind for event in watched.events]
    assert kinds.count("apiserver-restarted") == 1, kinds

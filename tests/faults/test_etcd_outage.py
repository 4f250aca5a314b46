"""etcd frozen (``crdscope lab stop etcd``: SIGSTOP) and resumed mid-load, the monitor watching.

kube-apiserver stays up but cannot reach its storage: ``/readyz`` fails and
names etcd, and writes fail after the server's own etcd deadline (a 500
"keepalive ping failed", or our read timeout first).  Both are transient
failures the loader retries with backoff.

Proves: the health probe reports not ready with etcd among the failing
checks (and the events log says so once, then that readyz recovered); the
loader's writes that failed were retried, not recorded as failures; after
etcd returns everything converges: the load ends ``done`` with the whole set
Established (kubectl agrees) and every probe delivers good samples again.
"""

from __future__ import annotations

import asyncio

import pytest

from crdscope.loader.engine import LoadEngine
from crdscope.loader.sources import open_source
from crdscope.loader.synthetic import synthetic_documents
from tests.faults.helpers import FAST_CADENCES, Watched, assert_loaded_once
from tests.helpers import async_wait_for

#: ~70 s of a fresh lab loading through an etcd outage: beyond `make test`'s few minutes, so in `make soak`.
pytestmark = [pytest.mark.lab, pytest.mark.soak]

COUNT = 60
SEED = 9201


async def test_etcd_stopped_and_started_mid_load_converges(fresh_lab, tmp_path):
    names = [d["metadata"]["name"] for d in synthetic_documents(COUNT, seed=SEED)]
    async with fresh_lab.cluster() as cluster, Watched(cluster) as watched:
        await async_wait_for(lambda: any(s.ok and s.ready for s in watched.of("health")), timeout=90,
                             message="a ready health sample")
        engine = LoadEngine(cluster, open_source(f"synthetic:{COUNT}", seed=SEED), rate=4, concurrency=4,
                            crd_watch=watched.monitor.crds, runs_directory=tmp_path / "runs")
        loading = asyncio.create_task(engine.run(), name="load")
        await async_wait_for(lambda: engine.progress().sent >= COUNT // 4, timeout=60, message="the loader sending")

        stopped_at = len(watched.samples)
        await asyncio.to_thread(fresh_lab.lab.stop, "etcd")
        try:
            not_ready = await async_wait_for(
                lambda: next((s for s in watched.of("health", stopped_at) if s.ready is False), None),
                timeout=60, message="readyz failing")
            await async_wait_for(lambda: engine.progress().retries_5xx + engine.progress().retries_transport > 0,
                                 timeout=120, message="a write failing and being retried")
        finally:
            await asyncio.to_thread(fresh_lab.lab.start, "etcd")  # SIGCONT
        assert not loading.done(), "a write failure must not end the load"

        final = await asyncio.wait_for(loading, timeout=600)
        back = len(watched.samples)
        await async_wait_for(lambda: all(any(s.ok for s in watched.of(name, back)) for name in FAST_CADENCES)
                             and any(s.ready for s in watched.of("health", back)),
                             timeout=180, message="every probe good again and readyz ok")
        assert not watched.task.done()

    # readyz named etcd (the lab's server says "etcd" and "etcd-readiness").
    assert "etcd" in not_ready.failing_checks, not_ready.failing_checks
    assert not_ready.down and not_ready.error is None  # the server answered: not ready, not unreachable
    kinds = [event.kind for event in watched.events]
    assert kinds.count("readyz-failing") == 1 and kinds.count("readyz-recovered") == 1, kinds
    failing = next(e for e in watched.events if e.kind == "readyz-failing")
    assert "etcd" in failing.message

    # The writes that failed were retried; nothing was lost, doubled or recorded as failed.
    assert_loaded_once(fresh_lab, final, names, tmp_path / "runs")

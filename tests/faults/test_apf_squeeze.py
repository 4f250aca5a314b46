"""API Priority and Fairness squeezing crdscope's own user while it loads.

A user is minted for the loader (``Lab.mint_user``) and given CRD write
rights by a ClusterRole and ClusterRoleBinding made here; a FlowSchema sends
every request of that user to a PriorityLevelConfiguration of one share (a
few seats on the lab) that rejects instead of queueing.  The loader then
loads in a burst, more applies at once than the level has seats.

Proves: the server answers 429 with ``Retry-After``; the loader sends a
CRD's apply again only after the delay the server asked for (read from every
request and answer on the wire); it reports its 429 retries; nothing is lost
(the whole set Established, kubectl agrees, the journal has no failure); and the
findings engine, fed by a monitor's throttling probe on the administrator's
connection, opens an APF finding that names the squeezed priority level.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

import pytest

from crdscope.loader.engine import LoadEngine
from crdscope.loader.sources import open_source
from crdscope.loader.synthetic import synthetic_documents
from crdscope.connection.cluster import Cluster
from tests.apf_squeeze import CONCURRENCY, COUNT, LEVEL, SEED, USER, manifests
from tests.faults.helpers import assert_loaded_once, count_requests
from tests.helpers import async_wait_for, steady_cadences

pytestmark = pytest.mark.lab


@contextlib.asynccontextmanager
async def watched_findings(lab):
    """A monitor running only the throttling probe (every second) into a session core."""
    from crdscope.probes.monitor import Monitor
    from crdscope.base.settings import Settings
    from crdscope.session.core import LatestSamples, SessionStore, WatchCore

    samples: list = []
    opened: list = []  # every finding that opened (the squeeze's may close again once the load is done)
    async with Cluster.connect(lab.kubeconfig, lab.admin_context) as admin:
        store = SessionStore()
        monitor = Monitor(admin, Settings().override("cadences", **steady_cadences(throttling=1.0)), probes=["throttling"],
                          latest=LatestSamples(store))
        core = WatchCore(monitor, store=store)
        core.add_listener(lambda taken: opened.extend(c.finding for c in taken.changes if c.change == "opened"))
        monitor.add_sink(samples.append)
        task = asyncio.create_task(monitor.run())
        try:
            await async_wait_for(lambda: samples, timeout=60, message="a first throttling sample")
            yield opened, samples
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def test_429s_are_honoured_and_nothing_is_lost(fresh_lab, tmp_path):
    async with watched_findings(fresh_lab) as (findings, samples):
        await _squeeze_and_load(fresh_lab, tmp_path)
        # The APF finding names the squeezed level (and is critical or a warning by its rate).
        finding = await async_wait_for(
            lambda: next((f for f in findings if f.id == f"apf-rejecting:{LEVEL}"), None), timeout=30,
            message=f"the APF finding for {LEVEL} (throttling: {[s.priority_levels for s in samples[-1:]]})")
    assert LEVEL in finding.title and any(LEVEL in e for e in finding.evidence), finding


async def _squeeze_and_load(fresh_lab, tmp_path) -> None:
    fresh_lab.kubectl("apply", "-f", "-", input=manifests())
    kubeconfig = fresh_lab.lab.mint_user(USER, path=tmp_path / "kubeconfig")
    names = [d["metadata"]["name"] for d in synthetic_documents(COUNT, seed=SEED)]

    async with Cluster.connect(str(kubeconfig), USER) as cluster:
        # The flow schema is in force once the squeezed user's answers name its priority level.
        level_uid = fresh_lab.kubectl_json("get", "prioritylevelconfiguration", LEVEL)["metadata"]["uid"]
        async def squeezed() -> bool:
            await cluster.client.get("/version")
            return any(pl == level_uid for _, pl in cluster.requests.apf_pairs)

        await async_wait_for(squeezed, timeout=60, interval=0.5, message="the flow schema in force")
        wire = count_requests(cluster)
        engine = LoadEngine(cluster, open_source(f"synthetic:{COUNT}", seed=SEED), profile="burst",
                            concurrency=CONCURRENCY, runs_directory=tmp_path / "runs")
        final = await engine.run()

    # The server pushed back, with Retry-After, and the loader counted its retries.
    patches = [f for f in wire.finished if f.method == "PATCH"]
    throttled = [f for f in patches if f.outcome == "429"]
    assert throttled, collections.Counter(f.outcome for f in patches)
    assert all(f.retry_after is not None and float(f.retry_after) >= 1 for f in throttled)
    assert final.retries_429 == len(throttled)

    # Each CRD's next apply came only after the delay its 429 asked for.
    by_path: dict[str, list] = collections.defaultdict(list)
    for f in patches:
        by_path[f.path].append(f)
    for attempts in by_path.values():
        attempts.sort(key=lambda f: f.started)
        for rejected, following in zip(attempts, attempts[1:], strict=False):  # consecutive pairs
            if rejected.outcome == "429":
                waited = following.started - (rejected.started + rejected.seconds)
                assert waited >= float(rejected.retry_after) - 0.05, (rejected, following)

    # Nothing lost: the whole set Established once, kubectl agrees, the journal has no failure.
    assert_loaded_once(fresh_lab, final, names, tmp_path / "runs")

"""OpenAPI readiness against the lab: every stage of every new CRD, the v3 index, v2 and ETags."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from crdscope.probes.monitor import Monitor
from crdscope.probes.openapi import (
    V2_ACCEPT,
    ConditionalGet,
    V2Fetcher,
    document_resources,
    index_hashes,
)
from crdscope.probes.publication import STAGES
from crdscope.base.settings import Settings
from tests.crdsets import crd_names, delete_crds, extract, write_tiny_crds
from tests.helpers import async_wait_for, steady_cadences

pytestmark = pytest.mark.lab

CRDSCOPE = [sys.executable, "-m", "crdscope.cli.main"]


def delete_and_wait(lab, names: list[str]) -> None:
    if names:
        delete_crds(lab, *names)


@contextlib.asynccontextmanager
async def running(monitor: Monitor, probe: str = "openapi"):
    """Run the monitor (its CRD watch and scheduler) and collect ``probe``'s samples."""
    samples: list = []
    monitor.add_sink(lambda sample: samples.append(sample) if sample.probe == probe else None)
    task = asyncio.create_task(monitor.run())
    try:
        yield monitor, samples
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_every_stage_of_a_batch_in_order(lab, shared_crds, tmp_path: Path):
    real = extract("provider-gcp", tmp_path / "gcp", groups=8)
    # Modest for CI on two cores: a provider slice plus tiny CRDs, enough for a visible backlog.
    tiny = write_tiny_crds(tmp_path / "tiny", 40, prefix="oa")
    names = crd_names(real) + crd_names([tiny])
    assert 60 <= len(names) <= 300
    settings = Settings().override("cadences", **steady_cadences(openapi=0.2, openapi_v2=5.0))
    async with lab.cluster() as cluster, running(Monitor(cluster, settings, probes=["openapi"], latest={})) as (monitor, samples):
        probe = monitor.probe("openapi")
        try:
            await async_wait_for(lambda: len(samples) >= 2, timeout=60, message="two index fetches before the batch")
            installed_at = time.time()
            await asyncio.to_thread(lab.kubectl, "apply", "--server-side", "-f", str(tmp_path / "gcp"),
                                    "-f", str(tiny), timeout=600)

            def all_published():
                by_name = {s.name: s for s in probe.tracker.stages.values()}
                unplaced = [n for n in names if by_name.get(n) is None or by_name[n].openapi_v3 is None]
                return not unplaced and samples[-1].backlog == 0

            try:
                await async_wait_for(all_published, timeout=300, interval=0.5,
                                     message="every CRD of the batch in the v3 index and an empty backlog")
            except AssertionError as exc:
                by_name = {s.name: s for s in probe.tracker.stages.values()}
                unplaced = {n: by_name.get(n) for n in names if by_name.get(n) is None or by_name[n].openapi_v3 is None}
                raise AssertionError(f"{exc}; backlog {samples[-1].backlog} {samples[-1].backlog_names}; "
                                     f"unplaced {len(unplaced)}: {list(unplaced.items())[:5]}") from None
            by_name = {s.name: s for s in probe.tracker.stages.values()}
            for name in names:
                stages = by_name[name]
                times = [stages.created, stages.names_accepted, stages.established, stages.discovery,
                         stages.openapi_v3]
                assert all(t is not None for t in times), (name, stages)
                # created and names_accepted are whole server seconds; the rest are local sub-second times.
                assert installed_at - 1 <= stages.created <= stages.names_accepted <= stages.established, (name, stages)
                assert stages.established <= stages.discovery, (name, stages)
                # Equal when the index showed the schema before the watch reported Established.
                assert stages.established <= stages.openapi_v3, (name, stages)
            # The backlog rose with the batch and went back to zero.
            assert max(s.backlog for s in samples) >= 1
            assert samples[-1].backlog == 0 and samples[-1].backlog_oldest_seconds is None
            # Lag figures: every stage timed for at least the batch, ordered percentiles.
            last = samples[-1]
            for stage in STAGES:
                lag = last.lag_seconds[stage]
                assert lag.count >= len(names), stage
                assert 0 <= lag.p50 <= lag.p95 <= lag.max, stage
            hand_max = max(by_name[n].openapi_v3 - by_name[n].created for n in names)
            assert last.lag_seconds["openapi_v3"].max >= hand_max
            # The v3 index gained the batch's group-versions, as the server lists them.
            raw = json.loads(lab.kubectl("get", "--raw", "/openapi/v3").stdout)
            server_paths = set(index_hashes(raw))
            records = [r for r in monitor.crds.crds.values() if r.name in set(names)]
            batch_gvs = {gv for r in records for gv in r.group_versions}
            assert {f"apis/{gv}" for gv in batch_gvs} <= server_paths
            for gv in batch_gvs:
                publication = last.group_versions[gv]
                assert publication.first_seen is not None and publication.first_seen >= installed_at
                assert publication.hash and index_hashes(raw)[f"apis/{gv}"].startswith(publication.hash)
            # A group-version document, read the way the probe settles a late watch report, lists its CRDs.
            gv = sorted(batch_gvs)[0]
            document = json.loads(lab.kubectl("get", "--raw", f"/openapi/v3/apis/{gv}").stdout)
            assert {r.plural for r in records if gv in r.group_versions} <= document_resources(document, f"apis/{gv}")
            # /openapi/v2 was fetched after the change, in the background, at its own cadence.
            await async_wait_for(lambda: samples[-1].v2_fetched_at and samples[-1].v2_fetched_at > installed_at,
                                 timeout=120, message="a v2 fetch after the batch")
            v2 = samples[-1]
            assert v2.v2_status == 200 and v2.v2_error is None
            assert 0 < v2.v2_first_byte_seconds <= v2.v2_seconds
        finally:
            await asyncio.to_thread(delete_and_wait, lab, names)


async def test_conditional_gets_against_the_server(lab):
    async with lab.cluster() as cluster:
        # The v3 index: the lab's kube-apiserver sends no ETag for it, so "unchanged" is told by content.
        index = ConditionalGet(cluster, "/openapi/v3")
        document, changed = await index.fetch()
        assert changed and index.status == 200
        raw = await cluster.client.get("/openapi/v3")
        assert (index.etag is not None) == ("ETag" in raw.headers)
        again, changed = await index.fetch()
        if index.etag:
            assert index.status == 304 and not changed
        else:
            assert index.status == 200 and index_hashes(again) == index_hashes(document) and not changed
        # Aggregated discovery has an ETag: the second fetch is a 304 that reuses the first body.
        discovery = ConditionalGet(cluster, "/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        first, _ = await discovery.fetch()
        assert discovery.status == 200 and discovery.etag
        second, changed = await discovery.fetch()
        assert discovery.status == 304 and second is first and not changed
        # /openapi/v2: the streamed byte count is the document's size, and If-None-Match gives a 304.
        fetcher = V2Fetcher(cluster)
        full = await fetcher.fetch()
        reference = await cluster.client.get("/openapi/v2", headers={"Accept": V2_ACCEPT},
                                              timeout=httpx.Timeout(120.0))
        assert full.status == 200 and full.bytes == len(reference.content)
        assert full.content_type == reference.headers["Content-Type"]
        repeat = await fetcher.fetch()
        assert repeat.status == 304 and repeat.bytes == full.bytes and repeat.wire_bytes == 0


def test_probe_openapi_json(lab):
    plain = subprocess.run([*CRDSCOPE, "probe", "openapi", "--json", "--kubeconfig", lab.kubeconfig],
                           check=False, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert plain.returncode == 0, plain.stderr
    off = json.loads(plain.stdout)  # /openapi/v2 only when asked: the server builds it for each fetch
    assert off["v2_fetched_at"] is None and off["v2_note"].startswith("off") and off["v3_paths"] > 0
    done = subprocess.run([*CRDSCOPE, "probe", "openapi", "--json", "--openapi-v2", "--kubeconfig", lab.kubeconfig],
                          check=False, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    for key in ("v3_paths", "v3_seconds", "v2_bytes", "v2_seconds", "backlog", "lag_seconds"):
        assert key in sample, key
    raw = json.loads(lab.kubectl("get", "--raw", "/openapi/v3").stdout)
    assert sample["v3_paths"] == len(raw["paths"])
    assert set(sample["lag_seconds"]) == set(STAGES)
    assert sample["v2_bytes"] > 0 and sample["v2_status"] == 200


async def test_discovery_stage_from_the_discovery_probe(lab, tmp_path: Path):
    """In the monitor, the discovery probe's published view times the discovery stage: no second /apis."""
    tiny = write_tiny_crds(tmp_path / "shared", 15, prefix="shared")
    names = crd_names([tiny])
    settings = Settings().override("cadences", **steady_cadences(openapi=0.2, discovery=0.2, openapi_v2=0.0))
    async with lab.cluster() as cluster, \
            running(Monitor(cluster, settings, probes=["discovery", "openapi"], latest={}), "openapi") as (monitor, samples):
        openapi = monitor.probe("openapi")
        try:
            await async_wait_for(lambda: monitor.shared.discovery is not None and len(samples) >= 2, timeout=60,
                                 message="a first round of both probes")
            own_fetches = openapi.observer.discovery.fetches  # before the discovery probe's first view
            await asyncio.to_thread(lab.kubectl, "apply", "-f", str(tiny))

            def timed():
                by_name = {s.name: s for s in openapi.tracker.stages.values()}
                return all(by_name.get(n) and by_name[n].discovery and by_name[n].openapi_v3 for n in names)

            await async_wait_for(timed, timeout=120, interval=0.3, message="discovery and v3 times for the batch")
            assert monitor.shared.discovery is not None
            # Once the discovery probe published its view, the OpenAPI probe stopped fetching /apis
            # (one run may have been under way when the view appeared).
            own = openapi.observer.discovery.fetches
            assert own <= own_fetches + 1 and openapi.tracker.discovery_fetches > own
            by_name = {s.name: s for s in openapi.tracker.stages.values()}
            for name in names:
                assert by_name[name].established <= by_name[name].discovery, name
            assert samples[-1].discovery_unobservable is None
            assert samples[-1].v2_note.startswith("off") and samples[-1].v2_fetched_at is None
        finally:
            await asyncio.to_thread(delete_and_wait, lab, names)

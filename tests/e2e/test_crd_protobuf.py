"""The CRD watch in protobuf against the real API server: the same records as a JSON watch of the
same CRDs (real Crossplane CRDs applied with kubectl, so with their last-applied annotations), live
events included."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from crdscope.base.settings import Settings
from crdscope.connection.crdwatch import CRD_PATH, CRDRecord, CRDWatch
from tests.crdsets import crd_names, delete_crds, extract
from tests.helpers import async_wait_for

pytestmark = pytest.mark.lab

#: First-seen times are this process's clock, read at different moments by the two watches; a schema's
#: size is its encoding's (compared apart, by :func:`assert_schema_sizes_agree`).
_NOT_COMPARED = {"seen", "seen_established", "schema_bytes"}


def comparable(record: CRDRecord) -> dict:
    return {k: v for k, v in dataclasses.asdict(record).items() if k not in _NOT_COMPARED}


def assert_schema_sizes_agree(pb: dict[str, CRDRecord], js: dict[str, CRDRecord], names) -> None:
    """The schemas' protobuf lengths stand for their compact JSON bytes (what the cost model prices):
    within 20% for each CRD and 5% over the set (measured on 521 real CRDs: 0.92-1.16 and 0.97-1.02)."""
    ratios = {name: pb[name].schema_bytes / js[name].schema_bytes for name in names}
    assert all(js[name].schema_bytes > 1000 for name in names), {n: js[n].schema_bytes for n in names}
    assert all(0.8 <= ratio <= 1.2 for ratio in ratios.values()), ratios
    total = sum(pb[n].schema_bytes for n in names) / sum(js[n].schema_bytes for n in names)
    assert 0.95 <= total <= 1.05, total


def features_of_files(paths: list[Path]) -> list:
    """The cost model's features of every CRD of the files (its calibration's schema bytes)."""
    import yaml

    from crdscope.costmodel.features import features_of_spec

    return [features_of_spec(d["metadata"]["name"], d["spec"]) for path in paths
            for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]


def crd_answer_bytes(cluster) -> int:
    """Bytes of CRD list and watch answers received so far, as they came over the wire."""
    return sum(tally.bytes for (_, path), tally in cluster.traffic.by_origin_and_path().items()
               if path.endswith(CRD_PATH))


async def test_protobuf_and_json_watches_see_the_same_crds(lab, shared_crds: Path, tmp_path: Path):
    paths = extract("provider-gcp", tmp_path / "crds", groups=4)
    names = crd_names(paths)
    assert len(names) >= 10, "the slice should hold real CRDs of several groups"
    async with lab.cluster() as pb_cluster, lab.cluster() as json_cluster:
        # The protobuf watch as the monitor runs it (pausing once drained), the JSON one reading each
        # event as it comes: the pauses must lose nothing.
        pb_watch = CRDWatch(pb_cluster, coalesce=Settings().budgets.crd_watch_coalesce_seconds)
        json_watch = CRDWatch(json_cluster, protobuf=False)
        tasks = [asyncio.create_task(w.run()) for w in (pb_watch, json_watch)]
        try:
            for watch in (pb_watch, json_watch):
                await asyncio.wait_for(watch.synced.wait(), 60)
            assert (pb_watch.status.list_encoding, json_watch.status.list_encoding) == ("protobuf", "json")

            # Live: created, names accepted, established, as each watch's events tell it.
            before = crd_answer_bytes(pb_cluster), crd_answer_bytes(json_cluster)
            await asyncio.to_thread(lab.kubectl, "apply", "-f", str(tmp_path / "crds"))

            def all_established(watch: CRDWatch) -> bool:
                return all(n in watch.crds and watch.crds[n].state == "Established" for n in names)

            await async_wait_for(lambda: all_established(pb_watch) and all_established(json_watch), timeout=120,
                                 message="both watches to see the CRDs Established")
            assert (pb_watch.status.watch_encoding, json_watch.status.watch_encoding) == ("protobuf", "json")

            def same_versions() -> bool:
                return all(pb_watch.crds[n].resource_version == json_watch.crds[n].resource_version for n in names)

            await async_wait_for(same_versions, timeout=30, message="both watches at the same resourceVersions")
            # Both streams carried the CRDs' events, schemas and all (protobuf is about as long: the
            # schemas' descriptions and kubectl's annotation are text either way; the saving is the
            # server's marshalling, measured in bench/, not bytes).
            pb_bytes, json_bytes = crd_answer_bytes(pb_cluster) - before[0], crd_answer_bytes(json_cluster) - before[1]
            assert pb_bytes > 0 and json_bytes > 0
            for name in names:
                assert comparable(pb_watch.crds[name]) == comparable(json_watch.crds[name]), name
                assert pb_watch.crds[name].established_live, name  # seen happening, not listed
            assert_schema_sizes_agree(pb_watch.crds, json_watch.crds, names)
            assert pb_watch.crds[names[0]].owner == "other" and pb_watch.crds[names[0]].served_versions

            # Listed: a fresh list of each encoding gives the same records for every CRD on the server.
            pb_listed, json_listed = CRDWatch(pb_cluster), CRDWatch(json_cluster, protobuf=False)
            assert await pb_listed.sync_once() is None and await json_listed.sync_once() is None
            assert set(pb_listed.crds) == set(json_listed.crds) >= set(names)
            for name in pb_listed.crds:
                assert comparable(pb_listed.crds[name]) == comparable(json_listed.crds[name]), name
            assert_schema_sizes_agree(pb_listed.crds, json_listed.crds, names)
            assert all(pb_listed.crds[n].schema_bytes == pb_watch.crds[n].schema_bytes for n in names)
            # The JSON watch counts what the cost model prices from the files (its schemas' compact JSON;
            # the server escapes <, > and & where Python writes non-ASCII escaped: within 2%).
            priced = {crd.name: crd.schema_bytes for crd in features_of_files(paths)}
            assert all(abs(json_listed.crds[n].schema_bytes - priced[n]) <= 0.02 * priced[n] for n in names), \
                {n: (json_listed.crds[n].schema_bytes, priced[n]) for n in names}

            # Deleted: both watches drop them.
            await asyncio.to_thread(delete_crds, lab, *names)
            await async_wait_for(lambda: not set(names) & (set(pb_watch.crds) | set(json_watch.crds)), timeout=120,
                                 message="both watches to drop the deleted CRDs")
            assert pb_watch.status.reconnects == 0, pb_watch.status.errors
            assert pb_watch.status.pauses > 0 and json_watch.status.pauses == 0
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.to_thread(delete_crds, lab, *names)

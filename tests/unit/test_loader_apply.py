"""Protocol edge cases of one apply that a healthy lab does not produce on demand (MockTransport),
and the run record's journal."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from crdscope.loader.apply import Applier, ApplyFatalError
from crdscope.loader.record import RunRecord, list_runs
from crdscope.loader.safety import CREATE_ONLY
from crdscope.loader.sources import document_items
from crdscope.connection.crdwatch import MANAGED_BY_LABEL, RUN_ANNOTATION
from crdscope.base.errors import ConfigError
from tests.crdsets import tiny_crd

SERVER = "https://lab.invalid"
NAME = "widgets.apply.example.test"


class FakeCluster:
    """What the applier uses of a Cluster: a client and the server's address."""

    def __init__(self, handler) -> None:
        self.server = SERVER
        self.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(handler))


def document():
    return next(document_items(tiny_crd("apply.example.test", "Widget"), "test"))


def crd_object(labels: dict, annotations: dict, resource_version: str = "7") -> dict:
    return {"metadata": {"name": NAME, "uid": "u-1", "resourceVersion": resource_version,
                         "labels": labels, "annotations": annotations}}


async def test_a_create_whose_answer_was_lost_is_recognised_as_ours():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, json.loads(request.content or b"{}").get("metadata", {}).get("resourceVersion")))
        if request.method == "PATCH" and len(seen) == 1:
            raise httpx.ReadTimeout("lost", request=request)  # it was applied, the answer never came
        if request.method == "PATCH":
            return httpx.Response(409, json={"message": "the object has been modified"})
        return httpx.Response(200, json=crd_object({MANAGED_BY_LABEL: "crdscope"}, {RUN_ANNOTATION: "run-1"}))

    result = await Applier(FakeCluster(handler), "run-1", asyncio.Event()).apply(document(), CREATE_ONLY)
    assert (result.outcome, result.uid) == ("created", "u-1")
    assert seen == [("PATCH", "1"), ("PATCH", "1"), ("GET", None)]


async def test_a_conflict_with_an_unlabelled_crd_skips_it_without_another_write():
    writes = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH":
            writes.append(request)
            return httpx.Response(409, json={"message": "conflict"})
        return httpx.Response(200, json=crd_object({}, {}))

    result = await Applier(FakeCluster(handler), "run-1", asyncio.Event()).apply(document(), CREATE_ONLY)
    assert result.outcome == "skipped" and "without crdscope's label" in result.reason
    assert len(writes) == 1


async def test_a_conflict_with_our_own_crd_applies_over_its_current_version():
    preconditions = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH":
            preconditions.append(json.loads(request.content)["metadata"]["resourceVersion"])
            if len(preconditions) == 1:
                return httpx.Response(409, json={"message": "conflict"})
            return httpx.Response(200, json=crd_object({}, {}))
        return httpx.Response(200, json=crd_object({MANAGED_BY_LABEL: "crdscope"}, {RUN_ANNOTATION: "old"}, "42"))

    result = await Applier(FakeCluster(handler), "run-2", asyncio.Event()).apply(document(), "41")
    assert result.outcome == "updated" and preconditions == ["41", "42"]


async def test_retry_after_of_a_429_is_waited_for():
    stamps = []

    def handler(request: httpx.Request) -> httpx.Response:
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            return httpx.Response(429, headers={"Retry-After": "1"}, json={"message": "too many requests"})
        return httpx.Response(201, json=crd_object({}, {}))

    applier = Applier(FakeCluster(handler), "run-1", asyncio.Event())
    result = await applier.apply(document(), CREATE_ONLY)
    assert result.outcome == "created" and applier.retries_429 == 1
    assert stamps[1] - stamps[0] >= 1.0


async def test_5xx_is_retried_and_a_stop_during_backoff_leaves_the_crd_pending():
    calls = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503 if len(calls) == 1 else 201, json={"message": "unavailable"})

    applier = Applier(FakeCluster(flaky), "run-1", asyncio.Event())
    assert (await applier.apply(document(), CREATE_ONLY)).outcome == "created" and applier.retries_5xx == 1

    stop = asyncio.Event()
    stop.set()  # stopped: the first backoff ends the apply, and the CRD stays pending
    down = Applier(FakeCluster(lambda request: httpx.Response(503, json={})), "run-1", stop)
    assert (await down.apply(document(), CREATE_ONLY)).outcome == "pending"


async def test_403_ends_the_run_with_the_servers_words_and_422_fails_one_crd():
    forbidden = Applier(FakeCluster(lambda r: httpx.Response(403, json={"message": "user x cannot patch"})),
                        "run-1", asyncio.Event())
    with pytest.raises(ApplyFatalError, match="forbidden \\(403\\): user x cannot patch"):
        await forbidden.apply(document(), CREATE_ONLY)
    invalid = Applier(FakeCluster(lambda r: httpx.Response(422, json={"message": "spec.names.plural: Required"})),
                      "run-1", asyncio.Event())
    result = await invalid.apply(document(), CREATE_ONLY)
    assert result.outcome == "failed" and "spec.names.plural: Required" in result.reason


# --------------------------------------------------------------------------- the run record


def open_record(directory: Path, key: str = "k1", server: str = SERVER) -> RunRecord:
    return RunRecord.open(source="src", source_key=key, server=server, context="ctx", directory=directory)


def test_a_stopped_run_is_resumed_and_a_done_run_is_not(tmp_path: Path):
    first = open_record(tmp_path)
    first.crd("a", "created", uid="1")
    first.crd("a", "established")
    first.crd("b", "failed", "rejected")
    first.end("stopped")
    first.close()
    resumed = open_record(tmp_path)
    assert resumed.resumed and resumed.run_id == first.run_id and resumed.attempts == 2
    assert resumed.outcome("a").established and resumed.counts == {"created": 1, "updated": 0, "skipped": 0,
                                                                     "failed": 1}
    resumed.crd("b", "created")  # retried: it moves from failed to created, still one entry
    assert resumed.counts["failed"] == 0 and resumed.counts["created"] == 2 and resumed.established == 1
    with pytest.raises(ConfigError, match="in progress in another crdscope"):
        open_record(tmp_path)  # the journal is locked while a run uses it
    resumed.end("done")
    resumed.close()
    fresh = open_record(tmp_path)
    assert not fresh.resumed and fresh.run_id != first.run_id
    other_server = open_record(tmp_path, server="https://elsewhere.invalid")
    assert not other_server.resumed
    assert {info.run_id for info in list_runs(tmp_path)} == {first.run_id, fresh.run_id, other_server.run_id}


def test_a_torn_last_line_of_a_killed_process_is_ignored(tmp_path: Path):
    record = open_record(tmp_path, key="k2")
    record.crd("a", "created")
    record.close()
    with open(record.path, "a", encoding="utf-8") as handle:
        handle.write('{"t": 1, "name": "b", "outc')  # killed mid-write
    again = open_record(tmp_path, key="k2")
    assert again.resumed and set(again.crds) == {"a"} and again.counts["created"] == 1
    again.crd("c", "created")
    again.close()
    third = open_record(tmp_path, key="k2")
    assert set(third.crds) == {"a", "c"} and third.attempts == 3  # nothing after the torn line was lost

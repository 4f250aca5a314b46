"""CRD watch edge cases the lab cannot produce on demand: 410 mid-watch, expired continue tokens,
lines cut anywhere, a name reused by another uid."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers import mock_cluster
from crdscope.connection.crdwatch import CRD_PATH, CRDWatch, LineSplitter, WatchError, record_from


def crd(name: str, uid: str, rv: str, established: bool = True) -> dict:
    conditions = [{"type": "NamesAccepted", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}]
    if established:
        conditions.append({"type": "Established", "status": "True", "lastTransitionTime": "2026-01-02T03:04:06Z"})
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": rv,
                         "creationTimestamp": "2026-01-02T03:04:05Z",
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x" * 1000}},
            "spec": {"group": "g.test", "names": {"kind": "K", "plural": name.split(".")[0]}, "scope": "Cluster",
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            "status": {"conditions": conditions}}


@pytest.mark.parametrize("size", [1, 7, 64, 16384])
def test_line_splitter_rebuilds_lines_cut_anywhere(size):
    lines = [b"a" * 10, b"", json.dumps({"big": "x" * 100_000}).encode(), b"tail"]
    stream = b"\n".join(lines) + b"\n"
    splitter = LineSplitter()
    out = []
    for start in range(0, len(stream), size):
        out.extend(splitter.feed(stream[start:start + size]))
    assert out == lines


def test_a_reused_name_is_a_new_crd():
    first = record_from(crd("a.g.test", "uid-1", "1"), None, now=100.0)
    same = record_from(crd("a.g.test", "uid-1", "2"), first, now=200.0)
    other = record_from(crd("a.g.test", "uid-2", "3"), first, now=300.0)
    assert (same.seen, same.seen_established) == (100.0, 100.0)
    assert (other.seen, other.seen_established) == (300.0, 300.0)
    live = record_from(crd("b.g.test", "uid-3", "4", established=False), None, now=10.0, live=True)
    assert live.seen_established is None
    now_established = record_from(crd("b.g.test", "uid-3", "5"), live, now=11.0, live=True)
    assert now_established.seen_established == 11.0 and now_established.established_live
    assert record_from(crd("c.g.test", "uid-4", "6"), None, now=12.0).established_live is False


async def test_gone_mid_watch_relists_and_reconciles():
    """List {a, b, c}; the watch reports a 410; the new list has b replaced (new uid), c gone, d new."""
    lists = [
        [crd("a.g.test", "ua", "1"), crd("b.g.test", "ub", "2"), crd("c.g.test", "uc", "3")],
        [crd("a.g.test", "ua", "1"), crd("b.g.test", "ub2", "7"), crd("d.g.test", "ud", "8")],
    ]
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == CRD_PATH
        calls.append(dict(request.url.params))
        if request.url.params.get("watch") == "true":
            if len([c for c in calls if c.get("watch")]) == 1:
                body = json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                               "message": "too old resource version"}}) + "\n"
                return httpx.Response(200, content=body.encode())
            return httpx.Response(500, json={"message": "stop here"})
        items = lists.pop(0)
        return httpx.Response(200, json={"metadata": {"resourceVersion": "9"}, "items": items})

    watch = CRDWatch(mock_cluster(handler), backoff_max=0.01)
    events = []
    watch.add_listener(lambda e: events.append((e.type, e.record.name, e.record.uid)))
    await watch.list_once()
    resource_version = watch.status.resource_version
    with pytest.raises(Exception) as gone:
        await watch._watch(resource_version)
    assert type(gone.value).__name__ == "_GoneError"
    await watch.list_once()
    assert {n: r.uid for n, r in watch.crds.items()} == {"a.g.test": "ua", "b.g.test": "ub2", "d.g.test": "ud"}
    after_first = events[3:]
    assert sorted(after_first) == sorted([("DELETED", "c.g.test", "uc"), ("DELETED", "b.g.test", "ub"),
                                          ("ADDED", "b.g.test", "ub2"), ("ADDED", "d.g.test", "ud")])
    # The schema and kubectl's annotation are not kept.
    assert not hasattr(watch.crds["a.g.test"], "schema")


async def test_expired_continue_token_starts_the_list_again():
    pages = {None: ([crd("a.g.test", "ua", "1")], "tok-1"), "tok-1": None}
    served = []

    def handler(request: httpx.Request) -> httpx.Response:
        token = request.url.params.get("continue")
        served.append(token)
        if token == "tok-1" and served.count("tok-1") == 1:
            return httpx.Response(410, json={"message": "The provided continue parameter is too old"})
        if token == "tok-1":
            return httpx.Response(200, json={"metadata": {"resourceVersion": "5"}, "items": [crd("b.g.test", "ub", "2")]})
        items, nxt = pages[None]
        return httpx.Response(200, json={"metadata": {"resourceVersion": "4", "continue": nxt}, "items": items})

    watch = CRDWatch(mock_cluster(handler))
    await watch.list_once()
    assert served == [None, "tok-1", None, "tok-1"]
    assert sorted(watch.crds) == ["a.g.test", "b.g.test"]


async def test_a_forbidden_list_is_one_line():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"message": 'customresourcedefinitions.apiextensions.k8s.io is forbidden'})

    watch = CRDWatch(mock_cluster(handler))
    reason = await watch.sync_once()
    assert reason == "list CRDs answered 403: customresourcedefinitions.apiextensions.k8s.io is forbidden"
    with pytest.raises(WatchError):
        await watch.list_once()

"""Discovery parsing edge cases on canned answers (httpx.MockTransport); the lab tests cover the rest.

Expected figures are counted by hand from the documents below and in discovery_documents.py,
following kubectl's rules (api-versions: fresh group-versions; api-resources: one per group and
resource, preferred version first, no subresources, no verb-less resources).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.probes.discovery import DiscoveryProbe, make_probe, once
from crdscope.base.samples.discovery import DiscoverySample
from crdscope.connection.discovery_docs import ACCEPT_AGGREGATED, content_format, decode_in_pieces
from crdscope.probes.discovery_kubectl import cache_dir_for, inspect_cache
from crdscope.base.errors import ConfigError
from crdscope.probes.registry import sample_type
from crdscope.probes.shared import SharedState
from crdscope.base.settings import Cadences, Settings
from tests.helpers import LoopTurns
from tests.unit.discovery_documents import APIS, CORE, EXPECTED_RESOURCES, group, resource

SERVER = "https://discovery.test:6443"
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


LEGACY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    # The preferred version is listed second here: its entries override the first version's.
    "/apis": {"kind": "APIGroupList", "groups": [
        {"name": "example.test", "versions": [{"groupVersion": "example.test/v1", "version": "v1"},
                                              {"groupVersion": "example.test/v2", "version": "v2"}],
         "preferredVersion": {"groupVersion": "example.test/v2", "version": "v2"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "verbs": ["get"]}, {"name": "pods/status", "verbs": ["get"]}]},
    "/apis/example.test/v1": {"kind": "APIResourceList", "resources": [
        {"name": "widgets", "verbs": []}, {"name": "gadgets", "verbs": ["list"]}]},
    "/apis/example.test/v2": {"kind": "APIResourceList", "resources": [
        {"name": "widgets", "verbs": ["get"]}, {"name": "hidden", "verbs": []}]},
}
# By hand: 3 group-versions; resources pods, widgets.example.test (v2's entry, with verbs, replaces
# v1's verb-less one), gadgets.example.test = 3 (pods/status: subresource; hidden: no verbs).


class Server:
    """Canned discovery answers; records what was asked."""

    def __init__(self, *, aggregated: bool = True, refuse_aggregated: bool = False,
                 content_type: str = V2, apis_doc: object = None) -> None:
        self.aggregated = aggregated
        self.refuse_aggregated = refuse_aggregated
        self.content_type = content_type
        self.apis_doc = APIS if apis_doc is None else apis_doc
        self.requests: list[httpx.Request] = []
        self.status_for: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path in self.status_for:
            return httpx.Response(self.status_for[path], json={"kind": "Status", "message": f"no {path} today"})
        wants_aggregated = "g=apidiscovery.k8s.io" in request.headers.get("Accept", "")
        if path in ("/api", "/apis") and wants_aggregated and self.refuse_aggregated:
            return httpx.Response(406, json={"kind": "Status", "message": "not acceptable"})
        if path in ("/api", "/apis") and wants_aggregated and self.aggregated:
            document = CORE if path == "/api" else self.apis_doc
            body = document if isinstance(document, bytes) else json.dumps(document).encode()
            etag = f'"{hash(body) & 0xffffffff:08X}"'
            if request.headers.get("If-None-Match") == etag:
                return httpx.Response(304, headers={"ETag": etag})
            return httpx.Response(200, content=body, headers={"Content-Type": self.content_type, "ETag": etag})
        if path in LEGACY:
            return httpx.Response(200, json=LEGACY[path])
        return httpx.Response(404, json={"kind": "Status", "message": "not found"})

    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]


async def mock_cluster(server: Server) -> Cluster:
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    await cluster.client.aclose()
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(server))
    return cluster


async def test_aggregated_v2_counts_like_kubectl_and_sends_client_go_accept():
    server = Server()
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster)
    assert sample.error is None
    assert (sample.mode, sample.format, sample.fallback_reason) == ("aggregated", "v2", None)
    assert (sample.group_versions, sample.resources, sample.requests) == (4, 6, 2)
    assert sample.stale_group_versions == ("stale.test/v1",)
    assert [r.headers["Accept"] for r in server.requests] == [ACCEPT_AGGREGATED] * 2
    assert server.paths() == ["/api", "/apis"]
    assert sample.client_models == () and "client_models" in sample.unobservable


async def test_unchanged_document_costs_a_304_and_keeps_its_figures():
    server = Server()
    async with await mock_cluster(server) as cluster:
        probe = DiscoveryProbe(cluster)
        first = await probe.observe("aggregated")
        second = await probe.observe("aggregated")
    assert (first.not_modified, second.not_modified, second.not_modified_total) == (0, 2, 2)
    assert all("If-None-Match" in r.headers for r in server.requests[2:])
    assert (second.group_versions, second.resources) == (first.group_versions, first.resources)
    assert set(probe.view.resources) == EXPECTED_RESOURCES
    assert not second.changed


@pytest.mark.parametrize("content_type, expected", [
    (V2, "v2"),
    ("application/json; as=APIGroupDiscoveryList;v=v2beta1; g=apidiscovery.k8s.io;charset=utf-8", "v2beta1"),
    ("application/json", "legacy"),
    ("application/json;charset=utf-8", "legacy"),
    ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", "legacy"),
])
def test_content_type_recognition(content_type, expected):
    assert content_format(content_type) == expected


async def test_v2beta1_answer_is_parsed_as_aggregated():
    server = Server(content_type="application/json;as=APIGroupDiscoveryList;v=v2beta1;g=apidiscovery.k8s.io")
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster)
    assert (sample.mode, sample.format, sample.group_versions, sample.resources) == ("aggregated", "v2beta1", 4, 6)


async def test_406_falls_back_to_the_legacy_walk():
    server = Server(refuse_aggregated=True)
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster)
    assert sample.error is None
    assert sample.mode == "legacy" and "406" in sample.fallback_reason
    assert (sample.group_versions, sample.resources) == (3, 3)
    # The 406, then /api and /apis as plain JSON, then each group-version once.
    assert sorted(server.paths()) == sorted(["/api", "/api", "/apis", "/api/v1", "/apis/example.test/v2",
                                             "/apis/example.test/v1"])
    assert sample.requests == 5 and len(sample.client_models) == 3


async def test_plain_group_list_falls_back_without_asking_again():
    server = Server(aggregated=False)
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster)
    assert sample.mode == "legacy" and "plain JSON" in sample.fallback_reason
    assert (sample.group_versions, sample.resources) == (3, 3)
    assert sorted(server.paths()) == sorted(["/api", "/apis", "/api/v1", "/apis/example.test/v2",
                                             "/apis/example.test/v1"])


async def test_without_aggregated_discovery_the_periodic_probe_walks_rarely():
    server = Server(aggregated=False)
    async with await mock_cluster(server) as cluster:
        probe = DiscoveryProbe(cluster, Cadences(discovery_legacy=3600.0))
        first = await probe.run()
        asked = len(server.requests)
        second = await probe.run()
    assert (first.mode, first.requests, asked) == ("legacy", 5, 5)
    # Between walks: /api and /apis only, the resources of the last walk still counted.
    assert (second.mode, second.requests, len(server.requests) - asked) == ("legacy", 2, 2)
    assert (second.group_versions, second.resources) == (first.group_versions, first.resources) == (3, 3)
    assert second.walk_timestamp == first.walk_timestamp


async def test_legacy_walk_times_every_group_version_and_reports_failures():
    server = Server()
    server.status_for["/apis/example.test/v1"] = 503
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster, legacy=True, qps=1, burst=1)
    assert sample.error is None and sample.mode == "legacy"
    assert list(sample.failed_group_versions) == ["example.test/v1"]
    assert "503" in sample.failed_group_versions["example.test/v1"]
    # gadgets was only in the failed version; widgets still comes from v2.
    assert (sample.group_versions, sample.resources) == (3, 2)
    assert [s.group_version for s in sample.slowest] == sorted(
        ["v1", "example.test/v2"], key=lambda gv: -next(s.seconds for s in sample.slowest if s.group_version == gv))
    assert sample.gv_max_seconds == max(s.seconds for s in sample.slowest)
    assert [m.name for m in sample.client_models][-1] == "user qps=1 burst=1"


async def test_a_full_sample_round_trips_through_json(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path))
    cache = cache_dir_for(SERVER, tmp_path)
    cache.mkdir(parents=True)
    (cache / "servergroups.json").write_text("{}")
    server = Server()
    server.status_for["/apis/example.test/v1"] = 500
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster, legacy=True, qps=3, burst=4)
    assert sample.kubectl_cache.files == 1 and sample.slowest and sample.client_models and sample.failed_group_versions
    assert sample_type("discovery") is DiscoverySample
    assert DiscoverySample.from_json(json.loads(json.dumps(sample.to_json()))) == sample


async def test_qps_without_legacy_is_one_clear_line():
    async with await mock_cluster(Server()) as cluster:
        with pytest.raises(ConfigError, match="add --legacy"):
            await once(cluster, qps=5, burst=10)


@pytest.mark.parametrize("apis_doc, message", [
    ({"kind": "APIGroupDiscoveryList", "items": {"not": "a list"}}, "'items' is not a list"),
    ({"items": [{"metadata": {"name": "x.test"}, "versions": [{"resources": []}]}]}, "versions[].version"),
    (b"{not json", "malformed discovery document"),
    ([1, 2, 3], "is not a JSON object"),
])
async def test_malformed_documents_become_error_samples(apis_doc, message):
    async with await mock_cluster(Server(apis_doc=apis_doc)) as cluster:
        sample = await once(cluster)
    assert isinstance(sample, DiscoverySample)
    assert sample.error is not None and message in sample.error and "\n" not in sample.error


async def test_non_json_content_type_is_an_error_sample():
    async with await mock_cluster(Server(content_type="text/html")) as cluster:
        sample = await once(cluster)
    assert "unexpected Content-Type" in sample.error


@pytest.mark.parametrize("status, message", [(503, "answered 503: no /apis today"), (403, "forbidden (403)")])
async def test_failed_answers_become_error_samples(status, message):
    server = Server()
    server.status_for["/apis"] = status
    async with await mock_cluster(server) as cluster:
        sample = await once(cluster)
    assert message in sample.error


async def test_changes_and_first_seen_between_runs():
    server = Server()
    shared = SharedState()
    async with await mock_cluster(server) as cluster:
        monitor = SimpleNamespace(cluster=cluster, shared=shared,
                                  settings=Settings(cadences=Cadences(discovery_legacy=3600.0)))
        probe = make_probe(monitor)
        assert probe.name == "discovery"  # paced by the monitor: its declaration, config.toml's keys over it
        first = await probe.run()  # the periodic policy: first run walks as well
        server.apis_doc = {"items": APIS["items"] + [group("new.test", ("v1", [resource("news")], "Current"))]}
        second = await probe.run()
        server.apis_doc = APIS
        third = await probe.run()
    assert first.walk_timestamp is not None and not first.changed
    assert (second.changed, second.appeared, second.vanished) == (True, ("new.test/v1",), ())
    assert (third.changed, third.appeared, third.vanished) == (True, (), ("new.test/v1",))
    # The walk is not repeated within the floor after a change (3600 s x 0.1).
    assert second.walk_timestamp == first.walk_timestamp and second.requests == 2
    view = shared.discovery
    assert view is not None
    assert "new.test/v1" not in view.visible_since and view.visible_since["v1"] <= view.timestamp
    assert ("example.test", "v1", "gadgets") in view.served and view.stale == {"stale.test/v1"}


# --------------------------------------------------------------------------- kubectl's cache paths


@pytest.mark.parametrize("server, folder", [
    ("https://127.0.0.1:6443", "127.0.0.1_6443"),
    ("http://api.example.com", "api.example.com"),
    ("https://my-cluster.example.com:443/k8s/clusters/c-1", "my_cluster.example.com_443/k8s/clusters/c_1"),
    ("https://[::1]:6443", "___1__6443"),
    ("https://host(1):6443", "host(1)_6443"),
])
def test_cache_dir_uses_kubectls_sanitising_rule(server, folder, tmp_path: Path):
    assert cache_dir_for(server, tmp_path) == tmp_path / "discovery" / folder


def test_inspect_cache_counts_sizes_and_ages(tmp_path: Path):
    directory = cache_dir_for(SERVER, tmp_path)
    (directory / "example.test" / "v1").mkdir(parents=True)
    (directory / "servergroups.json").write_text('{"groups": []}')  # 14 bytes
    (directory / "example.test" / "v1" / "serverresources.json").write_text('{"resources": [1]}')  # 18 bytes
    (directory / "broken.json").write_text("{")  # 1 byte
    groups_mtime = (directory / "servergroups.json").stat().st_mtime
    fresh = inspect_cache(SERVER, tmp_path, now=groups_mtime + 60)
    assert (fresh.present, fresh.files, fresh.bytes, fresh.unreadable_files) == (True, 3, 33, 1)
    assert abs(fresh.age_seconds - 60) < 1e-6 and fresh.expired is False and fresh.read_seconds >= 0
    old = inspect_cache(SERVER, tmp_path, now=groups_mtime + 6 * 3600 + 1, time_reads=False)
    assert old.expired is True and old.read_seconds is None
    assert inspect_cache("https://elsewhere.test", tmp_path).present is False


# --------------------------------------------------------------------------- decoding big documents


@pytest.mark.parametrize("text", [
    json.dumps(APIS), json.dumps(APIS, indent=2), '{ "a" : [ ] , "b" : { "c" : [1, 2] }, "d": [ {"e": null} ,7 ] }',
    '{}', ' {"items": [1,2,3]} \n', '{"s": "}],{[", "items": ["]", "[", ","]}',
])
async def test_decoding_in_pieces_equals_json_loads(text):
    assert await decode_in_pieces(text.encode(), piece=4) == json.loads(text)


@pytest.mark.parametrize("text", ['{"a": [1, 2', '{"a": [1 2]}', '{"a": 1} x', '{"a" 1}', '{"a": [1,]}',
                                  '{1: 2, "a": [' + '1,' * 9 + '1]}', '{"a": 1,}', '{"a": [1], }'])
async def test_decoding_in_pieces_rejects_what_json_loads_rejects(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        await decode_in_pieces(text.encode(), piece=4)


async def test_a_big_document_lets_the_event_loop_run_while_it_is_decoded():
    items = [{"metadata": {"name": f"g{i}.example.test"}, "versions": [{"version": "v1", "resources": [
        resource(f"things{j}") for j in range(5)]}]} for i in range(3000)]
    raw = json.dumps({"kind": "APIGroupDiscoveryList", "items": items}).encode()  # about 2 MB
    async with LoopTurns() as turns:
        decoded = await decode_in_pieces(raw)
    during = turns.count
    assert decoded == json.loads(raw)
    # One turn of the loop (at least) per 64 KiB piece; json.loads alone would give it none.
    assert during >= len(raw) // (1 << 16) - 1 > 20

"""Crossplane's install chain on canned answers (httpx.MockTransport): parsing edge cases, what is asked
of the server, owner resolution, runtime states, MRAP patterns as Go matches them, the sample's round
trip through a recording.  tests/e2e/test_crossplane_chain.py checks the same against the lab.
"""

from __future__ import annotations

import asyncio
import json
import time
import types

from crdscope.probes.shared import SharedState

import httpx
import pytest

from crdscope.connection.cluster import Cluster, ClusterConfig
from crdscope.connection.crdwatch import CRD_PATH, CRDWatch, record_from
from crdscope.base.crossplane import (
    MRAPS_CRD, MRDS_CRD, PROVIDERS_CRD, REVISIONS_CRD, CrossplaneObjects, go_match, runtime_state,
)
from crdscope.connection.crossplane_read import (
    TABLE_ACCEPT, ChainReader, is_safe_start, parse_mrd_table, parse_revision, read_nodes, read_objects,
    revision_provider,
)
from crdscope.probes.inventory import InventoryProbe, once, with_crossplane
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.settings import Settings
from crdscope.session.exporter import flatten
from tests.helpers import async_wait_for

SERVER = "https://crossplane.test:6443"
NOW = time.time()
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 10))
#: RuntimeHealthy messages as Crossplane v2.0.0 writes them (internal/controller/pkg/runtime).
NO_AVAILABLE = ('post establish runtime hook failed for package: provider package deployment has no condition '
                'of type "Available" yet')
UNAVAILABLE = ("post establish runtime hook failed for package: provider package deployment is unavailable "
               "with message: Deployment does not have minimum availability.")

API_CRDS = {PROVIDERS_CRD: ("pkg.crossplane.io", "Provider", "v1"),
            REVISIONS_CRD: ("pkg.crossplane.io", "ProviderRevision", "v1"),
            MRDS_CRD: ("apiextensions.crossplane.io", "ManagedResourceDefinition", "v1alpha1"),
            MRAPS_CRD: ("apiextensions.crossplane.io", "ManagedResourceActivationPolicy", "v1alpha1")}


def crd(name: str, *, kind: str = "Thing", version: str = "v1beta1", owners: list[dict] | None = None,
        established: bool = True) -> dict:
    plural, _, group = name.partition(".")
    conditions = [{"type": "NamesAccepted", "status": "True", "lastTransitionTime": STAMP}]
    if established:
        conditions.append({"type": "Established", "status": "True", "lastTransitionTime": STAMP})
    metadata = {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "creationTimestamp": STAMP}
    if owners:
        metadata["ownerReferences"] = owners
    return {"metadata": metadata,
            "spec": {"group": group, "scope": "Cluster", "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": version, "served": True, "storage": True}]},
            "status": {"conditions": conditions}}


def api_crds(*names: str) -> list[dict]:
    return [crd(name, kind=API_CRDS[name][1], version=API_CRDS[name][2]) for name in names]


def owner(kind: str, name: str, controller: bool = False) -> dict:
    api = "pkg.crossplane.io/v1" if kind.startswith("Provider") else "apiextensions.crossplane.io/v1alpha1"
    return {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": controller}


def condition(kind: str, status: str, message: str = "") -> dict:
    return {"type": kind, "status": status, "message": message, "lastTransitionTime": STAMP}


def provider(name: str, package: str) -> dict:
    return {"metadata": {"name": name}, "spec": {"package": package},
            "status": {"currentRevision": f"{name}-r2", "resolvedPackage": package,
                       "conditions": [condition("Installed", "True"), condition("Healthy", "False", "runtime")]}}


def revision(name: str, number: int, state: str, *, package: str | None = None, mrds=(), crds=(),
             runtime: tuple[str, str] | None = None, capabilities=()) -> dict:
    refs = [{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "name": n}
            for n in mrds]
    refs += [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": n} for n in crds]
    conditions = [condition("RevisionHealthy", "True")]
    if runtime:
        conditions.append(condition("RuntimeHealthy", *runtime))
    metadata: dict = {"name": name}
    if package:
        metadata["labels"] = {"pkg.crossplane.io/package": package}
        metadata["ownerReferences"] = [owner("Provider", package, controller=True)]
    return {"metadata": metadata,
            "spec": {"desiredState": state, "image": f"registry.test/{package or name}:v{number}", "revision": number},
            "status": {"objectRefs": refs, "conditions": conditions, "capabilities": list(capabilities)}}


def mrd_table(rows: list[tuple[str, str, str]], columns=("Name", "STATE", "ESTABLISHED", "AGE")) -> dict:
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "7"},
            "columnDefinitions": [{"name": c, "type": "string"} for c in columns],
            "rows": [{"cells": [name, state, established, "5m"]} for name, state, established in rows]}


def mrap(name: str, patterns: list[str], activated: list[str]) -> dict:
    return {"metadata": {"name": name}, "spec": {"activate": patterns},
            "status": {"activated": activated, "conditions": [condition("Healthy", "True")]}}


class FakeAPI:
    """Canned list answers by path; Tables paginate by the request's limit; records every request."""

    def __init__(self, crds: list[dict], lists: dict[str, object], *, status_for: dict[str, int] | None = None,
                 nodes: list[dict] | None = None) -> None:
        self.crds = crds
        self.lists = lists
        self.status_for = status_for or {}
        self.nodes = nodes if nodes is not None else []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path in self.status_for:
            return httpx.Response(self.status_for[path], json={"kind": "Status", "message": f"no {path} for you"})
        if path == CRD_PATH:
            return httpx.Response(200, json={"metadata": {"resourceVersion": "9"}, "items": self.crds})
        if path == "/api/v1/nodes":
            return httpx.Response(200, json={"kind": "PartialObjectMetadataList", "metadata": {},
                                             "items": self.nodes[:1]})
        resource = path.rsplit("/", 1)[-1]
        answer = self.lists.get(resource)
        if answer is None:
            return httpx.Response(404, json={"kind": "Status", "message": "not found"})
        if isinstance(answer, bytes):
            return httpx.Response(200, content=answer)
        if isinstance(answer, dict) and answer.get("kind") == "Table":
            start = int(request.url.params.get("continue") or 0)
            limit = int(request.url.params.get("limit") or 1_000_000)
            page = dict(answer, rows=answer["rows"][start:start + limit])
            if start + limit < len(answer["rows"]):
                page["metadata"] = {"continue": str(start + limit)}
            return httpx.Response(200, json=page)
        return httpx.Response(200, json={"metadata": {}, "items": answer})

    def asked(self) -> list[str]:
        return [r.url.path.rsplit("/", 1)[-1] for r in self.requests if r.url.path != CRD_PATH]


def mock_cluster(api) -> Cluster:
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(api))
    return cluster


def records(crds: list[dict]) -> dict:
    return {c["metadata"]["name"]: record_from(c, now=NOW) for c in crds}


MRDS = [f"{kind}s.s3.aws.test" for kind in ("bucket", "policy", "acl", "grant")]


def family() -> tuple[list[dict], dict[str, object]]:
    """Provider aws-s3, revision 1 (inactive) and 2 (active, listing 4 MRDs), 2 MRDs Active with
    their CRDs (one created by each revision, one not Established yet), one MRAP."""
    owned = [crd(MRDS[0], owners=[owner("ManagedResourceDefinition", MRDS[0]),
                                 owner("ProviderRevision", "aws-s3-r2", controller=True)]),
             crd(MRDS[1], owners=[owner("ManagedResourceDefinition", MRDS[1]),
                                 owner("ProviderRevision", "aws-s3-r1", controller=True)], established=False)]
    crds = [*api_crds(PROVIDERS_CRD, REVISIONS_CRD, MRDS_CRD, MRAPS_CRD), *owned, crd("plain.other.test")]
    lists = {
        "providers": [provider("aws-s3", "registry.test/aws-s3:v2")],
        "providerrevisions": [
            revision("aws-s3-r1", 1, "Inactive", package="aws-s3", mrds=MRDS[:2]),
            revision("aws-s3-r2", 2, "Active", package="aws-s3", mrds=MRDS, runtime=("False", NO_AVAILABLE),
                     capabilities=["Safe_Start"]),
        ],
        "managedresourcedefinitions": mrd_table([(MRDS[0], "Active", "True"), (MRDS[1], "Active", "False"),
                                                 (MRDS[2], "Inactive", "False"), (MRDS[3], "Inactive", "False"),
                                                 ("things.loose.test", "Inactive", "False")]),
        "managedresourceactivationpolicies": [mrap("s3", ["bucket*.s3.aws.test", "policys.*"], MRDS[:2]),
                                              mrap("grants", [r"grant[s]\.s3.aws.test", "[bad"], [])],
    }
    return crds, lists


async def test_the_whole_chain_is_read_with_four_lists_and_joined():
    crds, lists = family()
    api = FakeAPI(crds, lists)
    async with mock_cluster(api) as cluster:
        sample = await once(cluster)
    assert sample.error is None
    # CRDs are counted under the Provider, whichever of its revisions controls them.
    assert sample.by_owner == {"other": 5, "Provider/aws-s3": 2}  # other: the 4 API CRDs and a plain one
    [chain] = sample.crossplane.providers
    assert (chain.name, chain.owner, chain.package) == ("aws-s3", "Provider/aws-s3", "registry.test/aws-s3:v2")
    assert [r.name for r in chain.revisions] == ["aws-s3-r2", "aws-s3-r1"]
    assert chain.revisions[0].safe_start and not chain.revisions[1].safe_start
    assert (chain.mrds, chain.mrds_active, chain.mrds_inactive, chain.mrds_established) == (4, 2, 2, 1)
    assert chain.active_mrd_names == tuple(sorted(MRDS[:2])) and chain.inactive_mrd_names == tuple(sorted(MRDS[2:]))
    assert (chain.crds, chain.crds_established, chain.expected_crds) == (2, 1, 2)
    # The lab has no Node: the runtime is "no pods", a state, with the Node list read once.
    assert chain.runtime == "no-kubelet" and "no Node" in chain.runtime_note
    assert sample.crossplane.has_nodes is False
    assert chain.revisions[1].runtime == "inactive"
    assert sample.installing["Provider/aws-s3"].expected == 2
    assert sample.crossplane.mrds_unattributed == 1  # things.loose.test: no revision lists it
    s3, grants = sorted(sample.crossplane.mraps, key=lambda m: m.name, reverse=True)
    assert (s3.patterns, s3.activated, s3.matching, s3.matching_inactive) == (
        ("bucket*.s3.aws.test", "policys.*"), 2, 2, 0)
    assert (grants.activated, grants.matching, grants.matching_inactive) == (0, 1, 1)
    assert (sample.mrds.total, sample.mrds.active, sample.mrds.inactive) == (5, 2, 3)
    # Four lists from the watch cache and one Node list (one item, from etcd); MRDs as a Table, no objects.
    assert sorted(api.asked()) == sorted(["providers", "providerrevisions", "managedresourcedefinitions",
                                          "managedresourceactivationpolicies", "nodes"])
    for request in api.requests[1:]:
        assert request.url.params.get("resourceVersion") == ("0" if "crossplane.io" in request.url.path else None)
    table = next(r for r in api.requests if r.url.path.endswith("managedresourcedefinitions"))
    assert table.headers["Accept"] == TABLE_ACCEPT and table.url.params["includeObject"] == "None"
    # What is recorded replays equal, and the exporter walks it without clashes.
    assert InventorySample.from_json(json.loads(json.dumps(sample.to_json()))) == sample
    series = list(flatten("inventory", sample))
    assert ("crdscope_inventory_crossplane_providers_mrds_active", {"provider": "aws-s3"}, 2.0, False) in series


async def test_mrd_pages_follow_continue_tokens_without_a_resource_version():
    crds, lists = family()
    rows = [(f"k{i}s.big.test", "Active" if i % 3 else "Inactive", "True") for i in range(4500)]
    lists["managedresourcedefinitions"] = mrd_table(rows)
    api = FakeAPI(crds, lists)
    async with mock_cluster(api) as cluster:
        objects = await read_objects(cluster, records(crds))
    pages = [r for r in api.requests if r.url.path.endswith("managedresourcedefinitions")]
    assert len(pages) == 3  # 2,000 rows a page
    assert pages[0].url.params["resourceVersion"] == "0" and "continue" not in pages[0].url.params
    assert all("resourceVersion" not in p.url.params and p.url.params["continue"] for p in pages[1:])
    assert objects.mrds is not None and len(objects.mrds) == 4500


async def test_forbidden_and_broken_parts_are_reasons_and_owners_fall_back():
    crds, lists = family()
    lists["managedresourceactivationpolicies"] = b"<html>proxy error</html>"
    api = FakeAPI(crds, lists, status_for={"/apis/pkg.crossplane.io/v1/providerrevisions": 403})
    async with mock_cluster(api) as cluster:
        sample = await once(cluster)
    chain = sample.crossplane
    assert sample.error is None and chain.present
    assert chain.unobservable["providerrevisions"].startswith("list providerrevisions answered 403: no ")
    assert chain.unobservable["mraps"] == "list managedresourceactivationpolicies: not a JSON list answer"
    # Without revisions no CRD can be traced to its Provider: the revisions stay the owners.
    assert sample.by_owner["ProviderRevision/aws-s3-r2"] == sample.by_owner["ProviderRevision/aws-s3-r1"] == 1
    [alone] = chain.providers
    assert (alone.name, alone.revisions, alone.mrds, alone.crds) == ("aws-s3", (), 0, 0)
    assert chain.mrds_unattributed == 0  # unknown, not "all of them"
    assert "nodes" not in api.asked()  # no runtime read, no reason to ask


async def test_a_dead_server_is_a_reason_not_an_exception():
    crds, _ = family()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with mock_cluster(refuse) as cluster:
        objects = await read_objects(cluster, records(crds))
    assert objects.present and objects.providers is None and objects.mrds is None
    assert set(objects.unobservable) == {"providers", "providerrevisions", "mrds", "mraps"}
    assert all("crossplane.test" in reason for reason in objects.unobservable.values())


async def test_only_apis_that_exist_are_listed():
    # Crossplane v1: Providers and revisions, no MRD or MRAP API.
    crds = [*api_crds(PROVIDERS_CRD, REVISIONS_CRD),
            crd("buckets.s3.v1.test", owners=[owner("ProviderRevision", "old-r1", controller=True)])]
    lists = {"providers": [provider("old", "registry.test/old:v1")],
             "providerrevisions": [revision("old-r1", 1, "Active", package="old", crds=["buckets.s3.v1.test", "x.y"],
                                            runtime=("True", ""))]}
    api = FakeAPI(crds, lists)
    async with mock_cluster(api) as cluster:
        sample = await once(cluster)
    assert sorted(api.asked()) == ["providerrevisions", "providers"]
    assert sample.mrds.present is False and sample.mrds.unobservable
    [old] = sample.crossplane.providers
    assert (old.runtime, old.crds, old.expected_crds) == ("healthy", 1, 2)  # v1 revisions list CRDs
    assert sample.installing["Provider/old"].expected == 2
    # No Crossplane at all: nothing is asked, and the chain says so.
    api = FakeAPI([crd("plain.other.test")], {})
    async with mock_cluster(api) as cluster:
        sample = await once(cluster)
    assert api.asked() == [] and not sample.crossplane.present and sample.crossplane.providers == ()


async def test_an_unclaimed_revision_keeps_its_own_name_as_owner():
    crds = [*api_crds(REVISIONS_CRD, MRDS_CRD),
            crd("kind0s.pr.test", owners=[owner("ProviderRevision", "made-up", controller=True)])]
    lists = {"providerrevisions": [revision("made-up", 1, "Active", crds=[f"kind{i}s.pr.test" for i in range(5)])],
             "managedresourcedefinitions": mrd_table([])}
    async with mock_cluster(FakeAPI(crds, lists)) as cluster:
        sample = await once(cluster)
    assert sample.by_owner["ProviderRevision/made-up"] == 1
    assert sample.installing["ProviderRevision/made-up"].expected == 5
    assert [r.name for r in sample.crossplane.orphan_revisions] == ["made-up"]
    assert sample.crossplane.providers == ()


def test_mrd_tables_without_state_or_with_short_rows():
    table = {"columnDefinitions": [{"name": "Name"}, {"name": "Age"}],
             "rows": [{"cells": ["a.b.test", "1m"]}, {"cells": []}, {"nothing": 1}, "junk"]}
    assert [(r.name, r.state, r.established) for r in parse_mrd_table(table)] == [("a.b.test", "", False)]
    reordered = {"columnDefinitions": [{"name": "ESTABLISHED"}, {"name": "Name"}, {"name": "STATE"}],
                 "rows": [{"cells": ["True", "c.d.test"]}, {"cells": [None, "e.f.test", "Active"]}]}
    assert [(r.name, r.state, r.established) for r in parse_mrd_table(reordered)] == [
        ("c.d.test", "", True), ("e.f.test", "Active", False)]


def test_revision_parsing_edge_cases():
    odd = parse_revision({"metadata": {"name": "odd", "ownerReferences": [
        {"apiVersion": "other.test/v1", "kind": "Provider", "name": "impostor"},
        {"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider", "name": "real"}]},
        "spec": {"revision": "not-a-number"}, "status": {"objectRefs": ["junk", {"kind": "ManagedResourceDefinition",
                                                                                  "name": "m.test"}]}})
    assert (odd.provider, odd.info.revision, odd.mrd_names, odd.runtime_condition) == ("real", 0, ("m.test",), None)
    assert revision_provider({"labels": {"pkg.crossplane.io/package": "by-label"},
                              "ownerReferences": [owner("Provider", "by-owner", True)]}) == "by-label"
    assert revision_provider({}) == ""
    assert is_safe_start(["safe-start"]) and is_safe_start(["SafeStart"]) and is_safe_start(["safe_START"])
    assert not is_safe_start(["safe-start-later", "starter"])


@pytest.mark.parametrize(("condition", "has_nodes", "state"), [
    (("False", NO_AVAILABLE), False, "no-kubelet"),
    (("False", UNAVAILABLE), False, "no-kubelet"),
    (("False", NO_AVAILABLE), None, "deployment-unavailable"),
    (("False", UNAVAILABLE), True, "deployment-unavailable"),
    (("False", "Package revision is not healthy yet"), False, "waiting"),
    (("False", "Waiting for signature verification to complete"), None, "waiting"),
    (("False", "post establish runtime hook failed for package: cannot apply provider package service"), False,
     "unhealthy"),
    (("Unknown", ""), None, "unknown"),
    (("True", ""), False, "healthy"),
    (None, None, "unknown"),
])
def test_runtime_states(condition, has_nodes, state):
    assert runtime_state("Active", condition, has_nodes)[0] == state
    assert runtime_state("Inactive", condition, has_nodes)[0] == "inactive"


@pytest.mark.parametrize(("pattern", "name", "matches"), [
    ("*", "buckets.s3.aws.upbound.io", True),
    ("*.aws.upbound.io", "buckets.s3.aws.upbound.io", True),  # * crosses dots (only / stops it)
    ("*.aws.upbound.io", "buckets.s3.gcp.upbound.io", False),
    ("bucket?.s3.aws.upbound.io", "buckets.s3.aws.upbound.io", True),
    ("[a-c]uckets.*", "buckets.x", True),
    ("[^a-c]uckets.*", "buckets.x", False),
    ("[!a-c]uckets.*", "!uckets.x", True),  # Go has no "!" negation: a literal member
    (r"\*.x", "*.x", True),
    (r"\*.x", "a.x", False),
    ("[z-a]*", "anything", False),  # an empty range matches nothing
    ("[", "[", False),  # malformed: no match, as Crossplane ignores the error
    ("[]a]", "]", False),
    ("[a-]", "a", False),
    ("abc\\", "abc", False),
    ("a*/b", "ab/b", True),
    ("*", "a/b", False),
])
def test_mrap_patterns_match_as_go_filepath_match(pattern, name, matches):
    assert go_match(pattern, name) is matches


async def test_the_reader_reads_on_its_cadence_and_asks_for_nodes_rarely():
    crds, lists = family()
    api = FakeAPI(crds, lists, nodes=[{"metadata": {"name": "node-1"}}])
    known = records(crds)
    async with mock_cluster(api) as cluster:
        reader = ChainReader(cluster, busy=30.0, idle=60.0)
        first = await reader.refresh(known, events=5, now=1000.0)
        assert first.has_nodes is True and api.asked().count("nodes") == 1
        count = len(api.requests)
        await reader.refresh(known, events=5, now=1020.0)  # nothing changed, not idle long enough
        await reader.refresh(known, events=6, now=1020.0)  # a CRD changed, but within the busy cadence
        assert len(api.requests) == count
        await reader.refresh(known, events=6, now=1031.0)  # changed and 31 s on: read
        assert len(api.requests) == count + 4  # no second Node list within 10 minutes
        await reader.refresh(known, events=6, now=1092.0)  # idle cadence
        assert len(api.requests) == count + 8
        del known[MRAPS_CRD]  # an API went away: read at once, without it
        await reader.refresh(known, events=6, now=1093.0)
        assert len(api.requests) == count + 11
        await reader.refresh(known, events=6, now=1700.0)
        assert api.asked().count("nodes") == 2
    objects = reader.objects
    assert isinstance(objects, CrossplaneObjects) and objects.has_nodes is True
    chain = with_crossplane(list(known.values()), NOW, objects).crossplane
    assert chain.providers[0].runtime == "deployment-unavailable"  # Nodes exist: not explained by a missing kubelet


async def test_mrds_appearing_without_a_crd_change_keep_the_busy_cadence():
    # A safe-start package makes MRDs, not CRDs: the CRD watch sees nothing while they appear.
    crds, lists = family()
    api = FakeAPI(crds, lists)
    known = records(crds)
    async with mock_cluster(api) as cluster:
        reader = ChainReader(cluster, busy=30.0, idle=300.0)
        await reader.refresh(known, events=5, now=1000.0)
        table = lists["managedresourcedefinitions"]
        lists["managedresourcedefinitions"] = dict(table, rows=[*table["rows"], *mrd_table(
            [("more.loose.test", "Inactive", "False")])["rows"]])
        count = len(api.requests)
        await reader.refresh(known, events=5, now=1031.0)  # the first read found the chain new: read
        assert len(api.requests) == count + 4 and reader.moving  # one more MRD
        await reader.refresh(known, events=5, now=1062.0)  # still moving at the last read: read again
        assert len(api.requests) == count + 8 and not reader.moving
        await reader.refresh(known, events=5, now=1093.0)  # still: only the idle cadence reads
        assert len(api.requests) == count + 8


class SlowAPI(FakeAPI):
    """Answers Crossplane lists only once ``go`` is set (a server slow to list)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.go = asyncio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        await self.go.wait()
        return self(request)


async def test_a_slow_chain_read_never_holds_the_crd_counts():
    crds, lists = family()
    api = SlowAPI(crds, lists)
    cluster = Cluster(ClusterConfig(server=SERVER, context="mock", user="mock", kubeconfig=()))
    cluster.client = httpx.AsyncClient(base_url=SERVER, transport=httpx.MockTransport(api.handle))
    watch = CRDWatch(cluster)
    watch.crds.update(records(crds))
    watch.synced.set()
    monitor = types.SimpleNamespace(cluster=cluster, crds=watch, shared=SharedState(), settings=Settings())
    probe = InventoryProbe(monitor)
    probe.cadence = 0.2  # as the scheduler paces it with [cadences] inventory = 0.2
    async with cluster:
        first = await asyncio.wait_for(probe.run(), timeout=5)
        # The counts come at once, the owners as the CRD watch names them until the chain is read.
        assert first.crds == len(crds) and not first.crossplane.present
        assert first.by_owner["ProviderRevision/aws-s3-r2"] == 1
        api.go.set()

        async def chained() -> InventorySample | None:
            sample = await probe.run()
            return sample if sample.crossplane.present else None

        later = await async_wait_for(chained, timeout=5, message="a sample with the chain")
        assert later.by_owner["Provider/aws-s3"] == 2 and later.crds == first.crds
        api.go.clear()
        watch.status.events += 1
        probe.chain.busy = probe.chain.idle = 0.0  # due again: this read hangs ...
        await probe.run()
        assert probe._reading is not None and not probe._reading.done()
        await probe.aclose()  # ... until the monitor closes its probes
        assert probe._reading.cancelled()


async def test_objects_of_another_shape_are_skipped_not_fatal():
    crds, lists = family()
    lists["providerrevisions"].append({"metadata": {"name": "odd"}, "spec": ["not", "a", "map"]})
    lists["providers"].append({"metadata": "junk"})
    lists["managedresourceactivationpolicies"] = json.dumps({"items": 5}).encode()  # items that are not a list
    async with mock_cluster(FakeAPI(crds, lists)) as cluster:
        sample = await once(cluster)
    assert sample.error is None
    assert [p.name for p in sample.crossplane.providers] == ["aws-s3"]
    assert [r.name for r in sample.crossplane.providers[0].revisions] == ["aws-s3-r2", "aws-s3-r1"]
    assert sample.crossplane.unobservable["mraps"].endswith("not a JSON list answer")


async def test_the_node_list_asks_for_one_item_and_follows_nothing():
    api = FakeAPI([], {}, nodes=[{"metadata": {"name": f"n{i}"}} for i in range(3)])
    async with mock_cluster(api) as cluster:
        assert await read_nodes(cluster) is True
    [request] = api.requests
    assert request.url.params["limit"] == "1" and "resourceVersion" not in request.url.params
    assert "PartialObjectMetadataList" in request.headers["Accept"]


async def test_probe_inventory_for_people_shows_the_chain_as_tables():
    from crdscope.cli.output import render_sample

    crds, lists = family()
    async with mock_cluster(FakeAPI(crds, lists)) as cluster:
        sample = await once(cluster)
    text = render_sample("inventory", sample.to_json(), now=sample.timestamp + 5)
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("provider "))
    assert lines[header].split()[:3] == ["provider", "package", "revision"]
    row = lines[header + 1].split()
    assert row[:6] == ["aws-s3", "registry.test/aws-s3:v2", "r2", "Active", "healthy", "(+1)"]
    assert row[-1] == "no-kubelet"
    assert any(line.strip().startswith("runtime") and "no Node" in line for line in lines)
    assert "activation policies:" in lines
    # No Node: said once for every runtime, under the tables.
    assert "nodes     none" in text
    assert "runtimes  no Node: no kubelet runs provider pods here (1 that should run cannot)" in text
    assert "{'" not in text and '{"' not in text  # no dicts dumped on a line
    # Without Crossplane the output is the generic one, as before.
    async with mock_cluster(FakeAPI([crd("plain.other.test")], {})) as cluster:
        plain = await once(cluster)
    assert "crossplane" not in render_sample("inventory", plain.to_json()).lower().replace("crossplane v2", "")


def test_an_owner_with_every_expected_crd_established_is_done():
    from crdscope.probes.inventory import owner_install

    owned = [record_from(c, now=NOW) for c in (crd("a.x.test"), crd("b.x.test"))]
    progress = owner_install(owned, NOW, 60.0, expected=2)
    assert progress is not None and progress.eta_seconds is None
    assert progress.eta_note == "all 2 expected CRDs are Established"


def test_a_v2_4_revision_says_whether_its_runtime_awaits_activation():
    """Crossplane v2.4.2 writes RuntimeActive (apis/pkg/v1/conditions.go): False, AwaitingActivation while
    a safe-start runtime is scaled to zero; the RuntimeHealthy time says since when the runtime is as it is."""
    from crdscope.connection.crossplane_read import parse_revision

    conditions = [
        {"type": "RevisionHealthy", "status": "True", "reason": "HealthyPackageRevision"},
        {"type": "RuntimeHealthy", "status": "True", "reason": "HealthyPackageRevision",
         "lastTransitionTime": "2026-12-07T19:00:00Z"},
        {"type": "RuntimeActive", "status": "False", "reason": "AwaitingActivation",
         "message": "Package runtime is scaled to zero; awaiting the first ManagedResourceDefinition to be activated",
         "lastTransitionTime": "2026-12-07T19:00:00Z"}]
    revision = parse_revision({"metadata": {"name": "aws-sqs-r1", "labels": {"pkg.crossplane.io/package": "aws-sqs"}},
                               "spec": {"desiredState": "Active", "revision": 1},
                               "status": {"conditions": conditions, "capabilities": ["safe-start"]}})
    assert (revision.info.runtime_active, revision.info.runtime_active_reason) == ("False", "AwaitingActivation")
    assert revision.info.runtime_since == 1796670000.0 and revision.info.safe_start
    # An older Crossplane (no RuntimeActive), a malformed time: absent, not an error.
    conditions[1]["lastTransitionTime"] = "yesterday"
    older = parse_revision({"metadata": {"name": "r"}, "spec": {}, "status": {"conditions": conditions[:2]}})
    assert (older.info.runtime_active, older.info.runtime_active_reason, older.info.runtime_since) == ("", "", None)


def test_provider_config_kinds_stay_crds_on_crossplane_2_4():
    """internal/converter/custom_to_managed.go (v2.4.2): ProviderConfig, ClusterProviderConfig and their
    usages are not converted; every other CRD of a provider package becomes an MRD."""
    from crdscope.base.crossplane import PLAIN_CRD_KINDS, becomes_mrd

    assert not any(becomes_mrd(f"{kind.lower()}s.aws.upbound.io") for kind in PLAIN_CRD_KINDS)
    assert not becomes_mrd("clusterproviderconfigs.aws.m.upbound.io")
    assert becomes_mrd("queues.sqs.aws.upbound.io") and becomes_mrd("storeconfigs.aws.upbound.io")

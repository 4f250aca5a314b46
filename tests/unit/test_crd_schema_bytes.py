"""What the CRD watch keeps of each schema: its size as the cost model counts it (``schema_bytes``), and
per API group the terms the model prices (``CRDWatch.terms``), kept as CRDs come, change and go.

JSON: the schema's text as the API server writes it (Go's encoding: ``<`` as ``\\u003c``, UTF-8) gives
the cost model's feature exactly.  Protobuf: the schema's protobuf length stands for it (the watch
never walks a schema); how close that is, on real provider CRDs, is measured here.
"""

from __future__ import annotations

import copy
import statistics
import tarfile

import httpx
import pytest
import yaml

from crdscope.base.samples.attribution import GroupTerms
from crdscope.connection.crd_decode import decode_event, decode_page
from crdscope.connection.crdwatch import CRD_PATH, CRDWatch, record_from
from crdscope.costmodel.features import features_of_spec
from tests.crdsets import archive
from tests.helpers import mock_cluster
from tests.protobuf_writer import go_json, schema_message

SCHEMA = {"type": "object", "description": "Ports <1024> & names: ünïcode, 😀, a \"quote\" and a\nnewline",
          "properties": {"spec": {"type": "object", "properties": {
              "size": {"type": "integer", "maximum": 100, "enum": [1, 10, 100]},
              "name": {"type": "string", "pattern": "^[a-z]+$", "default": "<none>"}}}}}


def crd(name: str, group: str, uid: str, rv: str, *, versions: int = 1, schema: dict | None = None) -> dict:
    return {"metadata": {"name": name, "uid": uid, "resourceVersion": rv, "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"group": group, "names": {"kind": "K", "plural": name.split(".")[0]}, "scope": "Cluster",
                     "versions": [{"name": f"v{i}", "served": True, "storage": i == 1,
                                   "schema": {"openAPIV3Schema": schema or SCHEMA}} for i in range(1, versions + 1)]
                     + [{"name": "v0", "served": False, "storage": False, "schema": {"openAPIV3Schema": SCHEMA}}]},
            "status": {"conditions": []}}


def go_text(value: dict) -> bytes:
    """A list page or event as the API server writes it."""
    return go_json(value)


def test_the_json_watch_measures_a_schema_as_the_cost_model_counts_it():
    obj = crd("ks.g.test", "g.test", "u1", "1", versions=2)
    expected = features_of_spec(obj["metadata"]["name"], obj["spec"]).schema_bytes  # the unserved v0 not counted
    page = decode_page(go_text({"metadata": {}, "items": [obj]}))
    event = decode_event(go_text({"type": "ADDED", "object": obj}))
    # As the server sends it (Go writes "<" as \\u003c and non-ASCII as UTF-8: a few percent off
    # Python's compact json.dumps here, with every such character in a short schema).
    for item in (page["items"][0], event["object"]):
        assert record_from(item).schema_bytes == pytest.approx(expected, rel=0.05)
    assert record_from(obj).schema_bytes == expected  # a whole object: its schema's compact JSON
    assert "openAPIV3Schema" not in str(page) + str(event), "the schema is measured, never kept"


@pytest.mark.shared_crds
@pytest.mark.parametrize("provider", ["provider-aws", "provider-gcp"])
def test_real_schemas_measured_from_the_json_and_the_protobuf(shared_crds, provider):
    """Every 5th CRD of a real provider (100 of them): the JSON's figure is the feature itself; the protobuf's is within
    a few percent (the figures the crd_proto docstring quotes)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    ratios, json_total, proto_total = [], 0, 0
    with tarfile.open(archive(provider), "r:xz") as tar:  # read in the archive's order: xz cannot seek back
        files = (m for m in tar if m.isfile() and m.name.endswith(".yaml"))
        for index, member in enumerate(files):
            if len(ratios) >= 100:
                break
            if index % 5:
                continue
            document = yaml.load(tar.extractfile(member).read(), Loader=loader)
            feature = features_of_spec(document["metadata"]["name"], document["spec"]).schema_bytes
            item = {**copy.deepcopy(document), "status": {}}
            decoded = decode_page(go_text({"metadata": {}, "items": [item]}))["items"][0]
            assert record_from(decoded).schema_bytes == pytest.approx(feature, rel=0.01), document["metadata"]["name"]
            served = [v["schema"]["openAPIV3Schema"] for v in document["spec"]["versions"]
                      if v.get("served", True) and v.get("schema")]
            proto = sum(len(schema_message(schema)) for schema in served)
            json_total, proto_total = json_total + feature, proto_total + proto
            ratios.append(proto / feature)
    ratios.sort()
    assert 0.97 <= proto_total / json_total <= 1.03
    assert ratios[len(ratios) // 20] >= 0.95 and ratios[-len(ratios) // 20 - 1] <= 1.05
    assert 0.97 <= statistics.median(ratios) <= 1.03


def terms_of(watch: CRDWatch) -> dict[str, GroupTerms]:
    """The terms recounted from the watch's records, the slow way."""
    counted: dict[str, GroupTerms] = {}
    for record in watch.crds.values():
        counted[record.group] = counted.get(record.group, GroupTerms()).plus(
            1, max(1, len(record.served_versions)), record.schema_bytes)
    return counted


async def test_the_watch_keeps_each_groups_terms_as_crds_come_change_and_go():
    big = {"type": "object", "description": "x" * 5000}
    lists = [
        [crd("a.g.test", "g.test", "ua", "1"), crd("b.g.test", "g.test", "ub", "2", versions=2),
         crd("c.h.test", "h.test", "uc", "3")],
        # b changed its schema, c was deleted and made again in another group... by a new uid; d is new.
        [crd("a.g.test", "g.test", "ua", "1"), crd("b.g.test", "g.test", "ub", "5", schema=big),
         crd("c.h.test", "i.test", "uc2", "6"), crd("d.h.test", "h.test", "ud", "7")],
        [crd("a.g.test", "g.test", "ua", "1")],
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == CRD_PATH
        return httpx.Response(200, content=go_text({"metadata": {"resourceVersion": "9"}, "items": lists.pop(0)}))

    watch = CRDWatch(mock_cluster(handler))
    seen = []
    for _ in range(3):
        await watch.list_once()
        assert watch.terms.snapshot() == terms_of(watch)
        seen.append(watch.terms.snapshot())
    first, second, third = seen
    one = first["h.test"].schema_bytes
    assert one == pytest.approx(features_of_spec("a.g.test", crd("a.g.test", "g.test", "ua", "1")["spec"]).schema_bytes,
                                rel=0.05)
    assert first == {"g.test": GroupTerms(2, 3, 3 * one), "h.test": GroupTerms(1, 1, one)}
    assert set(second) == {"g.test", "h.test", "i.test"} and second["g.test"].schema_bytes > 5000
    assert third == {"g.test": GroupTerms(1, 1, one)}, "a group with no CRD left is gone"

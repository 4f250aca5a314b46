"""The cost model without a cluster: features, built discovery sizes, fitting, coefficients, estimates.

Figures that claim cluster behaviour are checked against a real lab in tests/e2e/test_estimate.py;
here the expected values come from documents a real kube-apiserver 1.37 wrote (quoted below), from
arithmetic done by hand, or from a coefficients file written by the test itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscope.costmodel import coefficients as coefficients_module
from crdscope.costmodel.coefficients import for_minor, parse_minor
from crdscope.costmodel.documents import aggregated_bytes
from crdscope.costmodel.features import features_of_spec, totals
from crdscope.costmodel.fitting import fit_terms, least_squares
from crdscope.costmodel.model import estimate
from crdscope.costmodel.report import to_json, to_markdown, to_table
from crdscope.base.errors import ConfigError

#: /apis (aggregated, compact) of a kube-apiserver v1.37.2 lab: the whole entry of a group holding one CRD.
REAL_GROUP_ENTRY = (
    '{"metadata":{"name":"ml.synthetic.crdscope.dev"},"versions":[{"version":"v1beta1","resources":[{"resource":'
    '"storesubnets","responseKind":{"group":"ml.synthetic.crdscope.dev","version":"v1beta1","kind":"StoreSubnet"},'
    '"scope":"Cluster","singularResource":"storesubnet","verbs":["delete","deletecollection","get","list","patch",'
    '"create","update","watch"],"categories":["crossplane","managed","synthetic"],"subresources":[{"subresource":'
    '"status","responseKind":{"group":"ml.synthetic.crdscope.dev","version":"v1beta1","kind":"StoreSubnet"},'
    '"verbs":["get","patch","update"]}]}],"freshness":"Current"}]}'
)

SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
             "x-kubernetes-validations": [{"rule": "self.a != ''"}]},
    "status": {"type": "object"}}}


def spec(versions=("v1",), served=None, group="ml.synthetic.crdscope.dev", kind="StoreSubnet", scope="Cluster"):
    served = served or versions
    return {"group": group, "scope": scope,
            "names": {"kind": kind, "plural": kind.lower() + "s", "singular": kind.lower(),
                      "categories": ["crossplane", "managed", "synthetic"]},
            "conversion": {"strategy": "None"},
            "versions": [{"name": v, "served": v in served, "storage": i == 0, "subresources": {"status": {}},
                          "additionalPrinterColumns": [{"name": "READY", "type": "string", "jsonPath": ".x"}],
                          "schema": {"openAPIV3Schema": SCHEMA}} for i, v in enumerate(versions)]}


def test_features_count_what_each_served_version_compiles():
    crd = features_of_spec("storesubnets.ml.synthetic.crdscope.dev", spec(("v1beta1", "v1beta2", "v1"),
                                                                           served=("v1beta1", "v1beta2")))
    schema_bytes = len(json.dumps(SCHEMA, separators=(",", ":")))
    assert crd.served_versions == ("v1beta1", "v1beta2")
    assert crd.storage_version == "v1beta1"
    assert crd.schema_bytes == 2 * schema_bytes  # two served versions, the unserved one costs no schema
    assert crd.schema_properties == 2 * 4  # spec, status, a, b per served version
    assert crd.cel_rules == 2
    assert crd.printer_columns == 2
    assert crd.subresources == ("status",)
    assert crd.conversion == "None"
    assert not crd.namespaced
    assert crd.group_versions == ("ml.synthetic.crdscope.dev/v1beta1", "ml.synthetic.crdscope.dev/v1beta2")


def test_aggregated_bytes_of_a_new_group_match_the_real_servers_entry():
    crd = features_of_spec("storesubnets.ml.synthetic.crdscope.dev", spec(("v1beta1",)))
    # The entry and the comma separating it from the previous group.
    assert aggregated_bytes([crd]) == len(REAL_GROUP_ENTRY) + 1


def test_a_group_version_the_target_serves_adds_only_the_resource():
    crd = features_of_spec("storesubnets.ml.synthetic.crdscope.dev", spec(("v1beta1",)))
    alone = aggregated_bytes([crd])
    known = aggregated_bytes([crd], known_groups={crd.group}, known_group_versions=set(crd.group_versions))
    resource = REAL_GROUP_ENTRY[REAL_GROUP_ENTRY.index('{"resource"'):REAL_GROUP_ENTRY.index('],"freshness"')]
    assert known == len(resource) + 1
    assert alone > known


def test_totals_count_new_group_versions_only():
    a = features_of_spec("as.g.example", spec(("v1", "v2"), group="g.example", kind="A"))
    b = features_of_spec("bs.g.example", spec(("v1",), group="g.example", kind="B"))
    found = totals([a, b], known_group_versions={"g.example/v2"})
    assert (found.crds, found.served_versions, found.group_versions, found.groups, found.resources) == (2, 3, 1, 1, 3)


def test_least_squares_recovers_exact_coefficients():
    rows = [[1, 2], [2, 1], [3, 5], [4, 4]]
    ys = [2 * a + 3 * b for a, b in rows]
    assert least_squares(rows, ys) == pytest.approx([2, 3])


def test_a_term_that_would_be_negative_is_dropped():
    rows = [{"crds": n, "served_versions": n, "schema_bytes": 100 * n + (n % 2)} for n in (10, 20, 30, 40)]
    ys = [5.0 * r["crds"] for r in rows]
    fit = fit_terms(rows, ys, ("crds", "served_versions", "schema_bytes"))
    assert all(value >= 0 for value in fit.coefficients.values())
    predicted = [sum(c * r[t] for t, c in fit.coefficients.items()) for r in rows]
    assert predicted == pytest.approx(ys, rel=1e-6)


def write_coefficients(path: Path, minors=("1.30", "1.37")) -> Path:
    entry = {
        "kubernetes_version": "v1.37.2",
        "baseline": {"rss_bytes": 300 * 2**20, "heap_bytes": 150 * 2**20, "aggregated_bytes": 27000,
                     "legacy_bytes": 29000, "group_versions": 23, "openapi_v3_paths": 49,
                     "openapi_v2_bytes": 2_000_000, "etcd_connections": 69, "legacy_request_seconds": 0.002},
        "figures": {
            "rss_bytes": {"terms": {"crds": 2 * 2**20, "served_versions": 1 * 2**20, "schema_bytes": 10.0},
                          "relative_rms": 0.1},
            "heap_bytes": {"terms": {"crds": 2**20}, "relative_rms": 0.02},
            "openapi_v2_bytes": {"terms": {"schema_bytes": 1.0}, "relative_rms": 0.0},
            "etcd_connections": {"terms": {"crds": 0.0}, "relative_rms": 0.0},
            "aggregated_bytes": {"scale": 1.0},
            "legacy_bytes": {"scale": 1.0},
            "install_seconds": {"terms": {"crds": 0.1}, "relative_rms": 0.05},
            "establish_rate": {"per_second": 10.0},
        },
    }
    path.write_text(json.dumps({"format": 1, "minors": {m: {**entry, "kubernetes_version": f"v{m}.0"}
                                                        for m in minors}}))
    return path


@pytest.fixture
def coefficients_file(tmp_path, monkeypatch):
    path = write_coefficients(tmp_path / "coefficients.json")
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    return path


def test_a_minor_without_coefficients_uses_the_nearest_and_says_so(coefficients_file):
    assert for_minor("1.37").note.startswith("model for 1.37")
    used = for_minor("v1.35.1")
    assert used.minor == "1.37"
    assert "1.35 has no coefficients of its own" in used.note
    assert for_minor("1.31").minor == "1.30"


def test_minor_versions_are_parsed_or_refused():
    assert parse_minor("v1.37.2") == (1, 37)
    with pytest.raises(ConfigError):
        parse_minor("latest")


def test_estimate_sums_the_terms_and_counts_the_walk(coefficients_file):
    crds = [features_of_spec(f"k{i}s.g{i % 3}.example", spec(("v1", "v2"), group=f"g{i % 3}.example", kind=f"K{i}"))
            for i in range(12)]
    result = estimate(crds, "1.37", memory_limit_bytes=float(2**30))
    schema = sum(c.schema_bytes for c in crds)
    expected = 12 * 2 * 2**20 + 24 * 2**20 + 10.0 * schema
    assert result.memory_bytes.value == pytest.approx(expected)
    assert result.memory_bytes.low == pytest.approx(expected * 0.75)  # 2 x 10% RMS, widened to RSS's 25% floor
    assert result.heap_bytes.high == pytest.approx(12 * 2**20 * 1.1)  # never narrower than 10%
    assert result.rss_after_bytes.value == pytest.approx(300 * 2**20 + expected)
    assert result.group_versions_added == 6 and result.groups_added == 3
    assert result.legacy_requests_after == 2 + 23 + 6
    assert result.openapi_v3_paths_added == 6
    assert result.install_seconds.value == pytest.approx(1.2)
    per_crd = expected / 12
    assert result.crds_until_limit == int((2**30 - 300 * 2**20) // per_crd)
    assert result.headroom_bytes == pytest.approx(2**30 - 300 * 2**20 - expected)
    walks = {w.name: w.seconds for w in result.legacy_walks}
    # 31 requests: /api and /apis in turn, then 29 at once; client-go's 10-token bucket refills at 5/s.
    assert walks["client-go default"] == pytest.approx((31 - 10) / 5 + 0.002, abs=0.01)
    assert walks["kubectl >=1.24"] == pytest.approx(3 * 0.002, abs=1e-6)


def test_a_minor_that_serves_no_aggregated_discovery_predicts_none_and_says_why(coefficients_file):
    crd = features_of_spec("as.g.example", spec(("v1",), group="g.example", kind="A"))
    old = estimate([crd], "1.26")
    assert old.aggregated_bytes_added is None and old.aggregated_bytes_after is None
    assert any("AggregatedDiscoveryEndpoint" in note for note in old.notes)
    assert to_json(old, source="x.yaml")["discovery"]["aggregated_bytes_added"] is None
    assert "not served by default on 1.26" in to_table(old, source="x.yaml")
    assert estimate([crd], "1.27").aggregated_bytes_added  # beta, on by default


def test_reports_keep_their_keys_and_units(coefficients_file):
    crd = features_of_spec("as.g.example", spec(("v1",), group="g.example", kind="A"))
    result = estimate([crd], "1.33")
    data = to_json(result, source="x.yaml")
    assert set(data) == {"source", "priced_path", "packages", "kubernetes_minor_requested", "kubernetes_minor_model",
                         "model", "crds",
                         "installed_crds", "crds_added", "crds_removed", "crds_changed", "crds_unchanged",
                         "schema_bytes_added", "delta", "source_problems", "served_versions", "schema_bytes",
                         "memory", "discovery", "openapi", "install", "etcd", "top_crds", "crossplane_activation",
                         "notes", "path", "path_note"}
    # Not compared with a cluster's release: every CRD is added, and there is no delta to list.
    assert (data["installed_crds"], data["crds_added"], data["crds_removed"], data["delta"]) == (None, 1, 0, None)
    assert (data["priced_path"], data["packages"]) == ("direct", [])  # files: no package, the calibrated path
    assert data["kubernetes_minor_requested"] == "1.33" and data["kubernetes_minor_model"] == "1.30"
    assert "rss_added_mib" in data["memory"] and "aggregated_bytes_added" in data["discovery"]
    assert data["notes"] and "nearest" in data["notes"][0]
    assert data["path"] == "direct" and data["install"]["seconds_after_mrap"] is None
    assert "API-server memory added" in to_table(result, source="x.yaml")
    assert to_markdown(result, source="x.yaml").startswith("### API-server footprint of x.yaml")


def test_attribution_prices_each_group_by_its_own_crds_as_estimate_does(coefficients_file):
    from crdscope.base.activation import MRD_BYTES
    from crdscope.base.samples.attribution import GroupTerms
    from crdscope.costmodel.attribution import attribute_groups

    crds = [features_of_spec(f"k{i}s.{group}", spec(versions, group=group, kind=f"K{i}"))
            for i, (group, versions) in enumerate([("a.example", ("v1",)), ("a.example", ("v1", "v2")),
                                                   ("b.example", ("v1",))])]
    groups: dict[str, GroupTerms] = {}
    for crd in crds:
        groups[crd.group] = groups.get(crd.group, GroupTerms()).plus(1, crd.served, crd.schema_bytes)
    found = attribute_groups("1.37", groups, mrds=10, rss_bytes=3 * 2**30, memory_limit_bytes=4 * 2**30)
    # Each group as estimate prices those CRDs alone (the fixture's model has no one-time term).
    for group in ("a.example", "b.example"):
        alone = estimate([c for c in crds if c.group == group], "1.37")
        assert found.memory_bytes[group] == pytest.approx(alone.memory_bytes.value)
    assert found.crd_memory_bytes == pytest.approx(estimate(crds, "1.37").memory_bytes.value)
    assert (found.crds, found.groups, found.model_minor) == (3, 2, "1.37")
    assert found.mib_per_crd == pytest.approx(found.crd_memory_bytes / 3 / 2**20)
    assert found.mrd_memory_bytes == pytest.approx(10 * MRD_BYTES)
    assert found.headroom_crds == int(2**30 // (found.crd_memory_bytes / 3))
    assert found.relative_interval == pytest.approx(0.25)  # resident memory's narrowest interval
    assert attribute_groups("1.37", groups).headroom_crds is None  # no limit, no headroom
    assert attribute_groups("1.37", {}).crd_memory_bytes == 0.0


def test_attribution_keeps_the_costliest_groups_and_sums_the_rest(coefficients_file, monkeypatch):
    from crdscope.base.samples import attribution as samples
    from crdscope.base.samples.attribution import OTHER_GROUPS, GroupTerms
    from crdscope.costmodel import attribution

    monkeypatch.setattr(attribution, "MAX_GROUPS", 2)
    groups = {f"g{i}.example": GroupTerms(i, i, 1000 * i) for i in range(1, 5)}
    found = attribution.attribute_groups("1.37", groups)
    assert set(found.memory_bytes) == {"g4.example", "g3.example", OTHER_GROUPS}
    assert found.memory_bytes[OTHER_GROUPS] == pytest.approx(
        attribution.attribute_groups("1.37", {k: groups[k] for k in ("g1.example", "g2.example")}).crd_memory_bytes)
    assert (found.groups, found.other_groups) == (4, 2)
    assert samples.MAX_GROUPS >= 354, "every group of the AWS family (354) keeps its own series"


def test_the_first_crds_one_time_cost_is_not_per_crd(tmp_path, monkeypatch):
    path = write_coefficients(tmp_path / "c.json")
    document = json.loads(path.read_text())
    document["minors"]["1.37"]["figures"]["rss_bytes"]["terms"] = {"fixed": 100 * 2**20, "crds": 2**20}
    path.write_text(json.dumps(document))
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    crds = [features_of_spec(f"k{i}s.g.example", spec(("v1",), group="g.example", kind=f"K{i}")) for i in range(10)]
    empty = estimate(crds, "1.37", memory_limit_bytes=float(2**30))
    assert empty.memory_bytes.value == pytest.approx(110 * 2**20)
    # From 300 MiB: the one-time 100 MiB, then 1 MiB a CRD up to 1024 MiB.
    assert empty.crds_until_limit == 1024 - 300 - 100
    assert empty.top_crds[0].memory_bytes == pytest.approx(2**20)


async def test_a_file_sources_features_are_cached_until_the_file_changes(tmp_path):
    import os

    from crdscope.costmodel.source import read_source

    path = tmp_path / "crds.yaml"
    documents = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": f"k{i}s.g.example"}, "spec": spec(("v1",), group="g.example", kind=f"K{i}")}
                 for i in range(3)]
    path.write_text("\n---\n".join(json.dumps(d) for d in documents))
    first = await read_source(str(path))
    again = await read_source(str(path))
    assert again.crds == first.crds and len(first.crds) == 3
    path.write_text(json.dumps(documents[0]))
    os.utime(path, ns=(1, 1))  # another size and mtime: another key
    changed = await read_source(str(path))
    assert [crd.name for crd in changed.crds] == ["k0s.g.example"]


def test_memory_held_is_predicted_where_calibrated_and_judged_against_the_heap_after_gc(tmp_path, monkeypatch):
    from crdscope.costmodel.measure import MEMORY_HELD, compare, comparison_table

    path = write_coefficients(tmp_path / "coefficients.json")
    document = json.loads(path.read_text())
    document["minors"]["1.37"]["figures"]["live_heap_bytes"] = {"terms": {"crds": 2**20}, "relative_rms": 0.05}
    path.write_text(json.dumps(document))
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    crds = [features_of_spec(f"k{i}s.g.example", spec(("v1",), group="g.example", kind=f"K{i}")) for i in range(10)]

    calibrated = estimate(crds, "1.37")
    assert calibrated.live_heap_bytes.value == pytest.approx(10 * 2**20)
    before = {"rss_bytes": 0.0, "heap_bytes": 0.0, "live_heap_bytes": 100 * 2**20}
    after = {"rss_bytes": 40 * 2**20, "heap_bytes": 20 * 2**20, "live_heap_bytes": 112 * 2**20}
    rows = {row.figure: row for row in compare(calibrated, before, after, 1.0)}
    held = rows[MEMORY_HELD]
    assert held.measured == pytest.approx(12.0) and held.error == pytest.approx(10 / 12 - 1)
    assert held.met is False  # -16.7%: outside 15%
    assert rows["memory added (RSS)"].met is None  # given with its interval, not judged
    after["live_heap_bytes"] = 111 * 2**20
    assert {row.figure: row for row in compare(calibrated, before, after, 1.0)}[MEMORY_HELD].met is True

    older = estimate(crds, "1.30")  # calibrated before memory held was measured
    assert older.live_heap_bytes is None
    table = comparison_table(compare(older, before, after, 1.0))
    assert "not calibrated on this minor" in table
    assert "not calibrated on 1.30" in to_table(older, source="x.yaml")
    assert to_json(older, source="x.yaml")["memory"]["held_added_mib"] is None


def test_a_minor_calibrated_without_aggregated_discovery_is_priced(tmp_path, monkeypatch):
    """1.26 calibrated today reads no aggregated document: its baseline says None, not a size."""
    path = write_coefficients(tmp_path / "coefficients.json", minors=("1.26",))
    document = json.loads(path.read_text())
    document["minors"]["1.26"]["baseline"]["aggregated_bytes"] = None
    path.write_text(json.dumps(document))
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    crd = features_of_spec("as.g.example", spec(("v1",), group="g.example", kind="A"))
    result = estimate([crd], "1.26")
    assert result.aggregated_bytes_added is None and result.legacy_requests_added == 1

"""The Crossplane activation path in the cost model: priced apart from a direct install, said so, no ratio
(the measured ratio only in the note of a model whose activation path is not calibrated yet).

Coefficients here come from files the tests write (every expected figure is the test's own arithmetic);
tests/e2e/test_estimate.py and test_mrap.py check the real path on a lab with real Crossplane.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscope.costmodel import coefficients as coefficients_module
from crdscope.costmodel.activation_measure import ACTIVATION_TIME, compare_activation
from crdscope.costmodel.calibration import fit_activation, write_activation, write_minor
from crdscope.costmodel.coefficients import activation_for, for_minor, is_pre_release
from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.model import ACTIVATION, DIRECT, Target, estimate
from crdscope.costmodel.report import to_json, to_table

MIB = float(1 << 20)
SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}


def _spec(kind: str, group: str = "sqs.aws.upbound.io") -> dict:
    return {"group": group, "scope": "Cluster",
            "names": {"kind": kind, "plural": kind.lower() + "s", "singular": kind.lower(), "categories": ["managed"]},
            "versions": [{"name": "v1beta1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}]}


def _crds(count: int) -> list:
    return [features_of_spec(f"k{i}s.sqs.aws.upbound.io", _spec(f"K{i}")) for i in range(count)]


def _direct(version: str) -> dict:
    return {"kubernetes_version": version,
            "baseline": {"rss_bytes": 300 * MIB, "heap_bytes": 150 * MIB, "aggregated_bytes": 27000,
                         "legacy_bytes": 29000, "group_versions": 23, "openapi_v3_paths": 49,
                         "openapi_v2_bytes": 2_000_000, "etcd_connections": 69, "legacy_request_seconds": 0.002},
            "figures": {"rss_bytes": {"terms": {"fixed": 20 * MIB, "crds": 2 * MIB}, "relative_rms": 0.0},
                        "heap_bytes": {"terms": {"crds": MIB}, "relative_rms": 0.0},
                        "live_heap_bytes": {"terms": {"fixed": 10 * MIB, "crds": MIB}, "relative_rms": 0.0},
                        "openapi_v2_bytes": {"terms": {"schema_bytes": 1.0}, "relative_rms": 0.0},
                        "etcd_connections": {"terms": {"crds": 0.0}, "relative_rms": 0.0},
                        "aggregated_bytes": {"scale": 1.0}, "legacy_bytes": {"scale": 1.0},
                        "install_seconds": {"model": "paced", "pace_per_second": 20.0, "terms": {"crds": 0.01},
                                            "tail_seconds": 1.0, "relative_rms": 0.0}}}


ACTIVATION_ENTRY = {
    "kubernetes_version": "v1.37.2", "crossplane": "v2.4.2",
    "figures": {"rss_bytes": {"terms": {"crds": 5 * MIB}, "relative_rms": 0.0},
                "heap_bytes": {"terms": {"crds": 3 * MIB}, "relative_rms": 0.0},
                "live_heap_bytes": {"terms": {"crds": 2.5 * MIB}, "relative_rms": 0.05},
                "activation_seconds": {"terms": {"fixed": 4.0, "crds": 0.5}, "relative_rms": 0.1}}}


@pytest.fixture
def coefficients_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "coefficients.json"
    minors = {"1.33": _direct("v1.33.13"), "1.37": {**_direct("v1.37.2"), "activation": ACTIVATION_ENTRY},
              "1.38": _direct("v1.38.0-beta.0")}
    path.write_text(json.dumps({"format": 2, "minors": minors}))
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    coefficients_module.forget_loaded()
    return path


def test_the_activation_path_prices_memory_and_time_by_its_own_coefficients_and_says_so(coefficients_file):
    crds = _crds(10)
    direct = estimate(crds, "1.37", target=Target(crds=30))
    activated = estimate(crds, "1.37", target=Target(crds=30), path=ACTIVATION)
    assert direct.path == DIRECT and direct.path_note.startswith("direct install")
    assert direct.memory_bytes.value == pytest.approx(10 * 2 * MIB)
    assert activated.path == ACTIVATION
    assert activated.memory_bytes.value == pytest.approx(10 * 5 * MIB)
    assert activated.live_heap_bytes is not None and activated.live_heap_bytes.value == pytest.approx(25 * MIB)
    assert activated.heap_bytes.value == pytest.approx(30 * MIB)
    # From the MRAP's apply to every CRD Established: Crossplane's reaction once, then per CRD; no loader pace.
    assert activated.install_seconds.value == pytest.approx(4.0 + 10 * 0.5)
    assert activated.install_pace_per_second is None
    assert "through Crossplane activation" in activated.path_note and "v1.37.2" in activated.path_note
    assert "v2.4.2" in activated.path_note
    # Discovery and OpenAPI are the same whichever way the CRDs came.
    assert activated.group_versions_added == direct.group_versions_added == 1


def test_reports_name_the_path_priced(coefficients_file):
    activated = estimate(_crds(4), "1.37", target=Target(crds=30), path=ACTIVATION)
    data = to_json(activated, source="activate *")
    assert data["path"] == "activation" and "through Crossplane activation" in data["path_note"]
    assert data["install"]["seconds_at_loader_defaults"] is None
    assert data["install"]["seconds_after_mrap"]["value"] == pytest.approx(6.0)
    table = to_table(activated, source="activate *")
    assert "priced as" in table and "through Crossplane activation" in table
    assert "from the MRAP's apply to every CRD Established" in table
    direct = to_table(estimate(_crds(4), "1.37"), source="x.yaml")
    assert "direct install" in direct and "at the loader's defaults" in direct


def test_a_minor_without_its_own_activation_calibration_uses_the_nearest_and_says_so(coefficients_file):
    found = activation_for("1.33")
    assert found is not None and found.minor == "1.37"
    assert "1.33 has no activation calibration of its own, the nearest (1.37) is used" in found.note
    priced = estimate(_crds(2), "1.33", target=Target(crds=5), path=ACTIVATION)
    assert priced.memory_bytes.value == pytest.approx(2 * 5 * MIB)


def test_no_activation_calibration_anywhere_prices_the_direct_path_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "coefficients.json"
    path.write_text(json.dumps({"format": 2, "minors": {"1.37": _direct("v1.37.2")}}))
    monkeypatch.setattr(coefficients_module, "COEFFICIENTS_FILE", path)
    monkeypatch.setattr(coefficients_module.for_minor, "__defaults__", (path,))
    coefficients_module.forget_loaded()
    asked = estimate(_crds(2), "1.37", target=Target(crds=30), path=ACTIVATION)
    # The direct figure (2 MiB a CRD in the file above), the loader's time, and a note that says all of it.
    assert asked.path == DIRECT and asked.memory_bytes.value == pytest.approx(2 * 2 * MIB)
    assert asked.install_pace_per_second == 20.0
    assert asked.path_note.startswith("as a direct install: the Crossplane activation path is not calibrated")
    assert "1.5-2.1x the direct model on 1.37" in asked.path_note
    assert "not calibrated" in to_table(asked, source="activate *")
    predicted = estimate(_crds(4), "1.37", target=Target(crds=30), path=ACTIVATION)
    figures = {"crds": 30, "legacy_requests": 40, "aggregated_bytes": 100, "openapi_v3_paths": 50,
               "rss_bytes": 0.0, "heap_bytes": 0.0, "live_heap_bytes": 100 * MIB}
    rows = compare_activation(predicted, figures, {**figures, "crds": 34}, 7.5)
    assert ACTIVATION_TIME not in {row.figure for row in rows}  # no activation time was predicted


def test_a_pre_release_and_a_minor_outside_the_calibrated_range_say_so(coefficients_file):
    assert is_pre_release("v1.38.0-beta.0") and is_pre_release("v1.38.0-rc.1") and not is_pre_release("v1.37.2")
    own = for_minor("1.38")
    assert own.minor == "1.38" and own.pre_release
    assert own.note == "model for 1.38 (calibrated on v1.38.0-beta.0, a pre-release: the release may differ)"
    beyond = for_minor("1.39")
    assert beyond.minor == "1.38" and beyond.outside_range
    assert "1.39 is outside the calibrated range 1.33-1.38, the nearest calibrated minor is used" in beyond.note
    older = for_minor("1.25")
    assert older.minor == "1.33" and "1.25 is outside the calibrated range 1.33-1.38" in older.note
    inside = for_minor("1.35")
    assert not inside.outside_range and "1.35 has no coefficients of its own" in inside.note
    assert estimate(_crds(1), "1.39").model_note == beyond.note


def test_an_activation_compares_its_time_from_the_mrap_to_established(coefficients_file):
    predicted = estimate(_crds(4), "1.37", target=Target(crds=30), path=ACTIVATION)
    figures = {"crds": 30, "legacy_requests": 40, "aggregated_bytes": 100, "openapi_v3_paths": 50,
               "rss_bytes": 0.0, "heap_bytes": 0.0, "live_heap_bytes": 100 * MIB}
    after = {**figures, "crds": 34, "legacy_requests": 41, "live_heap_bytes": 110 * MIB}
    rows = {row.figure: row for row in compare_activation(predicted, figures, after, 7.5)}
    timed = rows[ACTIVATION_TIME]
    assert timed.predicted == pytest.approx(6.0) and timed.measured == 7.5 and timed.met is True  # -20%
    assert rows[ACTIVATION_TIME].unit == "s"
    direct = estimate(_crds(4), "1.37", target=Target(crds=30))
    assert ACTIVATION_TIME not in {row.figure for row in compare_activation(direct, figures, after, 7.5)}


def test_a_direct_calibration_keeps_the_minors_activation_path(coefficients_file):
    write_minor("1.37", _direct("v1.37.3"), coefficients_file)
    kept = json.loads(coefficients_file.read_text())["minors"]["1.37"]
    assert kept["kubernetes_version"] == "v1.37.3" and kept["activation"] == ACTIVATION_ENTRY
    write_activation("1.33", {**ACTIVATION_ENTRY, "kubernetes_version": "v1.33.13"}, coefficients_file)
    assert activation_for("1.33").minor == "1.33"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="1.29 has no direct coefficients"):
        write_activation("1.29", ACTIVATION_ENTRY, coefficients_file)


def test_the_activation_fit_recovers_the_growth_per_crd_and_per_schema_byte(tmp_path):
    sets = []
    for index, count in enumerate((3, 6, 9)):
        files = []
        for i in range(count):
            document = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "metadata": {"name": f"k{i}s.s{index}.example"}, "spec": _spec(f"K{i}", f"s{index}.example")}
            if index == 2:  # another schema size, so per-CRD and per-byte terms can be told apart
                document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "x" * 500
            path = tmp_path / f"s{index}-{i}.json"
            path.write_text(json.dumps(document))
            files.append(str(path))
        crds = [features_of_spec(f"k{i}s.s{index}.example", json.loads(Path(f).read_text())["spec"])
                for i, f in enumerate(files)]
        schema = sum(crd.schema_bytes for crd in crds)
        held = 2 * MIB * count + 40.0 * schema
        seconds = 3.0 + 0.25 * count
        sets.append({"set": {"name": f"s{index}"}, "kubernetes": "v1.37.2", "crossplane": "v2.4.2", "files": files,
                     "points": [{"files": 0, "rss_bytes": 0.0, "heap_bytes": 0.0, "live_heap_bytes": 100 * MIB,
                                 "activation_seconds": 0.0},
                                {"files": count, "rss_bytes": 2 * held, "heap_bytes": held,
                                 "live_heap_bytes": 100 * MIB + held, "activation_seconds": seconds}]})
    minor, entry = fit_activation({"when": "2026-12-07T22:00:00Z", "sets": sets}, source="raw.json")
    assert minor == "1.37" and entry["crossplane"] == "v2.4.2"
    held_terms = entry["figures"]["live_heap_bytes"]["terms"]
    assert held_terms["crds"] == pytest.approx(2 * MIB, rel=1e-6)
    assert held_terms["schema_bytes"] == pytest.approx(40.0, rel=1e-6)
    assert "fixed" not in held_terms  # a Crossplane cluster has paid its first CRDs' cost already
    timed = entry["figures"]["activation_seconds"]["terms"]
    assert timed["fixed"] == pytest.approx(3.0, rel=1e-6) and timed["crds"] == pytest.approx(0.25, rel=1e-6)

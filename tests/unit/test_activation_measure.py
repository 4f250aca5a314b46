"""``estimate --activate --measure``: the CRDs packaged from MRDs, the comparison rows, the waits, the teardown."""

from __future__ import annotations

import json

import httpx
import pytest

from crdscope.costmodel import activation_measure
from crdscope.costmodel.activation_measure import ActivationMeasureError, compare_activation
from crdscope.costmodel.coefficients import calibrated_minors
from crdscope.costmodel.features import features_of_spec
from crdscope.costmodel.model import estimate
from crdscope.costmodel.mrds import select


def _mrd(name: str, state: str = "Inactive") -> dict:
    plural, group = name.split(".", 1)
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    return {"metadata": {"name": name, "uid": "x"},
            "spec": {"group": group, "names": {"plural": plural, "kind": plural.title(), "singular": plural},
                     "scope": "Cluster", "state": state, "connectionDetails": {"enabled": False},
                     "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def test_the_selection_carries_the_crds_the_mrds_become():
    chosen = select([_mrd("topics.sns.aws.upbound.io"), _mrd("queues.sqs.aws.upbound.io"),
                     _mrd("policies.sqs.aws.upbound.io", state="Active")], ("*.aws.upbound.io",))
    assert [d["metadata"] for d in chosen.documents] == [{"name": "queues.sqs.aws.upbound.io"},
                                                          {"name": "topics.sns.aws.upbound.io"}]
    queues = chosen.documents[0]
    assert queues["kind"] == "CustomResourceDefinition" and queues["apiVersion"] == "apiextensions.k8s.io/v1"
    assert "state" not in queues["spec"] and "connectionDetails" not in queues["spec"]
    # What is priced is what is packaged.
    assert chosen.crds[0] == features_of_spec("queues.sqs.aws.upbound.io", queues["spec"])


def _figures(crds: int, legacy: int, aggregated: int, v3: int) -> dict:
    return {"crds": crds, "legacy_requests": legacy, "aggregated_bytes": aggregated, "openapi_v3_paths": v3,
            "rss_bytes": 100 * 2**20, "heap_bytes": 50 * 2**20, "openapi_v2_bytes": 1000, "etcd_connections": 2}


def test_an_activation_compares_counts_added_not_the_loaders_install():
    chosen = select([_mrd("topics.sns.aws.upbound.io"), _mrd("queues.sqs.aws.upbound.io")], ("*",))
    predicted = estimate(chosen.crds, calibrated_minors()[-1])
    rows = {row.figure: row for row in compare_activation(predicted, _figures(40, 60, 9000, 100),
                                                          _figures(42, 62, 9900, 104))}
    assert rows["CRDs added"].predicted == 2 and rows["CRDs added"].measured == 2 and rows["CRDs added"].met
    assert rows["group-versions added"].predicted == 2 and rows["group-versions added"].measured == 2
    assert rows["aggregated discovery added"].measured == 900
    assert rows["OpenAPI v3 paths added"].measured == 4
    assert "install time (loader defaults)" not in rows and "legacy walk requests" not in rows
    missed = compare_activation(predicted, _figures(40, 60, 9000, 100), _figures(41, 61, 9000, 100))
    assert missed[0].met is False and missed[1].met is False


def _table(mrds: list[dict]) -> dict:
    """The MRDs as the API server serves them as a Table (its printer columns: NAME, STATE, ESTABLISHED, AGE)."""
    columns = [{"name": name, "type": "string"} for name in ("Name", "STATE", "ESTABLISHED", "AGE")]
    rows = []
    for mrd in mrds:
        established = next((c["status"] for c in (mrd.get("status") or {}).get("conditions") or []
                            if c["type"] == "Established"), None)
        rows.append({"cells": [mrd["metadata"]["name"], mrd["spec"].get("state"), established, "1m"]})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "columnDefinitions": columns, "rows": rows}


def _client(mrds: list[dict], crds: list[str], seen: list[str] | None = None) -> httpx.Client:
    def answer(request: httpx.Request) -> httpx.Response:
        accept = request.headers.get("accept", "")
        if seen is not None:
            seen.append(accept)
        if request.url.path == activation_measure.MRD_PATH:
            assert "as=Table" in accept, "MRDs carry whole schemas: the waits read their Table"
            return httpx.Response(200, json=_table(mrds))
        assert "as=PartialObjectMetadataList" in accept, "the CRDs' names are read as metadata"
        return httpx.Response(200, json={"items": [{"metadata": {"name": n}} for n in crds]})

    return httpx.Client(base_url="https://lab", transport=httpx.MockTransport(answer))


def test_mrds_are_awaited_inactive_and_an_early_activation_is_an_error():
    wanted = {"queues.sqs.aws.upbound.io", "topics.sns.aws.upbound.io"}
    assert not activation_measure._inactive_mrds(_client([_mrd("queues.sqs.aws.upbound.io")], []), wanted)
    both = [_mrd("queues.sqs.aws.upbound.io"), _mrd("topics.sns.aws.upbound.io")]
    assert activation_measure._inactive_mrds(_client(both, ["providers.pkg.crossplane.io"]), wanted)
    with pytest.raises(ActivationMeasureError, match="topics.sns.aws.upbound.io was activated before the MRAP"):
        activation_measure._inactive_mrds(_client(both, ["topics.sns.aws.upbound.io"]), wanted)
    both[0]["spec"]["state"] = "Active"
    with pytest.raises(ActivationMeasureError, match="queues.sqs.aws.upbound.io was activated"):
        activation_measure._inactive_mrds(_client(both, []), wanted)


def test_a_wait_past_its_deadline_is_one_line(monkeypatch):
    monkeypatch.setattr(activation_measure, "POLL_SECONDS", 0.0)
    with pytest.raises(ActivationMeasureError, match="^--measure: nothing happened within 0s$"):
        activation_measure._wait(lambda: False, 0.0, "nothing happened")


def test_the_lab_goes_down_when_the_measurement_fails(monkeypatch, tmp_path):
    from crdscope.lab import crossplane
    from crdscope.toolchain import crossplane as toolchain_crossplane
    from crdscope.lab.controlplane import Lab

    calls: list[str] = []
    monkeypatch.setattr(toolchain_crossplane, "crossplane_binaries", lambda progress: object())
    monkeypatch.setattr(activation_measure, "_control_plane", lambda minor, say: object())
    monkeypatch.setattr(Lab, "up", lambda self, binaries, say, options: calls.append(f"up {options.name}") or {})
    monkeypatch.setattr(Lab, "down", lambda self: calls.append(f"down {self.name}") or [])

    def refuse(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(crossplane, "start", refuse)
    chosen = select([_mrd("queues.sqs.aws.upbound.io")], ("*",))
    with pytest.raises(KeyboardInterrupt):
        activation_measure.measure_activation(chosen, "1.37", say=lambda _line: None, lab_name="estimate-test")
    assert calls == ["up estimate-test", "down estimate-test"]
    assert json.dumps(chosen.documents[0])  # what is packaged is plain JSON


def test_the_after_figures_wait_for_the_openapi_paths_of_the_activated_group_versions():
    chosen = select([_mrd("topics.sns.aws.upbound.io"), _mrd("queues.sqs.aws.upbound.io"),
                     _mrd("subscriptions.sns.aws.upbound.io")], ("*.aws.upbound.io",))
    assert activation_measure._openapi_paths(chosen) == {"apis/sns.aws.upbound.io/v1beta1",
                                                         "apis/sqs.aws.upbound.io/v1beta1"}


def test_a_poll_rejected_by_apf_is_asked_again(monkeypatch):
    monkeypatch.setattr(activation_measure, "POLL_SECONDS", 0.0)
    answers = iter([429, 429, 200])
    request = httpx.Request("GET", "https://lab.test/apis")

    def condition() -> bool:
        status = next(answers)
        httpx.Response(status, request=request).raise_for_status()
        return True

    activation_measure._wait(condition, 5.0, "never")
    with pytest.raises(ActivationMeasureError, match="500"):
        activation_measure._wait(lambda: httpx.Response(500, request=request).raise_for_status() is None, 5.0, "x")


def _established(mrd: dict, status: str = "True") -> dict:
    return {**mrd, "spec": {**mrd["spec"], "state": "Active"},
            "status": {"conditions": [{"type": "Established", "status": status}]}}


def test_the_activation_is_awaited_on_the_mrd_table_until_every_crd_is_established():
    queues, topics = _mrd("queues.sqs.aws.upbound.io"), _mrd("topics.sns.aws.upbound.io")
    wanted = {"queues.sqs.aws.upbound.io", "topics.sns.aws.upbound.io"}
    assert not activation_measure._all_established(_client([_established(queues), topics], []), wanted)
    assert not activation_measure._all_established(_client([_established(queues), _established(topics, "False")],
                                                           []), wanted)
    assert activation_measure._all_established(_client([_established(queues), _established(topics)], []), wanted)


def test_the_activation_time_is_the_last_established_transition():
    def answer(request: httpx.Request) -> httpx.Response:
        def crd(name: str, when: str) -> dict:
            return {"metadata": {"name": name},
                    "status": {"conditions": [{"type": "Established", "status": "True", "lastTransitionTime": when}]}}

        return httpx.Response(200, json={"items": [crd("queues.sqs.aws.upbound.io", "2026-12-07T22:00:05Z"),
                                                   crd("topics.sns.aws.upbound.io", "2026-12-07T22:00:41Z"),
                                                   crd("other.example.io", "2026-12-07T23:00:00Z")]})

    client = httpx.Client(base_url="https://lab", transport=httpx.MockTransport(answer))
    wanted = {"queues.sqs.aws.upbound.io", "topics.sns.aws.upbound.io"}
    last = activation_measure._last_established(client, wanted)
    assert last == 1796680841.0  # 2026-12-07T22:00:41Z: the other CRD is not the activation's
    with pytest.raises(ActivationMeasureError, match="missing.example.io is not Established"):
        activation_measure._last_established(client, {"missing.example.io"})

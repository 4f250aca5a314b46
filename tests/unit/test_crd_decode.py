"""CRD watch events and list pages decoded without their schemas read the same as the full JSON."""

from __future__ import annotations

import json
import tarfile

import pytest
import yaml

from crdscope.connection.crd_decode import decode_event, decode_page
from crdscope.connection.crdwatch import record_from, slim
from tests.crdsets import archive

OBJECT = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.io", "uid": "u-1", "resourceVersion": "42",
                 "creationTimestamp": "2026-12-04T10:00:00Z", "labels": {"pkg.crossplane.io/provider": "aws"},
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                 "ownerReferences": [{"kind": "ProviderRevision", "name": "aws-1", "controller": True}]},
    "spec": {"group": "example.io", "scope": "Cluster",
             "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {"x": {"type": "string"}}}}},
                          {"name": "v1beta1", "served": False, "storage": False}]},
    "status": {"conditions": [{"type": "Established", "status": "True",
                               "lastTransitionTime": "2026-12-04T10:00:02Z"}]},
}


def compact(value: object) -> bytes:
    """JSON as the API server sends it: no spaces (a schema's size is counted as sent)."""
    return json.dumps(value, separators=(",", ":")).encode()


def test_an_event_decodes_to_the_record_the_full_json_gives():
    raw = compact({"type": "MODIFIED", "object": OBJECT})
    event = decode_event(raw)
    assert event["type"] == "MODIFIED"
    assert "schema" not in event["object"]["spec"]["versions"][0]
    now = 1.0e9
    assert record_from(event["object"], now=now) == record_from(OBJECT, now=now)


def test_a_schema_is_counted_as_sent_and_only_for_served_versions():
    schema = OBJECT["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    hidden = {**OBJECT, "spec": {**OBJECT["spec"], "versions": [
        OBJECT["spec"]["versions"][0], {**OBJECT["spec"]["versions"][1], "schema": {"openAPIV3Schema": schema}}]}}
    event = decode_event(compact({"type": "ADDED", "object": hidden}))
    # The served version's schema, byte for byte as sent; the unserved one's is not counted.
    assert record_from(event["object"], now=1.0).schema_bytes == len(compact(schema)) == 54
    assert record_from(hidden, now=1.0).schema_bytes == 54 and record_from(slim(hidden), now=1.0).schema_bytes == 54
    assert "openAPIV3Schema" not in json.dumps(event) and "openAPIV3Schema" not in json.dumps(slim(hidden))


def test_a_conversion_webhook_is_kept_without_its_ca_bundle():
    converted = {**OBJECT, "spec": {**OBJECT["spec"], "conversion": {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"caBundle": "LS0t" * 400, "service": {"namespace": "crossplane-system",
                                                             "name": "provider-aws", "path": "/convert"}}}}}}
    event = decode_event(compact({"type": "ADDED", "object": converted}))
    assert "caBundle" not in json.dumps(event) and "caBundle" not in json.dumps(slim(converted))
    record = record_from(event["object"], now=1.0)
    assert record == record_from(converted, now=1.0)
    assert record.conversion_webhook == "service crossplane-system/provider-aws:443/convert"


def test_error_and_bookmark_events_keep_what_the_watch_reads():
    error = decode_event(b'{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},'
                         b'"status":"Failure","message":"too old","reason":"Expired","code":410}}')
    assert error["object"]["code"] == 410 and error["object"]["message"] == "too old"
    mark = decode_event(b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"77"}}}')
    assert mark["object"]["metadata"]["resourceVersion"] == "77"


def test_a_line_that_is_no_event_is_a_value_error():
    with pytest.raises(ValueError):
        decode_event(b'{"type": ')


def test_real_provider_crds_decode_to_the_same_records(shared_crds):
    with tarfile.open(archive("provider-aws"), "r:xz") as tar:
        members = sorted((m for m in tar.getmembers() if m.name.endswith(".yaml")), key=lambda m: m.name)[:40]
        objects = [yaml.safe_load(tar.extractfile(m).read()) for m in members]
    raw = compact({"items": objects, "metadata": {"resourceVersion": "9", "continue": "next"}})
    page = decode_page(raw)
    assert page["metadata"] == {"resourceVersion": "9", "continue": "next"}
    now = 1.0e9
    for decoded, full in zip(page["items"], objects, strict=True):
        assert slim(decoded) == slim(full)
        assert record_from(decoded, now=now) == record_from(full, now=now)
        assert record_from(decoded, now=now).schema_bytes > 1_000  # a real provider's schema, counted

"""Protobuf CRD decoding edge cases (the lab's real answers are compared with JSON in
tests/e2e/test_crd_protobuf.py): frames cut anywhere, errors, zero times, skipped annotations,
truncated and foreign bytes, and the watch choosing its decoder by the answer's Content-Type."""

from __future__ import annotations

import dataclasses
import json

import httpx
import pytest

from crdscope.connection import crd_proto
from tests.helpers import mock_cluster
from crdscope.connection.crdwatch import CRDRecord, CRDWatch, record_from, slim


# -- a minimal protobuf writer, enough to build what the API server sends ---------------------------
def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 on the wire: two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, value: bytes | str | int | bool) -> bytes:
    if isinstance(value, bool | int):
        return varint(number << 3) + varint(int(value))
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def timestamp(seconds: int) -> bytes:
    return field(1, seconds) + field(2, 0)


def envelope(kind: str, raw: bytes) -> bytes:
    type_meta = field(1, "apiextensions.k8s.io/v1" if kind != "Status" else "v1") + field(2, kind)
    return crd_proto.MAGIC + field(1, type_meta) + field(2, raw) + field(3, "") + field(4, "")


def map_entry(key: str, value: str) -> bytes:
    return field(1, key) + field(2, value)


def crd_message(name: str, uid: str, rv: str, *, established: bool = True, created: int = 1767323045,
                annotations: dict[str, str] | None = None, deleting: bool = False, conversion: bytes = b"") -> bytes:
    metadata = field(1, name) + field(5, uid) + field(6, rv) + field(7, 1) + field(8, timestamp(created))
    if deleting:
        metadata += field(9, timestamp(created + 60))
    metadata += field(11, map_entry("app.kubernetes.io/managed-by", "crdscope"))
    for key, value in (annotations or {}).items():
        metadata += field(12, map_entry(key, value))
    metadata += field(13, field(1, "Provider") + field(3, "provider-aws") + field(4, "u-1") + field(5, "pkg/v1")
                      + field(6, True) + field(7, True))
    metadata += field(17, field(1, "kubectl") + field(2, "Update"))  # managedFields: skipped
    schema = field(1, field(1, "x" * 5000))  # CustomResourceValidation: never looked at
    versions = (field(7, field(1, "v1beta1") + field(2, False) + field(3, False) + field(4, schema))
                + field(7, field(1, "v1") + field(2, True) + field(3, True) + field(4, schema)
                        + field(5, b"") + field(7, False)))
    names = field(1, name.split(".")[0]) + field(2, "thing") + field(3, "th") + field(4, "Thing") + field(5, "ThingList")
    spec = field(1, name.split(".", 1)[1]) + field(3, names) + field(4, "Cluster") + versions + field(10, False)
    if conversion:
        spec += field(9, conversion)
    conditions = field(1, field(1, "NamesAccepted") + field(2, "True") + field(3, timestamp(created + 1))
                       + field(4, "NoConflicts") + field(5, "no conflicts found"))
    if established:
        conditions += field(1, field(1, "Established") + field(2, "True") + field(3, timestamp(created + 2))
                            + field(4, "InitialNamesAccepted") + field(5, "ok"))
    status = conditions + field(2, names) + field(3, "v1")
    return field(1, metadata) + field(2, spec) + field(3, status)


#: The schema :func:`crd_message` carries (``JSONSchemaProps`` field 1 is ``id``), as JSON.
SCHEMA = {"openAPIV3Schema": {"id": "x" * 5000}}


def same_record(from_protobuf: CRDRecord, from_json: CRDRecord) -> bool:
    """The same CRD: every field equal, the schema's size within 1% (the encodings' overheads differ)."""
    sizes = from_protobuf.schema_bytes, from_json.schema_bytes
    return (dataclasses.replace(from_protobuf, schema_bytes=0) == dataclasses.replace(from_json, schema_bytes=0)
            and abs(sizes[0] - sizes[1]) <= 0.01 * max(sizes))


def json_crd(name: str, uid: str, rv: str, *, established: bool = True, created: str = "2026-01-02T03:04:05Z",
             annotations: dict[str, str] | None = None) -> dict:
    """The JSON a server sends for :func:`crd_message` (created 1767323045 = 2026-01-02T03:04:05Z)."""
    conditions = [{"type": "NamesAccepted", "status": "True", "lastTransitionTime": "2026-01-02T03:04:06Z",
                   "reason": "NoConflicts", "message": "no conflicts found"}]
    if established:
        conditions.append({"type": "Established", "status": "True", "lastTransitionTime": "2026-01-02T03:04:07Z",
                           "reason": "InitialNamesAccepted", "message": "ok"})
    return {
        "metadata": {"name": name, "uid": uid, "resourceVersion": rv, "creationTimestamp": created,
                     "labels": {"app.kubernetes.io/managed-by": "crdscope"},
                     "annotations": annotations or {},
                     "ownerReferences": [{"apiVersion": "pkg/v1", "kind": "Provider", "name": "provider-aws",
                                          "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"group": name.split(".", 1)[1], "scope": "Cluster",
                 "names": {"plural": name.split(".")[0], "singular": "thing", "shortNames": ["th"], "kind": "Thing",
                           "listKind": "ThingList"},
                 "versions": [{"name": "v1beta1", "served": False, "storage": False, "schema": SCHEMA},
                              {"name": "v1", "served": True, "storage": True, "schema": SCHEMA}]},
        "status": {"conditions": conditions},
    }


def watch_frame(event_type: str, obj: bytes) -> bytes:
    event = field(1, event_type) + field(2, field(1, obj))
    return len(event).to_bytes(4, "big") + event


# -- decoding ------------------------------------------------------------------------------------------
def test_a_protobuf_crd_gives_the_record_its_json_gives():
    annotations = {"crdscope.dev/load-run": "run-7", "kubectl.kubernetes.io/last-applied-configuration": "{" * 9000}
    page = crd_proto.decode_page(envelope("CustomResourceDefinitionList",
                                          field(1, field(2, "1234") + field(3, "next-token"))
                                          + field(2, crd_message("things.aws.test", "uid-1", "17",
                                                                 annotations=annotations))))
    assert page["metadata"] == {"resourceVersion": "1234", "continue": "next-token"}
    from_json = slim(json_crd("things.aws.test", "uid-1", "17", annotations=annotations))
    assert len(page["items"]) == 1
    assert page["items"][0]["status"] == from_json["status"]
    record = record_from(page["items"][0], now=5.0)
    assert same_record(record, record_from(from_json, now=5.0))
    # The served version's schema, skipped unread and counted by its length: field 1 of 5,000 bytes.
    assert record.schema_bytes == len(field(1, "x" * 5000)) == 5003
    assert record_from(from_json, now=5.0).schema_bytes == len(json.dumps(SCHEMA["openAPIV3Schema"],
                                                                          separators=(",", ":"))) == 5009
    assert (record.served_versions, record.storage_version, record.owner, record.run_id) == (
        ("v1",), "v1", "Provider/provider-aws", "run-7")
    assert record.state == "Established" and record.managed_by_crdscope


def test_the_last_applied_annotation_is_skipped_and_a_deletion_is_kept():
    item = crd_proto.decode_page(envelope("CustomResourceDefinitionList", field(2, crd_message(
        "things.aws.test", "u", "1", deleting=True,
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "big"}))))["items"][0]
    assert "annotations" not in item["metadata"]
    assert item["metadata"]["deletionTimestamp"] == "2026-01-02T03:05:05Z"
    assert record_from(item).state == "Terminating"


def test_go_zero_time_decodes_as_absent_like_json_null():
    item = crd_proto.decode_page(envelope("CustomResourceDefinitionList", field(2, crd_message(
        "things.aws.test", "u", "1", created=-62135596800))))["items"][0]
    assert "creationTimestamp" not in item["metadata"]
    assert record_from(item, now=42.0).created == 42.0


SERVICE = {"namespace": "crossplane-system", "name": "provider-aws-ec2", "path": "/convert", "port": 9443}


@pytest.mark.parametrize("client_config, endpoint", [
    ({"service": SERVICE}, "service crossplane-system/provider-aws-ec2:9443/convert"),
    ({"service": {"namespace": "ns", "name": "hooks"}}, "service ns/hooks:443"),  # the API's defaults
    ({"url": "https://127.0.0.1:9443/convert"}, "https://127.0.0.1:9443/convert"),
])
def test_a_conversion_webhook_decodes_as_its_json_does(client_config, endpoint):
    """``spec.conversion`` (field 9): its strategy and where its webhook is; the CA bundle is skipped."""
    service = client_config.get("service")
    wire_config = field(2, b"\x00" * 600)  # caBundle
    if service is not None:
        wire_service = field(1, service["namespace"]) + field(2, service["name"])
        if "path" in service:
            wire_service += field(3, service["path"]) + field(4, service["port"])
        wire_config += field(1, wire_service)
    else:
        wire_config += field(3, client_config["url"])
    conversion = field(1, "Webhook") + field(2, field(2, wire_config) + field(3, "v1"))
    message = crd_message("things.aws.test", "uid-1", "17", conversion=conversion)
    item = crd_proto.decode_page(envelope("CustomResourceDefinitionList", field(2, message)))["items"][0]
    as_json = json_crd("things.aws.test", "uid-1", "17")
    as_json["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "clientConfig": {**client_config, "caBundle": "AAAA"}, "conversionReviewVersions": ["v1"]}}
    record = record_from(item, now=5.0)
    assert record_from(slim(as_json), now=5.0) == record_from(as_json, now=5.0)
    assert same_record(record, record_from(as_json, now=5.0))
    assert record.conversion_webhook == endpoint
    assert "caBundle" not in str(item)


def test_a_crd_without_a_conversion_webhook_has_none():
    item = crd_proto.decode_page(envelope("CustomResourceDefinitionList", field(2, crd_message(
        "things.aws.test", "u", "1", conversion=field(1, "None")))))["items"][0]
    assert record_from(item).conversion_webhook is None
    assert record_from(json_crd("things.aws.test", "u", "1")).conversion_webhook is None


@pytest.mark.parametrize("size", [1, 3, 5, 4096, 1 << 20])
def test_frames_cut_anywhere_are_rebuilt(size):
    frames = [watch_frame("ADDED", envelope("CustomResourceDefinition", crd_message("a.g.test", "ua", "5",
                                                                                     established=False))),
              watch_frame("MODIFIED", envelope("CustomResourceDefinition", crd_message("a.g.test", "ua", "6"))),
              watch_frame("BOOKMARK", envelope("CustomResourceDefinition", field(1, field(6, "9")))),
              watch_frame("DELETED", envelope("CustomResourceDefinition", crd_message("a.g.test", "ua", "10")))]
    stream = b"".join(frames)
    splitter = crd_proto.FrameSplitter()
    events = []
    for start in range(0, len(stream), size):
        events.extend(crd_proto.decode_event(frame) for frame in splitter.feed(stream[start:start + size]))
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
    assert [e["object"]["metadata"]["resourceVersion"] for e in events] == ["5", "6", "9", "10"]
    assert record_from(events[0]["object"]).state == "NamesAccepted"
    assert record_from(events[1]["object"]).state == "Established"


def test_an_error_event_and_an_error_answer_carry_the_servers_status():
    status = envelope("Status", field(2, "Failure") + field(3, "too old resource version: 5 (90)")
                      + field(4, "Expired") + field(6, 410))
    event = crd_proto.decode_event(watch_frame("ERROR", status)[4:])
    assert event["object"]["code"] == 410 and "too old" in event["object"]["message"]
    assert crd_proto.decode_status(status)["reason"] == "Expired"


@pytest.mark.parametrize("raw, message", [
    (b"{\"kind\": \"CustomResourceDefinitionList\"}", "no k8s magic"),
    (envelope("Status", field(2, "Failure")), "expected a CustomResourceDefinitionList"),
    (envelope("CustomResourceDefinitionList", field(2, crd_message("a.g.test", "u", "1")))[:-40], "past its message"),
    (crd_proto.MAGIC + b"\xff\xff\xff", "truncated varint"),
    (crd_proto.MAGIC + bytes([0x0B]), "wire type 3"),
])
def test_foreign_or_cut_bytes_are_one_clear_error(raw, message):
    with pytest.raises(crd_proto.ProtobufError, match=message):
        crd_proto.decode_page(raw)


def test_a_frame_length_beyond_any_crd_is_refused():
    with pytest.raises(crd_proto.ProtobufError, match="not a protobuf watch stream"):
        crd_proto.FrameSplitter().feed(b'{"ty')  # JSON read as a frame length: 2 GB


def test_media_types():
    assert crd_proto.is_protobuf("application/vnd.kubernetes.protobuf;stream=watch")
    assert crd_proto.is_protobuf("application/vnd.kubernetes.protobuf")
    assert not crd_proto.is_protobuf("application/json")
    assert not crd_proto.is_protobuf(None)


# -- the watch picks its decoder by what the server answered --------------------------------------------
@pytest.mark.parametrize("server_speaks_protobuf", [True, False])
async def test_the_watch_asks_for_protobuf_and_reads_what_comes(server_speaks_protobuf):
    accepts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        accepts.append(request.headers["accept"])
        watching = request.url.params.get("watch") == "true"
        if server_speaks_protobuf:
            if watching:
                body = watch_frame("ADDED", envelope("CustomResourceDefinition", crd_message("b.g.test", "ub", "3")))
                return httpx.Response(200, content=body,
                                      headers={"content-type": "application/vnd.kubernetes.protobuf;stream=watch"})
            body = envelope("CustomResourceDefinitionList", field(1, field(2, "2"))
                            + field(2, crd_message("a.g.test", "ua", "1")))
            return httpx.Response(200, content=body, headers={"content-type": crd_proto.PROTOBUF})
        if watching:  # a server (or proxy) that only speaks JSON
            event = {"type": "ADDED", "object": json_crd("b.g.test", "ub", "3")}
            return httpx.Response(200, content=json.dumps(event).encode() + b"\n",
                                  headers={"content-type": "application/json"})
        return httpx.Response(200, json={"items": [json_crd("a.g.test", "ua", "1")],
                                         "metadata": {"resourceVersion": "2"}})

    watch = CRDWatch(mock_cluster(handler))  # type: ignore[arg-type]
    assert await watch.list_once() == "2"
    assert await watch._watch("2") == "3"
    assert sorted(watch.crds) == ["a.g.test", "b.g.test"]
    assert watch.crds["b.g.test"].established_live
    assert accepts[0] == crd_proto.LIST_ACCEPT and accepts[1] == crd_proto.WATCH_ACCEPT


async def test_a_protobuf_error_answer_is_read_as_one_line():
    def handler(request: httpx.Request) -> httpx.Response:
        status = envelope("Status", field(2, "Failure") + field(3, 'customresourcedefinitions is forbidden: User "x"')
                          + field(4, "Forbidden") + field(6, 403))
        return httpx.Response(403, content=status, headers={"content-type": crd_proto.PROTOBUF})

    watch = CRDWatch(mock_cluster(handler))  # type: ignore[arg-type]
    reason = await watch.sync_once()
    assert reason == 'list CRDs answered 403: customresourcedefinitions is forbidden: User "x"'

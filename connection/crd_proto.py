"""Decode CRDs, CRD list pages and CRD watch events from the API server's protobuf encoding.

Why protobuf: a JSON watch of an install makes the API server marshal every CRD it sends us, schema
and all, with ``encoding/json`` (about 200 MB for the whole AWS set, and nested schemas go through
custom marshalers level by level).  The server's own controllers watch CRDs in protobuf, so a
protobuf watcher asks for the encoding the server already makes, smaller and far cheaper to
produce (bench/RESULTS.md, footprint on 1.26).

Only the fields :func:`connection.crdwatch.record_from` reads are decoded; a schema is skipped by its
length without being looked at (the length is kept: what the cost model prices a CRD by).  The result
is the same slim dict :func:`connection.crdwatch.slim` makes from JSON, times as RFC 3339 text, so
everything after decoding is shared.

Wire format (``k8s.io/apimachinery/pkg/runtime/serializer/protobuf``): an object is the magic
``k8s\\0`` and a ``runtime.Unknown`` envelope (``typeMeta`` 1, ``raw`` 2); a watch stream is frames of a
4-byte big-endian length and a bare ``metav1.WatchEvent`` (``type`` 1, ``object`` 2, a RawExtension
whose ``raw`` 1 holds an enveloped object).  Field numbers are those of the ``generated.proto`` files
of ``k8s.io/apimachinery/pkg/apis/meta/v1`` and ``k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1``.
"""

from __future__ import annotations

import time
from typing import Any

#: The media type a client asks for, and the one a protobuf answer carries.
PROTOBUF = "application/vnd.kubernetes.protobuf"
#: What the CRD list asks for: protobuf, JSON where a server (or a proxy) cannot.
LIST_ACCEPT = f"{PROTOBUF}, application/json;q=0.9"
#: What the CRD watch asks for.
WATCH_ACCEPT = f"{PROTOBUF};stream=watch, application/json;q=0.9"
MAGIC = b"k8s\x00"
#: The annotation whose value the records keep (crdscope's load run); the others are skipped.
_KEPT_ANNOTATIONS = ("crdscope.dev/load-run",)

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """Bytes that are not the protobuf object, page or event expected."""


def is_protobuf(content_type: str | None) -> bool:
    """True for a response whose Content-Type is Kubernetes protobuf (with or without ``stream=watch``)."""
    return bool(content_type) and content_type.split(";", 1)[0].strip() == PROTOBUF  # type: ignore[union-attr]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    try:
        while True:
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise ProtobufError("varint longer than 10 bytes")
    except IndexError:
        raise ProtobufError("truncated varint") from None


def _fields(buf: bytes, start: int = 0, end: int | None = None) -> list[tuple[int, int, Any]]:
    """``(field number, wire type, value)`` of one message; a length-delimited value is ``(start, end)``.

    A list, not a generator, and one-byte keys and lengths read inline: a CRD event is about 70
    fields, and this loop is most of the watch's decoding time (as a generator with a call per
    varint it took twice as long as msgspec's JSON decoding of the same events).
    """
    end = len(buf) if end is None else end
    pos = start
    fields: list[tuple[int, int, Any]] = []
    append = fields.append
    try:
        while pos < end:
            key = buf[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(buf, pos)
            wire = key & 7
            value: Any
            if wire == _BYTES:
                length = buf[pos]
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = _varint(buf, pos)
                value = (pos, pos + length)
                pos += length
            elif wire == _VARINT:
                value, pos = _varint(buf, pos)
            elif wire == _FIXED64:
                value, pos = None, pos + 8
            elif wire == _FIXED32:
                value, pos = None, pos + 4
            else:
                raise ProtobufError(f"unsupported wire type {wire} (field {key >> 3})")
            if pos > end:
                raise ProtobufError(f"field {key >> 3} runs past its message")
            append((key >> 3, wire, value))
    except IndexError:
        raise ProtobufError("truncated message") from None
    return fields


def _text(buf: bytes, span: tuple[int, int]) -> str:
    return buf[span[0]:span[1]].decode("utf-8", "replace")


def _time(buf: bytes, span: tuple[int, int]) -> str | None:
    """A ``metav1.Time`` (``seconds`` 1, ``nanos`` 2) as the RFC 3339 text JSON would carry.

    Go's zero time (year 1, negative seconds on the wire) is None, as JSON's ``null``.
    """
    seconds = 0
    for number, wire, value in _fields(buf, *span):
        if number == 1 and wire == _VARINT:
            seconds = value - (1 << 64) if value >= 1 << 63 else value  # int64: two's complement
    if seconds <= 0:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _map_entry(buf: bytes, span: tuple[int, int]) -> tuple[str, tuple[int, int] | None]:
    key, value = "", None
    for number, wire, field in _fields(buf, *span):
        if wire != _BYTES:
            continue
        if number == 1:
            key = _text(buf, field)
        elif number == 2:
            value = field
    return key, value


def _owner_reference(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    reference: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if wire == _BYTES and number in (1, 3, 4, 5):
            reference[{1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}[number]] = _text(buf, value)
        elif wire == _VARINT and number == 6:
            reference["controller"] = bool(value)
    return reference


def _object_meta(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if wire != _BYTES:
            continue
        if number == 1:
            metadata["name"] = _text(buf, value)
        elif number == 5:
            metadata["uid"] = _text(buf, value)
        elif number == 6:
            metadata["resourceVersion"] = _text(buf, value)
        elif number in (8, 9):
            stamp = _time(buf, value)
            if stamp is not None:
                metadata["creationTimestamp" if number == 8 else "deletionTimestamp"] = stamp
        elif number == 11:
            key, text = _map_entry(buf, value)
            metadata.setdefault("labels", {})[key] = _text(buf, text) if text else ""
        elif number == 12:
            key, text = _map_entry(buf, value)
            if key in _KEPT_ANNOTATIONS:  # kubectl's last-applied copy of the CRD is skipped unread
                metadata.setdefault("annotations", {})[key] = _text(buf, text) if text else ""
        elif number == 13:
            metadata.setdefault("ownerReferences", []).append(_owner_reference(buf, value))
    return metadata


def _names(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if wire == _BYTES and number in (1, 2, 4, 5):
            names[{1: "plural", 2: "singular", 4: "kind", 5: "listKind"}[number]] = _text(buf, value)
    return names


def _version(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    # Unset bools are absent on the wire (proto2 optional, false by default in Go).
    version: dict[str, Any] = {"name": None, "served": False, "storage": False}
    for number, wire, value in _fields(buf, *span):
        if number == 1 and wire == _BYTES:
            version["name"] = _text(buf, value)
        elif number == 2 and wire == _VARINT:
            version["served"] = bool(value)
        elif number == 3 and wire == _VARINT:
            version["storage"] = bool(value)
        elif number == 4 and wire == _BYTES:
            version["schemaBytes"] = _schema_bytes(buf, value)
    return version


def _schema_bytes(buf: bytes, span: tuple[int, int]) -> int:
    """The length of a ``CustomResourceValidation``'s ``openAPIV3Schema`` (1), its content unread.

    The cost model prices a schema by its compact JSON bytes; its protobuf encoding is as long within
    a few percent (property names, types and descriptions are text either way): per CRD 0.95-1.16 of
    the JSON's on GCP's provider CRDs, 0.97-1.05 on AWS's, 1.01-1.04 on crdscope's synthetic ones and
    0.92-1.00 on Crossplane's own; summed over each set 0.97-1.02 (1.37 lab, 2026-12-08; 521 CRDs).
    """
    for number, wire, value in _fields(buf, *span):
        if number == 1 and wire == _BYTES:
            return int(value[1] - value[0])
    return 0


def _client_config(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    """A ``WebhookClientConfig``: ``url`` 3, ``service`` 1 (``namespace`` 1, ``name`` 2, ``path`` 3,
    ``port`` 4); the ``caBundle`` (2) is skipped."""
    config: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if number == 3 and wire == _BYTES:
            config["url"] = _text(buf, value)
        elif number == 1 and wire == _BYTES:
            service: dict[str, Any] = {}
            for field_number, field_wire, field_value in _fields(buf, *value):
                if field_wire == _BYTES and field_number in (1, 2, 3):
                    service[{1: "namespace", 2: "name", 3: "path"}[field_number]] = _text(buf, field_value)
                elif field_wire == _VARINT and field_number == 4:
                    service["port"] = field_value
            config["service"] = service
    return config


def _conversion(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    """A ``CustomResourceConversion``: ``strategy`` 1, ``webhook`` 2 (its ``clientConfig`` 2)."""
    conversion: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if wire != _BYTES:
            continue
        if number == 1:
            conversion["strategy"] = _text(buf, value)
        elif number == 2:
            config = next((v for n, w, v in _fields(buf, *value) if n == 2 and w == _BYTES), None)
            conversion["webhook"] = {"clientConfig": _client_config(buf, config) if config else {}}
    return conversion


def _spec(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    spec: dict[str, Any] = {"group": None, "scope": None, "names": {}, "versions": []}
    for number, wire, value in _fields(buf, *span):
        if wire != _BYTES:
            continue
        if number == 1:
            spec["group"] = _text(buf, value)
        elif number == 3:
            spec["names"] = _names(buf, value)
        elif number == 4:
            spec["scope"] = _text(buf, value)
        elif number == 7:
            spec["versions"].append(_version(buf, value))
        elif number == 9:
            spec["conversion"] = _conversion(buf, value)
    return spec


def _condition(buf: bytes, span: tuple[int, int]) -> dict[str, Any]:
    condition: dict[str, Any] = {}
    for number, wire, value in _fields(buf, *span):
        if wire != _BYTES:
            continue
        if number == 3:
            condition["lastTransitionTime"] = _time(buf, value)
        elif number in (1, 2, 4, 5):
            condition[{1: "type", 2: "status", 4: "reason", 5: "message"}[number]] = _text(buf, value)
    return condition


def _crd(buf: bytes, start: int, end: int) -> dict[str, Any]:
    """A ``CustomResourceDefinition`` message as the slim dict (``metadata`` 1, ``spec`` 2, ``status`` 3)."""
    crd: dict[str, Any] = {"metadata": {}, "spec": {"group": None, "scope": None, "names": {}, "versions": []},
                           "status": {"conditions": []}}
    for number, wire, value in _fields(buf, start, end):
        if wire != _BYTES:
            continue
        if number == 1:
            crd["metadata"] = _object_meta(buf, value)
        elif number == 2:
            crd["spec"] = _spec(buf, value)
        elif number == 3:
            crd["status"]["conditions"] = [_condition(buf, span) for n, w, span in _fields(buf, *value)
                                           if n == 1 and w == _BYTES]
    return crd


def _status(buf: bytes, start: int, end: int) -> dict[str, Any]:
    """A ``metav1.Status``: ``status`` 2, ``message`` 3, ``reason`` 4, ``code`` 6."""
    status: dict[str, Any] = {"kind": "Status"}
    for number, wire, value in _fields(buf, start, end):
        if wire == _BYTES and number in (2, 3, 4):
            status[{2: "status", 3: "message", 4: "reason"}[number]] = _text(buf, value)
        elif wire == _VARINT and number == 6:
            status["code"] = value
    return status


def _envelope(buf: bytes, start: int = 0, end: int | None = None) -> tuple[str, tuple[int, int]]:
    """The kind and the span of the object inside ``k8s\\0`` + ``runtime.Unknown``."""
    end = len(buf) if end is None else end
    if buf[start:start + 4] != MAGIC:
        raise ProtobufError("not a Kubernetes protobuf object (no k8s magic)")
    kind, raw = "", (start + 4, start + 4)
    for number, wire, value in _fields(buf, start + 4, end):
        if wire != _BYTES:
            continue
        if number == 1:
            kind = next((_text(buf, v) for n, w, v in _fields(buf, *value) if n == 2 and w == _BYTES), "")
        elif number == 2:
            raw = value
    return kind, raw


def decode_status(raw: bytes) -> dict[str, Any]:
    """An enveloped ``Status`` (an error answer) as ``{"kind", "status", "message", "reason", "code"}``."""
    kind, span = _envelope(raw)
    if kind != "Status":
        raise ProtobufError(f"expected a Status, got {kind or 'no kind'}")
    return _status(raw, *span)


def decode_page(raw: bytes) -> dict[str, Any]:
    """A ``CustomResourceDefinitionList`` page as ``{"items": [...], "metadata": {...}}``, items slim."""
    kind, (start, end) = _envelope(raw)
    if kind != "CustomResourceDefinitionList":
        raise ProtobufError(f"expected a CustomResourceDefinitionList, got {kind or 'no kind'}")
    items: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {}
    for number, wire, value in _fields(raw, start, end):
        if wire != _BYTES:
            continue
        if number == 1:  # ListMeta: resourceVersion 2, continue 3
            for meta_number, meta_wire, meta_value in _fields(raw, *value):
                if meta_wire == _BYTES and meta_number in (2, 3):
                    metadata["resourceVersion" if meta_number == 2 else "continue"] = _text(raw, meta_value)
        elif number == 2:
            items.append(_crd(raw, *value))
    return {"items": items, "metadata": metadata}


def decode_event(frame: bytes) -> dict[str, Any]:
    """One watch frame (a bare ``WatchEvent``) as ``{"type", "object"}``, the object slim.

    An ERROR event's object is a Status dict (``code``, ``message``); a BOOKMARK's is a CRD that
    carries only its resourceVersion.  Raises :class:`ProtobufError` for bytes that are not one.
    """
    event_type, raw = "", None
    for number, wire, value in _fields(frame):
        if wire != _BYTES:
            continue
        if number == 1:
            event_type = _text(frame, value)
        elif number == 2:
            raw = next((v for n, w, v in _fields(frame, *value) if n == 1 and w == _BYTES), None)
    if not event_type or raw is None:
        raise ProtobufError("a watch frame without a type or an object")
    kind, span = _envelope(frame, *raw)
    obj = _status(frame, *span) if kind == "Status" else _crd(frame, *span)
    return {"type": event_type, "object": obj}


class FrameSplitter:
    """Splits a protobuf watch stream into frames (4-byte big-endian length, then the frame).

    Like :class:`connection.crdwatch.LineSplitter`, it copies each byte about once: a megabyte frame
    arrives in many small chunks.
    """

    #: A frame larger than this is not a CRD event: the stream is not what we think it is.
    MAX_FRAME = 256 * 1024 * 1024

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """Complete frames found after adding ``chunk``."""
        self._buffer += chunk
        frames: list[bytes] = []
        start = 0
        # A view, so that a frame is copied once (a bytearray slice is itself a copy); it is
        # released before the buffer is trimmed.
        with memoryview(self._buffer) as view:
            while len(view) - start >= 4:
                length = int.from_bytes(view[start:start + 4], "big")
                if length > self.MAX_FRAME:
                    raise ProtobufError(f"a watch frame of {length} bytes: not a protobuf watch stream")
                if len(view) - start - 4 < length:
                    break
                frames.append(bytes(view[start + 4:start + 4 + length]))
                start += 4 + length
        if start:
            del self._buffer[:start]
        return frames

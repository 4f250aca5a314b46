"""Decode CRD objects, list pages and watch events without their schemas.

A provider CRD is about 50 KB of JSON, almost all of it the OpenAPI schema of its versions, and a
watch of an install carries each CRD three times or more (created, names accepted, established):
about 300 MB of JSON for the whole AWS set.  ``json.loads`` builds every dict of every schema
only for :func:`connection.crdwatch.slim` to drop them.  msgspec decodes into structs that declare
the few fields crdscope reads and skips the rest while parsing, without building it: the monitor
then costs the machine it shares with the API server far less CPU during an install
(bench/RESULTS.md, footprint).  The result is the same slim dict :func:`connection.crdwatch.slim` makes.

Each version's ``openAPIV3Schema`` is kept as its raw text only long enough to be measured
(:func:`schema_length`: the cost model's ``schema_bytes``), then dropped: what the records keep is
the number (``schemaBytes``), never the schema.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec


class _Metadata(msgspec.Struct, rename="camel", omit_defaults=True):
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    # A list's metadata (the page's own).
    continue_: str | None = msgspec.field(default=None, name="continue")


class _Validation(msgspec.Struct):
    # Not built: its text is measured (schema_length), then dropped.
    openAPIV3Schema: msgspec.Raw = msgspec.Raw()  # noqa: N815 - the API's field name


class _Version(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    served: bool | None = None
    storage: bool | None = None
    schema: _Validation | None = None
    #: The schema's size, filled from ``schema`` once decoded (see :func:`_measured`).
    schemaBytes: int | None = None  # noqa: N815 - the slim dict's key


class _ClientConfig(msgspec.Struct, omit_defaults=True):
    url: str | None = None
    service: dict[str, Any] | None = None  # caBundle skipped


class _Webhook(msgspec.Struct, rename="camel", omit_defaults=True):
    client_config: _ClientConfig | None = None


class _Conversion(msgspec.Struct, omit_defaults=True):
    strategy: str | None = None
    webhook: _Webhook | None = None


class _Spec(msgspec.Struct, omit_defaults=True):
    group: str | None = None
    scope: str | None = None
    names: dict[str, Any] | None = None
    versions: list[_Version] | None = None
    conversion: _Conversion | None = None


class _Status(msgspec.Struct, omit_defaults=True):
    conditions: list[dict[str, Any]] | None = None


class _Object(msgspec.Struct, omit_defaults=True):
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    # A CRD's status; an ERROR event's object is a Status, whose ``status`` is "Failure".
    status: _Status | str | None = None
    code: int | None = None
    message: str | None = None


class _Event(msgspec.Struct):
    type: str = ""
    object: _Object | None = None


class _Page(msgspec.Struct):
    items: list[_Object] = msgspec.field(default_factory=list)
    metadata: _Metadata | None = None


_EVENTS = msgspec.json.Decoder(_Event)
_PAGES = msgspec.json.Decoder(_Page)


def decode_event(raw: bytes) -> dict[str, Any]:
    """One watch event line as ``{"type", "object"}``, the object without its schemas.

    Raises ``ValueError`` for a line that is not a watch event.
    """
    return _slim_builtins(_EVENTS, raw, "watch event")


def decode_page(raw: bytes) -> dict[str, Any]:
    """One CRD list page as ``{"items": [...], "metadata": {...}}``, the items without their schemas."""
    return _slim_builtins(_PAGES, raw, "CRD list")


def _slim_builtins(decoder: msgspec.json.Decoder[Any], raw: bytes, what: str) -> dict[str, Any]:
    try:
        structs = decoder.decode(raw)
    except msgspec.DecodeError as exc:
        raise ValueError(f"undecodable {what}: {exc}") from None
    for obj in structs.items if isinstance(structs, _Page) else [structs.object]:
        _measured(obj)
    decoded: dict[str, Any] = msgspec.to_builtins(structs)
    return decoded


def _measured(obj: _Object | None) -> None:
    """Each version's schema replaced by its size."""
    for version in (obj.spec.versions or ()) if obj is not None and obj.spec is not None else ():
        if version.schema is not None:
            version.schemaBytes = schema_length(version.schema.openAPIV3Schema)
            version.schema = None


#: What Go's encoding/json escapes for HTML and Python's json does not: ``<``, ``>``, ``&`` (6 characters, not 1).
_GO_HTML_ESCAPES = (b"\\u003c", b"\\u003e", b"\\u0026")


def dumps_length(schema: Any) -> int:
    """The cost model's ``schema_bytes`` of one parsed schema: its compact JSON as Python writes it
    (the definition :func:`schema_length` reproduces from the server's text)."""
    return len(json.dumps(schema, separators=(",", ":")))


def schema_length(raw: msgspec.Raw | bytes) -> int:
    """The size of a schema's JSON text (as the API server wrote it) as the cost model counts it: the
    length of Python's compact ``json.dumps`` (``costmodel.features``).  Whitespace is taken out; what
    Go writes otherwise than Python is counted as Python writes it: ``<``, ``>`` and ``&`` (Go:
    ``\\u003c``), characters beyond ASCII (Go: their UTF-8 bytes; Python: ``\\uXXXX``, two for one
    beyond the BMP)."""
    text_sent = bytes(memoryview(raw))
    if not text_sent:
        return 0
    data = msgspec.json.format(text_sent, indent=-1)
    length = len(data) - 5 * sum(data.count(escape) for escape in _GO_HTML_ESCAPES)
    if data.isascii():
        return length
    text = data.decode("utf-8", "replace")
    beyond = len(text) - len(text.encode("ascii", "ignore"))
    astral = len(text.encode("utf-16-le")) // 2 - len(text)
    return length - (len(data) - (len(text) - beyond)) + 6 * beyond + 6 * astral

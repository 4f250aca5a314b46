"""Decode CRD objects, list pages and watch events without their schemas.

A provider CRD is about 50 KB of JSON, almost all of it the OpenAPI schema of its versions, and a
watch of an install carries each CRD three times or more (created, names accepted, established):
about 300 MB of JSON for the whole AWS set.  ``json.loads`` builds every dict of every schema
only for :func:`connection.crdwatch.slim` to drop them.  msgspec decodes into structs that declare
the few fields crdscope reads and skips the rest while parsing, without building it: the monitor
then costs the machine it shares with the API server far less CPU during an install
(bench/RESULTS.md, footprint).  A schema is kept as its raw bytes and counted (the cost model prices a
CRD by its schema's compact JSON bytes, which is what the server sends).  The result is the same slim
dict :func:`connection.crdwatch.slim` makes.
"""

from __future__ import annotations

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
    # Its bytes as sent, never parsed into objects: all the cost model needs of a schema is its size.
    schema: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="openAPIV3Schema")


class _Version(msgspec.Struct, omit_defaults=True):
    name: str | None = None
    served: bool | None = None
    storage: bool | None = None
    schema: _Validation | None = None
    schema_bytes: int = msgspec.field(default=0, name="schemaBytes")

    def __post_init__(self) -> None:
        # The slim dict carries the schema's size (as :func:`connection.crdwatch.slim` counts it), not the schema.
        if self.schema is not None:
            self.schema_bytes = len(self.schema.schema)
            self.schema = None


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
        decoded: dict[str, Any] = msgspec.to_builtins(decoder.decode(raw))
    except msgspec.DecodeError as exc:
        raise ValueError(f"undecodable {what}: {exc}") from None
    return decoded

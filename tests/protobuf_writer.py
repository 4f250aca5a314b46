"""A minimal protobuf writer for tests: enough to build what the API server sends for CRDs.

``schema_message`` writes a ``JSONSchemaProps`` as the API server's generated marshaller does
(``k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1/generated.pb.go``): every non-pointer
field written whether empty or not, pointers only when set, map entries sorted by key, raw JSON
values (defaults, enums, examples) as Go's ``json.Marshal`` writes them (compact, UTF-8, ``<``,
``>`` and ``&`` escaped).
"""

from __future__ import annotations

import json
import struct
from typing import Any


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


def double(number: int, value: float) -> bytes:
    return varint(number << 3 | 1) + struct.pack("<d", float(value))


def go_json(value: Any) -> bytes:
    """``json.Marshal`` of a parsed JSON value, as Go writes it."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


def _raw(number: int, value: Any) -> bytes:
    return field(number, field(1, go_json(value)))


def _or_bool(number: int, value: Any) -> bytes:
    if isinstance(value, bool):
        return field(number, field(1, value))
    return field(number, field(1, True) + field(2, schema_message(value)))


def _schema_map(number: int, value: dict[str, Any]) -> bytes:
    return b"".join(field(number, field(1, key) + field(2, schema_message(value[key]))) for key in sorted(value))


def _rule(rule: dict[str, Any]) -> bytes:
    out = field(1, rule.get("rule", "")) + field(2, rule.get("message", ""))
    out += field(3, rule.get("messageExpression", ""))
    if "reason" in rule:
        out += field(4, rule["reason"])
    out += field(5, rule.get("fieldPath", ""))
    if "optionalOldSelf" in rule:
        out += field(6, bool(rule["optionalOldSelf"]))
    return out


_STRINGS = ((1, "id"), (2, "$schema"))
_INTS = {13: "maxLength", 14: "minLength", 16: "maxItems", 17: "minItems", 21: "maxProperties", 22: "minProperties"}


def schema_message(schema: dict[str, Any]) -> bytes:
    """A ``JSONSchemaProps`` message, fields in their numbers' order as Go writes them."""
    s = schema
    out = field(1, s.get("id", "")) + field(2, s.get("$schema", ""))
    if "$ref" in s:
        out += field(3, s["$ref"])
    for number, name in ((4, "description"), (5, "type"), (6, "format"), (7, "title")):
        out += field(number, s.get(name, ""))
    if "default" in s:
        out += _raw(8, s["default"])
    if "maximum" in s:
        out += double(9, s["maximum"])
    out += field(10, bool(s.get("exclusiveMaximum", False)))
    if "minimum" in s:
        out += double(11, s["minimum"])
    out += field(12, bool(s.get("exclusiveMinimum", False)))
    for number in (13, 14):
        if _INTS[number] in s:
            out += field(number, int(s[_INTS[number]]))
    out += field(15, s.get("pattern", ""))
    for number in (16, 17):
        if _INTS[number] in s:
            out += field(number, int(s[_INTS[number]]))
    out += field(18, bool(s.get("uniqueItems", False)))
    if "multipleOf" in s:
        out += double(19, s["multipleOf"])
    out += b"".join(_raw(20, v) for v in s.get("enum") or ())
    for number in (21, 22):
        if _INTS[number] in s:
            out += field(number, int(s[_INTS[number]]))
    out += b"".join(field(23, v) for v in s.get("required") or ())
    items = s.get("items")
    if isinstance(items, dict):
        out += field(24, field(1, schema_message(items)))
    elif isinstance(items, list):
        out += field(24, b"".join(field(2, schema_message(v)) for v in items))
    for number, name in ((25, "allOf"), (26, "oneOf"), (27, "anyOf")):
        out += b"".join(field(number, schema_message(v)) for v in s.get(name) or ())
    if "not" in s:
        out += field(28, schema_message(s["not"]))
    out += _schema_map(29, s.get("properties") or {})
    if "additionalProperties" in s:
        out += _or_bool(30, s["additionalProperties"])
    out += _schema_map(31, s.get("patternProperties") or {})
    for key, value in sorted((s.get("dependencies") or {}).items()):
        inner = (field(1, schema_message(value)) if isinstance(value, dict)
                 else b"".join(field(2, v) for v in value))
        out += field(32, field(1, key) + field(2, inner))
    if "additionalItems" in s:
        out += _or_bool(33, s["additionalItems"])
    out += _schema_map(34, s.get("definitions") or {})
    if "externalDocs" in s:
        docs = s["externalDocs"]
        out += field(35, field(1, docs.get("description", "")) + field(2, docs.get("url", "")))
    if "example" in s:
        out += _raw(36, s["example"])
    out += field(37, bool(s.get("nullable", False)))
    if "x-kubernetes-preserve-unknown-fields" in s:
        out += field(38, bool(s["x-kubernetes-preserve-unknown-fields"]))
    out += field(39, bool(s.get("x-kubernetes-embedded-resource", False)))
    out += field(40, bool(s.get("x-kubernetes-int-or-string", False)))
    out += b"".join(field(41, v) for v in s.get("x-kubernetes-list-map-keys") or ())
    for number, name in ((42, "x-kubernetes-list-type"), (43, "x-kubernetes-map-type")):
        if name in s:
            out += field(number, s[name])
    out += b"".join(field(44, _rule(v)) for v in s.get("x-kubernetes-validations") or ())
    return out

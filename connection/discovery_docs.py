"""Discovery documents: recognise them, parse them, and count them the way kubectl does.

Aggregated discovery (``apidiscovery.k8s.io`` v2 or v2beta1 ``APIGroupDiscoveryList``)
and the legacy documents (``APIVersions`` at ``/api``, ``APIGroupList`` at ``/apis``,
``APIResourceList`` per group-version) are reduced to one :class:`DiscoveredAPIs`.

Counting follows kubectl (checked against the lab):

* ``group_versions`` is what ``kubectl api-versions`` prints: every listed
  group-version, except those aggregated discovery marks ``freshness: Stale``
  (client-go drops them from the group list and reports them as failed).
* ``resources`` is what ``kubectl api-resources`` prints: client-go's
  ``ServerPreferredResources`` keeps one entry per (group, resource), the
  preferred version's where several versions serve it, skips subresources
  (names with ``/``), and kubectl then drops resources without verbs.  An
  aggregated resource without a ``responseKind`` is dropped, as client-go does.
"""

from __future__ import annotations

from crdscope.base.samples.discovery import DiscoveryFormat

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
#: client-go's Accept list for /api and /apis (parameters must be ordered g, v, as).
ACCEPT_AGGREGATED = ",".join((
    f"application/json;g={AGGREGATED_GROUP};v=v2;as={AGGREGATED_KIND}",
    f"application/json;g={AGGREGATED_GROUP};v=v2beta1;as={AGGREGATED_KIND}",
    "application/json",
))
ACCEPT_LEGACY = "application/json"


#: Yield to the event loop after decoding this many characters of a big document.
PIECE_CHARS = 1 << 16
_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class DiscoveryFormatError(ValueError):
    """A discovery document that is not what its Content-Type promises."""


async def decode_in_pieces(raw: bytes, piece: int = PIECE_CHARS) -> Any:
    """``json.loads`` that lets the event loop run while a big document is decoded.

    ``json.loads`` holds the GIL for its whole run, so decoding in a thread still
    stalls the loop (measured: 12 MB, 1.1 s in a thread, 1.7 s inline).  A big
    top-level object is decoded here one member at a time, and a member that is an
    array (aggregated discovery's ``items``) one element at a time, yielding to the
    loop after every ``piece`` characters.  Raises ``ValueError`` as ``json.loads``.
    """
    text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
    position = _skip_space(text, 0)
    if len(text) <= piece or not text.startswith("{", position):
        return json.loads(text)
    try:
        return await _decode_object(text, position, piece)
    except IndexError:
        raise ValueError("unexpected end of JSON document") from None


def _skip_space(text: str, at: int) -> int:
    """The first position at or after ``at`` that is not JSON whitespace."""
    match = _SPACE.match(text, at)  # ``\s*`` always matches, possibly empty
    return match.end() if match else at


async def _decode_object(text: str, position: int, piece: int) -> dict[str, Any]:
    def skip(at: int) -> int:
        return _skip_space(text, at)

    def expect(at: int, character: str) -> int:
        if text[at] != character:
            raise ValueError(f"expected {character!r} at character {at}")
        return skip(at + 1)

    result: dict[str, Any] = {}
    position = skip(position + 1)
    decoded = 0
    closed = text[position] == "}"
    while not closed:
        key, position = _DECODER.raw_decode(text, position)
        if not isinstance(key, str):
            raise ValueError(f"object key is not a string at character {position}")
        position = expect(skip(position), ":")
        if text[position] == "[":
            value: Any = []
            position = skip(position + 1)
            done = text[position] == "]"
            while not done:
                start = position
                element, position = _DECODER.raw_decode(text, position)
                value.append(element)
                decoded += position - start
                if decoded >= piece:
                    decoded = 0
                    await asyncio.sleep(0)
                position = skip(position)
                done = text[position] == "]"
                if not done:
                    position = expect(position, ",")
            position += 1
        else:
            value, position = _DECODER.raw_decode(text, position)
        result[key] = value
        position = skip(position)
        closed = text[position] == "}"
        if not closed:
            position = expect(position, ",")
    if skip(position + 1) != len(text):
        raise ValueError(f"extra data after the document at character {position + 1}")
    return result


def content_format(content_type: str | None) -> DiscoveryFormat:
    """``"v2"``, ``"v2beta1"`` (aggregated) or ``"legacy"`` (plain JSON), from a Content-Type.

    Parameter order, spaces and extra parameters (``charset``) do not matter, as in
    client-go's ``ContentTypeIsGVK``; anything that is not JSON raises
    :class:`DiscoveryFormatError`.
    """
    if not content_type:
        return "legacy"
    base, *raw_params = content_type.split(";")
    if base.strip().lower() != "application/json":
        raise DiscoveryFormatError(f"unexpected Content-Type {content_type!r}")
    params = {}
    for raw in raw_params:
        key, _, value = raw.partition("=")
        params[key.strip().lower()] = value.strip().strip('"')
    aggregated = params.get("g") == AGGREGATED_GROUP and params.get("as") == AGGREGATED_KIND
    if aggregated and params.get("v") == "v2":
        return "v2"
    if aggregated and params.get("v") == "v2beta1":
        return "v2beta1"
    return "legacy"


def group_version(group: str, version: str) -> str:
    """``"v1"`` for the core group, else ``"<group>/<version>"``."""
    return f"{group}/{version}" if group else version


def group_version_path(gv: str) -> str:
    """The legacy discovery URL of a group-version (``/api/v1`` or ``/apis/<g>/<v>``)."""
    return "/api/" + gv if "/" not in gv else "/apis/" + gv


@dataclass
class Resource:
    """A served resource (or subresource, ``name`` containing ``/``) of one group-version."""

    name: str
    has_verbs: bool


@dataclass
class DiscoveredAPIs:
    """Groups in discovery order, their versions (preferred first) and resources."""

    #: group -> versions listed (fresh only), in the server's order of preference
    versions: dict[str, list[str]] = field(default_factory=dict)
    #: group -> its preferred version
    preferred: dict[str, str] = field(default_factory=dict)
    #: group-version -> its resources (missing when not (yet) known, e.g. a failed legacy GET)
    resources: dict[str, list[Resource]] = field(default_factory=dict)
    #: group-versions marked ``freshness: Stale`` (aggregated discovery only)
    stale: set[str] = field(default_factory=set)

    def merge(self, other: DiscoveredAPIs) -> DiscoveredAPIs:
        """``/api`` first, then ``/apis``, as client-go merges them."""
        merged = DiscoveredAPIs(dict(self.versions), dict(self.preferred), dict(self.resources), set(self.stale))
        for group, versions in other.versions.items():
            merged.versions.setdefault(group, []).extend(versions)
            merged.preferred.setdefault(group, other.preferred.get(group, ""))
        merged.resources.update(other.resources)
        merged.stale |= other.stale
        return merged

    def group_versions(self) -> list[str]:
        """Every fresh group-version, in discovery order (``kubectl api-versions`` sorts them)."""
        return [group_version(g, v) for g, versions in self.versions.items() for v in versions]

    def listed(self) -> set[str]:
        """Every group-version the server listed, fresh or stale (for change detection)."""
        return set(self.group_versions()) | self.stale

    def served_resources(self) -> set[tuple[str, str, str]]:
        """(group, version, resource) of every resource (not subresource) of every fresh group-version."""
        return {(group, version, resource.name)
                for group, versions in self.versions.items() for version in versions
                for resource in self.resources.get(group_version(group, version), []) if "/" not in resource.name}

    def preferred_resources(self) -> set[str]:
        """``kubectl api-resources -o name`` as a set: ``<resource>.<group>`` (``<resource>`` for core)."""
        chosen: dict[tuple[str, str], bool] = {}
        for group, versions in self.versions.items():
            for version in versions:
                for resource in self.resources.get(group_version(group, version), []):
                    if "/" in resource.name:
                        continue
                    key = (group, resource.name)
                    if key in chosen and version != self.preferred.get(group):
                        continue  # only the preferred version overrides an earlier one
                    chosen[key] = resource.has_verbs
        return {f"{name}.{group}" if group else name for (group, name), has_verbs in chosen.items() if has_verbs}


def _items(document: Any, key: str, where: str) -> list[Any]:
    if not isinstance(document, dict):
        raise DiscoveryFormatError(f"{where} is not a JSON object")
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DiscoveryFormatError(f"{where}: '{key}' is not a list")
    return value


def _text(value: Any, what: str, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise DiscoveryFormatError(f"{where}: {what} is missing or not a string")
    return value


def _has_kind(entry: dict[str, Any]) -> bool:
    # client-go drops an aggregated (sub)resource whose responseKind is absent or empty.
    kind = entry.get("responseKind")
    return isinstance(kind, dict) and any(kind.get(k) for k in ("group", "version", "kind"))


def parse_aggregated(document: Any, where: str) -> DiscoveredAPIs:
    """An ``APIGroupDiscoveryList`` (v2 or v2beta1: the fields used here are the same)."""
    found = DiscoveredAPIs()
    for item in _items(document, "items", where):
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if metadata is not None and not isinstance(metadata, dict):
            raise DiscoveryFormatError(f"{where}: items[].metadata is not an object")
        group = _text((metadata or {}).get("name", ""), "items[].metadata.name", where, allow_empty=True)
        fresh = found.versions.setdefault(group, [])
        for entry in _items(item, "versions", where):
            version = _text(entry.get("version") if isinstance(entry, dict) else None, "versions[].version", where)
            gv = group_version(group, version)
            if entry.get("freshness") == "Stale":
                found.stale.add(gv)
                continue
            fresh.append(version)
            found.preferred.setdefault(group, version)  # the first fresh version is preferred
            resources = []
            for raw in _items(entry, "resources", where):
                name = _text(raw.get("resource") if isinstance(raw, dict) else None, "resources[].resource", where)
                if _has_kind(raw):
                    resources.append(Resource(name, bool(raw.get("verbs"))))
                for sub in _items(raw, "subresources", where):
                    subname = _text(sub.get("subresource") if isinstance(sub, dict) else None,
                                    "subresources[].subresource", where)
                    if _has_kind(sub):
                        resources.append(Resource(f"{name}/{subname}", bool(sub.get("verbs"))))
            found.resources[gv] = resources
    return found


def parse_api_versions(document: Any, where: str = "/api") -> DiscoveredAPIs:
    """The legacy ``APIVersions`` of ``/api`` (the core group)."""
    versions = [_text(v, "versions[]", where) for v in _items(document, "versions", where)]
    found = DiscoveredAPIs()
    if versions:
        found.versions[""] = versions
        found.preferred[""] = versions[0]
    return found


def parse_api_group_list(document: Any, where: str = "/apis") -> DiscoveredAPIs:
    """The legacy ``APIGroupList`` of ``/apis``."""
    found = DiscoveredAPIs()
    for group in _items(document, "groups", where):
        name = _text(group.get("name") if isinstance(group, dict) else None, "groups[].name", where)
        versions = [_text(v.get("version") if isinstance(v, dict) else None, "groups[].versions[].version", where)
                    for v in _items(group, "versions", where)]
        found.versions.setdefault(name, []).extend(versions)
        preferred = group.get("preferredVersion")
        chosen = preferred.get("version") if isinstance(preferred, dict) else None
        found.preferred[name] = chosen if isinstance(chosen, str) and chosen else (versions[0] if versions else "")
    return found


def parse_resource_list(document: Any, where: str) -> list[Resource]:
    """A legacy ``APIResourceList`` (one group-version's resources and subresources)."""
    return [Resource(_text(r.get("name") if isinstance(r, dict) else None, "resources[].name", where),
                     bool(r.get("verbs")))
            for r in _items(document, "resources", where)]

"""What each CRD is made of, as far as its cost on an API server goes.

The API server builds, per served version of a CRD, a structural schema, a
validator, a CEL program set, an OpenAPI v2/v3 definition and a REST storage
with its own etcd client and watch cache; per group-version it publishes one
discovery entry and one OpenAPI v3 path.  :class:`CRDFeatures` holds the
figures a model needs for that, read once from the CRD's spec (no cluster).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from crdscope.connection.crd_decode import dumps_length
from crdscope.loader.documents import CRDDocument


@dataclass(frozen=True)
class CRDFeatures:
    """One CRD's cost drivers.  Sizes are bytes of compact JSON."""

    name: str
    group: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    served_versions: tuple[str, ...]
    storage_version: str
    #: openAPIV3Schema bytes summed over served versions (each one is compiled on its own)
    schema_bytes: int
    #: ``properties`` entries, nested ones included, summed over served versions
    schema_properties: int
    printer_columns: int
    subresources: tuple[str, ...]
    conversion: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    cel_rules: int = 0

    @property
    def served(self) -> int:
        """Served versions (at least one counts: a CRD serving none still costs its storage)."""
        return max(1, len(self.served_versions))

    @property
    def group_versions(self) -> tuple[str, ...]:
        """``group/version`` of every served version."""
        return tuple(f"{self.group}/{version}" for version in self.served_versions)


def _count_schema(node: Any) -> tuple[int, int]:
    """(properties, CEL rules) under one schema node, iteratively (schemas nest deep)."""
    properties = rules = 0
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            props = current.get("properties")
            if isinstance(props, dict):
                properties += len(props)
            validations = current.get("x-kubernetes-validations")
            if isinstance(validations, list):
                rules += len(validations)
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return properties, rules


def features_of_spec(name: str, spec: dict[str, Any]) -> CRDFeatures:
    """The features of a CRD given its ``spec`` (as parsed JSON/YAML)."""
    names: dict[str, Any] = spec["names"] if isinstance(spec.get("names"), dict) else {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    served = [v for v in versions if v.get("served", True)]
    storage = next((str(v.get("name", "")) for v in versions if v.get("storage")), "")
    schema_bytes = properties = rules = columns = 0
    subresources: set[str] = set()
    for version in served:
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is not None:
            schema_bytes += dumps_length(schema)
            counted, cel = _count_schema(schema)
            properties += counted
            rules += cel
        columns += len(version.get("additionalPrinterColumns") or [])
        subresources.update(str(key) for key in (version.get("subresources") or {}))
    conversion: dict[str, Any] = spec["conversion"] if isinstance(spec.get("conversion"), dict) else {}
    kind = str(names.get("kind", ""))
    return CRDFeatures(
        name=name, group=str(spec.get("group", "")), kind=kind,
        plural=str(names.get("plural", "")), singular=str(names.get("singular", "") or kind.lower()),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        served_versions=tuple(str(v.get("name", "")) for v in served), storage_version=storage,
        schema_bytes=schema_bytes, schema_properties=properties, printer_columns=columns,
        subresources=tuple(sorted(subresources)), conversion=str(conversion.get("strategy", "None")),
        short_names=tuple(str(s) for s in names.get("shortNames") or ()),
        categories=tuple(str(c) for c in names.get("categories") or ()), cel_rules=rules)


def features_of(document: CRDDocument) -> CRDFeatures:
    """The features of one loader document."""
    return features_of_spec(document.name, json.loads(document.spec_json))


@dataclass(frozen=True)
class SetFeatures:
    """Totals over a set of CRDs: the regressors of the fitted figures."""

    crds: int
    served_versions: int
    schema_bytes: int
    schema_properties: int
    group_versions: int
    groups: int
    resources: int


def totals(crds: Iterable[CRDFeatures], known_group_versions: Iterable[str] = (),
           known_groups: Iterable[str] = ()) -> SetFeatures:
    """Totals of ``crds``; group-versions and groups count only those new beside the known ones."""
    listed = list(crds)
    gvs = {gv for crd in listed for gv in crd.group_versions} - set(known_group_versions)
    groups = {crd.group for crd in listed} - set(known_groups)
    return SetFeatures(
        crds=len(listed), served_versions=sum(crd.served for crd in listed),
        schema_bytes=sum(crd.schema_bytes for crd in listed),
        schema_properties=sum(crd.schema_properties for crd in listed),
        group_versions=len(gvs), groups=len(groups),
        resources=sum(len(crd.served_versions) for crd in listed))

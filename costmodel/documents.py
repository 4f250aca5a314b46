"""The bytes a set of CRDs adds to discovery, built the way the API server writes them.

Discovery documents are a function of the CRDs' names alone, so their size is
built here entry by entry (compact JSON, the API server's field order) rather
than fitted; calibration only checks the construction (a scale factor near 1).

* aggregated discovery (``/apis``, ``apidiscovery.k8s.io/v2``): a group entry
  per new group, a version entry per new group-version, a resource entry (with
  its subresources) per served version of each CRD;
* legacy discovery: one ``APIResourceList`` per group-version (what client-go's
  legacy walk downloads and kubectl's cache keeps), and the ``/apis`` group list.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .features import CRDFeatures

VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
SUBRESOURCE_VERBS = ["get", "patch", "update"]
#: storageVersionHash is 12 base64 characters for every resource.
HASH = "x" * 12


def _compact(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":")))


def _aggregated_resource(crd: CRDFeatures, version: str) -> dict[str, object]:
    kind = {"group": crd.group, "version": version, "kind": crd.kind}
    entry: dict[str, object] = {"resource": crd.plural, "responseKind": kind,
                                "scope": "Namespaced" if crd.namespaced else "Cluster",
                                "singularResource": crd.singular, "verbs": VERBS}
    if crd.short_names:
        entry["shortNames"] = list(crd.short_names)
    if crd.categories:
        entry["categories"] = list(crd.categories)
    subresources = []
    if "status" in crd.subresources:
        subresources.append({"subresource": "status", "responseKind": kind, "verbs": SUBRESOURCE_VERBS})
    if "scale" in crd.subresources:
        subresources.append({"subresource": "scale",
                             "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                             "verbs": SUBRESOURCE_VERBS})
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated_bytes(crds: Iterable[CRDFeatures], known_groups: Iterable[str] = (),
                     known_group_versions: Iterable[str] = ()) -> int:
    """Bytes ``crds`` add to the aggregated ``/apis`` document.

    Each new entry counts with the comma before it, except the first entry of a list
    that starts empty (a new group's first version, a new version's first resource).
    """
    groups, gvs = set(known_groups), set(known_group_versions)
    total = 0
    for crd in crds:
        if crd.group not in groups:
            groups.add(crd.group)
            total += _compact({"metadata": {"name": crd.group}, "versions": []}) + 1
            first_version = True
        else:
            first_version = False
        for version in crd.served_versions:
            gv = f"{crd.group}/{version}"
            if gv not in gvs:
                gvs.add(gv)
                total += _compact({"version": version, "resources": [], "freshness": "Current"})
                total += 0 if first_version else 1
                first_version = False
                total += _compact(_aggregated_resource(crd, version))
            else:
                total += _compact(_aggregated_resource(crd, version)) + 1
    return total


def _legacy_resources(crd: CRDFeatures) -> list[dict[str, object]]:
    entry: dict[str, object] = {"name": crd.plural, "singularName": crd.singular, "namespaced": crd.namespaced,
                                "kind": crd.kind, "verbs": VERBS}
    if crd.short_names:
        entry["shortNames"] = list(crd.short_names)
    if crd.categories:
        entry["categories"] = list(crd.categories)
    entry["storageVersionHash"] = HASH
    found = [entry]
    if "status" in crd.subresources:
        found.append({"name": f"{crd.plural}/status", "singularName": "", "namespaced": crd.namespaced,
                      "kind": crd.kind, "verbs": SUBRESOURCE_VERBS})
    if "scale" in crd.subresources:
        found.append({"name": f"{crd.plural}/scale", "singularName": "", "namespaced": crd.namespaced,
                      "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": SUBRESOURCE_VERBS})
    return found


def legacy_bytes(crds: Iterable[CRDFeatures], known_group_versions: Iterable[str] = ()) -> int:
    """Bytes of the legacy walk's new documents: each new group-version's ``APIResourceList``
    (with every CRD it serves) and its entry in the ``/apis`` group list."""
    gvs = set(known_group_versions)
    total = 0
    for crd in crds:
        for version in crd.served_versions:
            gv = f"{crd.group}/{version}"
            if gv not in gvs:
                gvs.add(gv)
                total += _compact({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                                   "resources": []})
                total += _compact({"groupVersion": gv, "version": version}) + 1
            total += sum(_compact(entry) + 1 for entry in _legacy_resources(crd))
    return total

"""Canned aggregated-discovery documents (v2) for the unit tests, with their figures counted by hand.

Counted following kubectl's rules (api-versions: fresh group-versions; api-resources: one per group and
resource, preferred version first, no subresources, no verb-less resources).
"""

from __future__ import annotations


def resource(name: str, *, verbs=("get", "list"), kind: str | None = "Thing", subresources=()) -> dict:
    entry = {"resource": name, "scope": "Cluster", "verbs": list(verbs),
             "subresources": [{"subresource": s, "responseKind": {"group": "", "version": "", "kind": "Thing"},
                               "verbs": ["get"]} for s in subresources]}
    if kind is not None:
        entry["responseKind"] = {"group": "", "version": "", "kind": kind}
    return entry


def group(name: str, *versions: tuple[str, list[dict], str]) -> dict:
    return {"metadata": {"name": name},
            "versions": [{"version": v, "resources": r, "freshness": f} for v, r, f in versions]}


CORE = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "items": [group("", ("v1", [resource("pods", subresources=("status", "log")), resource("bindings",
                                                                                                verbs=("create",))],
                             "Current"))]}
APIS = {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
    # widgets in v2 (preferred) and v1; gadgets only in v1; a verb-less and a kind-less resource
    group("example.test",
          ("v2", [resource("widgets"), resource("hidden", verbs=())], "Current"),
          ("v1", [resource("widgets"), resource("gadgets"), resource("kindless", kind=None)], "Current")),
    # the preferred (first) version is stale: kubectl skips it and prefers v1beta1
    group("stale.test",
          ("v1", [resource("things")], "Stale"),
          ("v1beta1", [resource("things"), resource("others")], "Current")),
]}
# By hand: group-versions v1, example.test/v2, example.test/v1, stale.test/v1beta1 = 4 (stale.test/v1 is stale).
# Resources: pods, bindings, widgets.example.test, gadgets.example.test, things.stale.test, others.stale.test = 6
# (pods/status, pods/log: subresources; hidden: no verbs; kindless: no responseKind).
EXPECTED_RESOURCES = {"pods", "bindings", "widgets.example.test", "gadgets.example.test",
                      "things.stale.test", "others.stale.test"}

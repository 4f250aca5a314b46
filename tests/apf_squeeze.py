"""API Priority and Fairness squeezes for the lab tests: Reject priority levels and the flow schemas
that send one user there.

``manifests`` squeezes the loader's own user (CRD write rights included; the faults and rules tests);
``squeeze_manifests`` squeezes any user (the throttling tests, single and HA), who then lists CRDs.
"""

from __future__ import annotations

import json

LIST_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

USER = "crdscope-squeezed"
LEVEL = "crdscope-faults-squeeze"
COUNT = 60
SEED = 9301
CONCURRENCY = 16


def manifests() -> str:
    """CRD write rights for USER, and a one-share Reject priority level for everything it sends."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": LEVEL},
         "rules": [{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": LEVEL},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": LEVEL},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
         "metadata": {"name": LEVEL},
         "spec": {"type": "Limited", "limited": {
             "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
             "limitResponse": {"type": "Reject"}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": LEVEL},
         "spec": {"matchingPrecedence": 500, "priorityLevelConfiguration": {"name": LEVEL},
                  "distinguisherMethod": {"type": "ByUser"},
                  "rules": [{"subjects": [{"kind": "User", "user": {"name": USER}}],
                             "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                "clusterScope": True, "namespaces": ["*"]}],
                             "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}},
    ]})


def squeeze_manifests(name: str, user: str) -> str:
    """A Reject priority level with one share (3 seats on the lab) and a flow schema sending ``user`` there."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
         "metadata": {"name": name},
         "spec": {"type": "Limited", "limited": {
             "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
             "limitResponse": {"type": "Reject"}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name},
         "spec": {"matchingPrecedence": 1000, "priorityLevelConfiguration": {"name": name},
                  "distinguisherMethod": {"type": "ByUser"},
                  "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                             "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                "clusterScope": True, "namespaces": ["*"]}],
                             "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}},
    ]})

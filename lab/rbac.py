"""The restricted lab user: what a read-only monitor needs, and nothing more.

The ClusterRole doubles as documentation of the least privilege crdscope's
probes need on a real cluster (docs/permissions.md points here).
"""

from __future__ import annotations

import ssl

RESTRICTED_USER = "crdscope-restricted"
ROLE_NAME = "crdscope-monitor"

MONITOR_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": ROLE_NAME, "labels": {"app.kubernetes.io/managed-by": "crdscope"}},
    "rules": [
        {
            # Discovery, OpenAPI, metrics and health: everything the probes GET by path.
            "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*",
                "/metrics", "/version", "/readyz", "/readyz/*", "/livez", "/livez/*", "/healthz",
            ],
            "verbs": ["get"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # The latency probe's single-object read canary: GET /api/v1/namespaces/default.
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["get"],
        },
        {
            # Map APF response headers (UIDs) to flow schema and priority level names.
            "apiGroups": ["flowcontrol.apiserver.k8s.io"],
            "resources": ["flowschemas", "prioritylevelconfigurations"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # Crossplane v2's install chain, where installed: MRDs and the MRAPs that activate them ...
            "apiGroups": ["apiextensions.crossplane.io"],
            "resources": ["managedresourcedefinitions", "managedresourceactivationpolicies"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # ... the Providers and their revisions ...
            "apiGroups": ["pkg.crossplane.io"],
            "resources": ["providers", "providerrevisions"],
            "verbs": ["get", "list", "watch"],
        },
        {
            # ... and whether any Node runs the providers' pods (one metadata-only item, rarely).
            "apiGroups": [""],
            "resources": ["nodes"],
            "verbs": ["list"],
        },
    ],
}

MONITOR_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": ROLE_NAME, "labels": {"app.kubernetes.io/managed-by": "crdscope"}},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE_NAME},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": RESTRICTED_USER}],
}


#: The kube-apiserver identity Leases (issue 17: how many API servers run, and when one is replaced).
#: RBAC cannot grant by label, and their names are hashes of host names: the Role covers the Leases
#: of kube-system, read only, and no other namespace (leader-election Leases there become readable).
LEASE_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "Role",
    "metadata": {"name": ROLE_NAME, "namespace": "kube-system",
                 "labels": {"app.kubernetes.io/managed-by": "crdscope"}},
    "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list"]}],
}

LEASE_BINDING = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "RoleBinding",
    "metadata": {"name": ROLE_NAME, "namespace": "kube-system",
                 "labels": {"app.kubernetes.io/managed-by": "crdscope"}},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": RESTRICTED_USER}],
}

RBAC_PATH = "/apis/rbac.authorization.k8s.io/v1"


def apply_restricted_role(server: str, admin_tls: ssl.SSLContext) -> None:
    """Server-side apply the monitor roles and bind the restricted user to them."""
    import httpx  # here: `crdscope lab status` imports this module and never needs httpx

    with httpx.Client(base_url=server, verify=admin_tls, timeout=30) as client:
        for path, body in ((f"{RBAC_PATH}/clusterroles", MONITOR_ROLE),
                           (f"{RBAC_PATH}/clusterrolebindings", MONITOR_BINDING),
                           (f"{RBAC_PATH}/namespaces/kube-system/roles", LEASE_ROLE),
                           (f"{RBAC_PATH}/namespaces/kube-system/rolebindings", LEASE_BINDING)):
            response = client.patch(
                f"{path}/{ROLE_NAME}",
                params={"fieldManager": "crdscope-lab", "force": "true"},
                headers={"Content-Type": "application/apply-patch+yaml"},
                json=body,
            )
            response.raise_for_status()

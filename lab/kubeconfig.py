"""The lab's kubeconfig: one cluster, an admin context and a restricted one."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

from .pki import KeyPair

ADMIN_CONTEXT = "crdscope-lab"
RESTRICTED_CONTEXT = "crdscope-lab-restricted"
CLUSTER_NAME = "crdscope-lab"


def context_names(lab_name: str = "") -> tuple[str, str]:
    """The admin and restricted context names of a lab (a named lab's differ, so kubeconfigs merge)."""
    if not lab_name:
        return ADMIN_CONTEXT, RESTRICTED_CONTEXT
    return f"{ADMIN_CONTEXT}-{lab_name}", f"{ADMIN_CONTEXT}-{lab_name}-restricted"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    users: dict[str, KeyPair],
    current: str,
    cluster: str = CLUSTER_NAME,
) -> Path:
    """Write a self-contained kubeconfig (data embedded, mode 0600).

    Each key of ``users`` names a context and its user.
    """
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate-data": _b64(pair.cert_pem),
                    "client-key-data": _b64(pair.key_pem),
                },
            }
            for name, pair in users.items()
        ],
        "contexts": [
            {"name": name, "context": {"cluster": cluster, "user": name}} for name in users
        ],
        "current-context": current,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(document, handle, sort_keys=False)
    os.replace(temporary, path)
    return path

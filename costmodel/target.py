"""A real cluster as the target of an estimate, read only: its version, its APIs, its memory.

What is already there decides what SOURCE adds: a group-version the cluster serves
adds no discovery entry and no OpenAPI path, and the memory after the install starts
from the API server's current resident memory (when ``/metrics`` is readable).  The
release SOURCE replaces (:func:`read_installed`) is read from the cluster's CRDs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx

from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.connection.discovery_docs import ACCEPT_AGGREGATED
from crdscope.base.errors import ClusterError
from crdscope.probes.health_checks import count_crds
from crdscope.connection.kubeconfig import load_config
from crdscope.connection.metrics import parse_text

from .delta import BY_GROUPS, installed_of
from .features import CRDFeatures, features_of
from .model import Target

_MINOR_DIGITS = re.compile(r"\d+")
#: What a request to an unreachable or misbehaving server raises.
TRANSPORT_ERRORS = (httpx.HTTPError, OSError)


async def _group_versions(cluster: Cluster) -> tuple[frozenset[str], frozenset[str]]:
    """(group-versions, groups) the cluster serves: /apis (aggregated, or the legacy list) and /api."""
    gvs: set[str] = set()
    groups: set[str] = set()
    response = await cluster.client.get("/apis", headers={"Accept": ACCEPT_AGGREGATED})
    raise_for_status(response)
    body = response.json()
    if body.get("kind") == "APIGroupDiscoveryList":
        for item in body.get("items") or []:
            name = (item.get("metadata") or {}).get("name") or ""
            groups.add(name)
            gvs.update(f"{name}/{v.get('version')}" for v in item.get("versions") or [])
    else:
        for group in body.get("groups") or []:
            groups.add(group.get("name") or "")
            gvs.update(str(v.get("groupVersion")) for v in group.get("versions") or [])
    # The core group-versions (v1) are listed by /api: the legacy walk fetches them too.
    core = await cluster.client.get("/api", headers={"Accept": "application/json"})
    raise_for_status(core)
    gvs.update(str(version) for version in core.json().get("versions") or [])
    return frozenset(gvs), frozenset(groups)


async def _rss(cluster: Cluster) -> float | None:
    """The API server's resident memory, or None when /metrics is not readable."""
    try:
        response = await cluster.client.get("/metrics")
    except TRANSPORT_ERRORS:
        return None
    if response.status_code != 200:
        return None
    return parse_text(response.content, ["process_resident_memory_bytes"]).value("process_resident_memory_bytes")


async def read_target(context: str | None, kubeconfig: str | None = None) -> tuple[str, Target]:
    """(the cluster's minor version, what it holds now); read-only GETs."""
    config = load_config(kubeconfig, context)
    async with Cluster(config) as cluster:
        try:
            response = await cluster.client.get("/version")
            raise_for_status(response)
            version = response.json()
            gvs, groups = await _group_versions(cluster)
            rss = await _rss(cluster)
            crds, _ = await count_crds(cluster)
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, cluster.server)) from None
        except ValueError:
            raise ClusterError(f"{cluster.server} did not answer JSON") from None
    minor_digits = _MINOR_DIGITS.search(str(version.get("minor", "")))
    minor = f"{version.get('major', '1')}.{minor_digits.group(0) if minor_digits else '0'}"
    description = f"context {context or '(current)'} at {config.server}, Kubernetes {version.get('gitVersion', minor)}"
    return minor, Target(rss_bytes=rss, crds=crds or 0, group_versions=gvs, groups=groups, description=description)


async def read_installed(context: str | None, kubeconfig: str | None, groups: Iterable[str], names: Iterable[str],
                         replaces: str = BY_GROUPS) -> tuple[CRDFeatures, ...]:
    """The cluster's CRDs a source of ``groups`` and ``names`` replaces (:func:`.delta.installed_of`),
    read-only: one paged list of the cluster's CRDs, the export ``--from-context`` and ``estimate
    --measure --context`` read, each CRD kept (as its features) only if the source replaces it."""
    from crdscope.loader.documents import CRDDocument
    from crdscope.loader.sources import ContextSource

    exported = ContextSource(context or load_config(kubeconfig, None).context, kubeconfig)
    await exported.aprepare()
    of_groups, of_names = set(groups), set(names)
    found: list[CRDFeatures] = []
    async for item in exported.aitems():
        if isinstance(item, CRDDocument) and (item.name in of_names or item.group in of_groups):
            found.append(features_of(item))
    return installed_of(found, of_groups, of_names, replaces)

"""What activating Crossplane MRDs would add, read from the MRDs themselves (nothing is activated).

A ManagedResourceDefinition (Crossplane v2) carries the spec of the CRD it becomes once Active:
group, names, scope and versions with their schemas.  ``crdscope estimate --activate PATTERN``
lists the cluster's MRDs (read-only, paginated), keeps the inactive ones whose name matches a
pattern the way an MRAP matches them (Go ``filepath.Match`` globs on the MRD name, ``*.ec2.aws.upbound.io``), and
prices their specs with the same features as any CRD source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crdscope.connection.cluster import Cluster, explain, raise_for_status
from crdscope.base.globs import go_match
from crdscope.base.errors import ClusterError, ConfigError
from crdscope.connection.kubeconfig import load_config
from crdscope.connection.transport import TRANSPORT_ERRORS

from .features import CRDFeatures, features_of_spec

MRD_PATH = "/apis/apiextensions.crossplane.io/v1alpha1/managedresourcedefinitions"
#: MRDs hold whole schemas (tens of KB each): pages keep one answer in the low MB.
PAGE = 100
#: Fields of an MRD spec that are Crossplane's, not the CRD's.
MRD_ONLY_FIELDS = ("state", "connectionDetails")


@dataclass(frozen=True)
class MRDSelection:
    """The inactive MRDs matching the patterns, as the CRDs they would become."""

    patterns: tuple[str, ...]
    crds: tuple[CRDFeatures, ...]
    #: MRDs in the cluster, and those already Active among the matching ones (they add nothing).
    mrds_total: int
    already_active: tuple[str, ...]
    #: The same MRDs as the CRD documents they become (sorted like ``crds``): what ``--measure`` packages.
    documents: tuple[dict[str, Any], ...] = field(default=(), compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(crd.name for crd in self.crds)


def matches(name: str, patterns: tuple[str, ...]) -> bool:
    """True when an MRAP with ``patterns`` would activate the MRD ``name``."""
    return any(go_match(pattern, name) for pattern in patterns)


def crd_document(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The CRD an MRD of ``name`` becomes once Active: its spec without Crossplane's own fields."""
    crd_spec = {key: value for key, value in spec.items() if key not in MRD_ONLY_FIELDS}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name}, "spec": crd_spec}


def select(mrds: list[dict[str, Any]], patterns: tuple[str, ...]) -> MRDSelection:
    """The inactive MRDs of ``mrds`` (API objects) matching ``patterns``, priced as CRDs."""
    crds, active, documents = [], [], {}
    for mrd in mrds:
        name = str(mrd.get("metadata", {}).get("name", ""))
        if not matches(name, patterns):
            continue
        spec = dict(mrd.get("spec") or {})
        if spec.get("state") == "Active":
            active.append(name)
            continue
        documents[name] = crd_document(name, spec)
        crds.append(features_of_spec(name, documents[name]["spec"]))
    return MRDSelection(patterns, tuple(sorted(crds, key=lambda c: c.name)), len(mrds), tuple(sorted(active)),
                        tuple(documents[name] for name in sorted(documents)))


async def read_selection(patterns: tuple[str, ...], context: str | None,
                         kubeconfig: str | None = None) -> MRDSelection:
    """List the cluster's MRDs and select what ``patterns`` would activate (read-only GETs)."""
    if not patterns or any(not p.strip() for p in patterns):
        raise ConfigError("--activate needs a pattern, e.g. '*.sqs.aws.upbound.io'")
    config = load_config(kubeconfig, context)
    items: list[dict[str, Any]] = []
    async with Cluster(config) as cluster:
        token = ""
        try:
            while True:
                params = {"limit": str(PAGE), **({"continue": token} if token else {})}
                response = await cluster.client.get(MRD_PATH, params=params)
                if response.status_code == 404:
                    raise ConfigError(f"{cluster.server} has no ManagedResourceDefinitions (is Crossplane v2 "
                                      "installed?)")
                raise_for_status(response)
                page = response.json()
                items.extend(page.get("items") or [])
                token = str((page.get("metadata") or {}).get("continue") or "")
                if not token:
                    break
        except TRANSPORT_ERRORS as exc:
            raise ClusterError(explain(exc, cluster.server)) from None
        except ValueError:
            raise ClusterError(f"{cluster.server} did not answer JSON") from None
    return select(items, patterns)

"""What activating only some of a Crossplane provider's managed resources would save.

Crossplane v2 installs a provider's managed resources as ManagedResourceDefinitions
and creates a CRD only for those an activation policy activates; upjet providers ship
each kind twice, cluster-scoped (``<service>.<provider domain>``) and namespaced
(``<service>.m.<provider domain>``).  The savings are the model's per-CRD costs of
the CRDs left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .features import CRDFeatures

PROVIDER_DOMAINS = (".upbound.io", ".crossplane.io")
TOP_SERVICES = 10


@dataclass(frozen=True)
class ServiceCost:
    """One service (API group family) of a provider: its CRDs and what leaving it out saves."""

    service: str
    crds: int
    memory_bytes: float


@dataclass(frozen=True)
class Activation:
    """Savings of partial activation, by scope and by service."""

    namespaced_crds: int
    namespaced_memory_bytes: float
    cluster_crds: int
    cluster_memory_bytes: float
    services: tuple[ServiceCost, ...]
    service_count: int


def is_crossplane_provider(crds: Sequence[CRDFeatures]) -> bool:
    """Most CRDs belong to a Crossplane provider domain or carry the ``managed`` category."""
    ours = sum(1 for crd in crds if crd.group.endswith(PROVIDER_DOMAINS) or "managed" in crd.categories)
    return bool(crds) and ours * 2 > len(crds)


def service_of(group: str) -> str:
    """``ec2.m.aws.upbound.io`` -> ``ec2``."""
    return group.split(".", 1)[0]


def activation(crds: Sequence[CRDFeatures], cost: Callable[[CRDFeatures], float]) -> Activation:
    """What each scope and each service costs (what activating without it saves)."""
    namespaced = [crd for crd in crds if ".m." in f".{crd.group}."]
    cluster = [crd for crd in crds if ".m." not in f".{crd.group}."]
    by_service: dict[str, list[CRDFeatures]] = {}
    for crd in crds:
        by_service.setdefault(service_of(crd.group), []).append(crd)
    services = sorted((ServiceCost(name, len(members), sum(cost(c) for c in members))
                       for name, members in by_service.items()), key=lambda s: (-s.memory_bytes, s.service))
    return Activation(len(namespaced), sum(cost(c) for c in namespaced), len(cluster),
                      sum(cost(c) for c in cluster), tuple(services[:TOP_SERVICES]), len(services))

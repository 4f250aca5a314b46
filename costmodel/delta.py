"""A release against the one a cluster runs now: the CRDs it adds, removes, changes and leaves as they are.

The installed release is the cluster's CRDs that SOURCE replaces: those of SOURCE's API groups
(:data:`BY_GROUPS`, an upgrade: a CRD of those groups that SOURCE lacks is removed), or only those
of SOURCE's names (:data:`BY_NAMES`, a source that adds to groups it shares: nothing is removed).
A CRD present in both whose cost drivers are the same costs nothing new; a changed one costs the
difference of its terms (a larger schema its extra bytes, a smaller one frees them); a removed one
frees what it held.  :func:`crdscope.costmodel.model.estimate` prices a :class:`Delta`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .features import CRDFeatures

BY_GROUPS = "groups"
BY_NAMES = "names"
REPLACES = (BY_GROUPS, BY_NAMES)


@dataclass(frozen=True)
class Delta:
    """SOURCE against the installed release, CRD by CRD (each tuple sorted by name)."""

    added: tuple[CRDFeatures, ...]
    removed: tuple[CRDFeatures, ...]
    #: (installed, SOURCE's) for every CRD present in both whose cost drivers differ
    changed: tuple[tuple[CRDFeatures, CRDFeatures], ...]
    unchanged: tuple[CRDFeatures, ...]

    @property
    def installed(self) -> tuple[CRDFeatures, ...]:
        """The installed release: what is removed, changed (as it is now) or left as it is."""
        return (*self.removed, *(old for old, _ in self.changed), *self.unchanged)

    @property
    def written(self) -> tuple[CRDFeatures, ...]:
        """What installing SOURCE writes: the CRDs it adds and the new form of those it changes."""
        return (*self.added, *(new for _, new in self.changed))

    @property
    def replaced(self) -> tuple[CRDFeatures, ...]:
        """What stops costing: the CRDs removed and the old form of those changed."""
        return (*self.removed, *(old for old, _ in self.changed))

    @property
    def schema_bytes_added(self) -> int:
        """Schema bytes the release adds, net (negative when it sheds more than it adds)."""
        return sum(crd.schema_bytes for crd in self.written) - sum(crd.schema_bytes for crd in self.replaced)


def cost_drivers(crd: CRDFeatures) -> tuple[object, ...]:
    """What a CRD costs by: its served versions, schema and the names and subresources discovery
    publishes.  Printer columns, the storage version and the conversion strategy cost nothing the
    model counts (Crossplane sets a provider's conversion webhook on the CRDs it creates)."""
    return (crd.group, crd.kind, crd.plural, crd.singular, crd.namespaced, crd.served_versions, crd.schema_bytes,
            crd.schema_properties, crd.cel_rules, crd.subresources, crd.short_names, crd.categories)


def installed_of(cluster: Iterable[CRDFeatures], groups: Iterable[str], names: Iterable[str],
                 replaces: str = BY_GROUPS) -> tuple[CRDFeatures, ...]:
    """The cluster's CRDs a source of ``groups`` and ``names`` replaces: those of its groups, or of
    its names (a CRD's name is ``<plural>.<group>``: the same names are among the same groups)."""
    if replaces == BY_NAMES:
        wanted = set(names)
        return tuple(sorted((crd for crd in cluster if crd.name in wanted), key=lambda crd: crd.name))
    of_groups = set(groups)
    return tuple(sorted((crd for crd in cluster if crd.group in of_groups), key=lambda crd: crd.name))


def diff(installed: Iterable[CRDFeatures], source: Iterable[CRDFeatures]) -> Delta:
    """SOURCE against ``installed`` by CRD name."""
    before = {crd.name: crd for crd in installed}
    after = {crd.name: crd for crd in source}
    changed = tuple((before[name], after[name]) for name in sorted(before.keys() & after.keys())
                    if cost_drivers(before[name]) != cost_drivers(after[name]))
    unchanged = tuple(after[name] for name in sorted(before.keys() & after.keys())
                      if cost_drivers(before[name]) == cost_drivers(after[name]))
    return Delta(added=tuple(after[name] for name in sorted(after.keys() - before.keys())),
                 removed=tuple(before[name] for name in sorted(before.keys() - after.keys())),
                 changed=changed, unchanged=unchanged)

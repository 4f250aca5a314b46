"""``crdscope mrap --from NEW --context CTX``: a provider release in files against what a cluster runs now.

How MRDs count (Crossplane v2: an inactive MRD has no CRD, only itself):

- a kind has a CRD while its MRD is Active.  After the upgrade, an MRD the cluster has keeps its
  state (Crossplane never deactivates one: narrowing an MRAP frees nothing), and one whose CRD the
  cluster already has stays Active; an MRD the cluster lacks is Active when its package is not
  safe-start or an MRAP (the cluster's or NEW's) matches it, else Inactive;
- the CRDs compared are the cluster's CRDs of the release's API groups (before) and the specs of the
  MRDs Active after (NEW's own schemas; a spec that could not be read as a typical CRD), priced by
  :func:`.model.estimate` as any delta: a CRD left as it is costs nothing, a changed schema its
  difference, a CRD whose MRD the release drops frees what it held; Crossplane writes those CRDs, so
  they are priced through the activation path (:data:`.model.ACTIVATION`);
- MRDs themselves: a release MRD the cluster lacks is added, a cluster MRD of the release's groups
  that NEW lacks is removed; each costs its measured :data:`.planner.INACTIVE_MRD_BYTES` whatever its
  state, reported apart from the model's figures (a measurement on one minor, not a fitted term).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from crdscope.base.activation import MRD
from crdscope.base.globs import go_match

from .features import CRDFeatures
from .model import ACTIVATION, Estimate, Target, estimate
from .planner import INACTIVE_MRD_BYTES, Platform, typical_crd

ACTIVE, INACTIVE = "Active", "Inactive"


@dataclasses.dataclass(frozen=True)
class Upgrade:
    """NEW's release over the cluster's: its CRDs' delta priced, and its MRDs counted."""

    estimate: Estimate
    #: The cluster's MRDs of the release's groups, before.
    installed_mrds: int
    mrds_added: tuple[str, ...]
    mrds_removed: tuple[str, ...]
    #: Added MRDs that are Active at once (not safe-start, or an MRAP matches): each brings a CRD.
    mrds_activated: tuple[str, ...]
    #: Each release MRD's state after the upgrade.
    states: Mapping[str, str] = dataclasses.field(repr=False)

    @property
    def mrd_bytes_added(self) -> float:
        """What the MRDs themselves add, net (their measured cost each, whatever their state)."""
        return (len(self.mrds_added) - len(self.mrds_removed)) * INACTIVE_MRD_BYTES


def release_groups(release: Platform) -> frozenset[str]:
    """The API groups of the release's MRDs: the cluster's CRDs and MRDs of these are what it replaces."""
    return frozenset(mrd.group for mrd in release.mrds)


def states_after(cluster: Platform, release: Platform, installed: frozenset[str]) -> dict[str, str]:
    """Each release MRD's state once the release is installed over ``cluster`` (``installed``: the
    names of the cluster's CRDs)."""
    before = {mrd.name: mrd for mrd in cluster.mrds}
    patterns = [pattern for policy in (*cluster.policies, *release.policies) for pattern in policy.patterns]
    states = {}
    for mrd in release.mrds:
        kept = before.get(mrd.name)
        active = (mrd.active or (kept is not None and kept.active) or mrd.name in installed
                  or any(go_match(pattern, mrd.name) for pattern in patterns))
        states[mrd.name] = ACTIVE if active else INACTIVE
    return states


def upgraded(cluster: Platform, release: Platform, states: Mapping[str, str]) -> Platform:
    """The platform once the release is installed: the cluster's MRDs of other groups, the release's
    with their states after, the Compositions and MRAPs of both (the release's replacing the
    cluster's of the same name); what the planner judges and plans in ``mrap --from NEW --context``."""
    groups = release_groups(release)
    before = {mrd.name: mrd for mrd in cluster.mrds}
    mrds = [mrd for mrd in cluster.mrds if mrd.group not in groups]
    for mrd in release.mrds:
        kept = before.get(mrd.name)
        mrds.append(MRD(mrd.name, state=states[mrd.name], kind=mrd.kind,
                        established=kept.established if kept is not None and kept.active else None,
                        objects=kept.objects if kept is not None else (0 if cluster.objects_known else None)))
    release_compositions = {composition.name for composition in release.compositions}
    release_policies = {policy.name for policy in release.policies}
    return dataclasses.replace(
        cluster, mrds=tuple(sorted(mrds, key=lambda mrd: mrd.name)),
        compositions=(*(c for c in cluster.compositions if c.name not in release_compositions),
                      *release.compositions),
        policies=(*(p for p in cluster.policies if p.name not in release_policies), *release.policies),
        composite_groups=(*cluster.composite_groups, *release.composite_groups),
        described=f"{release.described} over {cluster.described}", features=release.features,
        problems=(*cluster.problems, *release.problems))


def price_upgrade(cluster: Platform, release: Platform, installed: tuple[CRDFeatures, ...], target: Target,
                  minor: str) -> Upgrade:
    """The release over the cluster: the CRDs of its MRDs Active after against ``installed`` (the
    cluster's CRDs of its groups), and its MRDs against the cluster's of those groups."""
    states = states_after(cluster, release, frozenset(crd.name for crd in installed))
    after = [release.features.get(name) or typical_crd(name, minor)
             for name, state in sorted(states.items()) if state == ACTIVE]
    groups = release_groups(release)
    before = {mrd.name for mrd in cluster.mrds if mrd.group in groups}
    added = tuple(sorted(states.keys() - before))
    return Upgrade(estimate=estimate(after, minor, target=target, installed=installed, path=ACTIVATION),
                   installed_mrds=len(before),
                   mrds_added=added, mrds_removed=tuple(sorted(before - states.keys())),
                   mrds_activated=tuple(name for name in added if states[name] == ACTIVE), states=states)


async def read_upgrade(release: Platform, context: str | None,
                       kubeconfig: str | None = None) -> tuple[Platform, tuple[CRDFeatures, ...], str, Target]:
    """What the cluster runs, read-only and at once: its platform (MRDs, MRAPs, Compositions), its CRDs
    of the release's groups, its minor and what it serves."""
    import asyncio

    from .planner import read_platform
    from .target import read_installed, read_target

    cluster, installed, (minor, target) = await asyncio.gather(
        read_platform(context, kubeconfig), read_installed(context, kubeconfig, release_groups(release), ()),
        read_target(context, kubeconfig))
    return cluster, installed, minor, target

"""The Crossplane v2 install chain: Provider -> ProviderRevision -> MRDs -> CRDs, and the MRAPs.

What the inventory shows for each Provider: its package, its revisions (active
or not, health, runtime), its ManagedResourceDefinitions (Active / Inactive),
the CRDs those made (from the shared CRD watch), and which
ManagedResourceActivationPolicies activated what.  This module holds the sample
records, the rules and the join with the CRD watch; :mod:`connection.crossplane_read`
parses the objects and sends the few list requests.

How Crossplane v2.0.0 links the chain (``internal/controller/pkg``):

- A Provider's revisions carry the label ``pkg.crossplane.io/package=<provider>``
  and a controller ownerReference to it (``manager/reconciler.go``).
- A revision establishes the package's objects (CRDs become MRDs) and lists them
  in ``status.objectRefs`` once all are established (``revision/reconciler.go``);
  MRDs get the revision as controller and the Provider as a plain owner.
- The MRD controller creates a CRD of the same name only while the MRD is
  Active, owned by the MRD and controlled by the MRD's controller (the
  revision): the CRD watch sees ``ProviderRevision/<revision>`` as its owner,
  which :func:`owner_aliases` turns into ``Provider/<provider>``.
- A revision's runtime condition ``RuntimeHealthy`` stays False while the
  provider Deployment is not Available, which is forever where no kubelet runs
  pods (crdscope's lab): the MRDs and CRDs install regardless.  That is reported
  as the runtime state ``no-kubelet`` (the cluster has no Node) or
  ``deployment-unavailable``.
- Crossplane v2.4 (crossplane#7586, #7639) scales a ``safe-start`` revision's
  runtime to zero until one of the MRDs it controls is Active, and says so with
  the condition ``RuntimeActive``: False, reason ``AwaitingActivation``, while
  scaled to zero (``RuntimeHealthy`` is True then: nothing needs to run); True,
  reason ``ActiveRuntime``, written by a reconcile whose Deployment was
  Available (``internal/controller/pkg/runtime/reconciler.go``).  The
  reconcile that scales the Deployment up reads the Available condition the
  Deployment still carries from its zero-replica days (no observedGeneration
  check), so the condition flips to ``ActiveRuntime`` at once, whether a Pod
  ever runs or not (seen in the lab); until that reconcile, or where the
  Deployment has no condition at all, it still says ``AwaitingActivation``
  while an MRD the revision lists is Active: woken.  Either way a woken
  runtime's health is its ``RuntimeHealthy``.  A revision awaiting activation
  is the runtime state ``awaiting-activation``: expected, not a fault.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Literal, Protocol

from .activation import MRD, ActivationReport, ActivationView, CompositionKinds, Policy, analyse, view_of
from .globs import go_match as go_match  # re-exported: callers name the chain module for its rules

PROVIDERS_CRD = "providers.pkg.crossplane.io"
REVISIONS_CRD = "providerrevisions.pkg.crossplane.io"
MRDS_CRD = "managedresourcedefinitions.apiextensions.crossplane.io"
MRAPS_CRD = "managedresourceactivationpolicies.apiextensions.crossplane.io"
COMPOSITIONS_CRD = "compositions.apiextensions.crossplane.io"
PACKAGE_LABEL = "pkg.crossplane.io/package"
#: Kinds of a provider package's CRDs that Crossplane v2.4 installs as plain CRDs, not MRDs: a provider's
#: configuration, there whatever is activated (``internal/converter/custom_to_managed.go``,
#: ``isManagedResource``; v2.0.0 made an MRD of every CRD of a package).
PLAIN_CRD_KINDS = frozenset({"ProviderConfig", "ClusterProviderConfig", "ProviderConfigUsage",
                             "ClusterProviderConfigUsage"})
_PLAIN_CRD_PLURALS = frozenset(f"{kind.lower()}s" for kind in PLAIN_CRD_KINDS)
#: Names kept per list in a sample, the counts beside them complete: each sample is recorded (every
#: 2 s), and a provider's 1,000 MRD names would be most of a recording (10 providers with 10 names a
#: list are ~20 KB a sample).
NAMES_KEPT = 10
#: Kinds in use named per provider: the MRAP a finding proposes lists them.
IN_USE_KEPT = 200
#: RuntimeHealthy messages that say the provider Deployment is not Available
#: (``internal/controller/pkg/runtime/runtime_provider.go``).
_DEPLOYMENT_UNAVAILABLE = ('deployment has no condition of type "Available"', "deployment is unavailable")

#: What a revision's provider runtime is doing:
#: healthy, no-kubelet (Deployment not Available and the cluster has no Node to run it),
#: deployment-unavailable (not Available, Nodes exist or cannot be listed), waiting (for the
#: revision's own health or signature verification), unhealthy (any other failure), unknown
#: (no condition yet), inactive (an inactive revision runs no provider).
RuntimeState = Literal["healthy", "no-kubelet", "deployment-unavailable", "waiting", "unhealthy", "unknown",
                       "inactive", "awaiting-activation"]
#: Runtime states of a runtime that should run and does not (where Nodes exist or cannot be listed).
NOT_RUNNING: frozenset[RuntimeState] = frozenset({"deployment-unavailable", "unhealthy"})
#: ``RuntimeActive``'s reason while Crossplane keeps a safe-start runtime scaled to zero (v2.4+).
AWAITING_ACTIVATION = "AwaitingActivation"


@dataclasses.dataclass(frozen=True, kw_only=True)
class RevisionInfo:
    """One ProviderRevision."""

    name: str
    revision: int = 0
    #: ``spec.desiredState``: Active or Inactive.
    desired_state: str = ""
    image: str = ""
    #: Condition statuses ("True", "False", "Unknown"; "" when absent) and the message when not True.
    healthy: str = ""
    healthy_message: str = ""
    runtime: RuntimeState = "unknown"
    runtime_message: str = ""
    #: When ``RuntimeHealthy`` last changed (epoch seconds; None: no condition or no time).
    runtime_since: float | None = None
    #: ``RuntimeActive`` (Crossplane v2.4+): its status and reason ("" when absent: an older Crossplane,
    #: or one whose runtime never got as far as writing it).
    runtime_active: str = ""
    runtime_active_reason: str = ""
    #: Objects the revision established (``status.objectRefs``; empty until all were established).
    mrd_refs: int = 0
    crd_refs: int = 0
    #: The package declares ``safe-start``: its MRDs start Inactive until an MRAP activates them.
    safe_start: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class EntryMatch:
    """One MRAP entry and how many of a set of MRDs it matches."""

    mrap: str
    pattern: str
    mrds: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProviderChain:
    """One Provider and everything it installed."""

    name: str
    #: Its key in the inventory's ``by_owner`` and ``installing``: ``Provider/<name>``.
    owner: str
    package: str = ""
    resolved_package: str = ""
    current_revision: str = ""
    #: Installed and Healthy condition statuses ("" when absent); the Healthy message when not True.
    installed: str = ""
    healthy: str = ""
    healthy_message: str = ""
    #: Newest first.
    revisions: tuple[RevisionInfo, ...] = ()
    #: MRDs its revisions list (that exist), by ``spec.state``, and how many are Established.
    mrds: int = 0
    mrds_active: int = 0
    mrds_inactive: int = 0
    mrds_established: int = 0
    #: Sorted, at most :data:`NAMES_KEPT` each.
    active_mrd_names: tuple[str, ...] = ()
    inactive_mrd_names: tuple[str, ...] = ()
    #: Its CRDs as the CRD watch sees them (not Terminating), and of those Established.
    crds: int = 0
    crds_established: int = 0
    #: CRDs its active revision will have: listed CRDs plus its Active MRDs (None: not listed yet).
    expected_crds: int | None = None
    #: Install pace and ETA of its CRDs (the inventory's ``installing[owner]``; 0/None when done).
    per_minute: float = 0.0
    eta_seconds: float | None = None
    eta_note: str = ""
    #: The active revision's runtime, and what that means here.
    runtime: RuntimeState = "unknown"
    runtime_note: str = ""
    #: Its Active MRDs whose kinds have stored objects (sorted, at most :data:`IN_USE_KEPT`), and how many
    #: Active MRDs have none (None: object counts not observable): what an MRAP of the kinds in use keeps.
    active_in_use: tuple[str, ...] = ()
    active_unused: int | None = None
    #: Its Active MRDs the activation plan leaves out: no Composition composes them and they have no
    #: objects (None: object counts not observable); their names (sorted, at most :data:`NAMES_KEPT`).
    active_unplanned: int | None = None
    active_unplanned_names: tuple[str, ...] = ()
    #: The MRAP entries that match those (what activated them, on a safe-start provider), most first,
    #: and how many of them no current entry matches.
    unplanned_activated_by: tuple[EntryMatch, ...] = ()
    unplanned_unmatched: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True)
class MRAPInfo:
    """One ManagedResourceActivationPolicy."""

    name: str
    #: ``spec.activate``: MRD name patterns (Go ``filepath.Match`` globs).
    patterns: tuple[str, ...] = ()
    #: ``status.activated``: the MRDs it activated (count; sorted names, at most :data:`NAMES_KEPT`).
    activated: int = 0
    activated_names: tuple[str, ...] = ()
    #: MRDs whose names match a pattern now, and of those still Inactive (activation pending or failing).
    matching: int = 0
    matching_inactive: int = 0
    healthy: str = ""
    message: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class CrossplaneChain:
    """The Crossplane install chain as last read (every part is absent where its API is)."""

    #: The Provider or ProviderRevision API exists on this cluster.
    present: bool = False
    #: When the Crossplane objects were read (they are re-read on their own cadence).
    read_at: float | None = None
    providers: tuple[ProviderChain, ...] = ()
    #: ProviderRevisions no Provider claims (no package label, no Provider owner).
    orphan_revisions: tuple[RevisionInfo, ...] = ()
    mraps: tuple[MRAPInfo, ...] = ()
    #: MRDs no revision lists (yet: a revision lists its objects once all are established).
    mrds_unattributed: int = 0
    #: The cluster has a Node (False: no kubelet runs the providers' pods; None: not read or not allowed).
    has_nodes: bool | None = None
    #: Part ("providers", "providerrevisions", "mrds", "mraps", "nodes") -> why it could not be read.
    unobservable: dict[str, str] = dataclasses.field(default_factory=dict)
    #: What the Compositions need activated, against the MRDs and MRAPs (:mod:`base.activation`).
    activation: ActivationView = dataclasses.field(default_factory=ActivationView)


# --------------------------------------------------------------------------- parsed objects


@dataclasses.dataclass(frozen=True)
class ProviderObject:
    name: str
    package: str
    resolved_package: str
    current_revision: str
    installed: str
    healthy: str
    healthy_message: str


@dataclasses.dataclass(frozen=True)
class RevisionObject:
    info: RevisionInfo
    #: The Provider it belongs to ("" for none), and what it lists.
    provider: str
    mrd_names: tuple[str, ...]
    crd_names: tuple[str, ...]
    runtime_condition: tuple[str, str] | None


@dataclasses.dataclass(frozen=True)
class MRDRow:
    name: str
    #: ``spec.state`` ("Active", "Inactive"; "" when the Table has no STATE column).
    state: str
    established: bool


@dataclasses.dataclass(frozen=True)
class MRAPObject:
    name: str
    patterns: tuple[str, ...]
    activated: tuple[str, ...]
    healthy: str
    message: str


@dataclasses.dataclass(frozen=True)
class CrossplaneObjects:
    """What one read found (a part left as None was not read: its API is absent or it failed)."""

    providers: tuple[ProviderObject, ...] | None = None
    revisions: tuple[RevisionObject, ...] | None = None
    mrds: tuple[MRDRow, ...] | None = None
    mrds_version: str = ""
    mraps: tuple[MRAPObject, ...] | None = None
    #: What each Composition composes (None: no Composition API, or not read).
    compositions: tuple[CompositionKinds, ...] | None = None
    has_nodes: bool | None = None
    unobservable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    read_at: float | None = None
    present: bool = False


# --------------------------------------------------------------------------- rules


def runtime_state(desired_state: str, condition: tuple[str, str] | None, has_nodes: bool | None, *,
                  awaiting: bool = False, woken: bool = False) -> tuple[RuntimeState, str]:
    """A revision's runtime from its ``RuntimeHealthy`` condition, and a note for people.

    ``awaiting``: its ``RuntimeActive`` says ``AwaitingActivation`` (Crossplane v2.4+ scaled it to
    zero); ``woken``: one of the MRDs it lists is Active since, so Crossplane scales it up (the
    condition changes once the Deployment is Available).
    """
    if desired_state == "Inactive":
        return "inactive", "an inactive revision runs no provider"
    if awaiting and not woken:
        return "awaiting-activation", ("scaled to zero by Crossplane (safe-start) until one of its MRDs is "
                                       "activated: no pod runs, and none needs to")
    state, note = _runtime_health(condition, has_nodes)
    if awaiting:  # woken: RuntimeActive still says AwaitingActivation while the Deployment scales up
        note = "activated: Crossplane scales its runtime up from zero" + (f"; {note}" if note else "")
    return state, note


def _runtime_health(condition: tuple[str, str] | None, has_nodes: bool | None) -> tuple[RuntimeState, str]:
    if condition is None:
        return "unknown", "no RuntimeHealthy condition yet"
    status, message = condition
    if status == "True":
        return "healthy", ""
    if any(marker in message for marker in _DEPLOYMENT_UNAVAILABLE):
        if has_nodes is False:
            return "no-kubelet", ("no pods: the cluster has no Node, so no kubelet runs the provider's Deployment "
                                  "(its MRDs and CRDs install regardless)")
        return "deployment-unavailable", message
    if status == "False" and ("not healthy yet" in message or "Waiting for" in message):
        return "waiting", message
    return ("unknown" if status != "False" else "unhealthy"), message


def becomes_mrd(crd_name: str) -> bool:
    """Whether Crossplane v2.4 makes an MRD of a provider package's CRD ``<plural>.<group>`` (by its plural:
    the kinds of :data:`PLAIN_CRD_KINDS` stay CRDs, Established at install)."""
    return crd_name.split(".", 1)[0] not in _PLAIN_CRD_PLURALS


def runtimes_summary(chain: CrossplaneChain) -> str:
    """One line on the providers' runtimes as a whole: how many Crossplane keeps scaled to zero awaiting
    activation, and, where the cluster has no Node, that no provider pod runs here (said once for all);
    empty when there is nothing to say."""
    states = [p.runtime for p in chain.providers]
    parts = []
    if (asleep := states.count("awaiting-activation")):
        parts.append(f"{asleep} scaled to zero awaiting activation (safe-start, Crossplane v2.4+)")
    if chain.has_nodes is False:
        stopped = states.count("no-kubelet")
        parts.append("no Node: no kubelet runs provider pods here"
                     + (f" ({stopped} that should run cannot)" if stopped else ""))
    return "; ".join(parts)


def is_safe_start(capabilities: Iterable[object]) -> bool:
    """Crossplane's fuzzy match of ``safe-start``: letters and digits only, any case."""
    return any(re.sub(r"[^a-z0-9]+", "", str(c).lower()) == "safestart" for c in capabilities)


def deployment_unavailable(revisions: Iterable[RevisionObject]) -> bool:
    """Some active revision's runtime says its Deployment is not Available (worth asking for Nodes)."""
    return any(runtime_state(r.info.desired_state, r.runtime_condition, None)[0] == "deployment-unavailable"
               for r in revisions)


def _active(revisions: Iterable[RevisionObject]) -> RevisionObject | None:
    """The revision that counts: the newest Active one, else the newest."""
    ordered = sorted(revisions, key=lambda r: (r.info.desired_state == "Active", r.info.revision), reverse=True)
    return ordered[0] if ordered else None


def _revision_owner(revision: RevisionObject) -> str:
    return f"Provider/{revision.provider}" if revision.provider else f"ProviderRevision/{revision.info.name}"


def owner_aliases(objects: CrossplaneObjects) -> dict[str, str]:
    """CRD owners as the CRD watch names them -> the Provider they belong to.

    ``ProviderRevision/<r>`` -> ``Provider/<p>`` for revisions a Provider claims, and
    ``ManagedResourceDefinition/<m>`` (a CRD whose MRD has no controller) through the revision
    that lists the MRD.  Owners not resolved stay as they are.
    """
    aliases: dict[str, str] = {}
    for revision in objects.revisions or ():
        owner = _revision_owner(revision)
        if revision.provider:
            aliases[f"ProviderRevision/{revision.info.name}"] = owner
        for name in revision.mrd_names:
            aliases[f"ManagedResourceDefinition/{name}"] = owner
    return aliases


def expected_crds(objects: CrossplaneObjects) -> dict[str, int]:
    """CRDs each owner's active revision will have: listed CRDs plus its Active MRDs."""
    states = {row.name: row.state for row in objects.mrds or ()}
    by_owner: dict[str, list[RevisionObject]] = {}
    for revision in objects.revisions or ():
        by_owner.setdefault(_revision_owner(revision), []).append(revision)
    expected: dict[str, int] = {}
    for owner, revisions in by_owner.items():
        active = _active(revisions)
        if active is None:
            continue
        count = len(active.crd_names) + sum(1 for n in active.mrd_names if states.get(n) == "Active")
        if count:
            expected[owner] = count
    return expected


class InstallLike(Protocol):
    """What the chain takes from the inventory's :class:`~probes.inventory.OwnerInstall`."""

    @property
    def per_minute(self) -> float: ...
    @property
    def eta_seconds(self) -> float | None: ...
    @property
    def eta_note(self) -> str: ...


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(names)[:NAMES_KEPT])


def build_chain(objects: CrossplaneObjects, crds: Mapping[str, tuple[int, int]],
                installs: Mapping[str, InstallLike], in_use: frozenset[str] | None = None) -> CrossplaneChain:
    """Join what was read with the CRD counts by (resolved) owner and their install progress.

    ``crds``: owner -> (CRDs not Terminating, of those Established), owners already resolved;
    ``in_use``: CRDs with stored objects (None: unknown).
    """
    if not objects.present:
        return CrossplaneChain(unobservable=dict(objects.unobservable))
    rows = {row.name: row for row in objects.mrds or ()}
    expected = expected_crds(objects)
    by_provider: dict[str, list[RevisionObject]] = {}
    orphans: list[RevisionInfo] = []
    attributed: set[str] = set()
    for revision in objects.revisions or ():
        attributed.update(revision.mrd_names)
        info = _classified(revision, objects.has_nodes, rows)
        if revision.provider:
            by_provider.setdefault(revision.provider, []).append(dataclasses.replace(revision, info=info))
        else:
            orphans.append(info)
    providers = {p.name: p for p in objects.providers or ()}
    report, view = activation(objects, in_use)
    unplanned = frozenset(report.active_unused) if report is not None and in_use is not None else None
    chains = []
    for name in sorted(set(providers) | set(by_provider)):
        revisions = by_provider.get(name, [])
        chain = _with_use(_provider_chain(name, providers.get(name), revisions, rows, crds, installs, expected),
                          revisions, rows, in_use)
        chains.append(_with_plan(chain, revisions, rows, unplanned, objects.mraps or ()))
    return CrossplaneChain(
        present=True, read_at=objects.read_at, providers=tuple(chains),
        orphan_revisions=tuple(sorted(orphans, key=lambda r: r.name)),
        mraps=tuple(_mrap_info(m, rows) for m in sorted(objects.mraps or (), key=lambda m: m.name)),
        mrds_unattributed=sum(1 for name in rows if name not in attributed) if objects.revisions is not None else 0,
        has_nodes=objects.has_nodes, unobservable=dict(objects.unobservable), activation=view)


_last_view: list[tuple[tuple[int, int, int, frozenset[str] | None], ActivationReport | None, ActivationView]] = []


def activation(objects: CrossplaneObjects,
               in_use: frozenset[str] | None) -> tuple[ActivationReport | None, ActivationView]:
    """The activation report of what was read (the kinds in use from ``in_use``: CRDs with objects) and
    its bounded view (no report where the MRDs were not read).

    Worked out once per read of the objects and set of kinds in use (the inventory samples every few
    seconds; the objects are re-read on the chain's own cadence).
    """
    if objects.mrds is None:
        return None, ActivationView()
    key = (id(objects.mrds), id(objects.mraps), id(objects.compositions), in_use)
    if _last_view and _last_view[0][0] == key:
        return _last_view[0][1], _last_view[0][2]
    mrds = [MRD(row.name, state=row.state or "Inactive", established=row.established if row.state == "Active" else None,
                objects=None if in_use is None else int(row.name in in_use)) for row in objects.mrds]
    policies = [Policy(m.name, m.patterns) for m in objects.mraps or ()]
    report = analyse(objects.compositions or (), mrds, policies, objects_known=in_use is not None)
    view = view_of(report, compositions_read=objects.compositions is not None)
    _last_view[:] = [(key, report, view)]
    return report, view


def _classified(revision: RevisionObject, has_nodes: bool | None, rows: Mapping[str, MRDRow]) -> RevisionInfo:
    info = revision.info
    awaiting = info.runtime_active == "False" and info.runtime_active_reason == AWAITING_ACTIVATION
    woken = awaiting and any(rows[n].state == "Active" for n in revision.mrd_names if n in rows)
    state, message = runtime_state(info.desired_state, revision.runtime_condition, has_nodes, awaiting=awaiting,
                                   woken=woken)
    return dataclasses.replace(info, runtime=state, runtime_message=message)


def _provider_chain(name: str, provider: ProviderObject | None, revisions: list[RevisionObject],
                    rows: Mapping[str, MRDRow], crds: Mapping[str, tuple[int, int]],
                    installs: Mapping[str, InstallLike], expected: Mapping[str, int]) -> ProviderChain:
    owner = f"Provider/{name}"
    listed = {n for r in revisions for n in r.mrd_names if n in rows}
    active = sorted(n for n in listed if rows[n].state == "Active")
    inactive = sorted(n for n in listed if rows[n].state == "Inactive")
    current = _active(revisions)
    runtime: RuntimeState = current.info.runtime if current else "unknown"
    note = current.info.runtime_message if current else "no revision yet"
    live, established = crds.get(owner, (0, 0))
    install = installs.get(owner)
    ordered = sorted(revisions, key=lambda r: r.info.revision, reverse=True)
    return ProviderChain(
        name=name, owner=owner, package=provider.package if provider else "",
        resolved_package=provider.resolved_package if provider else "",
        current_revision=provider.current_revision if provider else "",
        installed=provider.installed if provider else "", healthy=provider.healthy if provider else "",
        healthy_message=provider.healthy_message if provider else "",
        revisions=tuple(r.info for r in ordered), mrds=len(listed), mrds_active=len(active),
        mrds_inactive=len(inactive), mrds_established=sum(1 for n in listed if rows[n].established),
        active_mrd_names=_names(active), inactive_mrd_names=_names(inactive), crds=live, crds_established=established,
        expected_crds=expected.get(owner), per_minute=install.per_minute if install else 0.0,
        eta_seconds=install.eta_seconds if install else None, eta_note=install.eta_note if install else "",
        runtime=runtime, runtime_note=note)


def _with_use(chain: ProviderChain, revisions: list[RevisionObject], rows: Mapping[str, MRDRow],
              in_use: frozenset[str] | None) -> ProviderChain:
    if in_use is None:
        return chain
    active = {n for r in revisions for n in r.mrd_names if n in rows and rows[n].state == "Active"}
    used = sorted(active & in_use)
    return dataclasses.replace(chain, active_in_use=tuple(used[:IN_USE_KEPT]), active_unused=len(active) - len(used))


def _with_plan(chain: ProviderChain, revisions: list[RevisionObject], rows: Mapping[str, MRDRow],
               unplanned: frozenset[str] | None, mraps: Iterable[MRAPObject]) -> ProviderChain:
    """The provider's Active MRDs the plan leaves out, and the MRAP entries that match them."""
    if unplanned is None:
        return chain
    left_out = sorted({n for r in revisions for n in r.mrd_names if n in rows and rows[n].state == "Active"}
                      & unplanned)
    matches = [EntryMatch(mrap=mrap.name, pattern=pattern, mrds=sum(1 for n in left_out if go_match(pattern, n)))
               for mrap in mraps for pattern in mrap.patterns]
    unmatched = sum(1 for n in left_out if not any(go_match(p, n) for mrap in mraps for p in mrap.patterns))
    return dataclasses.replace(chain, active_unplanned=len(left_out), active_unplanned_names=_names(left_out),
                               unplanned_activated_by=tuple(sorted((m for m in matches if m.mrds),
                                                                   key=lambda m: (-m.mrds, m.mrap, m.pattern))),
                               unplanned_unmatched=unmatched)


def _mrap_info(mrap: MRAPObject, rows: Mapping[str, MRDRow]) -> MRAPInfo:
    matching = [row for name, row in rows.items() if any(go_match(p, name) for p in mrap.patterns)]
    return MRAPInfo(name=mrap.name, patterns=mrap.patterns, activated=len(mrap.activated),
                    activated_names=_names(mrap.activated), matching=len(matching),
                    matching_inactive=sum(1 for row in matching if row.state == "Inactive"),
                    healthy=mrap.healthy, message=mrap.message)

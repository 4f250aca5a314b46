"""Findings that speak Crossplane v2: activation policies, safe-start and what unused kinds cost.

Each reads the inventory's typed :class:`~base.crossplane.CrossplaneChain` (and the health
sample for memory), one finding per provider or policy (ids ``kind:name``):

- ``crossplane-unused-active-mrds``: a provider's Active MRDs whose kinds have no objects; an MRAP
  of the kinds in use would have kept their CRDs out (Crossplane's docs: about 3 MiB each). An
  Active MRD never goes back to Inactive, so the remedy is a reinstall with safe-start and that MRAP.
- ``crossplane-provider-without-safe-start``: its package does not declare ``safe-start``: every MRD
  was activated at install, whatever the MRAPs say (provider-kubernetes#400 and others).
- ``crossplane-mrds-active-outside-mraps``: a safe-start provider has Active MRDs no current MRAP
  pattern matches: an MRAP changed, and changing it deactivates nothing (crossplane#6984).
- ``crossplane-mrap-not-ready``: an MRAP has matching MRDs still Inactive or CRDs not yet
  Established: clients using those kinds get "no matches for kind" (crossplane#7822).
- ``crossplane-composed-kind-inactive`` (critical): a Composition composes a kind whose MRD is
  Inactive (or that no MRD defines): every XR it serves fails (:mod:`base.activation`).
- ``crossplane-mrap-entry-matches-nothing``: an MRAP entry matches no MRD (a singular, a kind, a
  typo, a malformed pattern): it activates nothing, silently (crossplane/docs#982).
- ``crossplane-runtime-not-running`` (warning): a provider's runtime should run (its revision is
  active and not scaled to zero awaiting activation) and has not been healthy for
  :data:`RUNTIME_GRACE_SECONDS`, on a cluster with Nodes (or where they cannot be listed).  A
  safe-start runtime Crossplane v2.4 keeps at zero until an activation is expected, never a finding.
- ``crossplane-no-nodes`` (info, one for the cluster): the cluster has no Node, so no provider pod
  runs (crdscope's lab runs no kubelet): said once, naming the runtimes that would run, instead of a
  finding per provider.

Where the Compositions were read, the unused-kinds remedy proposes the activation plan (the kinds
the Compositions compose and the kinds in use, as ``crdscope mrap`` prints it).
"""

from __future__ import annotations

import json

from crdscope.costmodel.attribution import activated_crd_bytes
from crdscope.base.activation import MANAGED_BY, MRAP_API_VERSION, MRAP_KIND, PLAN_NAME
from crdscope.base.crossplane import NOT_RUNNING, CrossplaneChain, ProviderChain, RevisionInfo
from crdscope.base.globs import go_match
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample
from crdscope.base.samples.version import VersionSample

from .model import Finding, Severity
from .observations import Observations, fmt_count, fmt_seconds, kubernetes_minor
from .spec import AlertRule, CheckSpec, PromQL

UNUSED_ACTIVE = "crossplane-unused-active-mrds"
NO_SAFE_START = "crossplane-provider-without-safe-start"
ACTIVE_OUTSIDE = "crossplane-mrds-active-outside-mraps"
MRAP_NOT_READY = "crossplane-mrap-not-ready"
COMPOSED_INACTIVE = "crossplane-composed-kind-inactive"
DEAD_ENTRY = "crossplane-mrap-entry-matches-nothing"
RUNTIME_NOT_RUNNING = "crossplane-runtime-not-running"
NO_NODES = "crossplane-no-nodes"
#: How long a runtime that should run may be unhealthy before it is a finding: a provider's pod takes
#: a minute or so to pull and start after an install or an activation.
RUNTIME_GRACE_SECONDS = 180.0
#: Providers named in the no-Node finding (the rest are counted).
NAMES_SHOWN = 5
MIB = float(1 << 20)
#: Entries of an MRAP a remedy writes out; past this the remedy names the command that prints it.
MRAP_KINDS_SHOWN = 12
#: MRAP entries named as what activated a provider's kinds.
MRAP_ENTRIES_SHOWN = 3


def _chain(obs: Observations) -> CrossplaneChain | None:
    inventory = obs.good(InventorySample)
    if inventory is None or not inventory.crossplane.present:
        return None
    return inventory.crossplane


def _mib_per_crd(obs: Observations) -> tuple[float, str]:
    """MiB one CRD costs this API server: its own measured fit, else the cost model's typical CRD as
    Crossplane creates it (an Active MRD's CRD: the activation path, not a direct install's)."""
    health = obs.good(HealthSample)
    if health is not None and health.mib_per_crd:
        return health.mib_per_crd, "health.mib_per_crd (this API server's measured fit)"
    minor = kubernetes_minor(obs)
    per_crd, path_note = activated_crd_bytes(minor)
    return per_crd / MIB, f"the cost model's typical CRD on Kubernetes {minor}, priced {path_note}"


def _current(provider: ProviderChain) -> RevisionInfo | None:
    """The provider's active revision (None: none yet)."""
    return next((r for r in provider.revisions if r.desired_state == "Active"), None)


def _with_active_revision(obs: Observations) -> list[tuple[ProviderChain, RevisionInfo]]:
    """Each provider that has an active revision, with it (none where the chain was not read)."""
    chain = _chain(obs)
    if chain is None:
        return []
    return [(provider, current) for provider in chain.providers if (current := _current(provider)) is not None]


def plan_mrap(chain: CrossplaneChain) -> str | None:
    """The activation plan as one MRAP on one line of JSON (``kubectl apply -f -`` takes it as written:
    kubectl reads input that opens with a brace as JSON, so YAML's flow style is refused), labelled
    crdscope's as ``crdscope mrap --apply`` writes it; None when it has no entry (an MRAP needs one) or
    more than a remedy shows (:data:`MRAP_KINDS_SHOWN`)."""
    plan = chain.activation
    if not plan.plan_entries or plan.plan_entries > min(MRAP_KINDS_SHOWN, len(plan.plan)):
        return None
    return json.dumps({"apiVersion": MRAP_API_VERSION, "kind": MRAP_KIND,
                       "metadata": {"name": PLAN_NAME, "labels": {MANAGED_BY[0]: MANAGED_BY[1]}},
                       "spec": {"activate": list(plan.plan)}})


def _plan_words(chain: CrossplaneChain) -> str:
    """The plan (the kinds Compositions compose and those in use), to apply: as an MRAP when it is short,
    else the command that prints it."""
    entries = chain.activation.plan_entries
    if not entries:
        return "no MRAP at all (nothing is composed or in use)"
    mrap = plan_mrap(chain)
    if mrap is not None:
        return f"the plan's MRAP ({entries} entr{'y' if entries == 1 else 'ies'}): {mrap}"
    return f"the plan's MRAP ({entries} entries: `crdscope mrap --yaml` prints it)"


def _deletion(provider: ProviderChain) -> str:
    """The commands that delete the kinds the plan leaves out: their MRDs first (an Active MRD's controller
    would make its CRD again), then their CRDs (each is owned by the provider's revision too, so it
    outlives its MRD: no garbage collector removes it)."""
    names = " ".join(provider.active_unplanned_names)
    more = (provider.active_unplanned or 0) - len(provider.active_unplanned_names)
    listed = f" ({more} more: `crdscope mrap` lists them)" if more > 0 else ""
    return (f"delete their MRDs, then their CRDs: `kubectl delete managedresourcedefinitions {names}`, then "
            f"`kubectl delete customresourcedefinitions {names}`{listed} (a CRD is owned by the provider's "
            "revision too and outlives its MRD; the revision makes each MRD again, Inactive)")


def _activated_how(provider: ProviderChain, current: RevisionInfo | None) -> str:
    """How the provider's kinds the plan leaves out came to be Active."""
    if current is not None and not current.safe_start:
        return (f"{provider.name} declares no safe-start: every MRD of it was created Active at install, "
                "whatever the MRAPs say")
    parts = [f"MRAP {m.mrap}'s entry `{m.pattern}` activated {fmt_count(m.mrds)} of them"
             for m in provider.unplanned_activated_by[:MRAP_ENTRIES_SHOWN]]
    if provider.unplanned_unmatched:
        parts.append(f"no current MRAP entry matches {fmt_count(provider.unplanned_unmatched)} of them (an MRAP "
                     "that activated them was narrowed or deleted since)")
    return f"{provider.name} is safe-start: " + "; ".join(parts or ["an MRAP activated them"])


def _removal(provider: ProviderChain, current: RevisionInfo | None, chain: CrossplaneChain) -> str:
    """What removes the CRDs of the kinds the plan leaves out, by how they were activated."""
    delete = _deletion(provider)
    plan = _plan_words(chain)
    if current is not None and not current.safe_start:
        return (f"move {provider.name} to a release that declares safe-start, with {plan}; an upgrade keeps the MRDs "
                f"already Active (Crossplane carries an MRD's state over), so then {delete}; or install that "
                "release on a new cluster")
    entries = ", ".join(f"`{m.pattern}` (MRAP {m.mrap})" for m in provider.unplanned_activated_by[:MRAP_ENTRIES_SHOWN])
    narrow = (f"narrow {entries} to what the plan keeps, or replace it with {plan}, so that nothing activates them "
              "again; then " if entries else "")
    return (f"narrowing an MRAP deactivates nothing (crossplane#6984): {narrow}{delete}; or start a new cluster "
            "with the plan's MRAP")


def unused_active_mrds(obs: Observations) -> list[Finding]:
    """Per provider: Active MRDs (so CRDs) the activation plan leaves out (no Composition composes them and
    they have no objects), what they cost, how they were activated and what removes them."""
    chain = _chain(obs)
    if chain is None:
        return []
    found = []
    per_crd, priced_by = _mib_per_crd(obs)
    composed = chain.activation.compositions_read
    for provider in chain.providers:
        left_out = provider.active_unplanned
        if left_out is None or left_out < max(1, obs.thresholds.crossplane_unused_mrds_info):
            continue
        current = _current(provider)
        kept = provider.mrds_active - left_out
        mib = left_out * per_crd
        neither = "neither composed nor in use" if composed else "not in use (no Composition was read)"
        names = provider.active_unplanned_names
        shown = "" if len(names) == left_out else f"first {len(names)}: "
        found.append(Finding(
            f"{UNUSED_ACTIVE}:{provider.name}", Severity.INFO,
            f"{provider.name}: {fmt_count(left_out)} of {fmt_count(provider.mrds_active)} active kinds are {neither}: "
            f"their CRDs hold about {mib:,.0f} MiB; the activation plan keeps the other {fmt_count(kept)}",
            (f"inventory.crossplane.providers[{provider.name}].mrds_active = {provider.mrds_active}, active_unplanned "
             f"= {left_out} (no Composition composes them; apiserver_storage_objects: no objects of those kinds)",
             f"{per_crd:.2f} MiB per CRD from {priced_by} × {fmt_count(left_out)} = {mib:,.0f} MiB",
             f"active kinds the plan leaves out ({shown}{', '.join(names)})",
             _activated_how(provider, current)),
            "every Active MRD makes a CRD the API server serves, stores and documents, used or not, and an "
            "Active MRD never goes back to Inactive",
            _removal(provider, current, chain)))
    return found


def without_safe_start(obs: Observations) -> list[Finding]:
    """Providers whose package does not declare safe-start: everything is activated at install."""
    found = []
    for provider, current in _with_active_revision(obs):
        if current.safe_start or not provider.mrds_active:
            continue
        found.append(Finding(
            f"{NO_SAFE_START}:{provider.name}", Severity.INFO,
            f"{provider.name} has no safe-start: all its {fmt_count(provider.mrds)} MRDs were activated at install",
            (f"inventory.crossplane.providers[{provider.name}].revisions[{current.name}].safe_start = false",
             f"mrds_active = {provider.mrds_active} of mrds = {provider.mrds}"),
            "a package without the safe-start capability has its MRDs created Active, whatever the MRAPs say",
            "use a release of the provider that declares safe-start (or a provider family member per service), "
            "then activate only the kinds you use with an MRAP; the MRDs already Active stay Active across the "
            "upgrade (the unused-kinds finding names how to drop those no one uses)"))
    return found


def active_outside_mraps(obs: Observations) -> list[Finding]:
    """Safe-start providers with Active MRDs that no current MRAP pattern matches."""
    chain = _chain(obs)
    if chain is None:
        return []
    patterns = [p for mrap in chain.mraps for p in mrap.patterns]
    found = []
    for provider in chain.providers:
        current = _current(provider)
        if current is None or not current.safe_start:
            continue
        outside = [n for n in provider.active_mrd_names if not any(go_match(p, n) for p in patterns)]
        if not outside:
            continue
        found.append(Finding(
            f"{ACTIVE_OUTSIDE}:{provider.name}", Severity.INFO,
            f"{provider.name}: active MRDs no MRAP asks for ({', '.join(outside[:3])}"
            f"{', ...' if len(outside) > 3 else ''})",
            (f"inventory.crossplane.providers[{provider.name}].active_mrd_names (first "
             f"{len(provider.active_mrd_names)} of {provider.mrds_active}) against the patterns of "
             f"{len(chain.mraps)} MRAPs: {', '.join(patterns) or 'none'}",),
            "an MRAP activated them and was changed or deleted since: Crossplane never deactivates an MRD",
            "narrowing an MRAP deactivated nothing (crossplane#6984): keep them, or drop their CRDs by deleting their "
            "MRDs and then their CRDs by hand (the unused-kinds finding names those no one uses), or start a new "
            "cluster; reinstalling the provider would delete every CRD of it, and every object of those kinds"))
    return found


def mrap_not_ready(obs: Observations) -> list[Finding]:
    """MRAPs whose matching MRDs are not all Active (or their CRDs not Established) yet."""
    chain = _chain(obs)
    if chain is None:
        return []
    found = []
    for mrap in chain.mraps:
        if not mrap.matching_inactive:
            continue
        found.append(Finding(
            f"{MRAP_NOT_READY}:{mrap.name}", Severity.WARNING,
            f"MRAP {mrap.name}: {fmt_count(mrap.matching_inactive)} of {fmt_count(mrap.matching)} matching MRDs "
            "are not active yet",
            (f"inventory.crossplane.mraps[{mrap.name}].matching_inactive = {mrap.matching_inactive}, "
             f"patterns {', '.join(mrap.patterns)}, healthy = {mrap.healthy or '?'} {mrap.message}".rstrip(),),
            "until the MRDs are Active and their CRDs Established, clients get \"no matches for kind\"",
            "wait for the activation (the inventory shows its pace); if it does not move, read the MRAP's "
            "conditions and Crossplane's log"))
    return found


UNUSED_ACTIVE_MRDS_CHECK = CheckSpec(
    unused_active_mrds, "Crossplane: unused active MRDs", probes=(InventorySample,),
    also_reads=(HealthSample, VersionSample), thresholds=("crossplane_unused_mrds_info",), kinds=(UNUSED_ACTIVE,))
WITHOUT_SAFE_START_CHECK = CheckSpec(
    without_safe_start, "Crossplane: providers without safe-start", probes=(InventorySample,), kinds=(NO_SAFE_START,))
ACTIVE_OUTSIDE_MRAPS_CHECK = CheckSpec(
    active_outside_mraps, "Crossplane: MRDs active outside MRAPs", probes=(InventorySample,),
    kinds=(ACTIVE_OUTSIDE,))
MRAP_NOT_READY_CHECK = CheckSpec(
    mrap_not_ready, "Crossplane: MRAPs not ready", probes=(InventorySample,), kinds=(MRAP_NOT_READY,))


def composed_kind_inactive(obs: Observations) -> list[Finding]:
    """Kinds a Composition composes whose MRD is Inactive or missing: the XRs it serves fail."""
    chain = _chain(obs)
    if chain is None or not chain.activation.composed_inactive:
        return []
    view = chain.activation
    count = view.composed_inactive
    shown = ", ".join(view.composed_inactive_names[:3]) + (", ..." if count > 3 else "")
    return [Finding(
        COMPOSED_INACTIVE, Severity.CRITICAL,
        f"{fmt_count(count)} composed kind{'s' if count != 1 else ''} not active: XRs composing "
        f"{'them' if count != 1 else 'it'} fail ({shown})",
        (f"inventory.crossplane.activation.composed_inactive = {count} (Compositions read: {view.compositions})",
         *view.composed_inactive_messages),
        "a kind whose MRD is Inactive has no CRD: the XR's composition fails with \"no matches for kind\" "
        "until an MRAP activates it and its CRD is Established",
        _composed_remedy(chain))]


def _composed_remedy(chain: CrossplaneChain) -> str:
    """Apply the plan (what the Compositions compose and what is in use): the MRAP itself where it is short."""
    mrap = plan_mrap(chain)
    written = (f"apply this MRAP (`kubectl apply -f -`): {mrap}; or " if mrap is not None
               else "apply the plan: `crdscope mrap --yaml | kubectl apply -f -`, or ")
    return (f"activate exactly what the Compositions compose and what is in use: {written}`crdscope mrap --apply "
            "--context CONTEXT`, which writes the same plan and waits until its CRDs are Established; a kind no "
            "MRD defines needs its provider installed or the Composition corrected (the evidence says which)")


def mrap_entries_matching_nothing(obs: Observations) -> list[Finding]:
    """MRAP entries that match no MRD: they activate nothing and say nothing."""
    chain = _chain(obs)
    if chain is None or not chain.activation.dead_entries:
        return []
    view = chain.activation
    count = view.dead_entries
    return [Finding(
        DEAD_ENTRY, Severity.WARNING,
        f"{fmt_count(count)} MRAP entr{'ies' if count != 1 else 'y'} match{'' if count != 1 else 'es'} no MRD "
        f"({', '.join(view.dead_entry_names[:2])}{', ...' if count > 2 else ''})",
        (f"inventory.crossplane.activation.dead_entries = {count}", *view.dead_entry_messages),
        "MRAP entries are Go filepath.Match patterns over MRD names (<plural>.<group>): a singular, a kind, "
        "a typo or a malformed pattern matches nothing, and Crossplane says nothing (crossplane/docs#982)",
        "correct the entry to the MRD name shown as nearest, or take the plan of `crdscope mrap --yaml`")]


def _activation_rules(q: PromQL) -> tuple[AlertRule, ...]:
    return (AlertRule(
        "CrdscopeCrossplaneComposedKindInactive", "critical",
        f"{q.crdscope('crdscope_inventory_crossplane_activation_composed_inactive')} > 0",
        "Crossplane: a composed kind is not active",
        "{{ $value }} kinds that Compositions compose have no active MRD: XRs composing them fail "
        "(`crdscope mrap` names them and the MRAP that activates them)."),)


def _dead_entry_rules(q: PromQL) -> tuple[AlertRule, ...]:
    return (AlertRule(
        "CrdscopeCrossplaneMRAPEntryMatchesNothing", "warning",
        f"{q.crdscope('crdscope_inventory_crossplane_activation_dead_entries')} > 0",
        "Crossplane: an MRAP entry matches no MRD",
        "{{ $value }} MRAP entries match no MRD name (a singular, a kind, a typo or a malformed pattern): "
        "they activate nothing (`crdscope mrap` names the nearest MRD)."),)


COMPOSED_INACTIVE_CHECK = CheckSpec(
    composed_kind_inactive, "Crossplane: composed kinds active", probes=(InventorySample,),
    rules=_activation_rules, kinds=(COMPOSED_INACTIVE,))
DEAD_ENTRY_CHECK = CheckSpec(
    mrap_entries_matching_nothing, "Crossplane: MRAP entries match MRDs", probes=(InventorySample,),
    rules=_dead_entry_rules, kinds=(DEAD_ENTRY,))


def runtime_not_running(obs: Observations) -> list[Finding]:
    """Per provider: a runtime that should run (active revision, not awaiting activation) and has not
    been healthy for :data:`RUNTIME_GRACE_SECONDS`, where the cluster has Nodes to run it."""
    found = []
    for provider, current in _with_active_revision(obs):
        if current.runtime not in NOT_RUNNING:
            continue
        since = current.runtime_since
        if since is not None and obs.now - since < RUNTIME_GRACE_SECONDS:
            continue
        lasted = f" for {fmt_seconds(obs.now - since)}" if since is not None else ""
        active = (f", RuntimeActive = {current.runtime_active} {current.runtime_active_reason}".rstrip()
                  if current.runtime_active else "")
        found.append(Finding(
            f"{RUNTIME_NOT_RUNNING}:{provider.name}", Severity.WARNING,
            f"{provider.name}: its runtime should run and has not been healthy{lasted}",
            (f"inventory.crossplane.providers[{provider.name}].revisions[{current.name}].runtime = {current.runtime}"
             f"{active}", f"RuntimeHealthy: {current.runtime_message or 'False'}",
             f"mrds_active = {provider.mrds_active} (a safe-start runtime scaled to zero awaits none of these)"),
            "its revision is active and nothing keeps it at zero replicas, so Crossplane wants the provider's "
            "Deployment Available: until it is, no managed resource of the provider is reconciled",
            f"look at the Deployment {current.name} in Crossplane's namespace and its Pods' events (image pull, "
            "scheduling, crash loop): `kubectl -n crossplane-system describe deployment " + current.name + "`"))
    return found


def runtimes_without_nodes(obs: Observations) -> list[Finding]:
    """One finding for the cluster: no Node, so no provider pod runs (the runtimes that would run named)."""
    chain = _chain(obs)
    if chain is None or chain.has_nodes is not False:
        return []
    stopped = [p.name for p in chain.providers if p.runtime == "no-kubelet"]
    if not stopped:
        return []
    waiting = sum(1 for p in chain.providers if p.runtime == "awaiting-activation")
    shown = ", ".join(stopped[:NAMES_SHOWN]) + (f", ... ({len(stopped) - NAMES_SHOWN} more)"
                                                  if len(stopped) > NAMES_SHOWN else "")
    asleep = f"; {waiting} more scaled to zero awaiting activation need none" if waiting else ""
    return [Finding(
        NO_NODES, Severity.INFO,
        f"no Node: {fmt_count(len(stopped))} provider runtime{'s' if len(stopped) != 1 else ''} that should run "
        f"cannot ({shown}){asleep}",
        ("inventory.crossplane.has_nodes = false (GET /api/v1/nodes?limit=1 listed none)",
         f"runtime = no-kubelet for {shown}"),
        "the cluster has no Node, so no kubelet runs the providers' Pods (crdscope's lab runs none): their "
        "MRDs and CRDs install regardless, but no managed resource is reconciled",
        "nothing to do in crdscope's lab; on a real cluster, add Nodes that can run the provider Pods")]


RUNTIME_NOT_RUNNING_CHECK = CheckSpec(
    runtime_not_running, "Crossplane: provider runtimes running", probes=(InventorySample,),
    constants=("RUNTIME_GRACE_SECONDS",), kinds=(RUNTIME_NOT_RUNNING,))
NO_NODES_CHECK = CheckSpec(
    runtimes_without_nodes, "Crossplane: Nodes for provider runtimes", probes=(InventorySample,),
    kinds=(NO_NODES,))

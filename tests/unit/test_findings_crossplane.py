"""Crossplane findings from a built chain: unused active kinds, safe-start, MRAP drift and readiness."""

from __future__ import annotations

import dataclasses
import json
import re


from crdscope.findings.crossplane import (ACTIVE_OUTSIDE, COMPOSED_INACTIVE, DEAD_ENTRY, MRAP_NOT_READY,
                                          NO_NODES, NO_SAFE_START, RUNTIME_GRACE_SECONDS, RUNTIME_NOT_RUNNING,
                                          UNUSED_ACTIVE, active_outside_mraps, composed_kind_inactive,
                                          mrap_entries_matching_nothing, mrap_not_ready, runtime_not_running,
                                          runtimes_without_nodes, unused_active_mrds, without_safe_start)
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.observations import Observations
from crdscope.base.activation import MANAGED_BY, MRD, PLAN_NAME, CompositionKinds, Policy, analyse, read_composition
from crdscope.base.crossplane import (CrossplaneObjects, MRAPObject, MRDRow, ProviderObject, RevisionInfo,
                                        RevisionObject, build_chain)
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample

KINDS = [f"k{i}.sqs.aws.upbound.io" for i in range(8)]


#: What Crossplane's runtime controller writes while the provider Deployment is not Available.
UNAVAILABLE = ("False", "post establish runtime hook failed for package: provider package deployment is unavailable "
                        "with message: Deployment does not have minimum availability.")


def _inventory(*, safe_start: bool, active: int, in_use: frozenset[str] | None, patterns=("k0.*", "k1.*"),
               inactive_matching: int = 0, compositions: tuple[CompositionKinds, ...] | None = None,
               runtime: tuple[str, str] | None = None, runtime_active: tuple[str, str] = ("", ""),
               runtime_since: float | None = None, has_nodes: bool | None = None) -> InventorySample:
    rows = tuple(MRDRow(name, "Active" if i < active else "Inactive", i < active) for i, name in enumerate(KINDS))
    info = RevisionInfo(name="sqs-r1", revision=1, desired_state="Active", safe_start=safe_start,
                        runtime_active=runtime_active[0], runtime_active_reason=runtime_active[1],
                        runtime_since=runtime_since)
    revision = RevisionObject(info, "provider-aws-sqs", tuple(KINDS), (), runtime)
    provider = ProviderObject("provider-aws-sqs", "reg/crdscope/provider-aws-sqs:v0.1.0", "", "sqs-r1", "True",
                              "True", "")
    mrap_patterns = patterns if not inactive_matching else (*patterns, KINDS[-1])
    objects = CrossplaneObjects(providers=(provider,), revisions=(revision,), mrds=rows, mrds_version="v1alpha1",
                                mraps=(MRAPObject("in-use", tuple(mrap_patterns), (), "True", ""),), present=True,
                                compositions=compositions, has_nodes=has_nodes)
    chain = build_chain(objects, {"Provider/provider-aws-sqs": (active, active)}, {}, in_use)
    return InventorySample(crossplane=chain)


def written_mrap(remedy: str) -> dict:
    """The MRAP a remedy writes out, parsed as kubectl reads it (one line opening with a brace: JSON)."""
    found = re.search(r'(\{"apiVersion": .*?\]\}\})', remedy)
    assert found, remedy
    mrap = json.loads(found.group(1))
    assert mrap["kind"] == "ManagedResourceActivationPolicy" and mrap["metadata"]["name"] == PLAN_NAME
    assert mrap["metadata"]["labels"] == {MANAGED_BY[0]: MANAGED_BY[1]}  # crdscope mrap --apply may replace it
    return mrap


def _obs(inventory: InventorySample, health: HealthSample | None = None, **thresholds) -> Observations:
    obs = Observations()
    obs.add(inventory)
    if health is not None:
        obs.add(health)
    if thresholds:
        obs.thresholds = dataclasses.replace(obs.thresholds, **thresholds)
    return obs


def test_unused_active_kinds_priced_by_the_servers_own_fit_with_the_mrap_of_kinds_in_use():
    inventory = _inventory(safe_start=False, active=8, in_use=frozenset({KINDS[0], KINDS[3], "other.example.io"}))
    provider = inventory.crossplane.providers[0]
    assert provider.active_in_use == (KINDS[0], KINDS[3]) and provider.active_unused == 6
    [finding] = unused_active_mrds(_obs(inventory, HealthSample(mib_per_crd=3.5)))
    assert finding.id == f"{UNUSED_ACTIVE}:provider-aws-sqs"
    assert "6 of 8 active kinds are not in use" in finding.title and "about 21 MiB" in finding.title
    assert "the activation plan keeps the other 2" in finding.title
    unused = ", ".join(k for i, k in enumerate(KINDS) if i not in (0, 3))
    assert finding.evidence[2] == f"active kinds the plan leaves out ({unused})"
    # No safe-start: no MRAP activated them, and an upgrade keeps them Active: the MRAP of the kinds in
    # use (as written, valid YAML) with a safe-start release, then the MRDs and CRDs deleted by name.
    assert "declares no safe-start" in finding.evidence[3]
    assert finding.remedy.startswith("move provider-aws-sqs to a release that declares safe-start")
    assert written_mrap(finding.remedy)["spec"]["activate"] == [KINDS[0], KINDS[3]]
    names = " ".join(k for i, k in enumerate(KINDS) if i not in (0, 3))
    assert f"`kubectl delete managedresourcedefinitions {names}`, then " \
           f"`kubectl delete customresourcedefinitions {names}`" in finding.remedy
    # Unknown object counts: no verdict; below the threshold: none either.
    assert unused_active_mrds(_obs(_inventory(safe_start=False, active=8, in_use=None))) == []
    assert unused_active_mrds(_obs(inventory, crossplane_unused_mrds_info=7)) == []


def test_without_the_servers_fit_the_cost_model_prices_a_typical_crd():
    inventory = _inventory(safe_start=False, active=8, in_use=frozenset())
    [finding] = unused_active_mrds(_obs(inventory))
    assert "cost model" in finding.evidence[1]


def test_safe_start_and_drift():
    eager = _inventory(safe_start=False, active=8, in_use=None)
    assert [f.id for f in without_safe_start(_obs(eager))] == [f"{NO_SAFE_START}:provider-aws-sqs"]
    # A safe-start provider whose active kinds all match an MRAP: nothing to say.
    matched = _inventory(safe_start=True, active=2, in_use=None)
    assert without_safe_start(_obs(matched)) == [] and active_outside_mraps(_obs(matched)) == []
    # Four active, the MRAP asks for two now: two stay active outside any MRAP.
    drifted = _inventory(safe_start=True, active=4, in_use=None)
    [finding] = active_outside_mraps(_obs(drifted))
    assert finding.id == f"{ACTIVE_OUTSIDE}:provider-aws-sqs"
    assert KINDS[2] in finding.title and KINDS[0] not in finding.title


def test_mrap_with_inactive_matches_is_not_ready():
    waiting = _inventory(safe_start=True, active=2, in_use=None, inactive_matching=1)
    [finding] = mrap_not_ready(_obs(waiting))
    assert finding.id == f"{MRAP_NOT_READY}:in-use" and "1 of 3 matching MRDs" in finding.title
    assert mrap_not_ready(_obs(_inventory(safe_start=True, active=2, in_use=None))) == []


def test_the_engine_runs_them():
    engine = FindingsEngine()
    changes = engine.observe(_inventory(safe_start=False, active=8, in_use=frozenset()))
    assert {c.finding.kind for c in changes} >= {UNUSED_ACTIVE, NO_SAFE_START}


def composing(*kinds: str, name: str = "xqueues") -> CompositionKinds:
    """A pipeline Composition whose patch-and-transform step composes ``kinds`` (``Kind`` names of sqs)."""
    return read_composition({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": name},
        "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1", "kind": "XQueue"},
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                         "resources": [{"name": k, "base": {"apiVersion": "sqs.aws.upbound.io/v1",
                                                                            "kind": k}} for k in kinds]}}]}})


def test_a_composed_inactive_kind_is_critical_and_a_dead_entry_a_warning():
    inventory = _inventory(safe_start=True, active=4, in_use=frozenset(), patterns=("k0.*", "k1.sqs.aws.upbound.i"),
                           compositions=(composing("K1", "K6"),))
    view = inventory.crossplane.activation
    assert view.compositions_read and view.needed == 2 and view.needed_active == 1
    [critical] = composed_kind_inactive(_obs(inventory))
    assert critical.id == COMPOSED_INACTIVE and critical.severity.name == "CRITICAL"
    assert "k6.sqs.aws.upbound.io" in critical.title
    assert any("Composition xqueues, step pt composes k6.sqs.aws.upbound.io: its MRD is Inactive" in e
               for e in critical.evidence)
    [dead] = mrap_entries_matching_nothing(_obs(inventory))
    assert dead.id == DEAD_ENTRY and "k1.sqs.aws.upbound.i -> k1.sqs.aws.upbound.io" in dead.title
    # Once every composed kind is active, no critical finding; without Compositions, none either.
    active = _inventory(safe_start=True, active=8, in_use=frozenset(), compositions=(composing("K1", "K6"),))
    assert composed_kind_inactive(_obs(active)) == []
    assert composed_kind_inactive(_obs(_inventory(safe_start=True, active=4, in_use=frozenset()))) == []


AWAITING = ("False", "AwaitingActivation")
SCALED_TO_ZERO_HEALTHY = ("True", "")


def test_a_safe_start_runtime_scaled_to_zero_is_awaiting_activation_and_no_finding():
    """Crossplane v2.4: RuntimeActive False/AwaitingActivation, RuntimeHealthy True, no MRD Active."""
    asleep = _inventory(safe_start=True, active=0, in_use=None, runtime=SCALED_TO_ZERO_HEALTHY,
                        runtime_active=AWAITING, has_nodes=False)
    provider = asleep.crossplane.providers[0]
    assert provider.runtime == "awaiting-activation" and "until one of its MRDs is activated" in provider.runtime_note
    assert runtime_not_running(_obs(asleep)) == [] and runtimes_without_nodes(_obs(asleep)) == []


def test_an_activated_runtime_that_does_not_come_up_is_a_finding_where_nodes_exist():
    """Woken (an MRD Active) while RuntimeActive still says AwaitingActivation: the Deployment scales up;
    not Available past the grace period on a cluster with Nodes is a finding, naming the Deployment."""
    woken = _inventory(safe_start=True, active=2, in_use=None, runtime=UNAVAILABLE, runtime_active=AWAITING,
                       has_nodes=True, runtime_since=1000.0)
    provider = woken.crossplane.providers[0]
    assert provider.runtime == "deployment-unavailable" and provider.runtime_note.startswith("activated: ")
    obs = _obs(woken)
    obs.now = 1000.0 + RUNTIME_GRACE_SECONDS - 1  # scaling up: not yet
    assert runtime_not_running(obs) == []
    obs.now = 1000.0 + RUNTIME_GRACE_SECONDS + 1
    [finding] = runtime_not_running(obs)
    assert finding.id == f"{RUNTIME_NOT_RUNNING}:provider-aws-sqs" and "should run" in finding.title
    assert "RuntimeActive = False AwaitingActivation" in finding.evidence[0] and "sqs-r1" in finding.remedy
    assert "Deployment does not have minimum availability" in finding.evidence[1]
    assert runtimes_without_nodes(obs) == []


def test_without_nodes_one_finding_says_so_for_every_runtime_instead_of_one_each():
    """The lab: no Node, so no runtime that should run can; said once, naming them."""
    woken = _inventory(safe_start=True, active=2, in_use=None, runtime=UNAVAILABLE, runtime_active=AWAITING,
                       has_nodes=False)
    assert woken.crossplane.providers[0].runtime == "no-kubelet"
    obs = _obs(woken)
    assert runtime_not_running(obs) == []
    [finding] = runtimes_without_nodes(obs)
    assert finding.id == NO_NODES and finding.severity.value == "info"
    assert "1 provider runtime that should run cannot (provider-aws-sqs)" in finding.title
    # Runtimes of an older Crossplane (no RuntimeActive) are counted the same way.
    old = _inventory(safe_start=False, active=8, in_use=None, runtime=UNAVAILABLE, has_nodes=False)
    [again] = runtimes_without_nodes(_obs(old))
    assert "provider-aws-sqs" in again.title
    # Nodes unknown (not read, or not allowed): no claim either way.
    assert runtimes_without_nodes(_obs(_inventory(safe_start=False, active=8, in_use=None, runtime=UNAVAILABLE))) == []


KUSTO = [f"{plural}.kusto.azure.upbound.io" for plural in
         ("attacheddatabaseconfigurations", "clusterprincipalassignments", "clusters", "databases",
          "databaseprincipalassignments", "eventgriddataconnections", "eventhubdataconnections",
          "iothubdataconnections", "scripts", "clustermanagedprivateendpoints", "cosmosdbdataconnections")]


def kusto_platform(*, patterns: tuple[str, ...], composed: tuple[str, ...]) -> tuple[InventorySample, CompositionKinds]:
    """The issue's lab: a safe-start provider whose kinds the user's own MRAP entry activated, none with
    objects, and a Composition composing three of them."""
    rows = tuple(MRDRow(name, "Active", True) for name in KUSTO)
    info = RevisionInfo(name="azure-kusto-r1", revision=1, desired_state="Active", safe_start=True)
    revision = RevisionObject(info, "provider-azure-kusto", tuple(KUSTO), (), None)
    provider = ProviderObject("provider-azure-kusto", "reg/provider-azure-kusto:v2", "", "azure-kusto-r1", "True",
                              "True", "")
    composition = read_composition({
        "apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition", "metadata": {"name": "xanalytics"},
        "spec": {"compositeTypeRef": {"apiVersion": "platform.example.org/v1", "kind": "XAnalytics"},
                 "pipeline": [{"step": "pt", "functionRef": {"name": "function-patch-and-transform"},
                               "input": {"apiVersion": "pt.fn.crossplane.io/v1beta1", "kind": "Resources",
                                         "resources": [{"name": k, "base": {
                                             "apiVersion": "kusto.azure.upbound.io/v1beta1", "kind": k}}
                                             for k in composed]}}]}})
    objects = CrossplaneObjects(providers=(provider,), revisions=(revision,), mrds=rows, mrds_version="v1alpha1",
                                mraps=(MRAPObject("analytics", patterns, tuple(KUSTO), "True", ""),), present=True,
                                compositions=(composition,))
    chain = build_chain(objects, {"Provider/provider-azure-kusto": (len(KUSTO), len(KUSTO))}, {}, frozenset())
    return InventorySample(crossplane=chain), composition


def test_kinds_the_users_own_mrap_entry_activated_name_that_entry_and_the_figure_is_the_plans():
    """The issue: a safe-start provider's kinds activated by the user's MRAP entry were told to
    "reinstall with safe-start", and "an MRAP activating only the 0 kinds in use would free 31 MiB" sat
    beside a plan of the 3 kinds a Composition needs."""
    inventory, composition = kusto_platform(patterns=("*.kusto.azure.upbound.io",),
                                            composed=("Cluster", "Database", "Script"))
    [finding] = unused_active_mrds(_obs(inventory, HealthSample(mib_per_crd=3.0)))
    # The planner's own plan for the same objects: the figure counts the active kinds it leaves out.
    report = analyse([composition], [MRD(n, "Active", True, objects=0) for n in KUSTO],
                     [Policy("analytics", ("*.kusto.azure.upbound.io",))])
    planned = {n.mrd for n in report.needed}
    assert len(planned) == 3 and set(report.active_unused) == set(KUSTO) - planned
    left_out = len(KUSTO) - len(planned)
    assert f"{left_out} of {len(KUSTO)} active kinds are neither composed nor in use" in finding.title
    assert f"about {left_out * 3.0:,.0f} MiB" in finding.title and "the activation plan keeps the other 3" in finding.title
    assert written_mrap(finding.remedy)["spec"]["activate"] == list(report.plan.patterns)
    # How they were activated: the user's entry, named; the provider is safe-start, so no reinstall advice.
    assert f"MRAP analytics's entry `*.kusto.azure.upbound.io` activated {left_out} of them" in finding.evidence[3]
    assert "reinstall" not in finding.remedy and "declares safe-start" not in finding.remedy
    assert "narrowing an MRAP deactivates nothing (crossplane#6984)" in finding.remedy
    assert "narrow `*.kusto.azure.upbound.io` (MRAP analytics)" in finding.remedy
    names = " ".join(sorted(set(KUSTO) - planned)[:10])
    assert f"`kubectl delete managedresourcedefinitions {names}`" in finding.remedy
    assert "more: `crdscope mrap`" not in finding.remedy  # 8 left out, 10 names kept: all of them here
    assert finding.remedy.index("managedresourcedefinitions") < finding.remedy.index("customresourcedefinitions")


def test_kinds_no_current_entry_matches_were_activated_by_an_mrap_since_narrowed():
    inventory, _ = kusto_platform(patterns=("clusters.kusto.azure.upbound.io",), composed=("Cluster",))
    [finding] = unused_active_mrds(_obs(inventory))
    assert "no current MRAP entry matches 10 of them" in finding.evidence[3]
    assert "narrow `" not in finding.remedy and "deactivates nothing" in finding.remedy
    assert "delete their MRDs, then their CRDs" in finding.remedy


def test_the_composed_inactive_remedy_names_the_plans_mrap_as_written():
    inventory = _inventory(safe_start=True, active=4, in_use=frozenset(), compositions=(composing("K1", "K6"),))
    [critical] = composed_kind_inactive(_obs(inventory))
    mrap = written_mrap(critical.remedy)
    assert mrap["spec"]["activate"] == list(inventory.crossplane.activation.plan) == [KINDS[1], KINDS[6]]
    assert "`crdscope mrap --apply --context CONTEXT`" in critical.remedy
    # A plan longer than a remedy shows is named by the command that prints it, never cut short.
    many = _inventory(safe_start=True, active=0, in_use=frozenset(),
                      compositions=(composing(*(f"K{i}" for i in range(8))),))
    view = many.crossplane.activation
    long_plan = dataclasses.replace(view, plan=view.plan * 2, plan_entries=16)
    crossplane = dataclasses.replace(many.crossplane, activation=long_plan)
    [critical] = composed_kind_inactive(_obs(dataclasses.replace(many, crossplane=crossplane)))
    assert '{"apiVersion"' not in critical.remedy and "`crdscope mrap --yaml | kubectl apply -f -`" in critical.remedy


def test_past_the_names_kept_the_commands_say_how_many_more_outside_the_command():
    inventory, _ = kusto_platform(patterns=("*.kusto.azure.upbound.io",), composed=())
    [finding] = unused_active_mrds(_obs(inventory))
    command = re.search(r"`kubectl delete managedresourcedefinitions ([^`]*)`", finding.remedy).group(1)
    assert command.split() == sorted(KUSTO)[:10]  # only names: the command runs as written
    assert "(1 more: `crdscope mrap` lists them)" in finding.remedy
    assert "no MRAP at all (nothing is composed or in use)" in finding.remedy

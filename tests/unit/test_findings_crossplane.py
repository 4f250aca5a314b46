"""Crossplane findings from a built chain: unused active kinds, safe-start, MRAP drift and readiness."""

from __future__ import annotations

import dataclasses

from crdscope.findings.crossplane import (ACTIVE_OUTSIDE, COMPOSED_INACTIVE, DEAD_ENTRY, MRAP_NOT_READY,
                                          NO_NODES, NO_SAFE_START, RUNTIME_GRACE_SECONDS, RUNTIME_NOT_RUNNING,
                                          UNUSED_ACTIVE, active_outside_mraps, composed_kind_inactive,
                                          mrap_entries_matching_nothing, mrap_not_ready, runtime_not_running,
                                          runtimes_without_nodes, unused_active_mrds, without_safe_start)
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.observations import Observations
from crdscope.base.activation import CompositionKinds, read_composition
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
    assert "6 of 8 active MRDs have no objects" in finding.title and "about 21 MiB" in finding.title
    assert f'"{KINDS[0]}", "{KINDS[3]}"' in finding.remedy and "safe-start" in finding.remedy
    unused = ", ".join(k for i, k in enumerate(KINDS) if i not in (0, 3))
    assert finding.evidence[2] == f"active kinds without objects ({unused})"
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

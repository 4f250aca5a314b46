"""Crossplane findings from a built chain: unused active kinds, safe-start, MRAP drift and readiness."""

from __future__ import annotations

import dataclasses

from crdscope.findings.crossplane import (ACTIVE_OUTSIDE, COMPOSED_INACTIVE, DEAD_ENTRY, MRAP_NOT_READY,
                                          NO_SAFE_START, UNUSED_ACTIVE, active_outside_mraps, composed_kind_inactive,
                                          mrap_entries_matching_nothing, mrap_not_ready, unused_active_mrds,
                                          without_safe_start)
from crdscope.findings.engine import FindingsEngine
from crdscope.findings.observations import Observations
from crdscope.base.activation import CompositionKinds, read_composition
from crdscope.base.crossplane import (CrossplaneObjects, MRAPObject, MRDRow, ProviderObject, RevisionInfo,
                                        RevisionObject, build_chain)
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.inventory import InventorySample

KINDS = [f"k{i}.sqs.aws.upbound.io" for i in range(8)]


def _inventory(*, safe_start: bool, active: int, in_use: frozenset[str] | None, patterns=("k0.*", "k1.*"),
               inactive_matching: int = 0, compositions: tuple[CompositionKinds, ...] | None = None
               ) -> InventorySample:
    rows = tuple(MRDRow(name, "Active" if i < active else "Inactive", i < active) for i, name in enumerate(KINDS))
    revision = RevisionObject(RevisionInfo(name="sqs-r1", revision=1, desired_state="Active", safe_start=safe_start),
                              "provider-aws-sqs", tuple(KINDS), (), None)
    provider = ProviderObject("provider-aws-sqs", "reg/crdscope/provider-aws-sqs:v0.1.0", "", "sqs-r1", "True",
                              "True", "")
    mrap_patterns = patterns if not inactive_matching else (*patterns, KINDS[-1])
    objects = CrossplaneObjects(providers=(provider,), revisions=(revision,), mrds=rows, mrds_version="v1alpha1",
                                mraps=(MRAPObject("in-use", tuple(mrap_patterns), (), "True", ""),), present=True,
                                compositions=compositions)
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

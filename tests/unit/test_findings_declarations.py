"""Each check's declaration (``findings.spec.CheckSpec``) holds: its thresholds, constants and sample classes
exist, what it reads is declared, and every check judges a store filled with samples that should trip it.

The type checker is the first guard against a renamed sample field: checks read samples by class
(``obs.good(HealthSample).rss_bytes``) and ``make lint`` runs strict mypy over ``crdscope.findings``.
The last test is the second: every check runs on real sample classes and must open its finding, so
a field read that no longer exists raises here instead of silently turning a verdict off.
"""

from __future__ import annotations

import dataclasses

import pytest

from crdscope.base.settings import Thresholds
from crdscope.base.store import SampleStore
from crdscope.findings.engine import CHECKS, DECLARED, FindingsEngine
from crdscope.findings.kubectl import KubectlClient
from crdscope.findings.model import Finding
from crdscope.base.facts import ClusterFacts
from crdscope.findings.observations import Observations
from crdscope.findings.spec import CheckSpec, PromQL
from crdscope.base.samples.throttling import FlowSchemaActivity, PriorityLevel, ThrottlingSample
from crdscope.base.samples.discovery import ClientModel, DiscoverySample
from crdscope.base.samples.health import HealthSample
from crdscope.base.samples.latency import Canary, LatencySample
from crdscope.base.samples.openapi import OpenAPISample
from crdscope.probes.registry import monitor_probes, sample_type
from crdscope.base.samples.responsiveness import ResponsivenessSample
from crdscope.base.restarts import RestartEvent
from crdscope.base.samples.version import VersionSample
from crdscope.base.samples.webhooks import ConversionWebhook, WebhooksSample
from tests.unit.test_findings_crossplane import UNAVAILABLE, _inventory, composing

THRESHOLD_NAMES = {f.name for f in dataclasses.fields(Thresholds)}
MIB = 1 << 20
LIMIT = 2048 * MIB
NOW = 10_000.0
ids = [check.name for check in DECLARED]


def test_one_declaration_per_check_function():
    assert len({check.function for check in DECLARED}) == len(DECLARED)
    assert all(check.what_it_checks and check.probes for check in DECLARED)


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_declared_thresholds_and_constants_exist(check: CheckSpec):
    assert set(check.thresholds) <= THRESHOLD_NAMES, set(check.thresholds) - THRESHOLD_NAMES
    limits = check.limits(Thresholds())  # a constant missing from the check's module raises KeyError
    assert all(isinstance(value, int | float) for value in limits.values()), limits


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_declared_sample_classes_are_the_registered_ones_of_monitor_probes(check: CheckSpec):
    for kind in (*check.probes, *check.also_reads):
        assert sample_type(kind.probe) is kind
        assert kind.probe in monitor_probes()


class RecordingThresholds(Thresholds):
    """Thresholds that note every field read (a frozen dataclass: the notes live outside)."""

    def __getattribute__(self, name: str):
        if name in THRESHOLD_NAMES:
            thresholds_read.add(name)
        return super().__getattribute__(name)


thresholds_read: set[str] = set()


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_thresholds_a_check_and_its_rules_read_are_declared(check: CheckSpec):
    thresholds_read.clear()
    for store in filled_stores():
        check(observations(store, RecordingThresholds()))
    check.rules(PromQL(RecordingThresholds()))
    undeclared = thresholds_read - set(check.thresholds)
    assert not undeclared, f"{check.name} reads thresholds it does not declare: {undeclared}"


def test_every_rule_is_declared_once():
    names = [rule.alert for check in DECLARED for rule in check.rules(PromQL())]
    assert len(names) == len(set(names)) and "CrdscopeAPIServerNotAnswering" in names


# --------------------------------------------------------------------------- checks on filled stores


def health_series() -> list[HealthSample]:
    """Twelve minutes of a server at 1,000 CRDs growing 100 MiB/min, crash-looping at the end, holding 2,500
    etcd connections (more than one per version the CRDs serve, see :func:`filled_stores`)."""
    deaths = tuple(RestartEvent(at=NOW - 240.0 * i, source="lab", rss_bytes_at_death=LIMIT) for i in (3, 2, 1))
    return [HealthSample(timestamp=NOW - 720.0 + 60.0 * i, rss_bytes=1000 * MIB + 100 * MIB * i, crds=1000,
                         start_time=1.0, mib_per_crd=4.0, r2=0.95, fit_points=12, fit_crd_counts=4,
                         crds_without_objects=900, unused_crd_examples=("a.example.io",), etcd_connections=2500,
                         restarts=3, restarts_source="lab", restarts_by_source={"lab": 3}, restart_events=deaths)
            for i in range(13)]


def rich_samples() -> list:
    """One sample of each probe (health: a series) with figures each check should find fault with."""
    return [
        *health_series(),
        VersionSample(timestamp=NOW, major="1", minor="33"),
        ResponsivenessSample(timestamp=NOW, in_flight=2, oldest_request="GET /readyz", oldest_request_seconds=20.0,
                             unanswered_seconds=20.0, ping_state="waiting", ping_waiting_seconds=9.0,
                             ping_failure="ReadTimeout"),
        LatencySample(timestamp=NOW, canaries={"version": Canary(seconds=19.0, p99_seconds=19.0, count=20)},
                      server_family="apiserver_request_sli_duration_seconds", window_seconds=60.0,
                      p99_by_verb_scope={"LIST cluster": 45.0}, requests_by_verb_scope={"LIST cluster": 12},
                      slo_seconds={"LIST cluster": 30.0}, slo_breaches=("LIST cluster",)),
        ThrottlingSample(timestamp=NOW, interval_seconds=10.0,
                         priority_levels=(PriorityLevel("workload-low", rejected=30, rejected_per_s=3.0,
                                                        rejected_by_reason={"queue-full": 30}, limit_seats=10),
                                          PriorityLevel("global-default", inqueue=4, wait_p99_seconds=2.5)),
                         flow_schemas=(FlowSchemaActivity("flood", "workload-low", rejected=30, rejected_per_s=3.0),
                                       FlowSchemaActivity("global-default", "global-default", inqueue=4))),
        OpenAPISample(timestamp=NOW, backlog=120, backlog_oldest_seconds=90.0, backlog_names=("a.example.io",),
                      v2_seconds=12.0, v2_bytes=50 * MIB),
        WebhooksSample(timestamp=NOW, conversion_webhooks=(
            ConversionWebhook("service crossplane-system/provider-aws:9443/convert", crds=900, conversions=40,
                              failures=40, failing=True, failing_crds=("vpcs.ec2.aws.upbound.io",),
                              failing_crd_count=1),)),
        DiscoverySample(timestamp=NOW, mode="legacy", format="", fallback_reason="no aggregated discovery (406)",
                        group_versions=400, client_models=(ClientModel("kubectl >=1.24", 50.0, 300, 9.0, 4.0),)),
    ]


def filled_stores() -> list[SampleStore]:
    """Two stores: an eager Crossplane provider whose runtime does not come up on a cluster with Nodes,
    and a safe-start one drifted from its MRAP, whose Composition composes an inactive kind, whose MRAP
    holds an entry that matches nothing and whose cluster has no Node."""
    stores = []
    for inventory in (_inventory(safe_start=False, active=8, in_use=frozenset(), runtime=UNAVAILABLE, has_nodes=True),
                      _inventory(safe_start=True, active=4, in_use=frozenset(), inactive_matching=1,
                                 patterns=("k0.*", "k1.*", "k2.sqs.aws.upbound.i"),
                                 compositions=(composing("K1", "K6"),), runtime=UNAVAILABLE, has_nodes=False)):
        store = SampleStore()
        # The 1,000 CRDs serve one version each: 2,500 etcd connections are more than every kind in use holds.
        for sample in (*rich_samples(), dataclasses.replace(inventory, timestamp=NOW, served_versions=1000)):
            store.add(sample)
        stores.append(store)
    return stores


def observations(store: SampleStore, thresholds: Thresholds | None = None) -> Observations:
    return Observations(thresholds=thresholds or Thresholds(), store=store, facts=ClusterFacts(flag_limit=LIMIT), now=NOW,
                        kubectl=KubectlClient("/usr/bin/kubectl", "v1.32.0", 1, 32))


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_every_check_opens_its_finding_on_samples_that_should_trip_it(check: CheckSpec):
    found: list[Finding] = []
    for store in filled_stores():
        found += check(observations(store))  # called directly: the engine would log and swallow an error
    assert found, f"{check.name} found nothing on samples that should trip it"


@pytest.mark.parametrize("check", DECLARED, ids=ids)
def test_every_check_judges_default_and_failed_samples_without_raising(check: CheckSpec):
    for failed in (None, "timeout"):
        store = SampleStore()
        for kind in {kind for spec in DECLARED for kind in (*spec.probes, *spec.also_reads)}:
            store.add(kind(timestamp=NOW, error=failed))
        assert check(observations(store)) == []


def test_the_engine_reads_a_store_it_is_handed_and_adds_each_sample_once():
    store = SampleStore()
    engine = FindingsEngine(Thresholds(), store=store)
    assert engine.store is store and engine.checks == list(CHECKS)
    sample = ResponsivenessSample(timestamp=NOW, unanswered_seconds=20.0)
    store.add(sample)  # a front end sharing the store adds first ...
    (change,) = engine.observe(sample)  # ... and the engine does not add it again
    assert change.finding.id == "apiserver-not-answering" and len(store.history("responsiveness")) == 1
    engine.observe(ResponsivenessSample(timestamp=NOW + 1))  # one it has not seen goes into the store
    assert len(store.history("responsiveness")) == 2 and engine.current() == []
